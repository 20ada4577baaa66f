//! One Nelder–Mead run, as every fit in capplan starts it: a simplex of the starting point and
//! one step along each coordinate (the coordinates are logs or similarly scaled, so one step
//! size serves all of them).

use argmin::core::{CostFunction, Error as ArgminError, Executor, State};
use argmin::solver::neldermead::NelderMead;

/// Where a run ended.
#[derive(Debug, Clone)]
pub struct Minimum {
    /// The best point found (`None` only if the solver reported none).
    pub best: Option<Vec<f64>>,
    pub cost: f64,
    pub iterations: u64,
}

/// Minimises `problem` from `origin` with first steps of `step`, until the simplex's spread is
/// under `sd_tolerance` or after `max_iterations`.
pub fn minimise<P>(
    problem: P,
    origin: &[f64],
    step: f64,
    sd_tolerance: f64,
    max_iterations: u64,
) -> Result<Minimum, ArgminError>
where
    P: CostFunction<Param = Vec<f64>, Output = f64>,
{
    let mut simplex = vec![origin.to_vec()];
    for index in 0..origin.len() {
        let mut vertex = origin.to_vec();
        vertex[index] += step;
        simplex.push(vertex);
    }
    let solver = NelderMead::new(simplex).with_sd_tolerance(sd_tolerance)?;
    let result = Executor::new(problem, solver)
        .configure(|state| state.max_iters(max_iterations))
        .run()?;
    let state = result.state();
    Ok(Minimum {
        best: state.get_best_param().cloned(),
        cost: state.get_best_cost(),
        iterations: state.get_iter(),
    })
}

/// Restarts [`minimise`] from its best point, with steps of a fifth of `step`, until a restart
/// no longer lowers the cost (by a millionth) or after [`MAX_RESTARTS`]. One Nelder–Mead run
/// stops when its simplex has shrunk, which on a cost that is flat along some direction may be
/// well before the minimum; where it stops then depends on where it started.
pub fn minimise_settled<P>(
    mut problem: impl FnMut() -> P,
    origin: &[f64],
    step: f64,
    sd_tolerance: f64,
    max_iterations: u64,
) -> Result<Minimum, ArgminError>
where
    P: CostFunction<Param = Vec<f64>, Output = f64>,
{
    let mut best = minimise(problem(), origin, step, sd_tolerance, max_iterations)?;
    for _ in 0..MAX_RESTARTS {
        let Some(from) = best.best.clone() else {
            break;
        };
        let next = minimise(problem(), &from, step / 5.0, sd_tolerance, max_iterations)?;
        let settled = next.cost >= best.cost - 1e-6 * best.cost.abs();
        if next.cost < best.cost {
            best = Minimum {
                iterations: best.iterations + next.iterations,
                ..next
            };
        }
        if settled {
            break;
        }
    }
    Ok(best)
}

/// Restarts [`minimise_settled`] makes at most.
pub const MAX_RESTARTS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// A long, narrow valley, ln-scaled as the fits' coordinates are: (x − 1)² + 1000·(y − x)².
    struct Valley;

    impl CostFunction for Valley {
        type Param = Vec<f64>;
        type Output = f64;

        fn cost(&self, p: &Self::Param) -> Result<f64, ArgminError> {
            Ok((p[0] - 1.0).powi(2) + 1000.0 * (p[1] - p[0]).powi(2))
        }
    }

    #[test]
    fn a_run_that_stopped_short_of_the_valley_floor_is_carried_on() {
        // Cut off at 12 iterations, one run is still on the valley's wall.
        let one = minimise(Valley, &[-2.0, 3.0], 0.5, 1e-5, 12).unwrap();
        let settled = minimise_settled(|| Valley, &[-2.0, 3.0], 0.5, 1e-5, 12).unwrap();
        assert!(
            settled.cost < one.cost / 10.0,
            "{} vs {}",
            settled.cost,
            one.cost
        );
        assert!(settled.iterations > one.iterations);
    }
}

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

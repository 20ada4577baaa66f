//! Fitting an engine profile's two overhead constants — milliseconds per iteration and
//! microseconds per sequence in it — to the rows of a source's fit subset.
//!
//! Four numbers: per iteration (ms), per sequence in it (µs), per layer of an iteration that
//! is not a captured CUDA graph (µs), and per request before it reaches the engine (ms).
//! These are the only numbers of the step model fitted to end-to-end measurements: kernel
//! times come from measured operator tables, scheduler behaviour from the engine's defaults.
//! What the kernels leave out (scheduling, input preparation, sampling, the HTTP front) is
//! what the overheads stand for. The fit minimises the mean squared log error of mean TTFT
//! and mean TPOT over the fit rows, by Nelder–Mead in log space; the rows it is scored on
//! elsewhere are never among them.

use argmin::core::{CostFunction, Error as ArgminError, Executor, State};
use argmin::solver::neldermead::NelderMead;
use serde::Serialize;

use super::{predict_rows, row_errors, Comparison};
use crate::catalog::{Catalog, EngineProfile};

/// An engine's fitted overheads and what they did to the fit rows.
#[derive(Debug, Clone, Serialize)]
pub struct FittedOverheads {
    pub engine: String,
    pub rows: usize,
    pub step_overhead_ms: f64,
    pub seq_overhead_us: f64,
    pub eager_layer_overhead_us: f64,
    pub request_overhead_ms: f64,
    /// Root mean square of ln(predicted / measured) over the rows' TTFT and TPOT, before
    /// (the catalog's constants) and after.
    pub rms_log_error_before: f64,
    pub rms_log_error_after: f64,
    pub evaluations: u64,
}

struct Problem<'a> {
    catalog: &'a Catalog,
    rows: &'a [Comparison],
    base: &'a EngineProfile,
}

impl Problem<'_> {
    fn profile(&self, p: &[f64]) -> EngineProfile {
        let mut profile = self.base.clone();
        profile.step_overhead_ms = p[0].exp().clamp(0.01, 200.0);
        profile.seq_overhead_us = p[1].exp().clamp(0.01, 2000.0);
        profile.eager_layer_overhead_us = p[2].exp().clamp(0.01, 5000.0);
        profile.request_overhead_ms = p[3].exp().clamp(0.01, 2000.0);
        profile
    }

    fn rms(&self, profile: &EngineProfile) -> f64 {
        let (rows, _) = predict_rows(self.catalog, self.rows, std::slice::from_ref(profile));
        let mut sum = 0.0;
        let mut n = 0usize;
        for row in &rows {
            for (metric, error) in row_errors(row) {
                if metric == "TTFT" || metric == "TPOT" {
                    sum += (1.0 + error).max(1e-6).ln().powi(2);
                    n += 1;
                }
            }
        }
        if n == 0 {
            f64::INFINITY
        } else {
            (sum / n as f64).sqrt()
        }
    }
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<f64, ArgminError> {
        Ok(self.rms(&self.profile(p)))
    }
}

/// Fits `base`'s overheads to `rows` (all of them served by that engine).
pub fn fit_overheads(
    catalog: &Catalog,
    rows: &[Comparison],
    base: &EngineProfile,
    max_iterations: u64,
) -> Result<(EngineProfile, FittedOverheads), ArgminError> {
    let problem = Problem {
        catalog,
        rows,
        base,
    };
    let before = problem.rms(base);
    let start = vec![
        base.step_overhead_ms.max(0.05).ln(),
        base.seq_overhead_us.max(0.05).ln(),
        base.eager_layer_overhead_us.max(1.0).ln(),
        base.request_overhead_ms.max(1.0).ln(),
    ];
    let mut simplex = vec![start.clone()];
    for index in 0..start.len() {
        let mut vertex = start.clone();
        vertex[index] += 1.0;
        simplex.push(vertex);
    }
    let solver = NelderMead::new(simplex).with_sd_tolerance(1e-3)?;
    let result = Executor::new(problem, solver)
        .configure(|state| state.max_iters(max_iterations))
        .run()?;
    let state = result.state();
    let best = state.get_best_param().cloned().unwrap_or(start);
    let problem = Problem {
        catalog,
        rows,
        base,
    };
    let fitted = problem.profile(&best);
    let after = problem.rms(&fitted);
    Ok((
        fitted.clone(),
        FittedOverheads {
            engine: base.name.clone(),
            rows: rows.len(),
            step_overhead_ms: fitted.step_overhead_ms,
            seq_overhead_us: fitted.seq_overhead_us,
            eager_layer_overhead_us: fitted.eager_layer_overhead_us,
            request_overhead_ms: fitted.request_overhead_ms,
            rms_log_error_before: before,
            rms_log_error_after: after,
            evaluations: state.get_iter(),
        },
    ))
}

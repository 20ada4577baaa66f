//! Fitting an engine profile's two overhead constants — milliseconds per iteration and
//! microseconds per sequence in it — to the rows of a source's fit subset.
//!
//! Two numbers: per iteration (ms) and per sequence in it (µs), fitted to mean TPOT — the
//! figure iteration times decide directly. (TTFT also depends on how a benchmark's users fall
//! in and out of step; fitting the step constants to it would let them stand in for that.)
//! Beside them, where the profile has them: a per-layer cost of iterations launched without
//! CUDA graphs, and how many of a masked-MHA decode's KV re-reads per KV head it takes for
//! half to reach memory (an engine without a grouped-query kernel for some shapes:
//! `grouped_decode`).
//! These are the only numbers of the step model fitted to end-to-end measurements: kernel
//! times come from measured operator tables, scheduler behaviour from the engine's defaults.
//! What the kernels leave out (scheduling, input preparation, sampling, the HTTP front) is
//! what the overheads stand for. The fit minimises a robust (Cauchy) loss of the log error of
//! mean TPOT over the fit rows, by Nelder–Mead in log space restarted from its best point until
//! the loss stops falling; the per-request overhead then comes from the TTFT residual. The rows
//! it is scored on elsewhere are never among them.
//!
//! One scheduler setting is fitted too, where nobody published it: a profile with a
//! `token_budget_grid` (the 2024 NIM's prebuilt TensorRT-LLM engines) first gets the budget of
//! the grid whose fit rows' median |TTFT error| is least, and its overheads are fitted at it.
//! The budget decides how many prompts share an iteration — how a wave of them queues, which
//! the first tokens show and no per-step constant can stand in for.

use argmin::core::{CostFunction, Error as ArgminError};
use serde::Serialize;

use crate::fit::simplex::minimise_settled;
use crate::slo::Percentile;

use super::score::ErrorStats;
use super::{predict_rows, row_errors, Comparison};
use crate::catalog::{Catalog, EngineProfile};

/// An engine's fitted overheads and what they did to the fit rows.
#[derive(Debug, Clone, Serialize)]
pub struct FittedOverheads {
    pub engine: String,
    pub rows: usize,
    pub step_overhead_ms: f64,
    pub seq_overhead_us: f64,
    /// Per transformer layer of an iteration launched without a CUDA graph, µs: fitted only
    /// for a profile that captures no graphs (else every decode step hides it).
    pub eager_layer_overhead_us: f64,
    /// Re-reads per KV head of a masked-MHA decode at which half reach memory
    /// ([`GroupedDecodeKernels::reread_half_group`](crate::catalog::GroupedDecodeKernels)):
    /// fitted only for a profile whose grouped-query decode kernel lacks some shapes
    /// (`grouped_decode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reread_half_group: Option<f64>,
    /// Time from arrival to the engine's queue, ms: fitted only when every fit row's arrivals
    /// are open-loop (a rate), whose TTFT no closed loop's lock-step decides; else the
    /// profile's own.
    pub request_overhead_ms: f64,
    /// The token budget kept, for a profile whose budget is fitted (`token_budget_grid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Each budget of the grid tried and the fit rows' median |TTFT error| with it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub token_budget_scores: Vec<BudgetScore>,
    /// Root mean square of ln(predicted / measured) over the rows' TPOT, before (the
    /// catalog's constants, at the budget kept) and after.
    pub rms_log_error_before: f64,
    pub rms_log_error_after: f64,
    pub evaluations: u64,
}

/// A token budget tried and how close the fit rows' TTFT came with it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BudgetScore {
    pub token_budget: u64,
    pub median_abs_ttft_error: f64,
}

struct Problem<'a> {
    catalog: &'a Catalog,
    rows: &'a [Comparison],
    base: &'a EngineProfile,
}

impl Problem<'_> {
    /// Without CUDA graphs every iteration pays the host's launches, layer by layer: a cost
    /// that grows with the model's depth, which a per-step constant fitted on one model
    /// would carry wrongly to a deeper or shallower one.
    fn fits_eager_layers(&self) -> bool {
        self.base.cuda_graph_sizes.is_empty()
    }

    /// The log-space starting point: per step, per sequence, then the optional parameters.
    /// Where the engine decodes some shapes with masked MHA (`grouped_decode`), how much of
    /// its re-reading reaches memory is a property of its kernels no table measured: fitted.
    fn start(&self) -> Vec<f64> {
        let base = self.base;
        let mut start = vec![
            base.step_overhead_ms.max(0.05).ln(),
            base.seq_overhead_us.max(0.05).ln(),
        ];
        if self.fits_eager_layers() {
            start.push(base.eager_layer_overhead_us.max(0.5).ln());
        }
        if let Some(kernels) = &base.grouped_decode {
            start.push(kernels.reread_half_group.clamp(0.01, 1000.0).ln());
        }
        start
    }

    fn profile(&self, p: &[f64]) -> EngineProfile {
        let mut profile = self.base.clone();
        profile.step_overhead_ms = p[0].exp().clamp(0.01, 200.0);
        profile.seq_overhead_us = p[1].exp().clamp(0.01, 2000.0);
        let mut next = 2;
        if self.fits_eager_layers() {
            profile.eager_layer_overhead_us = p[next].exp().clamp(0.01, 2000.0);
            next += 1;
        }
        if let Some(kernels) = profile.grouped_decode.as_mut() {
            kernels.reread_half_group = p[next].exp().clamp(0.001, 1000.0);
        }
        profile
    }

    /// Root mean square of ln(predicted/measured) over TPOT (reported), and the
    /// robust loss the fit minimises: mean Cauchy loss ln(1 + (ln r / 0.25)²), which lets a
    /// few rows the model gets badly wrong (a deployment it saturates) not pull the constants
    /// for every other row.
    fn errors(&self, profile: &EngineProfile) -> (f64, f64) {
        let (rows, _) = predict_rows(self.catalog, self.rows, std::slice::from_ref(profile));
        let (mut squares, mut loss) = (0.0, 0.0);
        let mut n = 0usize;
        for row in &rows {
            for (metric, error) in row_errors(row) {
                if metric == "TPOT" {
                    let log = log_error(error);
                    squares += log * log;
                    loss += cauchy_loss(log);
                    n += 1;
                }
            }
        }
        if n == 0 {
            (f64::INFINITY, f64::INFINITY)
        } else {
            ((squares / n as f64).sqrt(), loss / n as f64)
        }
    }

    fn rms(&self, profile: &EngineProfile) -> f64 {
        self.errors(profile).0
    }
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<f64, ArgminError> {
        Ok(self.errors(&self.profile(p)).1)
    }
}

/// The log of predicted / measured for a relative error (predicted / measured − 1), floored
/// so that a prediction of nothing stays finite.
pub(super) fn log_error(error: f64) -> f64 {
    (1.0 + error).max(1e-6).ln()
}

/// Scale of the log error at which the fits' robust loss turns from square to logarithm: a
/// quarter (about 28 %).
const CAUCHY_SCALE: f64 = 0.25;

/// The Cauchy loss of a log error, ln(1 + (log / 0.25)²): what every fit of engine constants
/// to end-to-end rows minimises (mean over the rows).
pub(super) fn cauchy_loss(log_error: f64) -> f64 {
    (1.0 + (log_error / CAUCHY_SCALE).powi(2)).ln()
}

/// Closed-loop users few enough that a request rarely waits for another's prefill: the rows
/// the per-request overhead is fitted on when a source has no open-loop rows.
const UNQUEUED_USERS: f64 = 2.0;

/// Rows at that load needed before a per-request overhead is fitted from them (fewer leave the
/// profile's own).
const MIN_UNQUEUED_ROWS: usize = 8;

/// Rounds of refitting a closed loop's per-request overhead at most.
const MAX_REFITS: usize = 8;

/// Fits `base`'s overheads to `rows` (all of them served by that engine) — at the budget of
/// its `token_budget_grid` that brings the rows' TTFT closest, where it has one.
pub fn fit_overheads(
    catalog: &Catalog,
    rows: &[Comparison],
    base: &EngineProfile,
    max_iterations: u64,
) -> Result<(EngineProfile, FittedOverheads), ArgminError> {
    let token_budget_scores = score_budgets(catalog, rows, base);
    let budgeted;
    let base = match token_budget_scores
        .iter()
        .min_by(|a, b| a.median_abs_ttft_error.total_cmp(&b.median_abs_ttft_error))
    {
        Some(best) => {
            budgeted = EngineProfile {
                token_budget: best.token_budget,
                ..base.clone()
            };
            &budgeted
        }
        None => base,
    };
    let problem = || Problem {
        catalog,
        rows,
        base,
    };
    let fit = problem();
    let before = fit.rms(base);
    let start = fit.start();
    // Restarted until it stops falling: the cost is flat along some directions (a per-step
    // cost trades against a per-sequence one), where one run stops wherever its start led it.
    let minimum = minimise_settled(problem, &start, 1.0, 1e-4, max_iterations)?;
    let best = minimum.best.unwrap_or(start);
    let mut fitted = fit.profile(&best);
    if !rows.is_empty() && rows.iter().all(|row| row.arrivals.is_open_loop()) {
        fitted.request_overhead_ms = fit_request_overhead(catalog, rows, &fitted);
    } else {
        // Under a closed loop the TTFT residual is mostly queueing, which no per-request
        // constant should absorb; one or two users barely queue, so their rows alone say
        // what a request costs before the engine sees it.
        let unqueued: Vec<Comparison> = rows
            .iter()
            .filter(|row| !row.arrivals.is_open_loop() && row.concurrency <= UNQUEUED_USERS)
            .cloned()
            .collect();
        if unqueued.len() >= MIN_UNQUEUED_ROWS {
            // A closed loop feeds the overhead back into when users return, so the residual
            // moves with it: repeat until it stays put.
            for _ in 0..MAX_REFITS {
                let next = fit_request_overhead(catalog, &unqueued, &fitted);
                let settled = (next - fitted.request_overhead_ms).abs() < 0.01;
                fitted.request_overhead_ms = next;
                if settled {
                    break;
                }
            }
        }
    }
    let after = fit.rms(&fitted);
    Ok((
        fitted.clone(),
        FittedOverheads {
            engine: base.name.clone(),
            rows: rows.len(),
            step_overhead_ms: fitted.step_overhead_ms,
            seq_overhead_us: fitted.seq_overhead_us,
            eager_layer_overhead_us: fitted.eager_layer_overhead_us,
            reread_half_group: fitted
                .grouped_decode
                .as_ref()
                .map(|kernels| kernels.reread_half_group),
            request_overhead_ms: fitted.request_overhead_ms,
            token_budget: (!token_budget_scores.is_empty()).then_some(fitted.token_budget),
            token_budget_scores,
            rms_log_error_before: before,
            rms_log_error_after: after,
            evaluations: minimum.iterations,
        },
    ))
}

/// The fit rows' median |TTFT error| at each budget of `base`'s grid, its other constants as
/// they are (none when it has no grid). The budget decides how many prompts one iteration
/// takes, so how a wave of them queues: what the first tokens show, and the iteration
/// constants fitted after it (to TPOT) do not stand in for.
fn score_budgets(catalog: &Catalog, rows: &[Comparison], base: &EngineProfile) -> Vec<BudgetScore> {
    base.token_budget_grid
        .iter()
        .filter_map(|&token_budget| {
            let profile = EngineProfile {
                token_budget,
                ..base.clone()
            };
            let (predicted, _) = predict_rows(catalog, rows, std::slice::from_ref(&profile));
            let errors: Vec<f64> = predicted
                .iter()
                .flat_map(row_errors)
                .filter(|(metric, _)| *metric == "TTFT")
                .map(|(_, error)| error)
                .collect();
            // The statistic the report's tables give, so the kept budget is the one they rank
            // first.
            ErrorStats::of(&errors).map(|stats| BudgetScore {
                token_budget,
                median_abs_ttft_error: stats.median_abs,
            })
        })
        .collect()
}

/// The time between a request's arrival and the engine's queue (HTTP front, tokenisation)
/// that makes the fit rows' median TTFT residual zero: the overhead adds to every first
/// token, and the median keeps a saturated row from pulling it.
fn fit_request_overhead(catalog: &Catalog, rows: &[Comparison], profile: &EngineProfile) -> f64 {
    let (predicted, _) = predict_rows(catalog, rows, std::slice::from_ref(profile));
    let residuals: Vec<f64> = predicted
        .iter()
        .filter_map(|row| Some(row.measured.ttft_s? - row.predicted.ttft_s?))
        .collect();
    if residuals.is_empty() {
        return profile.request_overhead_ms;
    }
    let median = crate::stats::statistic(&residuals, Percentile::P(50.0));
    (profile.request_overhead_ms + median * 1e3).max(0.0)
}

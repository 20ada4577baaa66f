//! How `capplan validate` reads: per source, per engine and subset, the errors of each metric;
//! C* at two SLOs where a source measured sweeps; what was skipped and why.

use super::{Document, Report, Table};
use crate::validate::cstar::Bracket;
use crate::validate::score::ErrorStats;
use crate::validate::{RowOutcome, SourceScore, ValidationReport};

fn pct(value: f64) -> String {
    format!("{:.1} %", value * 100.0)
}

/// A fitted constant as the engine profile states it: shares of a cycle to three places,
/// µs and ms to one.
fn constant_value(constant: &str, value: f64) -> String {
    if constant == "out_of_step" {
        format!("{value:.3}")
    } else {
        format!("{value:.1}")
    }
}

fn signed(value: f64) -> String {
    format!("{:+.1} %", value * 100.0)
}

fn stats_cells(stats: &ErrorStats) -> Vec<String> {
    vec![
        stats.n.to_string(),
        pct(stats.median_abs),
        pct(stats.p90_abs),
        pct(stats.worst_abs),
        signed(stats.median),
        format!("[{}, {}]", signed(stats.p10), signed(stats.p90)),
    ]
}

/// A slope at C* (see `validate::cstar`), or `-` where there is none.
fn slope_cell(slope: Option<f64>) -> String {
    slope.map_or_else(|| "-".into(), |slope| format!("{slope:.2}"))
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{:.1}", v * 1e3))
}

fn outcome_cells(outcome: &RowOutcome) -> Vec<String> {
    vec![
        ms(outcome.ttft_s),
        ms(outcome.tpot_s),
        ms(outcome.e2e_s),
        outcome
            .output_tokens_per_s
            .map_or_else(|| "-".into(), |v| format!("{v:.0}")),
    ]
}

fn source_tables(source: &SourceScore, details: bool) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut errors = Table {
        caption: Some(format!(
            "{} ({}) — {} of {} rows compared; split: {}",
            source.source, source.file, source.compared, source.total_rows, source.split
        )),
        headers: [
            "engine",
            "subset",
            "step times",
            "metric",
            "n",
            "median |error|",
            "p90 |error|",
            "worst",
            "median error",
            "80 % within",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for group in &source.groups {
        for metric in &group.metrics {
            let mut row = vec![
                group.engine.clone(),
                group.subset.clone(),
                group.basis_class.clone(),
                metric.metric.clone(),
            ];
            row.extend(stats_cells(&metric.stats));
            errors.rows.push(row);
        }
    }
    tables.push(errors);
    if !source.c_star.is_empty() {
        let mut table = Table {
            caption: Some(format!(
                "{}: C* read off each measured sweep and off the predicted one at the same loads",
                source.source
            )),
            headers: [
                "SLO",
                "engine",
                "subset",
                "step times",
                "sweeps",
                "median |error|",
                "p90 |error|",
                "worst",
                "median error",
                "80 % within",
                "predicted past the range",
                "predicted below it",
                "median slope at C*",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for score in &source.c_star {
            let mut row = vec![
                score.slo.clone(),
                score.engine.clone(),
                score.subset.clone(),
                score.basis_class.clone(),
            ];
            match &score.stats {
                Some(stats) => {
                    let cells = stats_cells(stats);
                    row.push(score.sweeps.to_string());
                    row.extend(cells.into_iter().skip(1));
                }
                None => {
                    row.push(score.sweeps.to_string());
                    row.extend(std::iter::repeat_n("-".to_string(), 5));
                }
            }
            row.push(score.predicted_above_range.to_string());
            row.push(score.predicted_below_range.to_string());
            row.push(slope_cell(score.median_slope));
            table.rows.push(row);
        }
        tables.push(table);
    }
    if details && !source.c_star_sweeps.is_empty() {
        tables.push(sweep_table(source));
    }
    if details && !source.c_star_by_predicted_slope.is_empty() {
        tables.push(Table {
            caption: Some(format!(
                "{}: held-out C* errors by the slope of the predicted curve at the predicted C* \
                 (what `capplan predict` reports as its fragility; both SLOs, sweeps predicted \
                 inside their loads)",
                source.source
            )),
            headers: ["predicted slope", "sweeps", "median |C* error|"]
                .map(String::from)
                .to_vec(),
            rows: source
                .c_star_by_predicted_slope
                .iter()
                .map(|class| {
                    vec![
                        class.predicted_slope.clone(),
                        class.sweeps.to_string(),
                        pct(class.median_abs_error),
                    ]
                })
                .collect(),
        });
    }
    if !source.queueing.is_empty() {
        let mut table = Table {
            caption: Some(format!(
                "{}: how much of TTFT is waiting — median TTFT at the row's load over the \
                 predicted TTFT of its prompt alone (measured ÷ alone, predicted ÷ alone); where \
                 they part, the error is in the arrivals and the scheduler, not the step times",
                source.source
            )),
            headers: [
                "engine",
                "subset",
                "users",
                "rows",
                "measured ÷ alone",
                "predicted ÷ alone",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for score in &source.queueing {
            table.rows.push(vec![
                score.engine.clone(),
                score.subset.clone(),
                score.users.clone(),
                score.rows.to_string(),
                format!("{:.2}", score.measured_over_alone),
                format!("{:.2}", score.predicted_over_alone),
            ]);
        }
        tables.push(table);
    }
    if details {
        let mut table = Table {
            caption: Some(format!(
                "{}: every row (ms; measured | predicted)",
                source.source
            )),
            headers: [
                "id",
                "engine",
                "subset",
                "model",
                "card",
                "tp",
                "load",
                "TTFT",
                "TPOT",
                "E2E",
                "tok/s",
                "TTFT pred",
                "TPOT pred",
                "E2E pred",
                "tok/s pred",
                "TTFT alone pred",
                "step times",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for row in &source.rows {
            let mut cells = vec![
                row.id.clone(),
                row.engine.clone(),
                row.subset.clone(),
                row.model.clone(),
                row.card.clone(),
                row.tp.to_string(),
                format!("{}", row.load),
            ];
            cells.extend(outcome_cells(&row.measured));
            cells.extend(outcome_cells(&row.predicted));
            cells.push(ms(row.predicted_alone_ttft_s));
            cells.push(crate::validate::basis_class(&row.basis).to_string());
            table.rows.push(cells);
        }
        tables.push(table);
    }
    tables
}

/// Every sweep's C*: where it was measured and predicted, the limit it crosses, how steeply
/// the binding statistic rises there, and the prediction's distance from the limit at the
/// measured C* — the latency error the C* error is made of.
fn sweep_table(source: &SourceScore) -> Table {
    let mut table = Table {
        caption: Some(format!(
            "{}: every sweep's C* (slope: d ln(binding ratio) / d ln(load) around the measured \
             C*; a C* error is about the prediction's distance from the limit there divided by \
             the slope)",
            source.source
        )),
        headers: [
            "sweep",
            "engine",
            "subset",
            "SLO",
            "loads",
            "C* measured",
            "binds",
            "slope",
            "C* predicted",
            "predicted slope",
            "C* error",
            "predicted at measured C*",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for sweep in &source.c_star_sweeps {
        let predicted = match sweep.predicted_bracket {
            Bracket::Above => format!("≥ {:.1}", sweep.predicted),
            Bracket::Below => format!("< {:.1} (about {:.1})", sweep.lowest_load, sweep.predicted),
            Bracket::Inside => format!("{:.1}", sweep.predicted),
        };
        let at_c_star = match (sweep.predicted_ratio_at_c_star, sweep.predicted_binds) {
            (Some(ratio), Some(which)) => format!("{which} {}", signed(ratio)),
            _ => "-".into(),
        };
        table.rows.push(vec![
            sweep.sweep.clone(),
            sweep.engine.clone(),
            sweep.subset.clone(),
            sweep.slo.split(':').next().unwrap_or_default().to_string(),
            format!(
                "{}: {}–{}",
                sweep.levels, sweep.lowest_load, sweep.highest_load
            ),
            format!("{:.1}", sweep.measured),
            sweep.binds.to_string(),
            slope_cell(sweep.slope),
            predicted,
            slope_cell(sweep.predicted_slope),
            signed(sweep.error),
            at_c_star,
        ]);
    }
    table
}

impl Report for ValidationReport {
    fn document(&self) -> Document {
        let mut tables = Vec::new();
        let mut notes = vec![
            "Errors are (predicted − measured) / measured; a negative TTFT or TPOT error is an \
             optimistic prediction, a positive C* error one that promises more users than were \
             measured."
                .to_string(),
        ];
        if !self.fitted.is_empty() {
            tables.push(Table {
                caption: Some(
                    "Engine overheads fitted on the fit subsets: per step, per sequence and \
                     (for an engine without CUDA graphs) per eager layer to mean TPOT (rms of \
                     ln(predicted/measured)); per request to the median TTFT residual of the fit \
                     rows when they arrive open-loop, else of those at one or two closed-loop \
                     users (eight or more); for a profile with a token_budget_grid, first the \
                     budget whose fit rows' median |TTFT error| is least"
                        .into(),
                ),
                headers: [
                    "engine",
                    "rows",
                    "step ms",
                    "µs per sequence",
                    "µs per eager layer",
                    "KV re-reads half missed at",
                    "request ms",
                    "token budget",
                    "rms log error before",
                    "after",
                    "iterations",
                ]
                .map(String::from)
                .to_vec(),
                rows: self
                    .fitted
                    .iter()
                    .map(|f| {
                        vec![
                            f.engine.clone(),
                            f.rows.to_string(),
                            format!("{:.3}", f.step_overhead_ms),
                            format!("{:.2}", f.seq_overhead_us),
                            format!("{:.2}", f.eager_layer_overhead_us),
                            f.reread_half_group
                                .map_or_else(|| "-".into(), |half| format!("{half:.2}")),
                            format!("{:.1}", f.request_overhead_ms),
                            f.token_budget
                                .map_or_else(|| "-".into(), |budget| budget.to_string()),
                            format!("{:.3}", f.rms_log_error_before),
                            format!("{:.3}", f.rms_log_error_after),
                            f.evaluations.to_string(),
                        ]
                    })
                    .collect(),
            });
        }
        if !self.fitted_constants.is_empty() {
            tables.push(Table {
                caption: Some(
                    "Engine constants fitted one at a time, each on its sources' fit subset with \
                     the profile's other constants held: moe_layer_overhead_us (µs per expert \
                     layer of every iteration) to mean TPOT, request_overhead_ms (from a \
                     request's arrival to the engine's queue), out_of_step (how far a \
                     benchmark's users fall out of step after its first wave, a share of one \
                     request cycle) and handoff_ms (between disaggregated pools) to mean TTFT; \
                     a grid, then a golden-section search, on a Cauchy loss of the log error"
                        .into(),
                ),
                headers: [
                    "engine",
                    "constant",
                    "fitted to",
                    "rows",
                    "was",
                    "fitted",
                    "median |error| before",
                    "after",
                    "evaluations",
                ]
                .map(String::from)
                .to_vec(),
                rows: self
                    .fitted_constants
                    .iter()
                    .map(|f| {
                        vec![
                            f.engine.clone(),
                            f.constant.to_string(),
                            f.metric.to_string(),
                            f.rows.to_string(),
                            // A share of a cycle needs more digits than µs or ms.
                            constant_value(f.constant, f.before),
                            constant_value(f.constant, f.value),
                            pct(f.median_abs_error_before),
                            pct(f.median_abs_error_after),
                            f.evaluations.to_string(),
                        ]
                    })
                    .collect(),
            });
        }
        for source in &self.sources {
            tables.extend(source_tables(source, self.details));
            for (reason, count) in &source.skipped.reasons {
                notes.push(format!(
                    "{}: {count} rows skipped — {reason}",
                    source.source
                ));
            }
            for (reason, count) in &source.failed.reasons {
                notes.push(format!(
                    "{}: {count} rows not predicted — {reason}",
                    source.source
                ));
            }
        }
        if !self.band_coverage.is_empty() {
            tables.push(Table {
                caption: Some(
                    "C* bands, leave one deployment out: how often the band built from a group's \
                     other deployments held the C* error of a held-out sweep (both SLOs) — the \
                     split-conformal 80 % band `--write-bands` writes, and the 10th–90th \
                     percentile band beside it; per sweep, and per deployment averaged over the \
                     deployments"
                        .into(),
                ),
                headers: [
                    "models",
                    "engine",
                    "step times",
                    "sweeps",
                    "deployments",
                    "80 % band held",
                    "per deployment",
                    "percentile band held",
                    "per deployment",
                ]
                .map(String::from)
                .to_vec(),
                rows: self
                    .band_coverage
                    .iter()
                    .map(|c| {
                        vec![
                            c.models.clone(),
                            c.engine.clone(),
                            c.basis.clone(),
                            c.sweeps.to_string(),
                            c.deployments.to_string(),
                            pct(c.covered),
                            pct(c.covered_per_deployment),
                            pct(c.covered_by_percentiles),
                            pct(c.covered_by_percentiles_per_deployment),
                        ]
                    })
                    .collect(),
            });
        }
        if let Some(score) = &self.static_batch {
            let mut table = Table {
                caption: Some(format!(
                    "TensorRT-LLM 0.9 static batches ({}): step times with each GPU, then each \
                     model, held out — fitted on the rest: the engine's overheads on the rows with \
                     operator tables, then the roofline's efficiencies on the others; {} of {} \
                     rows timed",
                    score.file, score.timed, score.rows
                )),
                headers: [
                    "held out",
                    "step times",
                    "first token n",
                    "median |error|",
                    "p90 |error|",
                    "median error",
                    "token-to-token median |error|",
                    "p90 |error|",
                    "median error",
                    "fitted: ms/step, µs/seq, roofline compute, memory, KV re-reads half missed at",
                ]
                .map(String::from)
                .to_vec(),
                rows: Vec::new(),
            };
            for held in score.by_gpu.iter().chain(&score.by_model) {
                let cells = |stats: &Option<ErrorStats>| match stats {
                    Some(s) => vec![pct(s.median_abs), pct(s.p90_abs), signed(s.median)],
                    None => vec!["-".into(); 3],
                };
                let mut row = vec![
                    format!("{} {}", held.by, held.held_out),
                    held.basis_class.clone(),
                    held.first_token.map_or(0, |s| s.n).to_string(),
                ];
                row.extend(cells(&held.first_token));
                row.extend(cells(&held.token_to_token));
                row.push(format!(
                    "{:.2}, {:.1}, {:.2}, {:.2}, {:.1}",
                    held.parameters.step_overhead_ms,
                    held.parameters.seq_overhead_us,
                    held.parameters.roofline_compute,
                    held.parameters.roofline_memory,
                    held.parameters.reread_half_group
                ));
                table.rows.push(row);
            }
            tables.push(table);
            if self.details && !score.details.is_empty() {
                tables.push(Table {
                    caption: Some(
                        "Static batches, every row predicted with its GPU held out \
                         (latencies in ms: measured / predicted)"
                            .into(),
                    ),
                    headers: [
                        "GPU",
                        "model",
                        "precision",
                        "tp",
                        "batch",
                        "in",
                        "out",
                        "first token",
                        "error",
                        "token to token",
                        "error",
                    ]
                    .map(String::from)
                    .to_vec(),
                    rows: score
                        .details
                        .iter()
                        .map(|r| {
                            let error = |predicted: f64, measured: f64| {
                                signed(predicted / measured.max(1e-9) - 1.0)
                            };
                            vec![
                                r.gpu.clone(),
                                r.model.clone(),
                                r.precision.clone(),
                                r.tp.to_string(),
                                r.batch_size.to_string(),
                                r.input_tokens.to_string(),
                                r.output_tokens.to_string(),
                                format!(
                                    "{:.1} / {:.1}",
                                    r.first_token_ms, r.first_token_predicted_ms
                                ),
                                error(r.first_token_predicted_ms, r.first_token_ms),
                                format!(
                                    "{:.2} / {:.2}",
                                    r.token_to_token_ms, r.token_to_token_predicted_ms
                                ),
                                error(r.token_to_token_predicted_ms, r.token_to_token_ms),
                            ]
                        })
                        .collect(),
                });
            }
            if let (Some(first), Some(t2t)) = (&score.first_token, &score.token_to_token) {
                notes.push(format!(
                    "Static batches, every GPU held out in turn: first-token latency median |error| {} \
                     (n = {}), token-to-token {}.",
                    pct(first.median_abs),
                    first.n,
                    pct(t2t.median_abs)
                ));
            }
            for (reason, count) in &score.skipped {
                notes.push(format!("static batches: {count} rows skipped — {reason}"));
            }
        }
        Document {
            heading: vec![
                "Predictions against public measurements; no row scored as held out was used \
                 to fit anything."
                    .into(),
            ],
            tables,
            notes,
            ..Document::default()
        }
    }
}

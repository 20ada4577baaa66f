//! How a prediction reads: the curve per concurrency and the C* line.

use super::{count, Document, Report, Table};
use crate::sim::predict::Prediction;
use crate::sim::step_parts::SampledStep;
use crate::slo::format_seconds;

fn ms(seconds: f64) -> String {
    if seconds.is_nan() {
        "-".into()
    } else {
        format!("{:.0}", seconds * 1e3)
    }
}

impl Report for Prediction {
    fn document(&self) -> Document {
        let heading = vec![
            format!(
                "Prediction: {} on {}{} ({}, {}){}, {} · {}",
                self.model,
                self.parallel.on(&self.card),
                if self.nodes > 1 {
                    format!(" over {} nodes", self.nodes)
                } else {
                    String::new()
                },
                self.interconnect,
                self.dtype,
                // Which node shape decides the scale-up domain, the network and which
                // measured all-reduce the cards run (--node picks another).
                self.node
                    .as_ref()
                    .map(|node| format!(", node shape {node}"))
                    .unwrap_or_default(),
                self.workload,
                self.slo.describe()
            ),
            format!(
                "Engine profile {}: continuous batching, ≤ {} running, {} tokens per step{} ({} prefill{}), \
                 KV cache {} tokens{}; step overhead {} ms + {} µs per sequence{}{}; {}.",
                self.calibration.engine,
                self.engine.max_running,
                self.engine.token_budget,
                self.engine
                    .prompt_budget
                    .map(|budget| format!(", new prompts taken while under {budget} prompt tokens"))
                    .unwrap_or_default(),
                self.engine.step_mix,
                if self.engine.chunked_prefill { ", chunked" } else { ", whole prompts" },
                self.engine.kv_capacity,
                if self.engine.state_tokens > 0 {
                    format!(
                        " (a running sequence's recurrent state takes {} of them)",
                        self.engine.state_tokens
                    )
                } else {
                    String::new()
                },
                count(self.calibration.efficiency.step_overhead_ms),
                count(self.calibration.efficiency.seq_overhead_ms * 1000.0),
                match self.calibration.efficiency.moe_layer_overhead_us {
                    us if us > 0.0 => format!(" (+ {} µs per expert layer)", count(us)),
                    _ => String::new(),
                },
                // Every first token carries it: the deployment's front, before the engine.
                match self.calibration.efficiency.request_overhead_ms {
                    ms if ms > 0.0 => format!("; {} ms a request before the engine", count(ms)),
                    _ => String::new(),
                },
                self.calibration.name,
            ),
            format!("Step times: {}.", self.basis),
        ];
        let mut heading = heading;
        // The engine's decode kernels, where it lacks some (TensorRT-LLM before 1.0): what a
        // long history or an uncovered head shape costs rests on them.
        if let Some(kernels) = &self.calibration.grouped_decode {
            heading.push(format!("Decode attention: {}.", kernels.describe()));
        }
        if let Some(how) = self.measured_as.describe() {
            heading.push(how);
        }
        let mut table = Table {
            caption: Some("Latency in ms; percentiles interpolated on exact values".into()),
            headers: [
                if self.rate_star.is_some() {
                    "offered req/s"
                } else {
                    "users"
                },
                "in flight",
                "requests",
                "TTFT mean",
                "TTFT p50",
                "TTFT p90",
                "TTFT p99",
                "TPOT mean",
                "TPOT p50",
                "TPOT p90",
                "TPOT p99",
                "E2E mean",
                "E2E p90",
                "E2E p99",
                "out tok/s",
                "req/s",
                "batch",
                "verdict",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for level in &self.curve {
            let tpot = |pick: fn(&crate::stats::Summary) -> f64| {
                level
                    .tpot
                    .as_ref()
                    .map(|t| ms(pick(t)))
                    .unwrap_or_else(|| "-".into())
            };
            table.rows.push(vec![
                match level.offered_rate {
                    Some(rate) => format!("{rate:.3}"),
                    None => level.concurrency.to_string(),
                },
                format!("{:.1}", level.mean_in_flight),
                level.requests.to_string(),
                ms(level.ttft.mean),
                ms(level.ttft.p50),
                ms(level.ttft.p90),
                ms(level.ttft.p99),
                tpot(|s| s.mean),
                tpot(|s| s.p50),
                tpot(|s| s.p90),
                tpot(|s| s.p99),
                ms(level.e2e.mean),
                ms(level.e2e.p90),
                ms(level.e2e.p99),
                format!("{:.0}", level.output_tokens_per_s),
                format!("{:.2}", level.requests_per_s),
                format!("{:.1}", level.mean_batch),
                if level.pass {
                    "pass".into()
                } else {
                    format!("fail: {}", level.failed.join("; "))
                },
            ]);
        }
        let bracket = match self.first_fail {
            Some(fail) => format!("[{} pass, {} fail]", self.last_pass, fail),
            None => format!("≥ {} (no fail found)", self.last_pass),
        };
        let mut notes = match &self.rate_star {
            Some(rate) => vec![
                format!(
                    "R* = {:.3} requests/s per instance (Poisson arrivals) {}, {:.1} in flight on average; limit {}.",
                    rate.rate,
                    match rate.first_fail {
                        Some(fail) => format!("[{:.3} pass, {fail:.3} fail]", rate.last_pass),
                        None => "(no fail found)".into(),
                    },
                    rate.mean_in_flight,
                    self.limit
                ),
                format!(
                    "{} instance(s) per node → {:.2} requests/s per node.",
                    self.instances_per_node,
                    f64::from(self.instances_per_node) * rate.rate
                ),
            ],
            None => vec![
                format!(
                    "C* = {} users per instance {bracket}; limit {}.",
                    self.c_star, self.limit
                ),
                match &self.band {
                    Some(band) => format!(
                        "Measured C* expected between {:.0} and {:.0} users (80 %): {}.",
                        band.low, band.high, band.basis
                    ),
                    None => "No error band: `capplan validate` measured none for this engine."
                        .to_string(),
                },
                slope_note(self.c_star, self.c_star_slope.as_ref()),
                format!(
                    "{} instance(s) per node → {} users per node.",
                    self.instances_per_node,
                    u64::from(self.instances_per_node) * u64::from(self.c_star)
                ),
            ],
        };
        match &self.disaggregated {
            Some(Ok(pd)) => {
                let aggregated = f64::from(self.c_star) / f64::from(self.parallel.cards().max(1));
                notes.push(format!(
                    "Disaggregated as {} ({} prefill workers of {}, {} decode of {}: {} cards): \
                     {:.0} users ({:.2} requests/s), {:.1} users per card against {:.1} aggregated \
                     ({}); a prefill worker holds {:.2} requests/s within TTFT {} less the KV \
                     hand-off ({:.0} ms: the bytes and the engine's {:.0} ms between workers) and \
                     the decode worker's first token ({:.0} ms), a decode worker {:.2} within TPOT \
                     {}; at those rates TTFT {} and TPOT {} (mean).",
                    pd.split,
                    pd.split.prefill,
                    pd.prefill_parallel,
                    pd.split.decode,
                    pd.decode_parallel,
                    pd.cards,
                    pd.users,
                    pd.rate,
                    pd.users_per_card(),
                    aggregated,
                    if pd.users_per_card() > aggregated {
                        "disaggregation wins"
                    } else {
                        "aggregated wins"
                    },
                    pd.prefill_rate,
                    format_seconds(self.slo.ttft_s),
                    pd.transfer_s * 1e3,
                    self.calibration.efficiency.handoff_ms,
                    pd.decode_first_s * 1e3,
                    pd.decode_rate,
                    self.slo
                        .tpot_s
                        .map_or_else(|| "-".to_string(), format_seconds),
                    format_seconds(pd.ttft_s),
                    format_seconds(pd.tpot_s),
                ));
            }
            Some(Err(why)) => notes.push(format!("Not disaggregated: {why}.")),
            None => {}
        }
        notes.extend([format!(
            "Predicted in virtual time in {:.0} ms; the TTFT limit {} includes queueing.",
            self.elapsed_ms,
            format_seconds(self.slo.ttft_s)
        )]);
        let mut tables = vec![table];
        if !self.steps.is_empty() {
            tables.push(steps_table(&self.steps, self.parallel.pp > 1));
        }
        Document {
            heading,
            tables,
            notes,
            ..Document::default()
        }
    }
}

/// Where the time of the sampled iterations goes, ms: the measured parts, or the roofline's
/// two bounds on a card timed without operator tables.
fn steps_table(steps: &[SampledStep], staged: bool) -> Table {
    let roofline = steps.iter().any(|s| s.parts.roofline.is_some());
    let kernels: &[&str] = if roofline {
        &["compute (roofline)", "memory (roofline)"]
    } else {
        &["weights", "attention", "elementwise"]
    };
    let mut headers = vec!["iteration", "prompt tokens", "decoding", "context"];
    headers.extend_from_slice(kernels);
    headers.extend_from_slice(&["communication", "overhead", "total", "CUDA graph"]);
    let fine = |seconds: f64| format!("{:.2}", seconds * 1e3);
    let rows = steps
        .iter()
        .map(|step| {
            let parts = &step.parts;
            let mut row = vec![
                step.step.clone(),
                format!("{:.0}", step.prompt_tokens),
                format!("{:.0}", step.decoding),
                if step.decoding > 0.0 {
                    format!("{:.0}", step.context)
                } else {
                    "-".into()
                },
            ];
            match parts.roofline {
                Some(bounds) => row.extend([fine(bounds.compute), fine(bounds.memory)]),
                None => row.extend([
                    fine(parts.weights),
                    fine(parts.attention),
                    fine(parts.elementwise),
                ]),
            }
            row.extend([
                fine(parts.communication),
                fine(parts.overhead),
                fine(step.total_s),
                parts
                    .graph_batch
                    .map_or_else(|| "eager".into(), |size| format!("{size:.0}")),
            ]);
            row
        })
        .collect();
    Table {
        caption: Some(format!(
            "Where an iteration's time goes, ms on each card of {} (they run in lockstep){}",
            if staged {
                "a pipeline stage"
            } else {
                "the instance"
            },
            if roofline {
                "; the roofline counts the longer of its two bounds"
            } else {
                ""
            }
        )),
        headers: headers.into_iter().map(String::from).collect(),
        rows,
    }
}

/// A slope this steep is a jump in the curve, not a rise: percentages per doubling mean
/// nothing there.
const CLIFF_SLOPE: f64 = 4.0;

/// How far C* moves with a latency error, read off the predicted curve around it.
fn slope_note(c_star: u32, slope: Option<&crate::sim::c_star_slope::CStarSlope>) -> String {
    use crate::sim::c_star_slope::{Crossing, LATENCY_ERROR};
    let Some(slope) = slope else {
        return "How fragile: not read (C* is within a level or two of one user).".into();
    };
    let percent = LATENCY_ERROR * 100.0;
    // C* counts the users that pass, so a crossing between levels is read down to whole users.
    let users = |crossing: Crossing| match crossing {
        Crossing::At(users) => format!("about {:.0} users", users.floor()),
        Crossing::Between(low, high) => format!(
            "between {low:.0} and {high:.0} users (the level of {high:.0} stopped once it was \
             sure to fail)"
        ),
    };
    let faster = match (slope.c_star_if_faster, slope.faster_extrapolated(c_star)) {
        (Some(crossing), _) => users(crossing),
        (None, Some(beyond)) => format!(
            "above every level tried (about {:.0} at the slope below C*)",
            beyond.floor()
        ),
        (None, None) => "above every level tried".into(),
    };
    let growth = match slope.slope {
        Some(s) if s >= CLIFF_SLOPE => format!(
            "; the binding latency jumps there (users^{s:.0}): a cliff, past which requests \
             queue for KV cache or batch slots, so C* moves with capacity more than with step \
             times"
        ),
        Some(s) => format!(
            "; around C* the binding latency grows as users^{s:.2} ({:+.0} % per doubling){}",
            (2f64.powf(s) - 1.0) * 100.0,
            if slope.is_flat() {
                format!(
                    ", a flat stretch where a latency error moves C* {:.1}× as much",
                    1.0 / s
                )
            } else {
                String::new()
            }
        ),
        None => String::new(),
    };
    format!(
        "How fragile: were every level's latency {percent:.0} % above the prediction, C* \
         ({c_star}) would be {}; {percent:.0} % below, {faster}{growth}.",
        users(slope.c_star_if_slower)
    )
}

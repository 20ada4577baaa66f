//! How a calibration reads: the factors before and after, and every measured figure against
//! the model with each.

use serde::Serialize;

use super::{Document, Report, Table};
use crate::sim::calibrate_runs::CalibrateOutcome;

/// `capplan calibrate`'s result: the outcome and the files written.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrateReport {
    #[serde(flatten)]
    pub outcome: CalibrateOutcome,
    pub written: Vec<String>,
}

fn figure(name: &str, value: f64) -> String {
    if name == "output_tokens_per_s" {
        format!("{value:.1}")
    } else {
        format!("{:.1} ms", value * 1e3)
    }
}

impl Report for CalibrateReport {
    fn document(&self) -> Document {
        let mut document = Document::default();
        for card in &self.outcome.cards {
            let fit = &card.fit;
            document.heading.push(format!(
                "{}: calibrated on {} run(s), {} levels; median error {:.1} % with the starting factors, {:.1} % calibrated ({} iterations)",
                card.card,
                card.runs.len(),
                fit.after.len(),
                fit.median_error_before * 100.0,
                fit.median_error_after * 100.0,
                fit.evaluations
            ));
            let (s, f) = (&card.start, &fit.factors);
            let mut factors = Table {
                caption: Some(format!("{}: efficiency factors", card.card)),
                headers: ["factor", "start", "calibrated"].map(String::from).to_vec(),
                rows: vec![
                    vec![
                        "compute".into(),
                        format!("{:.3}", s.compute),
                        format!("{:.3}", f.compute),
                    ],
                    vec![
                        "memory".into(),
                        format!("{:.3}", s.memory),
                        format!("{:.3}", f.memory),
                    ],
                    vec![
                        "step overhead, ms".into(),
                        format!("{:.3}", s.step_overhead_ms),
                        format!("{:.3}", f.step_overhead_ms),
                    ],
                    vec![
                        "per-sequence overhead, ms".into(),
                        format!("{:.4}", s.seq_overhead_ms),
                        format!("{:.4}", f.seq_overhead_ms),
                    ],
                ],
            };
            for (link, value) in &f.hop_latency_us {
                factors.rows.push(vec![
                    format!("{link} hop latency, µs"),
                    format!(
                        "{:.2}",
                        s.hop_latency_us.get(link).copied().unwrap_or(f64::NAN)
                    ),
                    format!("{value:.2}"),
                ]);
            }
            document.tables.push(factors);
            let mut levels = Table {
                caption: Some(format!("{}: measured against the model (means)", card.card)),
                headers: ["run", "users", "figure", "measured", "start", "calibrated"]
                    .map(String::from)
                    .to_vec(),
                rows: Vec::new(),
            };
            for (before, after) in fit.before.iter().zip(&fit.after) {
                for ((name, measured, start), (_, _, calibrated)) in
                    before.figures.iter().zip(&after.figures)
                {
                    levels.rows.push(vec![
                        before.run.clone(),
                        format!("{}", before.concurrency),
                        name.clone(),
                        figure(name, *measured),
                        figure(name, *start),
                        figure(name, *calibrated),
                    ]);
                }
            }
            document.tables.push(levels);
            // A benchmark's levels are simulated as it ran them (users started together);
            // say which way each run was read, since it decides the TTFT compared.
            for (run, how) in card.runs.iter().zip(&card.measured_by) {
                document.notes.push(format!(
                    "{}: {run} simulated as measured: {how}.",
                    card.card
                ));
            }
        }
        document
            .notes
            .extend(self.outcome.skipped.iter().map(|s| format!("Skipped {s}.")));
        if !self.written.is_empty() {
            document.notes.push(format!(
                "Wrote {}; predict and solve use it for these cards from now on (and say so).",
                self.written.join(", ")
            ));
        }
        if self.outcome.cards.is_empty() {
            document
                .notes
                .push("Nothing to calibrate: no run with a catalog model and card.".into());
        }
        document
    }
}

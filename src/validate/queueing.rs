//! How much of a row's time to first token is waiting: its prompt alone on an idle instance
//! against the figure at the row's load, measured and predicted.
//!
//! A TTFT error mixes two models that fail differently: the step model (how long the
//! prompt's own prefill takes) and the queueing model (how long it waits behind the other
//! users' prompts, which depends on how in step a benchmark's users fall). The tables rarely
//! measure one user, so the prompt alone is the *predicted* one in both ratios:
//! measured ÷ alone is what the queue cost in the measurement (if the step model is right),
//! predicted ÷ alone what it cost in the simulation. Where the two ratios part, the error is in
//! the arrivals and the scheduler, not in the kernels; where they agree and TTFT is still off,
//! it is the step model. Both show in the silicon sample: at one to four users vLLM's held-out
//! mixture-of-experts rows measure 1.44× the prompt alone and are simulated at 1.98× (users
//! kept in step queue where the measured ones barely do), SGLang's measure 4.0× where a queue
//! of four explains 2.5× (a prefill, or a cost per request, the step model lacks).

use std::collections::BTreeMap;

use serde::Serialize;

use super::ComparedRow;
use crate::slo::Percentile;
use crate::stats::statistic;

/// The concurrency bands the ratios are kept by: queueing grows with the users.
const BANDS: [(u32, u32, &str); 4] = [
    (1, 4, "1-4"),
    (5, 16, "5-16"),
    (17, 64, "17-64"),
    (65, u32::MAX, "65+"),
];

/// The band of `users` closed-loop users, as an index into [`BANDS`].
fn band(users: u32) -> usize {
    BANDS
        .iter()
        .position(|(low, high, _)| (*low..=*high).contains(&users))
        .unwrap_or(BANDS.len() - 1)
}

/// One engine's rows of one subset in one band of users: the median TTFT over the predicted
/// TTFT of the prompt alone, measured and predicted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueingScore {
    pub engine: String,
    pub subset: String,
    /// Closed-loop users, as a band (`1-4`, `5-16`, `17-64`, `65+`).
    pub users: String,
    pub rows: usize,
    /// Median of measured TTFT ÷ the prompt alone (predicted).
    pub measured_over_alone: f64,
    /// Median of predicted TTFT ÷ the prompt alone (predicted).
    pub predicted_over_alone: f64,
}

/// The ratios of `rows` that ran closed-loop users and have all three figures, per engine,
/// subset and band (in band order).
pub fn score(rows: &[ComparedRow]) -> Vec<QueueingScore> {
    type Key = (String, String, usize);
    let mut groups: BTreeMap<Key, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for row in rows {
        let (Some(users), Some(alone), Some(measured), Some(predicted)) = (
            row.users,
            row.predicted_alone_ttft_s,
            row.measured.ttft_s,
            row.predicted.ttft_s,
        ) else {
            continue;
        };
        if alone <= 0.0 || !alone.is_finite() {
            continue;
        }
        let entry = groups
            .entry((row.engine.clone(), row.subset.clone(), band(users)))
            .or_default();
        entry.0.push(measured / alone);
        entry.1.push(predicted / alone);
    }
    groups
        .into_iter()
        .map(
            |((engine, subset, order), (measured, predicted))| QueueingScore {
                engine,
                subset,
                users: BANDS[order].2.to_string(),
                rows: measured.len(),
                measured_over_alone: statistic(&measured, Percentile::P(50.0)),
                predicted_over_alone: statistic(&predicted, Percentile::P(50.0)),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::RowOutcome;

    fn row(
        engine: &str,
        users: Option<u32>,
        alone: f64,
        measured: f64,
        predicted: f64,
    ) -> ComparedRow {
        let outcome = |ttft: f64| RowOutcome {
            ttft_s: Some(ttft),
            ..RowOutcome::default()
        };
        ComparedRow {
            id: format!("{engine}-{users:?}-{measured}"),
            engine: engine.into(),
            subset: "held out".into(),
            model: "m".into(),
            card: "c".into(),
            tp: 1,
            load: users.map_or(0.0, f64::from),
            users,
            measured: outcome(measured),
            predicted: outcome(predicted),
            predicted_alone_ttft_s: Some(alone),
            basis: String::new(),
            note: String::new(),
            sweep: String::new(),
        }
    }

    #[test]
    fn ratios_are_kept_per_engine_and_band_of_users() {
        let rows = [
            row("vllm", Some(4), 0.1, 0.12, 0.2),
            row("vllm", Some(2), 0.1, 0.16, 0.3),
            row("vllm", Some(1), 0.1, 0.10, 0.1),
            row("vllm", Some(64), 0.1, 0.5, 0.4),
            row("sglang", Some(4), 0.2, 0.8, 0.4),
            // Open-loop rows (no users) and rows without the prompt alone are left out.
            row("vllm", None, 0.1, 9.0, 9.0),
        ];
        let scores = score(&rows);
        assert_eq!(scores.len(), 3, "{scores:?}");
        let low = &scores[1];
        assert_eq!((low.engine.as_str(), low.users.as_str()), ("vllm", "1-4"));
        assert_eq!(low.rows, 3);
        assert!((low.measured_over_alone - 1.2).abs() < 1e-9);
        assert!((low.predicted_over_alone - 2.0).abs() < 1e-9);
        let high = &scores[2];
        assert_eq!(high.users, "17-64");
        assert!((high.measured_over_alone - 5.0).abs() < 1e-9);
        assert_eq!(scores[0].engine, "sglang");
        assert!((scores[0].measured_over_alone - 4.0).abs() < 1e-9);
    }

    #[test]
    fn bands_cover_every_count_of_users() {
        let label = |users| BANDS[band(users)].2;
        assert_eq!(label(1), "1-4");
        assert_eq!(label(5), "5-16");
        assert_eq!(label(64), "17-64");
        assert_eq!(label(65), "65+");
        assert_eq!(label(u32::MAX), "65+");
    }
}

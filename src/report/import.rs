//! How an import reads: the levels as capplan now holds them, and every note on the way.

use std::path::PathBuf;

use serde::Serialize;

use super::{count, Document, Report, Table};
use crate::slo::Percentile;
use crate::store::import::Imported;
use crate::store::steps::Metric;

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub run_dir: PathBuf,
    pub imported: Imported,
}

impl Report for ImportReport {
    fn document(&self) -> Document {
        let i = &self.imported;
        let heading = vec![
            format!(
                "Imported {} level(s) from {}{} ({} file(s)) into {}",
                i.levels.len(),
                i.tool,
                i.tool_version
                    .as_ref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                i.files.len(),
                self.run_dir.display()
            ),
            "Next: `capplan fit` on that folder gives curves and C* at any SLO; `capplan solve` uses it as imported capacity.".into(),
        ];
        let ms = |v: Option<f64>| {
            v.map(|v| format!("{:.1}", v * 1e3))
                .unwrap_or_else(|| "-".into())
        };
        let mut table = Table {
            caption: Some("Levels, latency in ms (capplan's definitions)".into()),
            headers: [
                "load",
                "requests",
                "failed",
                "TTFT mean",
                "TTFT p90",
                "TPOT mean",
                "ITL mean",
                "E2E mean",
                "E2E p90",
                "out tok/s",
                "req/s",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for level in &i.levels {
            let v = |m: Metric, p: Percentile| level.value(m, p);
            table.rows.push(vec![
                match (level.concurrency, level.rate) {
                    (Some(c), _) => format!("{} users", count(c)),
                    (None, Some(r)) => format!("{} req/s", count(r)),
                    _ => "-".into(),
                },
                level.requests.map_or("-".into(), |n| n.to_string()),
                level.failures.map_or("-".into(), |n| n.to_string()),
                ms(v(Metric::Ttft, Percentile::Mean)),
                ms(v(Metric::Ttft, Percentile::P(90.0))),
                ms(v(Metric::Tpot, Percentile::Mean)),
                ms(v(Metric::Itl, Percentile::Mean)),
                ms(v(Metric::E2e, Percentile::Mean)),
                ms(v(Metric::E2e, Percentile::P(90.0))),
                level
                    .output_tokens_per_s
                    .map_or("-".into(), |x| format!("{x:.1}")),
                level
                    .requests_per_s
                    .map_or("-".into(), |x| format!("{x:.3}")),
            ]);
        }
        Document {
            heading,
            tables: vec![table],
            notes: i.notes.clone(),
            ..Document::default()
        }
    }
}

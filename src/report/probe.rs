//! How a probe run reads: its steps and the C* line.

use super::{count, Document, Report, Table};
use crate::fit::knee::{BatchKnee, BatchPoint};
use crate::probe::run::{ProbeReport, Target};
use crate::slo::format_seconds;
use crate::stats::Summary;

fn ms(summary: &Option<Summary>, pick: fn(&Summary) -> f64) -> String {
    summary
        .as_ref()
        .map(|s| format!("{:.0}", pick(s) * 1e3))
        .unwrap_or_else(|| "-".into())
}

impl Report for ProbeReport {
    fn document(&self) -> Document {
        let c = &self.config;
        let target = match &c.target {
            Target::Url { url, .. } => url.clone(),
            Target::Sim { time_scale, .. } => {
                format!("simulated engine in-process ({time_scale}× speed)")
            }
        };
        let mut heading = vec![
            format!(
                "Probe of {} ({} API, {}) — {} on {} × {} · {}",
                target,
                c.api,
                if c.stream {
                    "streaming"
                } else {
                    "not streaming"
                },
                c.layout.model,
                c.layout.tp,
                c.layout.card,
                c.slo.describe()
            ),
            format!("Run folder: {} ({})", self.run_dir.display(), self.status),
        ];
        if let Some(e2e) = c.e2e_limit_s {
            heading.push(format!("Also E2E ≤ {}.", format_seconds(e2e)));
        }
        let mut table = Table {
            caption: Some(format!(
                "Latency in ms, over counted requests; verdicts at 95 % confidence; max error rate {} %",
                count(c.max_error_rate * 100.0)
            )),
            headers: [
                "step", "users", "counted", "failed", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90",
                "TPOT p99", "ITL p50", "E2E p90", "out tok/s", "req/s", "verdict", "client",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for step in &self.steps {
            let verdict = step.verdict_label();
            let why = match (step.late, step.delivery_delay_s) {
                (true, Some(delay)) => format!(
                    "{} (failed by no more than the {} first tokens went out late on a busy machine; run again)",
                    step.verdict.explain(),
                    crate::slo::format_seconds(delay)
                ),
                _ => step.verdict.explain(),
            };
            table.rows.push(vec![
                step.step.to_string(),
                step.concurrency.to_string(),
                step.requests.to_string(),
                step.failures.to_string(),
                ms(&step.ttft, |s| s.p50),
                ms(&step.ttft, |s| s.p90),
                ms(&step.ttft, |s| s.p99),
                ms(&step.tpot, |s| s.p50),
                ms(&step.tpot, |s| s.p90),
                ms(&step.tpot, |s| s.p99),
                ms(&step.itl, |s| s.p50),
                ms(&step.e2e, |s| s.p90),
                format!("{:.0}", step.output_tokens_per_s),
                format!("{:.2}", step.requests_per_s),
                if why.is_empty() {
                    verdict
                } else {
                    format!(
                        "{verdict}{}: {why}",
                        if step.stopped_early { " (early)" } else { "" }
                    )
                },
                if step.client.bottleneck {
                    format!("BUSY lag p99 {:.1} ms", step.client.loop_lag_p99_ms)
                } else {
                    "ok".into()
                },
            ]);
        }
        if !self.batch_sweep.is_empty() {
            table.headers[1] = "users×batch".into();
            for (row, step) in table.rows.iter_mut().zip(&self.steps) {
                row[1] = format!("{}×{}", step.concurrency, step.batch);
            }
        }
        let bracket = match self.result.first_fail {
            Some(fail) => format!("[{} pass, {} fail]", self.result.last_pass, fail),
            None => format!("≥ {} (no level failed)", self.result.last_pass),
        };
        if let Some(soak) = &self.soak {
            return soak_document(self, soak, heading);
        }
        let headline = match &self.knee {
            Some(knee) => sweep_line(knee, &self.batch_sweep),
            None if self.batch_sweep.is_empty() => format!(
                "C* = {} users per instance {bracket}; limit: {}.",
                self.result.c_star, self.limit
            ),
            None => "The sweep measured no level.".into(),
        };
        let mut notes = vec![
            headline,
            format!(
                "{} requests sent, {:.1} s of server time.",
                self.requests_sent, self.server_seconds
            ),
        ];
        if !self.client_flagged_steps.is_empty() {
            notes.push(format!(
                "The load generator may have been the bottleneck in step(s) {:?}: their latency is not only the server's.",
                self.client_flagged_steps
            ));
        }
        if !self.usage_from_server {
            notes.push("The server refused stream_options: output tokens were counted from chunks (estimated).".into());
        }
        if self.steps.iter().any(|s| s.stable == Some(false)) {
            let unstable: Vec<u32> = self
                .steps
                .iter()
                .filter(|s| s.stable == Some(false))
                .map(|s| s.step)
                .collect();
            notes.push(format!(
                "Step(s) {unstable:?} never met the stability rule (three windows within {} %): judged on all their windows.",
                count(c.load.stability.unwrap_or(0.0) * 100.0)
            ));
        }
        notes.extend(self.notes.iter().cloned());
        Document {
            heading,
            tables: vec![table],
            notes,
            ..Document::default()
        }
    }
}

/// The knee of a batch sweep in one sentence, with what an item cost either side of it.
fn sweep_line(knee: &BatchKnee, points: &[BatchPoint]) -> String {
    let per_item = |batch: u32| {
        points
            .iter()
            .find(|p| p.batch == batch)
            .map(|p| format!("{:.2} ms", p.per_item_s() * 1e3))
            .unwrap_or_default()
    };
    match (knee.knee, knee.jumped_at, knee.jump) {
        (Some(at), Some(next), Some(jump)) => format!(
            "Knee at batch {at}: latency per item {} there, {} at batch {next} (+{:.1} % over the cheapest so far; threshold {} %). Find C* at it with --batch-size {at}.",
            per_item(at),
            per_item(next),
            jump * 100.0,
            count(knee.threshold * 100.0)
        ),
        _ => format!(
            "No knee: latency per item never rose {} % over the cheapest batch; cheapest at batch {} ({:.2} ms per item).",
            count(knee.threshold * 100.0),
            knee.cheapest,
            knee.cheapest_per_item_s * 1e3
        ),
    }
}

/// A soak reads as its intervals, then the whole run's statistics and footprint.
fn soak_document(
    report: &ProbeReport,
    soak: &crate::probe::soak::SoakReport,
    heading: Vec<String>,
) -> Document {
    use crate::probe::soak::LatencyStats;
    let ms = |s: &Option<LatencyStats>, pick: fn(&LatencyStats) -> f64| {
        s.as_ref()
            .map(|s| format!("{:.0}", pick(s) * 1e3))
            .unwrap_or_else(|| "-".into())
    };
    let mut table = Table {
        caption: Some(format!(
            "{} users held for {}, one row per {} of the server's time (HDR histograms, three significant digits); latency in ms",
            soak.concurrency,
            format_seconds(soak.duration_s),
            format_seconds(soak.interval_s)
        )),
        headers: [
            "interval", "from s", "requests", "failed", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50",
            "TPOT p90", "TPOT p99", "E2E p90", "out tok/s", "RSS MiB", "open fds",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for row in &soak.intervals {
        table.rows.push(vec![
            row.index.to_string(),
            format!("{:.0}", row.start_s),
            row.requests.to_string(),
            row.failed.to_string(),
            ms(&row.ttft, |s| s.p50_s),
            ms(&row.ttft, |s| s.p90_s),
            ms(&row.ttft, |s| s.p99_s),
            ms(&row.tpot, |s| s.p50_s),
            ms(&row.tpot, |s| s.p90_s),
            ms(&row.tpot, |s| s.p99_s),
            ms(&row.e2e, |s| s.p90_s),
            format!("{:.0}", row.output_tokens_per_s),
            row.rss_mib.map_or("-".into(), |v| format!("{v:.1}")),
            row.open_fds.map_or("-".into(), |v| v.to_string()),
        ]);
    }
    let failures: Vec<String> = soak
        .failures
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let mut notes = vec![
        format!("Soak verdict: {}.", soak.verdict),
        format!(
            "{} requests counted ({} ok{}); TTFT p50/p90/p99 {}/{}/{} ms, TPOT {}/{}/{} ms, {:.0} output tokens/s.",
            soak.requests,
            soak.ok,
            if failures.is_empty() {
                String::new()
            } else {
                format!(", failed: {}", failures.join(", "))
            },
            ms(&soak.ttft, |s| s.p50_s),
            ms(&soak.ttft, |s| s.p90_s),
            ms(&soak.ttft, |s| s.p99_s),
            ms(&soak.tpot, |s| s.p50_s),
            ms(&soak.tpot, |s| s.p90_s),
            ms(&soak.tpot, |s| s.p99_s),
            soak.output_tokens_per_s
        ),
        format!(
            "{} requests sent (warm-up and {} cut off at the end included), {:.1} s of server time.",
            report.requests_sent, soak.cut_off, report.server_seconds
        ),
    ];
    if let (Some(first), Some(max), Some(fds0), Some(fds)) = (
        soak.rss_mib_first,
        soak.rss_mib_max,
        soak.open_fds_first,
        soak.open_fds_max,
    ) {
        notes.push(format!(
            "Footprint of the probe: resident memory {first:.1} MiB at the first interval, at most {max:.1} MiB; open file descriptors {fds0}, at most {fds}."
        ));
    }
    notes.extend(report.notes.iter().cloned());
    Document {
        heading,
        tables: vec![table],
        notes,
        ..Document::default()
    }
}

//! How a fit reads, and the files it leaves beside its data: `fit.json`, and charts of
//! throughput (with the USL fit) and latency (with the SLO line and C* marked), SVG and PNG.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::chart::{write_chart, Chart, Mark, Rule, Series};
use super::{Document, Report, Table};
use crate::fit::curve::load_of;
use crate::fit::FittedCurve;
use crate::slo::{format_seconds, Percentile};
use crate::store::steps::Metric;

/// The result of `capplan fit`.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    pub curves: Vec<FittedEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FittedEntry {
    #[serde(flatten)]
    pub fitted: FittedCurve,
    /// Files written for it.
    pub written: Vec<PathBuf>,
}

fn sig(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else if value.abs() >= 0.01 && value.abs() < 1e5 {
        format!("{value:.4}")
    } else {
        format!("{value:.3e}")
    }
}

fn load_name(fitted: &FittedCurve) -> &'static str {
    if fitted.fit.load == "concurrency" {
        "users"
    } else {
        "requests/s"
    }
}

/// One line saying what C* the fit gives, or why it gives none.
pub fn capacity_line(fitted: &FittedCurve) -> String {
    match (&fitted.capacity, &fitted.capacity_gap) {
        (Some(c), _) => {
            let unit = load_name(fitted);
            let bracket = match (c.measured_pass, c.measured_fail) {
                (Some(p), Some(f)) => format!("measured: {p} passed, {f} failed"),
                (Some(p), None) => format!("measured: every level passed, up to {p}"),
                (None, Some(f)) => format!("measured: the first level ({f}) failed"),
                (None, None) => "no level had every figure the limits need".into(),
            };
            format!(
                "C* = {}{} {unit} [{}, {}] at {} — {}; {bracket}.",
                if c.at_least { "≥ " } else { "" },
                super::count(c.c_star),
                super::count(c.low),
                super::count(c.high),
                c.limits.describe(),
                c.limited_by
            )
        }
        (None, Some(gap)) => format!("No C*: {gap}."),
        (None, None) => "No C*.".into(),
    }
}

impl Report for FitReport {
    fn document(&self) -> Document {
        let mut document = Document::default();
        for entry in &self.curves {
            let fitted = &entry.fitted;
            let curve = &fitted.curve;
            let what = match &curve.layout {
                Some(l) => format!("{} on {} × {}", l.model, l.tp, l.card),
                None => "layout not recorded".into(),
            };
            document.heading.push(format!(
                "Fit of {} ({}{}, {what}): {} levels",
                curve.origin.display(),
                curve.kind,
                curve
                    .tool
                    .as_ref()
                    .map(|t| format!(" from {t}"))
                    .unwrap_or_default(),
                curve.levels.len()
            ));
            let mut throughput = Table {
                caption: Some(format!(
                    "{}: throughput against {} (Universal Scalability Law, relative least squares)",
                    curve.origin.display(),
                    load_name(fitted)
                )),
                headers: [
                    "quantity",
                    "λ",
                    "σ",
                    "κ",
                    "R²",
                    "RMS error",
                    "peak at",
                    "peak",
                    "points",
                ]
                .map(String::from)
                .to_vec(),
                rows: Vec::new(),
            };
            for t in &fitted.fit.throughput {
                let u = &t.usl;
                throughput.rows.push(vec![
                    t.quantity.to_string(),
                    sig(u.lambda),
                    sig(u.sigma),
                    sig(u.kappa),
                    format!("{:.4}", u.r2),
                    format!("{:.1} %", u.rms_relative_error * 100.0),
                    u.peak_concurrency
                        .map(|n| format!("{n:.0}"))
                        .unwrap_or_else(|| "-".into()),
                    u.peak_throughput
                        .map(|x| format!("{x:.1}"))
                        .unwrap_or_else(|| "-".into()),
                    u.points.to_string(),
                ]);
            }
            if !throughput.rows.is_empty() {
                document.tables.push(throughput);
            }
            let mut latency = Table {
                caption: Some(format!(
                    "{}: latency = a + b·N + c·max(0, N − knee), seconds (monotone; relative least squares)",
                    curve.origin.display()
                )),
                headers: ["metric", "a", "b", "c", "knee", "RMS error", "worst", "points", "range"]
                    .map(String::from)
                    .to_vec(),
                rows: Vec::new(),
            };
            for f in &fitted.fit.latency {
                latency.rows.push(vec![
                    format!("{} {}", f.metric, f.statistic),
                    sig(f.a),
                    sig(f.b),
                    sig(f.c),
                    format!("{:.1}", f.knee),
                    format!("{:.1} %", f.rms_relative_error * 100.0),
                    format!("{:.1} %", f.max_relative_error * 100.0),
                    f.points.to_string(),
                    format!("{}–{}", super::count(f.low), super::count(f.high)),
                ]);
            }
            if !latency.rows.is_empty() {
                document.tables.push(latency);
            }
            if !fitted.fit.flags.is_empty() {
                document.tables.push(Table {
                    caption: Some(format!("{}: flagged levels", curve.origin.display())),
                    headers: ["load", "left out of", "why"].map(String::from).to_vec(),
                    rows: fitted
                        .fit
                        .flags
                        .iter()
                        .map(|f| {
                            vec![
                                super::count(f.load),
                                if f.excluded_from.is_empty() {
                                    "(kept)".into()
                                } else {
                                    f.excluded_from.join(", ")
                                },
                                f.reason.clone(),
                            ]
                        })
                        .collect(),
                });
            }
            document.notes.push(capacity_line(fitted));
            if !curve.unused_columns.is_empty() {
                document.notes.push(format!(
                    "Columns not used: {}.",
                    curve.unused_columns.join(", ")
                ));
            }
            if !entry.written.is_empty() {
                document.notes.push(format!(
                    "Wrote {}.",
                    entry
                        .written
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        document
    }
}

/// Samples of a fitted curve over `[low, high]` for drawing.
fn sampled(low: f64, high: f64, f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    (0..=120)
        .map(|i| {
            let n = low + (high - low) * f64::from(i) / 120.0;
            (n, f(n))
        })
        .collect()
}

/// How a level's throughput is read.
type Quantity = fn(&crate::store::steps::Level) -> Option<f64>;

fn throughput_chart(fitted: &FittedCurve) -> Option<Chart> {
    let closed = fitted.fit.load == "concurrency";
    let (quantity, label, value): (&str, &str, Quantity) =
        if fitted.fit.throughput_fit("output_tokens_per_s").is_some() {
            ("output_tokens_per_s", "output tokens/s", |l| {
                l.output_tokens_per_s
            })
        } else {
            ("requests_per_s", "requests/s", |l| l.requests_per_s)
        };
    let usl = fitted.fit.throughput_fit(quantity)?;
    let levels = &fitted.curve.levels;
    let point = |l: &crate::store::steps::Level| Some((load_of(l, closed)?, value(l)?));
    let (used, left_out): (Vec<_>, Vec<_>) = levels
        .iter()
        .filter_map(point)
        .partition(|&(n, _)| !fitted.fit.excluded(n, "throughput"));
    let high = levels
        .iter()
        .filter_map(|l| load_of(l, closed))
        .fold(1.0, f64::max);
    let mut series = vec![
        Series {
            label: "measured".into(),
            points: used,
            mark: Mark::Points,
            colour: 0,
        },
        Series {
            label: format!(
                "USL fit (σ {}, κ {}, R² {:.3})",
                sig(usl.sigma),
                sig(usl.kappa),
                usl.r2
            ),
            points: sampled(0.0, high, |n| usl.at(n)),
            mark: Mark::Line,
            colour: 0,
        },
    ];
    if !left_out.is_empty() {
        series.push(Series {
            label: "flagged, not used".into(),
            points: left_out,
            mark: Mark::Hollow,
            colour: 3,
        });
    }
    let rules = usl
        .peak_concurrency
        .filter(|&n| n <= high * 1.5)
        .map(|n| Rule {
            label: format!("peak N* = {n:.0}"),
            at: n,
            vertical: true,
        })
        .into_iter()
        .collect();
    Some(Chart {
        title: format!("Throughput — {}", fitted.curve.origin.display()),
        x_label: load_name(fitted).into(),
        y_label: label.into(),
        series,
        rules,
    })
}

fn latency_chart(fitted: &FittedCurve) -> Option<Chart> {
    let closed = fitted.fit.load == "concurrency";
    // The metric the capacity is limited by, else the first one measured.
    let limits = fitted.capacity.as_ref().map(|c| c.limits);
    let metric = limits
        .and_then(|l| {
            [
                (Metric::Ttft, l.ttft_s),
                (Metric::Tpot, l.tpot_s),
                (Metric::E2e, l.e2e_s),
            ]
            .into_iter()
            .find(|(m, limit)| {
                limit.is_some()
                    && fitted
                        .capacity
                        .as_ref()
                        .is_some_and(|c| c.limited_by.starts_with(&m.to_string()))
            })
            .or_else(|| {
                [
                    (Metric::Ttft, l.ttft_s),
                    (Metric::Tpot, l.tpot_s),
                    (Metric::E2e, l.e2e_s),
                ]
                .into_iter()
                .find(|(_, limit)| limit.is_some())
            })
            .map(|(m, _)| m)
        })
        .or_else(|| fitted.fit.latency.first().map(|f| f.metric))?;
    let levels = &fitted.curve.levels;
    let high = levels
        .iter()
        .filter_map(|l| load_of(l, closed))
        .fold(1.0, f64::max);
    let mut series = Vec::new();
    for (colour, f) in fitted
        .fit
        .latency
        .iter()
        .filter(|f| f.metric == metric)
        .filter(|f| !matches!(f.statistic, Percentile::P(p) if p != 50.0 && p != 90.0 && p != 99.0))
        .enumerate()
    {
        let points: Vec<(f64, f64)> = levels
            .iter()
            .filter_map(|l| Some((load_of(l, closed)?, l.value(metric, f.statistic)?)))
            .collect();
        let (used, left_out): (Vec<_>, Vec<_>) = points
            .into_iter()
            .partition(|&(n, _)| !fitted.fit.excluded(n, "latency"));
        series.push(Series {
            label: format!("{} measured", f.statistic),
            points: used,
            mark: Mark::Points,
            colour,
        });
        if !left_out.is_empty() {
            series.push(Series {
                label: format!("{} flagged", f.statistic),
                points: left_out,
                mark: Mark::Hollow,
                colour,
            });
        }
        series.push(Series {
            label: format!("{} fit", f.statistic),
            points: sampled(f.low.min(1.0), high, |n| f.at(n)),
            mark: Mark::Line,
            colour,
        });
    }
    let mut rules = Vec::new();
    if let (Some(l), Some(c)) = (limits, &fitted.capacity) {
        let limit = match metric {
            Metric::Ttft => l.ttft_s,
            Metric::Tpot => l.tpot_s,
            _ => l.e2e_s,
        };
        if let Some(limit) = limit {
            rules.push(Rule {
                label: format!("SLO {metric} {} ≤ {}", l.statistic, format_seconds(limit)),
                at: limit,
                vertical: false,
            });
        }
        rules.push(Rule {
            label: format!("C* = {}", super::count(c.c_star)),
            at: c.c_star,
            vertical: true,
        });
    }
    Some(Chart {
        title: format!("{metric} — {}", fitted.curve.origin.display()),
        x_label: load_name(fitted).into(),
        y_label: format!("{metric}, seconds"),
        series,
        rules,
    })
}

/// Writes `fit.json` and the charts for `fitted` at `stem_of(name)`; returns what was written.
pub fn save(
    fitted: &FittedCurve,
    stem_of: impl Fn(&str) -> PathBuf,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let json = stem_of("fit.json");
    std::fs::write(&json, serde_json::to_string_pretty(fitted)? + "\n")
        .map_err(|err| anyhow::anyhow!("cannot write {}: {err} (use --out DIR)", json.display()))?;
    written.push(json);
    if let Some(chart) = throughput_chart(fitted) {
        written.extend(write_chart(&chart, &stem_of("throughput"))?);
    }
    if let Some(chart) = latency_chart(fitted) {
        written.extend(write_chart(&chart, &stem_of("latency"))?);
    }
    Ok(written)
}

/// Where a curve's files go: its own place, or `out` named after the curve.
pub fn stem_in(fitted: &FittedCurve, out: Option<&Path>) -> impl Fn(&str) -> PathBuf {
    let own = fitted.curve.clone();
    let out = out.map(Path::to_path_buf);
    move |name: &str| match &out {
        Some(dir) => {
            let base = own
                .origin
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "curve".into());
            dir.join(format!("{base}.{name}"))
        }
        None => own.output_stem(name),
    }
}

//! How a procurement comparison reads, and the report files it leaves: `<name>.json`, `.md`,
//! `.html` and charts of total cost and nodes per option (SVG and PNG).

use std::path::{Path, PathBuf};

use super::bar_chart::{write_bar_chart, Bar, BarChart, BarGroup, BarUnit};
use super::chart::chart_file;
use super::html::HtmlExporter;
use super::markdown::MarkdownExporter;
use super::step_times::{step_time_table, step_times_pointer};
use super::{count, dollars, users, ChartFile, Document, Exporter, Report, Table};
use crate::plan::compare::CompareReport;
use crate::plan::Demand;

fn money(value: Option<f64>) -> String {
    value.map(dollars).unwrap_or_else(|| "-".into())
}

impl CompareReport {
    /// `15, 22; no plan, 18`: nodes at −20 % and +20 % demand, at the stricter and looser SLO.
    fn sensitivity_cell(&self, model: &str, node: &str) -> String {
        let Some(sensitivity) = &self.sensitivity else {
            return "-".into();
        };
        let Some(row) = sensitivity
            .rows
            .iter()
            .find(|r| r.model == model && r.node == node)
        else {
            return "-".into();
        };
        let at = |label: &str| {
            sensitivity
                .variants
                .iter()
                .position(|v| v.starts_with(label))
                .and_then(|i| row.cells.get(i).cloned().flatten())
                .map_or_else(|| "no plan".to_string(), |(nodes, _)| nodes.to_string())
        };
        format!(
            "{}, {}; {}, {}",
            at("demand −"),
            at("demand +"),
            at("stricter"),
            at("looser")
        )
    }

    fn demand_unit(&self) -> &'static str {
        match self.plan.request.demand {
            Demand::Users(_) => "user",
            Demand::Rps(_) => "req/s",
        }
    }

    /// The document, with `charts` already written.
    pub fn document_with(&self, charts: Vec<ChartFile>) -> Document {
        let request = &self.plan.request;
        let mut heading = Vec::new();
        match &self.scenario {
            Some(s) => heading.push(format!(
                "Scenario {}{}",
                s.name,
                s.description
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            )),
            None => heading.push("Procurement comparison".into()),
        }
        heading.push(format!(
            "Demand {} · {} · headroom {} % · spares {} per candidate.",
            request.demand,
            request.slo.describe(),
            count(request.headroom * 100.0),
            request.spares
        ));
        heading.push(format!(
            "Costs: {}. Node prices and cloud rates are the catalog's editable sample estimates (hardware/nodes.toml), not quotes.",
            self.options.costs.describe()
        ));
        heading.push(format!("Users: {}.", self.plan.users_meaning));
        if let Some(predictions) = &self.plan.predictions {
            heading.push(format!(
                "Where nothing measured or imported applies: {} ({}).",
                predictions.summary,
                step_times_pointer(predictions)
            ));
        }
        if !self.options.inventory.is_empty() {
            heading.push(format!(
                "Already owned (purchase not counted again): {}.",
                self.options
                    .inventory
                    .iter()
                    .map(|o| format!("{} × {}", o.nodes, o.node))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let unit = self.demand_unit();
        let cloud = self.options.costs.cloud;
        let mut ranking = Table {
            caption: Some(format!(
                "Options, cheapest first over {} years",
                count(self.options.costs.years)
            )),
            headers: vec![
                "model".into(),
                "rank".into(),
                "node".into(),
                "split".into(),
                "nodes".into(),
                "cards".into(),
                if cloud { "rent".into() } else { "capex".into() },
                "energy".into(),
                "total".into(),
                format!("per {unit}"),
                "per M tokens".into(),
                "kW".into(),
                "RU".into(),
                "source".into(),
                "capacity per instance".into(),
                "evidence".into(),
                "nodes if (demand −20 %, +20 %; SLO × 0.8, × 1.25)".into(),
            ],
            rows: Vec::new(),
        };
        for option in &self.costed {
            let plan = &option.plan;
            ranking.rows.push(vec![
                plan.model.clone(),
                option.cost_rank.to_string(),
                plan.node.clone(),
                plan.split.to_string(),
                plan.nodes.to_string(),
                plan.cards.to_string(),
                if cloud {
                    money(option.cost.cloud_usd)
                } else {
                    money(option.cost.capex_usd)
                },
                if cloud {
                    "-".into()
                } else {
                    dollars(option.cost.energy_usd)
                },
                match option.band {
                    Some(band) => match (band.total_usd_low, band.total_usd_high) {
                        (Some(low), Some(high)) => format!(
                            "{} ({}–{} if C* lands in its band: {}–{} nodes)",
                            money(option.cost.total_usd),
                            dollars(low),
                            dollars(high),
                            band.nodes_low,
                            band.nodes_high
                        ),
                        _ => money(option.cost.total_usd),
                    },
                    None => money(option.cost.total_usd),
                },
                money(option.cost.usd_per_demand_unit),
                option
                    .cost
                    .usd_per_million_tokens
                    .map(|v| format!("${v:.2}"))
                    .unwrap_or_else(|| "-".into()),
                format!("{:.1}", option.cost.power_kw),
                option.cost.rack_units.to_string(),
                plan.source.to_string(),
                format!(
                    "{} ({})",
                    users(plan.users_per_instance),
                    plan.evidence_note
                ),
                plan.evidence.clone(),
                self.sensitivity_cell(&plan.model, &plan.node),
            ]);
        }
        let mut tables = vec![ranking];
        if !self.mixes.is_empty() {
            let mut mixes = Table {
                caption: Some("Cheapest mix of node types (exact integer program)".into()),
                headers: [
                    "model",
                    "mix",
                    "carries",
                    "total",
                    "cheapest single type",
                    "its total",
                    "mix wins",
                ]
                .map(String::from)
                .to_vec(),
                rows: Vec::new(),
            };
            for mix in &self.mixes {
                mixes.rows.push(vec![
                    mix.model.clone(),
                    mix.parts
                        .iter()
                        .map(|p| {
                            format!(
                                "{} × {} ({}){}",
                                p.nodes,
                                p.node,
                                p.split,
                                if p.owned { ", owned" } else { "" }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" + "),
                    format!("{} {unit}s", count(mix.capacity.floor())),
                    dollars(mix.total_usd),
                    mix.best_single_node.clone().unwrap_or_else(|| "-".into()),
                    money(mix.best_single_usd),
                    if mix.beats_every_single_type {
                        format!(
                            "yes, saves {}",
                            money(mix.best_single_usd.map(|b| b - mix.total_usd))
                        )
                    } else {
                        "no".into()
                    },
                ]);
            }
            tables.push(mixes);
        }
        if let Some(sensitivity) = &self.sensitivity {
            let mut headers = vec!["model".to_string(), "node".to_string()];
            headers.extend(sensitivity.variants.iter().cloned());
            let mut table = Table {
                caption: Some("Sensitivity: nodes and total cost as the question moves".into()),
                headers,
                rows: Vec::new(),
            };
            for row in &sensitivity.rows {
                let mut cells = vec![row.model.clone(), row.node.clone()];
                cells.extend(row.cells.iter().map(|cell| match cell {
                    Some((nodes, cost)) => format!("{nodes} nodes, {}", money(*cost)),
                    None => "no plan".into(),
                }));
                table.rows.push(cells);
            }
            tables.push(table);
        }
        if let Some(table) = self.plan.predictions.as_ref().and_then(step_time_table) {
            tables.push(table);
        }
        let mut notes = self.notes.clone();
        notes.extend(self.plan.notes.iter().cloned());
        if !self.plan.missing.is_empty() {
            notes.push(format!(
                "{} model × node shape(s) have no plan (no capacity proves the SLO, or the model does not fit); `capplan solve … --format json` lists each with what would fill it.",
                self.plan.missing.len()
            ));
        }
        notes.push(
            "total = capex + energy (owned) or rent (cloud) over the period; per M tokens: total ÷ the output tokens the demand generates over the period (shown where the evidence carries E2E latency and tokens per request).".into(),
        );
        Document {
            heading,
            tables,
            notes,
            charts,
        }
    }
}

impl Report for CompareReport {
    fn document(&self) -> Document {
        self.document_with(Vec::new())
    }
}

/// Writes `<dir>/<name>.json`, `.md`, `.html` and the cost and node charts; returns the paths.
pub fn save(report: &CompareReport, dir: &Path, name: &str) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|err| anyhow::anyhow!("cannot create {}: {err}", dir.display()))?;
    let mut written = Vec::new();
    let mut charts = Vec::new();
    // One panel per model (each on its own scale), bars coloured by their evidence.
    let grouped = |value: &dyn Fn(&crate::plan::compare::CostedPlan) -> Option<f64>| {
        let mut groups: Vec<BarGroup> = Vec::new();
        for option in &report.costed {
            let Some(v) = value(option) else {
                continue;
            };
            let bar = Bar {
                label: format!("{} {}", option.plan.node, option.plan.split),
                value: v,
                kind: option.plan.source.to_string(),
            };
            match groups.iter_mut().find(|g| g.name == option.plan.model) {
                Some(group) => group.bars.push(bar),
                None => groups.push(BarGroup {
                    name: option.plan.model.clone(),
                    bars: vec![bar],
                }),
            }
        }
        groups
    };
    let cost = BarChart {
        title: format!(
            "Total cost over {} years",
            count(report.options.costs.years)
        ),
        x_label: "US$".into(),
        groups: grouped(&|o| o.cost.total_usd),
        unit: BarUnit::Dollars,
    };
    let nodes = BarChart {
        title: "Nodes per option".into(),
        x_label: "nodes".into(),
        groups: grouped(&|o| Some(o.plan.nodes as f64)),
        unit: BarUnit::Count,
    };
    for (chart, suffix) in [(&cost, "cost"), (&nodes, "nodes")] {
        if chart.is_empty() {
            continue;
        }
        let files = write_bar_chart(chart, &dir.join(format!("{name}.{suffix}")))?;
        charts.extend(chart_file(&chart.title, &files));
        written.extend(files);
    }
    let document = report.document_with(charts);
    let files = [
        (
            format!("{name}.json"),
            serde_json::to_string_pretty(report)? + "\n",
        ),
        (format!("{name}.md"), MarkdownExporter.render(&document)),
        (format!("{name}.html"), HtmlExporter.render(&document)),
    ];
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::write(&path, text)
            .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

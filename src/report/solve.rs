//! How a fleet plan reads.

use super::step_times::{step_time_table, step_times_pointer};
use super::{count, dollars, users, Document, Report, Table};
use crate::plan::{Demand, SolveReport};

impl Report for SolveReport {
    fn document(&self) -> Document {
        let request = &self.request;
        let mut heading = vec![format!(
            "Plan for {} · {} · headroom {}% · spares {} per candidate",
            request.demand,
            request.slo.describe(),
            count(request.headroom * 100.0),
            request.spares
        )];
        heading.push(format!("Users: {}.", self.users_meaning));
        if let Some(predictions) = &self.predictions {
            heading.push(format!(
                "Where nothing measured or imported applies, C* is predicted ({}; {}); \
                 measured ≻ imported ≻ predicted on every node shape.",
                predictions.summary,
                step_times_pointer(predictions)
            ));
        }
        let (per_instance, per_node) = match request.demand {
            Demand::Users(_) => {
                heading.push(
                    "nodes = ⌈users × (1 + headroom) / (instances × C*)⌉ + spares; best first by \
                     the catalog's estimated node price (edit hardware/nodes.toml for your quotes)."
                        .into(),
                );
                ("C*/instance", "users/node")
            }
            Demand::Rps(_) => {
                heading.push(
                    "nodes = ⌈rate × (1 + headroom) / (instances × C* / (R + Z))⌉ + spares; best \
                     first by the catalog's estimated node price."
                        .into(),
                );
                ("req/s/instance", "req/s/node")
            }
        };

        let mut tables = Vec::new();
        let mut plans = Table {
            caption: None,
            headers: [
                "model",
                "rank",
                "card",
                "node",
                "split",
                per_instance,
                per_node,
                "nodes",
                "cards",
                "est. capex",
                "source",
                "think",
                "evidence",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
        };
        for plan in &self.plans {
            plans.rows.push(vec![
                plan.model.clone(),
                plan.rank.to_string(),
                plan.card.clone(),
                plan.node.clone(),
                plan.split.to_string(),
                users(plan.users_per_instance),
                users(plan.users_per_node),
                plan.nodes.to_string(),
                plan.cards.to_string(),
                plan.capex_usd.map(dollars).unwrap_or_else(|| "-".into()),
                match plan.may_not_beat_rank {
                    Some(rank) => format!("{} (may not beat #{rank})", plan.source),
                    None => plan.source.to_string(),
                },
                plan.evidence_think_time.to_string(),
                match &plan.evidence_band {
                    Some(band) => format!(
                        "{}; measured C* likely {:.0}–{:.0}",
                        plan.evidence, band.low, band.high
                    ),
                    None => plan.evidence.clone(),
                },
            ]);
        }
        tables.push(plans);
        let conversions: Vec<String> = self
            .plans
            .iter()
            .filter_map(|p| {
                Some(format!(
                    "{} on {} ({}): {}",
                    p.model,
                    p.node,
                    p.split,
                    p.conversion.as_ref()?
                ))
            })
            .collect();
        if !conversions.is_empty() {
            tables.push(Table {
                caption: Some("Converted through the E2E latency at C* (Little's law):".into()),
                headers: vec!["plan".into()],
                rows: conversions.into_iter().map(|c| vec![c]).collect(),
            });
        }

        if !self.skipped.is_empty() {
            let mut skipped = Table {
                caption: Some("Capacity points not used:".into()),
                headers: ["point", "model", "card", "tp", "C*", "why not"]
                    .map(String::from)
                    .to_vec(),
                rows: Vec::new(),
            };
            for point in &self.skipped {
                skipped.rows.push(vec![
                    point.origin.clone(),
                    point.model.clone(),
                    point.card.clone(),
                    point.tp.to_string(),
                    users(point.users_per_instance),
                    point.reason.clone(),
                ]);
            }
            tables.push(skipped);
        }

        if let Some(table) = self.predictions.as_ref().and_then(step_time_table) {
            tables.push(table);
        }

        let mut notes = self.notes.clone();
        let mut models: Vec<&str> = self.missing.iter().map(|m| m.model.as_str()).collect();
        models.dedup();
        for model in models {
            let gaps: Vec<_> = self.missing.iter().filter(|m| m.model == model).collect();
            let without_data: Vec<&str> = gaps
                .iter()
                .filter(|m| !m.fitting_splits.is_empty())
                .map(|m| m.node.as_str())
                .collect();
            let too_small: Vec<&str> = gaps
                .iter()
                .filter(|m| m.fitting_splits.is_empty())
                .map(|m| m.node.as_str())
                .collect();
            if !without_data.is_empty() {
                notes.push(format!(
                    "{model}: no capacity point proves this SLO on {} node shape(s): {}. Measure \
                     one (`capplan probe --model {model} --card CARD --tp T …`) or add a capacity \
                     point to a CSV table in measurements/.",
                    without_data.len(),
                    without_data.join(", ")
                ));
            }
            if !too_small.is_empty() {
                notes.push(format!(
                    "{model}: does not fit in memory on {}.",
                    too_small.join(", ")
                ));
            }
        }
        if self.plans.is_empty() {
            notes.push(
                "No plan: nothing above proves capacity for this request. `--format json` lists \
                 every gap with the command that would fill it."
                    .into(),
            );
        }
        Document {
            heading,
            tables,
            notes,
            ..Document::default()
        }
    }
}

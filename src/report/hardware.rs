//! How the catalog reads: lists and single entries.

use serde::Serialize;

use super::{count, dollars, Document, Report, Table};
use crate::catalog::{Card, Catalog, EngineProfile, Model, Node};

/// Which part of the catalog to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Cards,
    Nodes,
    Models,
    Engines,
    All,
}

/// `capplan hardware list`.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogListing {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cards: Vec<Card>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<Model>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineProfile>,
    /// Measured operator tables: (system, engine) pairs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub operator_tables: Vec<(String, String)>,
}

impl CatalogListing {
    pub fn new(catalog: &Catalog, section: Section) -> Self {
        let want = |s: Section| section == s || section == Section::All;
        CatalogListing {
            cards: if want(Section::Cards) {
                catalog.cards.clone()
            } else {
                Vec::new()
            },
            nodes: if want(Section::Nodes) {
                catalog.nodes.clone()
            } else {
                Vec::new()
            },
            models: if want(Section::Models) {
                catalog.models.clone()
            } else {
                Vec::new()
            },
            engines: if want(Section::Engines) {
                catalog.engines.clone()
            } else {
                Vec::new()
            },
            operator_tables: if want(Section::Engines) {
                catalog
                    .operators
                    .systems()
                    .into_iter()
                    .map(|(system, engine)| (system.to_string(), engine.to_string()))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

fn opt(value: Option<f64>) -> String {
    value.map(count).unwrap_or_else(|| "-".into())
}

fn cards_table(cards: &[Card]) -> Table {
    Table {
        caption: Some("Cards".into()),
        headers: [
            "card",
            "memory GiB",
            "HBM GB/s",
            "FP16 TFLOP/s",
            "FP8 TFLOP/s",
            "link",
            "link GB/s",
            "TDP W",
            "year",
        ]
        .map(String::from)
        .to_vec(),
        rows: cards
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    count(c.memory_gib),
                    count(c.hbm_bandwidth_gbs),
                    count(c.fp16_tflops),
                    opt(c.fp8_tflops),
                    c.interconnect.clone(),
                    count(c.link_bandwidth_gbs),
                    count(c.tdp_w),
                    c.release_year.to_string(),
                ]
            })
            .collect(),
    }
}

fn nodes_table(nodes: &[Node]) -> Table {
    Table {
        caption: Some("Node shapes (prices are editable estimates)".into()),
        headers: [
            "node",
            "card",
            "cards",
            "link",
            "topology",
            "scale-out GB/s/card",
            "host W",
            "RU",
            "est. price",
            "cloud",
            "est. $/h",
        ]
        .map(String::from)
        .to_vec(),
        rows: nodes
            .iter()
            .map(|n| {
                vec![
                    n.name.clone(),
                    n.card.clone(),
                    n.cards_per_node.to_string(),
                    n.interconnect.clone(),
                    n.topology.clone(),
                    opt(n.scale_out_gbs_per_card),
                    count(n.host_power_w),
                    n.rack_units.to_string(),
                    n.price_usd.map(dollars).unwrap_or_else(|| "-".into()),
                    n.cloud_instance.clone().unwrap_or_else(|| "-".into()),
                    opt(n.cloud_usd_per_hour),
                ]
            })
            .collect(),
    }
}

fn models_table(models: &[Model]) -> Table {
    Table {
        caption: Some("Models".into()),
        headers: [
            "model", "params B", "active B", "layers", "hidden", "heads", "KV heads", "head dim",
            "vocab", "context", "dtype",
        ]
        .map(String::from)
        .to_vec(),
        rows: models
            .iter()
            .map(|m| {
                // A model that is not a text generator has no decoder shape to show.
                let shape = |value: u32| {
                    if m.generates_text() {
                        value.to_string()
                    } else {
                        "-".to_string()
                    }
                };
                vec![
                    m.name.clone(),
                    count(m.params_b),
                    opt(m.active_params_b),
                    shape(m.layers),
                    shape(m.hidden_size),
                    shape(m.heads),
                    shape(m.kv_heads),
                    shape(m.head_dim),
                    shape(m.vocab_size),
                    if m.generates_text() {
                        m.max_context.to_string()
                    } else {
                        m.task.clone()
                    },
                    m.dtype.clone(),
                ]
            })
            .collect(),
    }
}

fn engines_table(engines: &[EngineProfile]) -> Table {
    Table {
        caption: Some("Engine profiles (scheduler defaults and per-step overhead)".into()),
        headers: [
            "engine",
            "describes",
            "max running",
            "tokens/step",
            "prefill",
            "admission",
            "schedules ahead",
            "step ms",
            "µs/seq",
            "request ms",
            "µs per expert layer",
            "hand-off ms",
            "benchmark users out of step (cycle share)",
            "kernels timed by",
        ]
        .map(String::from)
        .to_vec(),
        rows: engines
            .iter()
            .map(|e| {
                vec![
                    e.name.clone(),
                    e.describes.clone(),
                    e.max_running.to_string(),
                    e.token_budget.to_string(),
                    format!(
                        "{}{}",
                        e.step_mix,
                        if e.chunked_prefill {
                            ", chunked"
                        } else {
                            ", whole"
                        }
                    ),
                    e.admission.to_string(),
                    if e.schedule_ahead { "yes" } else { "no" }.to_string(),
                    format!("{:.2}", e.step_overhead_ms),
                    format!("{:.1}", e.seq_overhead_us),
                    format!("{:.1}", e.request_overhead_ms),
                    format!("{:.1}", e.moe_layer_overhead_us),
                    format!("{:.0}", e.handoff_ms),
                    format!("{:.3}", e.out_of_step),
                    format!("{} operator tables", e.operators),
                ]
            })
            .collect(),
    }
}

fn operator_tables_table(pairs: &[(String, String)]) -> Table {
    let mut systems: Vec<&str> = pairs.iter().map(|(s, _)| s.as_str()).collect();
    systems.dedup();
    Table {
        caption: Some(
            "Measured operator timings (hardware/operators/, from NVIDIA AIConfigurator)".into(),
        ),
        headers: vec!["system".into(), "engines".into()],
        rows: systems
            .iter()
            .map(|system| {
                vec![
                    system.to_string(),
                    pairs
                        .iter()
                        .filter(|(s, _)| s == system)
                        .map(|(_, e)| e.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                ]
            })
            .collect(),
    }
}

impl Report for CatalogListing {
    fn document(&self) -> Document {
        let mut tables = Vec::new();
        if !self.cards.is_empty() {
            tables.push(cards_table(&self.cards));
        }
        if !self.nodes.is_empty() {
            tables.push(nodes_table(&self.nodes));
        }
        if !self.models.is_empty() {
            tables.push(models_table(&self.models));
        }
        if !self.engines.is_empty() {
            tables.push(engines_table(&self.engines));
        }
        if !self.operator_tables.is_empty() {
            tables.push(operator_tables_table(&self.operator_tables));
        }
        Document {
            heading: Vec::new(),
            tables,
            notes: vec!["`capplan hardware show NAME` prints one entry with its sources.".into()],
            ..Document::default()
        }
    }
}

/// `capplan hardware show NAME`: one entry, whichever kind it is.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CatalogEntry {
    Card(Card),
    Node(Node),
    Model(Model),
    Engine(EngineProfile),
}

impl Report for CatalogEntry {
    fn document(&self) -> Document {
        // Every field, from the entry's own serialization, so nothing is left out.
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut rows = Vec::new();
        if let serde_json::Value::Object(fields) = value {
            for (key, field) in fields {
                let text = match field {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Array(items) => items
                        .iter()
                        .map(|i| {
                            i.as_str()
                                .map(String::from)
                                .unwrap_or_else(|| i.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                rows.push(vec![key, text]);
            }
        }
        Document {
            heading: Vec::new(),
            tables: vec![Table {
                caption: None,
                headers: vec!["field".into(), "value".into()],
                rows,
            }],
            notes: Vec::new(),
            ..Document::default()
        }
    }
}

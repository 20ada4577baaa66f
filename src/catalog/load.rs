//! Reading the catalog: the copy compiled into the binary, then a `hardware/` folder that
//! overrides and extends it entry by entry (same name replaces, new name adds).
//!
//! The built-in copy means a fresh install plans without any files; the folder means a buyer
//! can type in a quote or a new card without rebuilding.

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::band::ErrorBand;
use super::names::{find, normalize, suggestion, Named};
use super::operators::OperatorLibrary;
use super::{Card, Catalog, Dtype, EngineProfile, Model, Node};
use crate::error::InputError;

const SHIPPED_CARDS: &str = include_str!("../../hardware/cards.toml");
const SHIPPED_NODES: &str = include_str!("../../hardware/nodes.toml");
const SHIPPED_MODELS: &str = include_str!("../../hardware/models.toml");
const SHIPPED_ENGINES: &str = include_str!("../../hardware/engines.toml");
const SHIPPED_BANDS: &str = include_str!("../../hardware/bands.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CardsFile {
    #[serde(default)]
    card: Vec<Card>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodesFile {
    #[serde(default)]
    node: Vec<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    model: Vec<Model>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BandsFile {
    #[serde(default)]
    band: Vec<ErrorBand>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnginesFile {
    #[serde(default)]
    engine: Vec<EngineProfile>,
}

/// One catalog file's text and the name errors should point at.
struct Source<'a> {
    location: String,
    text: &'a str,
}

impl Catalog {
    /// The catalog compiled into the binary.
    pub fn shipped() -> Result<Catalog, InputError> {
        let mut catalog = Catalog::default();
        catalog.merge_texts(
            Some(Source {
                location: "hardware/cards.toml (built in)".into(),
                text: SHIPPED_CARDS,
            }),
            Some(Source {
                location: "hardware/nodes.toml (built in)".into(),
                text: SHIPPED_NODES,
            }),
            Some(Source {
                location: "hardware/models.toml (built in)".into(),
                text: SHIPPED_MODELS,
            }),
        )?;
        catalog.merge_engines(&Source {
            location: "hardware/engines.toml (built in)".into(),
            text: SHIPPED_ENGINES,
        })?;
        catalog.bands = read_bands(&Source {
            location: "hardware/bands.toml (built in)".into(),
            text: SHIPPED_BANDS,
        })?;
        catalog.operators = Arc::new(OperatorLibrary::shipped());
        Ok(catalog)
    }

    /// The built-in catalog, overridden and extended by `cards.toml`, `nodes.toml` and
    /// `models.toml` in `dir` (each optional).
    pub fn load(dir: Option<&Path>) -> Result<Catalog, InputError> {
        let mut catalog = Catalog::shipped()?;
        let Some(dir) = dir else {
            return Ok(catalog);
        };
        if !dir.is_dir() {
            return Err(InputError::file(
                dir.display().to_string(),
                "is not a folder; --hardware takes a folder holding cards.toml, nodes.toml and/or models.toml",
            ));
        }
        let read = |file: &str| -> Result<Option<(String, String)>, InputError> {
            let path = dir.join(file);
            if !path.exists() {
                return Ok(None);
            }
            let text = std::fs::read_to_string(&path).map_err(|err| {
                InputError::file(path.display().to_string(), format!("cannot read: {err}"))
            })?;
            Ok(Some((path.display().to_string(), text)))
        };
        let cards = read("cards.toml")?;
        let nodes = read("nodes.toml")?;
        let models = read("models.toml")?;
        let engines = read("engines.toml")?;
        if let Some(bands) = read("bands.toml")? {
            // A bands file replaces the built-in one whole: bands are one measurement.
            catalog.bands = read_bands(&Source {
                location: bands.0.clone(),
                text: &bands.1,
            })?;
        }
        catalog.merge_texts(source(&cards), source(&nodes), source(&models))?;
        if let Some(engines) = source(&engines) {
            catalog.merge_engines(&engines)?;
        }
        if dir.join("operators").is_dir() {
            catalog.operators = Arc::new(OperatorLibrary::load(Some(dir))?);
        }
        catalog
            .origin
            .push(format!("overrides from {}", dir.display()));
        Ok(catalog)
    }

    fn merge_engines(&mut self, source: &Source) -> Result<(), InputError> {
        let file: EnginesFile = parse_toml(source)?;
        for engine in &file.engine {
            check_engine(engine, source)?;
        }
        merge(&mut self.engines, file.engine, source)
    }

    fn merge_texts(
        &mut self,
        cards: Option<Source>,
        nodes: Option<Source>,
        models: Option<Source>,
    ) -> Result<(), InputError> {
        if let Some(source) = cards {
            let file: CardsFile = parse_toml(&source)?;
            for card in &file.card {
                check_card(card, &source)?;
            }
            merge(&mut self.cards, file.card, &source)?;
        }
        if let Some(source) = models {
            let file: ModelsFile = parse_toml(&source)?;
            for model in &file.model {
                check_model(model, &source)?;
            }
            merge(&mut self.models, file.model, &source)?;
        }
        if let Some(source) = nodes {
            let file: NodesFile = parse_toml(&source)?;
            let mut checked = Vec::with_capacity(file.node.len());
            for mut node in file.node {
                check_node(&mut node, &self.cards, &source)?;
                checked.push(node);
            }
            merge(&mut self.nodes, checked, &source)?;
        }
        Ok(())
    }
}

fn source(pair: &Option<(String, String)>) -> Option<Source<'_>> {
    pair.as_ref().map(|(location, text)| Source {
        location: location.clone(),
        text: text.as_str(),
    })
}

fn parse_toml<T: DeserializeOwned>(source: &Source) -> Result<T, InputError> {
    toml::from_str(source.text).map_err(|err| {
        let location = match err.span() {
            Some(span) => format!("{}:{}", source.location, line_at(source.text, span.start)),
            None => source.location.clone(),
        };
        InputError::file(location, err.message().trim().to_string())
    })
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `file:line` of the entry called `name` (where its `name = "…"` stands), for errors that
/// are found after parsing.
fn entry_location(source: &Source, name: &str) -> String {
    let quoted = format!("\"{name}\"");
    match source
        .text
        .lines()
        .position(|line| line.trim_start().starts_with("name") && line.contains(&quoted))
    {
        Some(index) => format!("{}:{}", source.location, index + 1),
        None => source.location.clone(),
    }
}

fn merge<T: Named>(into: &mut Vec<T>, incoming: Vec<T>, source: &Source) -> Result<(), InputError> {
    let mut seen: Vec<String> = Vec::new();
    for item in incoming {
        let key = normalize(item.name());
        if seen.contains(&key) {
            return Err(InputError::file(
                entry_location(source, item.name()),
                format!("'{}' is defined twice in this file", item.name()),
            ));
        }
        seen.push(key.clone());
        match into.iter().position(|old| normalize(old.name()) == key) {
            Some(index) => into[index] = item,
            None => into.push(item),
        }
    }
    Ok(())
}

fn positive(value: f64, field: &str, name: &str, source: &Source) -> Result<(), InputError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(InputError::file(
            entry_location(source, name),
            format!("'{name}': {field} must be a number above 0, got {value}"),
        ))
    }
}

fn check_card(card: &Card, source: &Source) -> Result<(), InputError> {
    for (value, field) in [
        (card.memory_gib, "memory_gib"),
        (card.hbm_bandwidth_gbs, "hbm_bandwidth_gbs"),
        (card.fp16_tflops, "fp16_tflops"),
        (card.link_bandwidth_gbs, "link_bandwidth_gbs"),
        (card.tdp_w, "tdp_w"),
    ] {
        positive(value, field, &card.name, source)?;
    }
    if let Some(fp8) = card.fp8_tflops {
        positive(fp8, "fp8_tflops", &card.name, source)?;
    }
    Ok(())
}

fn read_bands(source: &Source) -> Result<Vec<ErrorBand>, InputError> {
    let file: BandsFile = parse_toml(source)?;
    for band in &file.band {
        if !(band.low.is_finite()
            && band.high.is_finite()
            && band.low <= band.high
            && band.low > -1.0)
        {
            return Err(InputError::file(
                source.location.clone(),
                format!(
                    "band for {} on {}: low and high are C* errors with -1 < low ≤ high, got {} and {}",
                    band.engine, band.basis, band.low, band.high
                ),
            ));
        }
    }
    Ok(file.band)
}

fn check_engine(engine: &EngineProfile, source: &Source) -> Result<(), InputError> {
    for (value, field) in [
        (engine.max_running as f64, "max_running"),
        (engine.token_budget as f64, "token_budget"),
        (engine.memory_utilization, "memory_utilization"),
    ] {
        positive(value, field, &engine.name, source)?;
    }
    let invalid = |message: String| {
        InputError::file(
            entry_location(source, &engine.name),
            format!("'{}': {message}", engine.name),
        )
    };
    if let Some(zero) = engine.token_budget_grid.iter().find(|&&budget| budget == 0) {
        return Err(invalid(format!(
            "token_budget_grid lists budgets of tokens per iteration (each 1 or more), got {zero}"
        )));
    }
    if engine.memory_utilization > 1.0 {
        return Err(invalid(format!(
            "memory_utilization is a share of the card's memory (0 < x ≤ 1), got {}",
            engine.memory_utilization
        )));
    }
    for (value, field) in [
        (engine.step_overhead_ms, "step_overhead_ms"),
        (engine.seq_overhead_us, "seq_overhead_us"),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(invalid(format!("{field} must be 0 or more, got {value}")));
        }
    }
    if !(engine.out_of_step.is_finite() && (0.0..=1.0).contains(&engine.out_of_step)) {
        return Err(invalid(format!(
            "out_of_step is a share of one request cycle (0 ≤ x ≤ 1), got {}",
            engine.out_of_step
        )));
    }
    if engine
        .cuda_graph_sizes
        .windows(2)
        .any(|pair| pair[0] >= pair[1])
        || engine.cuda_graph_sizes.first() == Some(&0)
    {
        return Err(invalid(
            "cuda_graph_sizes must be batch sizes in ascending order, each at least 1".into(),
        ));
    }
    if let Some(kernels) = &engine.grouped_decode {
        let half = kernels.reread_half_group;
        if !(half.is_finite() && half >= 0.0) {
            return Err(invalid(format!(
                "grouped_decode.reread_half_group is a number of re-reads per KV head (≥ 0), got {half}"
            )));
        }
        let share = kernels.block_stream_share;
        if !(share.is_finite() && (0.0..=1.0).contains(&share)) {
            return Err(invalid(format!(
                "grouped_decode.block_stream_share is a share of the card's memory bandwidth (0 to 1), got {share}"
            )));
        }
        if kernels.head_dims.is_empty() || kernels.query_heads_per_kv.is_empty() {
            return Err(invalid(
                "grouped_decode needs the head_dims and query_heads_per_kv its kernel was built for"
                    .into(),
            ));
        }
    }
    Ok(())
}

fn check_model(model: &Model, source: &Source) -> Result<(), InputError> {
    positive(model.params_b, "params_b", &model.name, source)?;
    if !model.generates_text() {
        return check_dtype(model, source);
    }
    for (value, field) in [
        (model.layers, "layers"),
        (model.hidden_size, "hidden_size"),
        (model.heads, "heads"),
        (model.kv_heads, "kv_heads"),
        (model.head_dim, "head_dim"),
        (model.vocab_size, "vocab_size"),
        (model.max_context, "max_context"),
    ] {
        positive(f64::from(value), field, &model.name, source)?;
    }
    if let Some(mlp) = model.mlp.as_deref() {
        if mlp != "gated" && mlp != "plain" {
            return Err(InputError::file(
                entry_location(source, &model.name),
                format!("'{}': mlp '{mlp}' must be gated or plain", model.name),
            ));
        }
    }
    if !model.heads.is_multiple_of(model.kv_heads) {
        return Err(InputError::file(
            entry_location(source, &model.name),
            format!(
                "'{}': heads ({}) must be a multiple of kv_heads ({})",
                model.name, model.heads, model.kv_heads
            ),
        ));
    }
    // DeepSeek sparse attention selects positions of a latent cache; its tables and its
    // indexer keys are those of latent-attention models.
    if let Some(sparse) = model.sparse_attention {
        let problem = if model.kv_lora_rank.is_none() {
            Some("needs latent attention (kv_lora_rank)".to_string())
        } else if sparse.index_heads == 0 || sparse.index_head_dim == 0 || sparse.topk == 0 {
            Some("index_heads, index_head_dim and topk must be positive".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(InputError::file(
                entry_location(source, &model.name),
                format!("'{}': sparse_attention {problem}", model.name),
            ));
        }
    }
    check_dtype(model, source)
}

fn check_dtype(model: &Model, source: &Source) -> Result<(), InputError> {
    model.dtype.parse::<Dtype>().map_err(|err| {
        InputError::file(
            entry_location(source, &model.name),
            format!("'{}': {err}", model.name),
        )
    })?;
    Ok(())
}

/// Checks a node and rewrites its `card` to the catalog's canonical card name.
fn check_node(node: &mut Node, cards: &[Card], source: &Source) -> Result<(), InputError> {
    positive(
        f64::from(node.cards_per_node),
        "cards_per_node",
        &node.name,
        source,
    )?;
    let card = find(cards, &node.card).ok_or_else(|| {
        InputError::file(
            entry_location(source, &node.name),
            format!(
                "node '{}' names card '{}', which is not in the catalog{}",
                node.name,
                node.card,
                suggestion(cards, &node.card, "card")
            ),
        )
    })?;
    if let Some(gbs) = node.scale_out_gbs_per_card {
        positive(gbs, "scale_out_gbs_per_card", &node.name, source)?;
    }
    node.card = card.name.clone();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_catalog_loads_and_cross_references() {
        let catalog = Catalog::shipped().unwrap();
        assert!(catalog.cards.len() >= 18);
        assert!(catalog.models.len() >= 14);
        for node in &catalog.nodes {
            assert!(find(&catalog.cards, &node.card).is_some(), "{}", node.name);
        }
    }

    /// The nodes bought as building blocks of multi-node clusters — boxes of SXM or OAM
    /// modules, racks of superchips — say how fast they reach other nodes, and every node
    /// either has that figure or a comment in nodes.toml saying why not.
    #[test]
    fn every_node_states_its_scale_out_network() {
        let catalog = Catalog::shipped().unwrap();
        for node in &catalog.nodes {
            let card = find(&catalog.cards, &node.card).unwrap();
            let building_block = node.cards_per_node > 1
                && ["sxm", "oam", "superchip"].contains(&card.form_factor.as_str());
            if building_block {
                assert!(
                    node.scale_out_gbs_per_card.is_some(),
                    "{} is sold as a cluster building block but has no scale_out_gbs_per_card",
                    node.name
                );
            }
            if let Some(gbs) = node.scale_out_gbs_per_card {
                assert!(
                    node.scale_out.as_deref().is_some_and(|s| s.len() > 5),
                    "{}: name the scale-out network",
                    node.name
                );
                // One direction, GB/s: no NIC sold gives a card more than 1.6 Tb/s, and the
                // network out of a node is slower than the link between its cards (a figure in
                // Gb/s, or both directions, would break one of these).
                assert!(gbs <= 200.0, "{}: {gbs} GB/s per card", node.name);
                if node.interconnect != "none" {
                    assert!(
                        2.0 * gbs < card.link_bandwidth_gbs,
                        "{}: scale-out {gbs} GB/s per direction vs card link {} GB/s",
                        node.name,
                        card.link_bandwidth_gbs
                    );
                }
            }
        }
        for block in SHIPPED_NODES.split("[[node]]").skip(1) {
            let name = block
                .lines()
                .find_map(|line| line.strip_prefix("name = "))
                .unwrap_or_default();
            assert!(
                block.contains("\nscale_out_gbs_per_card = ")
                    || block.contains("# scale_out_gbs_per_card: "),
                "node {name}: give scale_out_gbs_per_card or a comment saying why not"
            );
        }
    }

    #[test]
    fn card_names_and_aliases_are_unambiguous() {
        let catalog = Catalog::shipped().unwrap();
        let mut seen: Vec<(String, &str)> = Vec::new();
        for card in &catalog.cards {
            for key in std::iter::once(&card.name)
                .chain(&card.aliases)
                .map(|n| normalize(n))
            {
                if let Some((_, other)) = seen.iter().find(|(k, c)| *k == key && *c != card.name) {
                    panic!("'{key}' names both {other} and {}", card.name);
                }
                seen.push((key, &card.name));
            }
        }
    }

    /// A card that names measured operator timings has them under every engine profile.
    #[test]
    fn cards_name_operator_tables_that_ship() {
        let catalog = Catalog::shipped().unwrap();
        let mut named = 0;
        for card in &catalog.cards {
            let Some(system) = card.operators.as_deref() else {
                continue;
            };
            named += 1;
            for engine in &catalog.engines {
                assert!(
                    catalog.operators.get(system, &engine.operators).is_some(),
                    "{}: no {system}/{}.csv",
                    card.name,
                    engine.operators
                );
            }
        }
        assert!(named >= 8, "{named} cards with operator tables");
    }

    #[test]
    fn toml_errors_name_file_and_line() {
        let source = Source {
            location: "x/cards.toml".into(),
            text: "[[card]]\nname = \"A\"\nmemory_gib = oops\n",
        };
        let err = parse_toml::<CardsFile>(&source).unwrap_err().to_string();
        assert!(err.starts_with("x/cards.toml:3:"), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let source = Source {
            location: "m.toml".into(),
            text: "[[model]]\nname = \"x\"\nparms_b = 7\n",
        };
        let err = parse_toml::<ModelsFile>(&source).unwrap_err().to_string();
        assert!(err.contains("m.toml:3") && err.contains("parms_b"), "{err}");
    }

    /// Sparse attention selects positions of a latent cache: a grouped-query model that
    /// declares it is refused, naming the model and what it lacks.
    #[test]
    fn sparse_attention_needs_a_latent_cache() {
        let shipped = Catalog::shipped().unwrap();
        let glm = shipped.model("glm-5").unwrap();
        assert!(check_model(
            glm,
            &Source {
                location: "m.toml".into(),
                text: ""
            }
        )
        .is_ok());
        let grouped = Model {
            name: "grouped".into(),
            kv_lora_rank: None,
            ..glm.clone()
        };
        let source = Source {
            location: "m.toml".into(),
            text: "[[model]]\nname = \"grouped\"\n",
        };
        let err = check_model(&grouped, &source).unwrap_err().to_string();
        assert!(
            err.contains("grouped") && err.contains("kv_lora_rank"),
            "{err}"
        );
    }
}

//! One card system's measured operator timings under one engine, read from its text table.
//!
//! The format (`hardware/operators/<system>/<engine>.csv`): `#` starts a comment; every other
//! line is comma-separated, and a list of numbers is one field with the numbers separated by
//! spaces.
//!
//! ```text
//! meta,system,h100_sxm                    # also: device, engine, version.<family>
//! axis,gemm,m,1 2 4 … 32768               # a table's axes, in order; the last one varies
//! axis,gemm,n,512 … 65536                 #   along each data line
//! axis,gemm,k,512 … 65536
//! gemm,bf16,<n>,<k>,<µs along m>          # table, variant, the other axes' values, values
//! context_attention,hd128.kv_bf16,<batch × heads>,,<µs along isl>
//! generation_attention,hd128.kv_fp8,<batch × kv heads>,,<µs along kv_len>
//! all_reduce,graph,<gpus>,,<µs along message bytes>
//! quantize,fp8.compute_scale,<k>,,<µs along m>   # computing an activation's scale
//! moe,fp8_block.h7168.i2048.k8.e256,<moe tp>,<moe ep>,<µs along tokens>  # a fused MoE layer
//! moe_a2a_decode,fp8_block.h7168.i2048.k8.e256,1,<moe ep>,<µs along tokens>  # experts fed by
//! moe_a2a_prefill,fp8_block.h7168.i2048.k8.e256,1,<moe ep>,<µs along tokens> #   an all-to-all
//! expert_exchange_decode,h7168.k8.e256,<ep>,,<µs along tokens a card sends>  # that all-to-all:
//! expert_exchange_prefill,h7168.k8.e256,<ep>,,<µs along tokens a card sends> #   out and back
//! context_mla,kv_bf16,<heads per card>,<sequences>,<µs along isl>  # latent attention
//! generation_mla,kv_fp8,<heads per card>,<sequences>,<µs along kv_len>
//! gdn_context,k4.v16.dk128.dv128,,,<µs along tokens>   # linear attention's own kernels
//! gdn_generation,k4.v16.dk128.dv128,,,<µs along batch>  #   (Gated DeltaNet), per layer
//! mla_module_context,fp8_block.kv_fp8.h7168,<heads per card>,<sequences>,<µs along isl>
//! mla_module_generation,fp8_block.kv_fp8.h7168,<heads per card>,<sequences>,<µs along kv_len>
//! dsa_context,fp8_block.kv_fp8.h6144,<heads per card>,<sequences>,<µs along isl>
//! dsa_generation,fp8_block.kv_fp8.h6144,<heads per card>,<sequences>,<µs along kv_len>
//! ```
//!
//! The `mla_module_*` and `dsa_*` tables time a latent- or sparse-attention layer's whole
//! attention block (projections, indexer, attention) per model shape, projection format and
//! KV format (`attention_module`).
//!
//! A `moe` variant names the expert format and the model's shape (hidden size, expert width,
//! experts per token, experts); its lines are the expert-parallel layouts measured, each a
//! curve along the layer's tokens (all attention replicas' together). `moe_a2a_decode` and
//! `moe_a2a_prefill` are the same layer as large expert-parallel deployments run it: each
//! card computes only the tokens an all-to-all dispatch delivers to its experts (SGLang's
//! DeepEP path, TensorRT-LLM's wide-EP path), per phase where the engine runs them apart.
//! `expert_exchange_*` time that all-to-all itself, dispatch and combine of one layer, by the
//! tokens each card sends (`expert_exchange`).
//!
//! Every variant of a table must cover every combination of its leading axes' values, so the
//! values form a full grid.

use std::collections::BTreeMap;

use super::grid::{Axis, Grid};
use crate::error::InputError;

/// Message size at which all-reduce bus bandwidths are compared: 64 MiB, past the sizes where
/// latency rules in every shipped table.
const BANDWIDTH_PROBE_BYTES: f64 = 67_108_864.0;

/// A group of GPUs whose measured all-reduce bus bandwidth is under this share of two GPUs'
/// crosses a slower path than the pair (see `OperatorTables::all_reduce_slower_from`).
const SLOWER_PATH_SHARE: f64 = 0.5;

/// The tables this reader knows and their axes, in order.
const TABLES: [(&str, &[&str]); 18] = [
    ("gemm", &["n", "k", "m"]),
    ("context_attention", &["batch_heads", "isl"]),
    ("generation_attention", &["batch_kv_heads", "kv_len"]),
    ("all_reduce", &["gpus", "bytes"]),
    ("quantize", &["k", "m"]),
    ("moe", &["moe_tp", "moe_ep", "tokens"]),
    ("moe_a2a_decode", &["moe_tp", "moe_ep", "tokens"]),
    ("moe_a2a_prefill", &["moe_tp", "moe_ep", "tokens"]),
    ("expert_exchange_decode", &["ep", "tokens"]),
    ("expert_exchange_prefill", &["ep", "tokens"]),
    ("context_mla", &["heads", "batch", "isl"]),
    ("generation_mla", &["heads", "batch", "kv_len"]),
    ("gdn_context", &["tokens"]),
    ("gdn_generation", &["batch"]),
    ("dsa_context", &["heads", "batch", "isl"]),
    ("dsa_generation", &["heads", "batch", "kv_len"]),
    ("mla_module_context", &["heads", "batch", "isl"]),
    ("mla_module_generation", &["heads", "batch", "kv_len"]),
];

/// One system × engine.
#[derive(Debug, Clone, Default)]
pub struct OperatorTables {
    pub system: String,
    pub engine: String,
    pub device: String,
    /// Engine (or NCCL) version each table family was measured with.
    pub versions: BTreeMap<String, String>,
    /// Where the tables were read from, for messages.
    pub origin: String,
    gemm: BTreeMap<String, Grid>,
    context_attention: BTreeMap<String, Grid>,
    generation_attention: BTreeMap<String, Grid>,
    /// By (variant, gpus): the all-reduce table is measured at a few GPU counts only, which
    /// are not interpolated between.
    all_reduce: BTreeMap<String, BTreeMap<u32, Grid>>,
    /// Activation quantisation steps by `<dtype>.<step>` (`fp8.compute_scale`: the
    /// reduction that finds a dynamic per-tensor scale).
    quantize: BTreeMap<String, Grid>,
    /// A fused MoE layer by (`<dtype>.<shape>`, moe tp, moe ep), along tokens: measured at a
    /// few layouts per shape, not interpolated between layouts or shapes.
    moe: BTreeMap<String, BTreeMap<(u32, u32), Grid>>,
    /// The same layer behind an all-to-all dispatch, by (phase, `<dtype>.<shape>`, moe ep):
    /// measured with the experts spread over `ep` cards only (moe tp 1).
    moe_a2a: BTreeMap<String, BTreeMap<(MoePhase, u32), Grid>>,
    /// The all-to-all that feeds them, dispatch and combine of one layer, by (phase,
    /// `h<hidden>.k<experts per token>.e<experts>`, expert-parallel cards), along the tokens
    /// one card sends.
    exchange: BTreeMap<String, BTreeMap<(MoePhase, u32), Grid>>,
    /// Latent (MLA) attention by KV format, over heads per card, sequences and length.
    context_mla: BTreeMap<String, Grid>,
    generation_mla: BTreeMap<String, Grid>,
    /// Linear attention's convolution and delta-rule kernels by heads per card
    /// (`k4.v16.dk128.dv128`): a prompt's along its tokens, a decode step's along its
    /// sequences.
    gdn_context: BTreeMap<String, Grid>,
    gdn_generation: BTreeMap<String, Grid>,
    /// A latent- or sparse-attention layer's whole attention block by (table,
    /// `<gemm>.<kv>.<shape>`), over heads per card, sequences and length
    /// (`attention_module::variant`).
    modules: BTreeMap<String, BTreeMap<String, Grid>>,
}

/// Which iterations an all-to-all MoE curve times: the engines run a step with prompt
/// tokens and a decode-only step through different dispatch kernels (DeepEP's normal and
/// low-latency modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MoePhase {
    Prefill,
    Decode,
}

/// Lines of one table variant while reading: the leading axes' values → the values along the
/// last axis.
type Rows = BTreeMap<Vec<u64>, Vec<f64>>;

impl OperatorTables {
    /// Reads `text`; errors name `origin:line` and what would be valid.
    pub fn parse(text: &str, origin: &str) -> Result<OperatorTables, InputError> {
        let mut tables = OperatorTables {
            origin: origin.to_string(),
            ..OperatorTables::default()
        };
        let mut axes: BTreeMap<String, BTreeMap<String, Axis>> = BTreeMap::new();
        let mut rows: BTreeMap<(String, String), (usize, Rows)> = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let bad = |message: String| InputError::file(format!("{origin}:{line_no}"), message);
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            match fields[0] {
                "meta" => {
                    let (Some(key), Some(value)) = (fields.get(1), fields.get(2)) else {
                        return Err(bad("a meta line is meta,KEY,VALUE".into()));
                    };
                    match *key {
                        "system" => tables.system = value.to_string(),
                        "engine" => tables.engine = value.to_string(),
                        "device" => tables.device = value.to_string(),
                        other => match other.strip_prefix("version.") {
                            Some(family) => {
                                tables.versions.insert(family.into(), value.to_string());
                            }
                            None => {
                                return Err(bad(format!(
                                    "unknown meta key '{other}': use system, device, engine or version.<family>"
                                )))
                            }
                        },
                    }
                }
                "axis" => {
                    let [_, table, name, values] = fields[..] else {
                        return Err(bad("an axis line is axis,TABLE,NAME,V1 V2 …".into()));
                    };
                    let Some((_, names)) = TABLES.iter().find(|(t, _)| *t == table) else {
                        return Err(bad(unknown_table(table)));
                    };
                    if !names.contains(&name) {
                        return Err(bad(format!(
                            "table {table} has axes {}, not '{name}'",
                            names.join(", ")
                        )));
                    }
                    if rows.keys().any(|(t, _)| t == table) {
                        return Err(bad(format!(
                            "axis {name} of {table} comes after {table}'s data; declare axes first"
                        )));
                    }
                    let values = numbers(values).map_err(&bad)?;
                    let axis = Axis::new(values).ok_or_else(|| {
                        bad(format!(
                            "axis {name} of {table}: values must be positive and ascending"
                        ))
                    })?;
                    axes.entry(table.into())
                        .or_default()
                        .insert(name.into(), axis);
                }
                table => {
                    let Some((_, names)) = TABLES.iter().find(|(t, _)| *t == table) else {
                        return Err(bad(unknown_table(table)));
                    };
                    if fields.len() != 5 {
                        return Err(bad(format!(
                            "a {table} line is {table},VARIANT,KEY1,KEY2,V1 V2 … (5 fields, KEY2 empty for a 2-axis table); found {}",
                            fields.len()
                        )));
                    }
                    let declared = axes.get(table);
                    let last = names[names.len() - 1];
                    let Some(last_axis) = declared.and_then(|a| a.get(last)) else {
                        return Err(bad(format!(
                            "{table} data before its axis '{last}' is declared"
                        )));
                    };
                    let mut key = Vec::new();
                    for (position, field) in fields[2..4].iter().enumerate() {
                        if position + 1 >= names.len() {
                            if !field.is_empty() {
                                return Err(bad(format!(
                                    "{table} has {} axes: leave the second key empty",
                                    names.len()
                                )));
                            }
                            continue;
                        }
                        let value: u64 = field.parse().map_err(|_| {
                            bad(format!(
                                "{table} key '{field}' ({}) is not a whole number",
                                names[position]
                            ))
                        })?;
                        key.push(value);
                    }
                    let values = numbers(fields[4]).map_err(&bad)?;
                    if values.len() != last_axis.len() {
                        return Err(bad(format!(
                            "{} values along {last}, which has {}",
                            values.len(),
                            last_axis.len()
                        )));
                    }
                    if values.iter().any(|v| *v <= 0.0) {
                        return Err(bad("timings must be above 0 µs".into()));
                    }
                    let entry = rows
                        .entry((table.to_string(), fields[1].to_string()))
                        .or_insert((line_no, Rows::new()));
                    if entry.1.insert(key, values).is_some() {
                        return Err(bad(format!("{table} {} repeats a line", fields[1])));
                    }
                }
            }
        }
        for ((table, variant), (line_no, lines)) in rows {
            let bad = |message: String| InputError::file(format!("{origin}:{line_no}"), message);
            let declared = axes.get(&table).cloned().unwrap_or_default();
            let phase = match table.as_str() {
                "moe_a2a_decode" => Some(MoePhase::Decode),
                "moe_a2a_prefill" => Some(MoePhase::Prefill),
                _ => None,
            };
            // A curve per line along the table's one axis (`tokens`, `bytes`), by the line's
            // keys; `name` says which line a curve that is not one came from.
            let curves = |axis: &str, name: &dyn Fn(&[u64]) -> String| {
                let along = declared
                    .get(axis)
                    .cloned()
                    .ok_or_else(|| bad(format!("{table} needs an axis '{axis}'")))?;
                lines
                    .iter()
                    .map(|(key, values)| {
                        Grid::new(vec![along.clone()], values)
                            .map(|grid| (key.clone(), grid))
                            .ok_or_else(|| bad(name(key)))
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            if table == "moe" || phase.is_some() {
                let name = |key: &[u64]| format!("{table} {variant} tp {} ep {}", key[0], key[1]);
                for (key, grid) in curves("tokens", &name)? {
                    let (tp, ep) = (key[0] as u32, key[1] as u32);
                    match phase {
                        None => {
                            tables
                                .moe
                                .entry(variant.clone())
                                .or_default()
                                .insert((tp, ep), grid);
                        }
                        Some(_) if tp != 1 => {
                            return Err(bad(format!(
                                "{table} {variant}: experts behind an all-to-all are spread by expert parallelism only (moe tp 1), found tp {tp}"
                            )));
                        }
                        Some(phase) => {
                            tables
                                .moe_a2a
                                .entry(variant.clone())
                                .or_default()
                                .insert((phase, ep), grid);
                        }
                    }
                }
                continue;
            }
            let exchange = match table.as_str() {
                "expert_exchange_decode" => Some(MoePhase::Decode),
                "expert_exchange_prefill" => Some(MoePhase::Prefill),
                _ => None,
            };
            if let Some(phase) = exchange {
                let name = |key: &[u64]| format!("{table} {variant} ep {}", key[0]);
                for (key, grid) in curves("tokens", &name)? {
                    let ep = key[0] as u32;
                    tables
                        .exchange
                        .entry(variant.clone())
                        .or_default()
                        .insert((phase, ep), grid);
                }
                continue;
            }
            if table == "all_reduce" {
                let gpus_of = |key: &[u64]| key.first().copied().unwrap_or(0) as u32;
                let name = |key: &[u64]| format!("all_reduce {variant} {} GPUs", gpus_of(key));
                for (key, grid) in curves("bytes", &name)? {
                    let gpus = gpus_of(&key);
                    tables
                        .all_reduce
                        .entry(variant.clone())
                        .or_default()
                        .insert(gpus, grid);
                }
                continue;
            }
            let names = TABLES
                .iter()
                .find(|(t, _)| *t == table)
                .map(|(_, n)| *n)
                .unwrap_or(&[]);
            let mut grid_axes = Vec::new();
            for name in names {
                grid_axes.push(
                    declared
                        .get(*name)
                        .cloned()
                        .ok_or_else(|| bad(format!("{table} needs an axis '{name}'")))?,
                );
            }
            // Row-major over the leading axes' values: every combination must be there.
            let mut values = Vec::new();
            let leading = &grid_axes[..grid_axes.len() - 1];
            let mut missing = None;
            for_each_combination(leading, &mut |key| match lines.get(key) {
                Some(row) => values.extend_from_slice(row),
                None => {
                    if missing.is_none() {
                        missing = Some(key.to_vec());
                    }
                }
            });
            if let Some(key) = missing {
                return Err(bad(format!(
                    "{table} {variant} has no line for {} = {key:?}: every combination of the leading axes is needed",
                    names[..names.len() - 1].join(", ")
                )));
            }
            let grid = Grid::new(grid_axes, &values)
                .ok_or_else(|| bad(format!("{table} {variant}: not a full grid")))?;
            match table.as_str() {
                "gemm" => tables.gemm.insert(variant, grid),
                "context_attention" => tables.context_attention.insert(variant, grid),
                "quantize" => tables.quantize.insert(variant, grid),
                "context_mla" => tables.context_mla.insert(variant, grid),
                "generation_mla" => tables.generation_mla.insert(variant, grid),
                "gdn_context" => tables.gdn_context.insert(variant, grid),
                "gdn_generation" => tables.gdn_generation.insert(variant, grid),
                "dsa_context"
                | "dsa_generation"
                | "mla_module_context"
                | "mla_module_generation" => tables
                    .modules
                    .entry(table.clone())
                    .or_default()
                    .insert(variant, grid),
                _ => tables.generation_attention.insert(variant, grid),
            };
        }
        if tables.system.is_empty() || tables.engine.is_empty() {
            return Err(InputError::file(
                origin,
                "needs meta,system,NAME and meta,engine,NAME lines",
            ));
        }
        Ok(tables)
    }

    /// The GEMM dtypes measured (`bf16`, `fp8`, `fp8_block`, `nvfp4`, …).
    pub fn gemm_dtypes(&self) -> Vec<&str> {
        self.gemm.keys().map(String::as_str).collect()
    }

    /// One GEMM of `m` tokens, `n` outputs, `k` inputs in `dtype`, µs.
    pub fn gemm_us(&self, dtype: &str, m: f64, n: f64, k: f64) -> Option<f64> {
        self.gemm
            .get(dtype)
            .map(|grid| grid.at_monotone(&[n, k, m]))
    }

    /// Context (prefill) attention of `batch_heads` = sequences × query heads on one card,
    /// each `isl` tokens long, µs.
    pub fn context_attention_us(
        &self,
        head_dim: u32,
        kv_dtype: &str,
        batch_heads: f64,
        isl: f64,
    ) -> Option<f64> {
        self.context_attention_at(&format!("hd{head_dim}.{kv_dtype}"), batch_heads, isl)
    }

    /// The same by the variant's name (`hd128.kv_bf16`): a step model names its variant once
    /// and looks it up hundreds of thousands of times.
    pub fn context_attention_at(&self, variant: &str, batch_heads: f64, isl: f64) -> Option<f64> {
        self.context_attention
            .get(variant)
            .map(|grid| grid.at_monotone(&[batch_heads, isl]))
    }

    /// Generation (decode) attention of `batch_kv_heads` = sequences × KV heads on one card
    /// over `kv_len` cached positions each, µs.
    pub fn generation_attention_us(
        &self,
        head_dim: u32,
        kv_dtype: &str,
        batch_kv_heads: f64,
        kv_len: f64,
    ) -> Option<f64> {
        self.generation_attention_at(&format!("hd{head_dim}.{kv_dtype}"), batch_kv_heads, kv_len)
    }

    /// The same by the variant's name (`hd128.kv_fp8`).
    pub fn generation_attention_at(
        &self,
        variant: &str,
        batch_kv_heads: f64,
        kv_len: f64,
    ) -> Option<f64> {
        self.generation_attention
            .get(variant)
            .map(|grid| grid.at_monotone(&[batch_kv_heads, kv_len]))
    }

    /// One activation-quantisation `step` (`compute_scale`) before a `dtype` GEMM of `m`
    /// tokens × `k` inputs, µs; `None` when the tables do not hold it.
    pub fn quantize_us(&self, dtype: &str, step: &str, m: f64, k: f64) -> Option<f64> {
        self.quantize
            .get(&format!("{dtype}.{step}"))
            .map(|grid| grid.at_monotone(&[k, m]))
    }

    /// One fused MoE layer (routing, both expert GEMMs, activation) for `tokens` tokens of
    /// the experts' group, experts in `dtype`, shape `shape` (`h7168.i2048.k8.e256`), experts
    /// split `moe_tp` ways and spread over `moe_ep` cards, µs; `None` when not measured.
    pub fn moe_us(
        &self,
        dtype: &str,
        shape: &str,
        moe_tp: u32,
        moe_ep: u32,
        tokens: f64,
    ) -> Option<f64> {
        self.moe_at(&format!("{dtype}.{shape}"), moe_tp, moe_ep, tokens)
    }

    /// [`OperatorTables::moe_us`] by the variant's name (`fp8_block.h7168.i2048.k8.e256`),
    /// which a step model names once.
    pub fn moe_at(&self, variant: &str, moe_tp: u32, moe_ep: u32, tokens: f64) -> Option<f64> {
        self.moe
            .get(variant)?
            .get(&(moe_tp, moe_ep))
            .map(|grid| grid.at_monotone(&[tokens]))
    }

    /// One layer's all-to-all out to the experts' cards and back (`expert_exchange_*`), µs,
    /// for `tokens` sent by each card, at the measured expert-parallel width nearest `ep`
    /// (returned beside it: the caller scales to its own width).
    pub fn exchange_us(
        &self,
        phase: MoePhase,
        shape: &str,
        ep: u32,
        tokens: f64,
    ) -> Option<(u32, f64)> {
        let (&(_, nearest), grid) = self
            .exchange
            .get(shape)?
            .iter()
            .filter(|((p, _), _)| *p == phase)
            .min_by_key(|((_, width), _)| width.abs_diff(ep))?;
        Some((nearest, grid.at_monotone(&[tokens])))
    }

    /// One MoE layer behind an all-to-all dispatch in `phase`, for `tokens` tokens of all
    /// attention replicas together, experts in `dtype` of shape `shape` spread over `moe_ep`
    /// cards, µs; `None` when not measured at that width nor between two measured ones.
    /// Between two widths the time is interpolated in log–log: each card's experts, and the
    /// tokens they receive, shrink in proportion to the width (AIConfigurator's SGLang
    /// collection on GB200 skips 8 cards between 4 and 16).
    pub fn moe_a2a_us(
        &self,
        phase: MoePhase,
        dtype: &str,
        shape: &str,
        moe_ep: u32,
        tokens: f64,
    ) -> Option<f64> {
        self.moe_a2a_at(phase, &format!("{dtype}.{shape}"), moe_ep, tokens)
    }

    /// [`OperatorTables::moe_a2a_us`] by the variant's name, which a step model names once.
    pub fn moe_a2a_at(
        &self,
        phase: MoePhase,
        variant: &str,
        moe_ep: u32,
        tokens: f64,
    ) -> Option<f64> {
        let curves = self.moe_a2a.get(variant)?;
        let at = |ep: u32| {
            curves
                .get(&(phase, ep))
                .map(|grid| grid.at_monotone(&[tokens]))
        };
        if let Some(exact) = at(moe_ep) {
            return Some(exact);
        }
        let widths = curves
            .keys()
            .filter(|(p, _)| *p == phase)
            .map(|(_, ep)| *ep);
        let below = widths.clone().filter(|&w| w < moe_ep).max()?;
        let above = widths.filter(|&w| w > moe_ep).min()?;
        let (low, high) = (at(below)?, at(above)?);
        let share = (f64::from(moe_ep) / f64::from(below)).ln()
            / (f64::from(above) / f64::from(below)).ln();
        Some((low.ln() + share * (high.ln() - low.ln())).exp())
    }

    /// Every measured fused-MoE curve: (`<dtype>.<shape>`, moe tp, moe ep).
    pub fn moe_layouts(&self) -> Vec<(String, u32, u32)> {
        self.moe
            .iter()
            .flat_map(|(variant, layouts)| {
                layouts
                    .keys()
                    .map(move |&(tp, ep)| (variant.clone(), tp, ep))
            })
            .collect()
    }

    /// The expert formats measured for a MoE shape at some layout.
    pub fn moe_dtypes(&self, shape: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .moe
            .keys()
            .filter_map(|variant| variant.strip_suffix(&format!(".{shape}")))
            .map(String::from)
            .collect();
        out.dedup();
        out
    }

    /// Latent attention over a prompt chunk: `batch` sequences of `isl` tokens, `heads`
    /// query heads on this card, µs.
    pub fn context_mla_us(&self, kv_dtype: &str, heads: f64, batch: f64, isl: f64) -> Option<f64> {
        self.context_mla
            .get(kv_dtype)
            .map(|grid| grid.at_monotone(&[heads, batch, isl]))
    }

    /// Latent attention of one decode step: `batch` sequences over `kv_len` cached positions,
    /// `heads` query heads on this card, µs.
    pub fn generation_mla_us(
        &self,
        kv_dtype: &str,
        heads: f64,
        batch: f64,
        kv_len: f64,
    ) -> Option<f64> {
        self.generation_mla
            .get(kv_dtype)
            .map(|grid| grid.at_monotone(&[heads, batch, kv_len]))
    }

    /// One linear-attention layer's own kernels (convolution and delta rule; not its
    /// projections) for `tokens` prompt tokens with heads per card `variant`, µs.
    pub fn gdn_context_us(&self, variant: &str, tokens: f64) -> Option<f64> {
        self.gdn_context
            .get(variant)
            .map(|grid| grid.at_monotone(&[tokens]))
    }

    /// The same for a decode step of `sequences` sequences, µs.
    pub fn gdn_generation_us(&self, variant: &str, sequences: f64) -> Option<f64> {
        self.gdn_generation
            .get(variant)
            .map(|grid| grid.at_monotone(&[sequences]))
    }

    /// An attention block timed whole (`table`: `dsa_context`, `mla_module_context`, or their
    /// `_generation` counterparts) for `batch` sequences of `length` tokens (a prompt's, or a
    /// decode step's cached ones), `heads` query heads on this card, in variant `variant`
    /// (`fp8_block.kv_fp8.h6144`), µs.
    pub fn module_us(
        &self,
        table: &str,
        variant: &str,
        heads: f64,
        batch: f64,
        length: f64,
    ) -> Option<f64> {
        self.module(table, variant)
            .map(|grid| grid.at_monotone(&[heads, batch, length]))
    }

    /// The grid behind [`OperatorTables::module_us`] (heads, sequences, length → µs), for a
    /// step model to hold rather than look up every iteration.
    pub fn module(&self, table: &str, variant: &str) -> Option<&Grid> {
        self.modules.get(table)?.get(variant)
    }

    /// The fewest GPUs whose measured all-reduce crosses a slower path than two GPUs do: its
    /// bus bandwidth (2(n−1)/n of the message over the time) at 64 MiB under half the 2-GPU
    /// one's, in the first variant measured at both. AIConfigurator's L40S box reaches
    /// 0.57–0.63 of PCIe Gen4's one-way rate with two GPUs, 0.11–0.16 with four and 0.05–0.07
    /// with eight — GPUs that are peers in pairs, the rest through the host — where every
    /// NVLink system keeps or gains bus bandwidth as the group grows. A node shape whose
    /// cards all sit behind one switch does not have that slower path.
    pub fn all_reduce_slower_from(&self) -> Option<u32> {
        let bus_bytes_per_s = |variant: &str, gpus: u32| {
            let us = self.all_reduce_us(variant, gpus, BANDWIDTH_PROBE_BYTES)?;
            let n = f64::from(gpus);
            Some(2.0 * (n - 1.0) / n * BANDWIDTH_PROBE_BYTES / (us * 1e-6))
        };
        let mut counts: Vec<u32> = self
            .all_reduce
            .values()
            .flat_map(|groups| groups.keys().copied())
            .filter(|&gpus| gpus > 2)
            .collect();
        counts.sort_unstable();
        counts.dedup();
        counts.into_iter().find(|&gpus| {
            ["custom", "graph", "eager", "nccl"]
                .iter()
                .find_map(|v| Some((bus_bytes_per_s(v, 2)?, bus_bytes_per_s(v, gpus)?)))
                .is_some_and(|(pair, group)| group < SLOWER_PATH_SHARE * pair)
        })
    }

    /// An all-reduce of `bytes` over `gpus` GPUs with this engine's `variant` (`graph`,
    /// `eager`, `custom`) or NCCL's (`nccl`), µs; `None` when not measured at that GPU count.
    pub fn all_reduce_us(&self, variant: &str, gpus: u32, bytes: f64) -> Option<f64> {
        self.all_reduce
            .get(variant)?
            .get(&gpus)
            .map(|grid| grid.at_monotone(&[bytes]))
    }
}

fn unknown_table(table: &str) -> String {
    format!(
        "unknown line kind '{table}': use meta, axis, {}",
        TABLES.map(|(t, _)| t).join(", ")
    )
}

fn numbers(field: &str) -> Result<Vec<f64>, String> {
    field
        .split_whitespace()
        .map(|word| {
            word.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("'{word}' is not a number"))
        })
        .collect()
}

/// Calls `visit` with every combination of `axes`' values (as whole numbers), the last axis
/// varying fastest.
fn for_each_combination(axes: &[Axis], visit: &mut dyn FnMut(&[u64])) {
    let mut key = vec![0u64; axes.len()];
    fn walk(axes: &[Axis], depth: usize, key: &mut Vec<u64>, visit: &mut dyn FnMut(&[u64])) {
        if depth == axes.len() {
            visit(key);
            return;
        }
        for value in &axes[depth].values {
            key[depth] = value.round() as u64;
            walk(axes, depth + 1, key, visit);
        }
    }
    walk(axes, 0, &mut key, visit);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# a test table\n\
        meta,system,test_gpu\n\
        meta,engine,vllm\n\
        meta,version.gemm,0.1\n\
        axis,gemm,m,1 16\n\
        axis,gemm,n,512 1024\n\
        axis,gemm,k,512\n\
        gemm,bf16,512,512,10 20\n\
        gemm,bf16,1024,512,20 40\n\
        axis,all_reduce,bytes,1024 2048\n\
        all_reduce,graph,2,,5 6\n\
        axis,quantize,k,512 1024\n\
        axis,quantize,m,1 16\n\
        quantize,fp8.compute_scale,512,,7 8\n\
        quantize,fp8.compute_scale,1024,,7 9\n\
        axis,moe,tokens,1 64\n\
        moe,fp8.h7168.i2048.k8.e256,8,1,40 80\n\
        moe,fp8.h7168.i2048.k8.e256,1,8,90 150\n\
        axis,generation_mla,heads,16 128\n\
        axis,generation_mla,batch,1\n\
        axis,generation_mla,kv_len,1 1024\n\
        generation_mla,kv_bf16,16,1,10 20\n\
        generation_mla,kv_bf16,128,1,10 40\n";

    #[test]
    fn a_small_table_reads_and_interpolates() {
        let tables = OperatorTables::parse(SMALL, "t.csv").unwrap();
        assert_eq!(tables.system, "test_gpu");
        assert_eq!(tables.versions["gemm"], "0.1");
        assert_eq!(tables.gemm_dtypes(), vec!["bf16"]);
        assert!((tables.gemm_us("bf16", 16.0, 1024.0, 512.0).unwrap() - 40.0).abs() < 1e-9);
        // Halfway in log m between 1 and 16 (m = 4): √(10·20).
        let mid = tables.gemm_us("bf16", 4.0, 512.0, 512.0).unwrap();
        assert!((mid - (200f64).sqrt()).abs() < 1e-9);
        assert!(tables.gemm_us("fp8", 4.0, 512.0, 512.0).is_none());
        assert!((tables.all_reduce_us("graph", 2, 1024.0).unwrap() - 5.0).abs() < 1e-9);
        assert!(tables.all_reduce_us("graph", 4, 1024.0).is_none());
        let scale = |m, k| tables.quantize_us("fp8", "compute_scale", m, k);
        assert!((scale(16.0, 1024.0).unwrap() - 9.0).abs() < 1e-9);
        assert!((scale(1.0, 512.0).unwrap() - 7.0).abs() < 1e-9);
        assert!(tables
            .quantize_us("nvfp4", "compute_scale", 1.0, 512.0)
            .is_none());
        let shape = "h7168.i2048.k8.e256";
        assert!((tables.moe_us("fp8", shape, 8, 1, 64.0).unwrap() - 80.0).abs() < 1e-9);
        assert!((tables.moe_us("fp8", shape, 1, 8, 1.0).unwrap() - 90.0).abs() < 1e-9);
        assert!(tables.moe_us("fp8", shape, 4, 2, 1.0).is_none());
        assert_eq!(tables.moe_dtypes(shape), vec!["fp8"]);
        let mla = tables
            .generation_mla_us("kv_bf16", 128.0, 1.0, 1024.0)
            .unwrap();
        assert!((mla - 40.0).abs() < 1e-9);
        assert!(tables.context_mla_us("kv_bf16", 16.0, 1.0, 1.0).is_none());
    }

    /// Linear attention's kernels are one curve a variant: a prompt's along its tokens, a
    /// decode step's along its sequences; a key on their lines is refused.
    #[test]
    fn linear_attention_kernels_read_along_one_axis() {
        let text = "meta,system,test_gpu\nmeta,engine,sglang\n\
            axis,gdn_context,tokens,1 1024\n\
            axis,gdn_generation,batch,1 16\n\
            gdn_context,k4.v16.dk128.dv128,,,20 80\n\
            gdn_generation,k4.v16.dk128.dv128,,,6 12\n";
        let tables = OperatorTables::parse(text, "t.csv").unwrap();
        let variant = "k4.v16.dk128.dv128";
        assert!((tables.gdn_context_us(variant, 1024.0).unwrap() - 80.0).abs() < 1e-9);
        // Halfway in log between 1 and 16 sequences (4): √(6·12).
        let mid = tables.gdn_generation_us(variant, 4.0).unwrap();
        assert!((mid - 72f64.sqrt()).abs() < 1e-9, "{mid}");
        assert!(tables.gdn_context_us("k2.v8.dk128.dv128", 1.0).is_none());
        let keyed = text.replace(
            "gdn_context,k4.v16.dk128.dv128,,,",
            "gdn_context,k4.v16.dk128.dv128,4,,",
        );
        let err = OperatorTables::parse(&keyed, "t.csv")
            .unwrap_err()
            .to_string();
        assert!(err.contains("t.csv:5"), "{err}");
    }

    /// Experts behind an all-to-all, measured at 4 and 16 cards, per phase.
    const A2A: &str = "meta,system,test_gpu\nmeta,engine,sglang\n\
        axis,moe_a2a_decode,tokens,1 1024\n\
        axis,moe_a2a_prefill,tokens,1 1024\n\
        moe_a2a_decode,fp8_block.h7168.i2048.k8.e256,1,4,40 400\n\
        moe_a2a_decode,fp8_block.h7168.i2048.k8.e256,1,16,10 100\n\
        moe_a2a_prefill,fp8_block.h7168.i2048.k8.e256,1,4,500 800\n";

    #[test]
    fn all_to_all_experts_read_per_phase_and_between_measured_widths() {
        let tables = OperatorTables::parse(A2A, "a2a.csv").unwrap();
        let (fp8, shape) = ("fp8_block", "h7168.i2048.k8.e256");
        let decode = |ep, tokens| tables.moe_a2a_us(MoePhase::Decode, fp8, shape, ep, tokens);
        assert!((decode(4, 1024.0).unwrap() - 400.0).abs() < 1e-9);
        assert!((decode(16, 1.0).unwrap() - 10.0).abs() < 1e-9);
        // Eight cards, halfway between 4 and 16 in log width: √(400 · 100).
        assert!((decode(8, 1024.0).unwrap() - 200.0).abs() < 1e-9);
        // Not past the widths measured.
        assert!(decode(2, 1.0).is_none());
        assert!(decode(32, 1.0).is_none());
        // The prefill curve is its own, and measured at one width only.
        let prefill = |ep| tables.moe_a2a_us(MoePhase::Prefill, fp8, shape, ep, 1024.0);
        assert!((prefill(4).unwrap() - 800.0).abs() < 1e-9);
        assert!(prefill(8).is_none());
        assert!(tables
            .moe_a2a_us(MoePhase::Decode, "nvfp4", shape, 4, 1.0)
            .is_none());
        // A curve behind an all-to-all is expert parallelism alone.
        let split = A2A.replace(",1,16,", ",2,16,");
        let err = OperatorTables::parse(&split, "a2a.csv")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a2a.csv:"), "{err}");
        assert!(
            err.contains("expert parallelism only (moe tp 1), found tp 2"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (SMALL.replace("10 20", "10"), ":8", "1 values along m"),
            (SMALL.replace("10 20", "10 x"), ":8", "'x' is not a number"),
            (
                SMALL.replace("gemm,bf16,1024", "gemmm,bf16,1024"),
                ":9",
                "unknown line kind",
            ),
            (
                SMALL.replace("gemm,bf16,1024,512,20 40\n", ""),
                ":8",
                "no line for n, k = [1024, 512]",
            ),
            (
                SMALL.replace("axis,gemm,k,512\n", "") + "axis,gemm,k,512\n",
                ":23",
                "comes after gemm's data",
            ),
            (
                SMALL.replace("meta,system,test_gpu\n", ""),
                "t.csv",
                "meta,system",
            ),
        ];
        for (text, line, message) in cases {
            let err = OperatorTables::parse(&text, "t.csv")
                .unwrap_err()
                .to_string();
            assert!(err.contains(line) && err.contains(message), "{err}");
        }
    }
}

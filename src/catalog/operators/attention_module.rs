//! Attention timed whole: AIConfigurator's module-level timings of latent attention
//! (`mla_context_module_perf`, `mla_generation_module_perf`) and of DeepSeek sparse attention
//! (`dsa_context_module_perf`, `dsa_generation_module_perf`), reduced to the
//! `mla_module_context` / `mla_module_generation` and `dsa_context` / `dsa_generation` tables.
//!
//! A latent-attention layer is more kernels than its projections and one attention kernel:
//! rotary embedding, the latent norms, the batched products that absorb the KV up-projection
//! into the queries and the values into the output, activation quantisation. A sparse one
//! (DeepSeek-V3.2, GLM-5) adds an indexer: its own projections, an FP8 scoring of every cached
//! position and a top-k selection, before latent attention over the selected positions. The
//! collection times the whole attention block of one layer on one card — its query, KV,
//! indexer and output projections included — per heads the card holds, sequences and prompt
//! (or cached) length, so the step model takes it whole in place of the projections and
//! attention kernel it otherwise times apart.
//!
//! Kept, per model shape (`h6144`: the architecture's hidden width, which with the catalog
//! model's other widths checked against the collection's ([`shape_of`]) names it),
//! projection format (`fp8_block`, `bf16`) and KV format: a prompt with nothing cached
//! before it along its length, and a decode step along the cached length, on powers of two
//! (the collection's lengths are `2^k` and, for some engines, `2^k + 1` positions; each curve
//! is read in log–log between its measured points). Where kernels of several sources time
//! the same cell (SGLang picks dense attention for short prompts and the indexer past 2 048
//! tokens, vLLM has several latent-attention backends) the fastest is kept, as for the GEMMs.
//! Heads per card a collection skipped (SGLang's GLM-5 at 4, its DeepSeek-V3.2 at 8) are
//! extrapolated from their neighbours and counted.

use std::collections::BTreeMap;

use std::path::Path;

use super::convert::{
    along_columns, axis_line, fill, floats, join, never_slower_than_larger, newest, read, strings,
};
use super::native_chain::{collected_fused, NativeChainFactors};

/// One family of module timings: where the collection keeps it and what the tables call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    folder: &'static str,
    files: [&'static str; 2],
    /// The `op_name` of the whole module per phase (GLM-5.2's layers that reuse another
    /// layer's selection are timed apart as `_skip_indexer`, and left out).
    ops: [&'static str; 2],
    /// The reduced tables, prompt and decode step.
    pub tables: [&'static str; 2],
    /// The header's `version.<key>`.
    pub version_key: &'static str,
    /// The architectures collected and their widths.
    architectures: &'static [Architecture],
}

/// An architecture the collection timed, with the widths it used for it (AIConfigurator's
/// `DSA_MODEL_DIMS`, and DeepSeek-V3's config for latent attention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Architecture {
    name: &'static str,
    hidden: u32,
    q_rank: u32,
    kv_rank: u32,
    nope: u32,
    rope: u32,
    value: u32,
}

const DEEPSEEK_V3: Architecture = Architecture {
    name: "DeepseekV3ForCausalLM",
    hidden: 7168,
    q_rank: 1536,
    kv_rank: 512,
    nope: 128,
    rope: 64,
    value: 128,
};

/// DeepSeek sparse attention (DeepSeek-V3.2, GLM-5).
pub const SPARSE: Family = Family {
    folder: "sparse_attention",
    files: [
        "dsa_context_module_perf.parquet",
        "dsa_generation_module_perf.parquet",
    ],
    ops: ["dsa_context_module", "dsa_generation_module"],
    tables: ["dsa_context", "dsa_generation"],
    version_key: "dsa",
    architectures: &[
        Architecture {
            name: "DeepseekV32ForCausalLM",
            ..DEEPSEEK_V3
        },
        Architecture {
            name: "GlmMoeDsaForCausalLM",
            hidden: 6144,
            q_rank: 2048,
            kv_rank: 512,
            nope: 192,
            rope: 64,
            value: 256,
        },
    ],
};

/// Latent attention (DeepSeek-V3 and R1, Kimi-K2: the same widths, other head counts).
pub const LATENT: Family = Family {
    folder: "mla",
    files: [
        "mla_context_module_perf.parquet",
        "mla_generation_module_perf.parquet",
    ],
    ops: ["mla_context_module", "mla_generation_module"],
    tables: ["mla_module_context", "mla_module_generation"],
    version_key: "mla_module",
    architectures: &[DEEPSEEK_V3],
};

/// The family and shape name (`h7168`) that time `model`'s attention whole, when the
/// collection timed an architecture of its widths: sparse attention for a model with an
/// indexer, latent attention for one without.
pub fn shape_of(model: &crate::catalog::Model) -> Option<(Family, String)> {
    let latent = model.latent()?;
    let family = if model.sparse_attention.is_some() {
        SPARSE
    } else {
        LATENT
    };
    let width = |v: f64| v as u32;
    family
        .architectures
        .iter()
        .find(|a| {
            a.hidden == model.hidden_size
                && Some(a.q_rank) == model.q_lora_rank
                && a.kv_rank == width(latent.kv_rank)
                && a.nope == width(latent.nope)
                && a.rope == width(latent.rope)
                && a.value == width(latent.value)
        })
        .map(|a| (family, shape(a.hidden)))
}

/// Projection formats kept: FP8 with block scales (the checkpoints' own) and 16-bit (what
/// NVIDIA's NVFP4 checkpoints keep attention in).
const GEMM_FORMATS: [(&str, &str); 2] = [("fp8_block", "fp8_block"), ("bfloat16", "bf16")];
/// KV format kept: FP8, what NVIDIA's checkpoints quantise these models' cache to and the
/// sparse kernels read natively; 16-bit only where a collection has no FP8 cache for the
/// shape and projection format (TensorRT-LLM on H100 and H200). A 16-bit cache is timed as
/// FP8 where both were collected (the 16-bit decode module costs 0.95-1.15 times the FP8 one,
/// the prompt module up to twice past 2 048 tokens), which keeps the shipped tables half the
/// size.
const KV_FORMATS: [(&str, &str); 2] = [("fp8", "kv_fp8"), ("bfloat16", "kv_bf16")];

/// Heads per card kept: 128-head models on 1 to 32 cards, 64-head ones on 1 to 16.
const HEADS: [f64; 6] = [4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
/// Sequences per step: a prompt step holds a few prompts, a decode step up to 1 024.
const CONTEXT_BATCH: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
const GENERATION_BATCH: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// The variant name of a shape in a projection and KV format: `fp8_block.kv_fp8.h6144`.
pub fn variant(gemm: &str, kv: &str, shape: &str) -> String {
    format!("{gemm}.{kv}.{shape}")
}

/// The shape name of an architecture `hidden` wide.
fn shape(hidden: u32) -> String {
    format!("h{hidden}")
}

/// What the reduction wrote for one system × engine.
#[derive(Debug, Default)]
pub(super) struct ModuleTables {
    pub axes: String,
    pub data: String,
    /// Engine release the tables come from, when any.
    pub version: Option<String>,
    /// Grid cells extrapolated from their neighbours.
    pub filled: usize,
    /// Rows scaled from vLLM's native norm chain to the fused ops ([`super::native_chain`]).
    pub unchained: usize,
}

/// Reduces `dir`'s (one system's data folder) module timings of `family` under `engine` for
/// the model shapes `shapes`, from release `preferred` when it collected both phases (the
/// GEMMs' release), else the newest that did. vLLM's latent-attention tables collected with
/// the native norm chain are scaled by `native_chain` where it has the row.
pub(super) fn reduce(
    dir: &Path,
    engine: &str,
    preferred: &str,
    family: Family,
    shapes: &[String],
    native_chain: Option<&NativeChainFactors>,
) -> anyhow::Result<ModuleTables> {
    let base = dir.join(family.folder).join(engine);
    let both = family.files;
    let version = if both.iter().all(|f| base.join(preferred).join(f).is_file()) {
        Some(preferred.to_string())
    } else {
        newest(&base, &both)
    };
    let Some(version) = version.filter(|_| !shapes.is_empty()) else {
        return Ok(ModuleTables::default());
    };
    let mut out = ModuleTables::default();
    let native_chain = native_chain
        .filter(|_| engine == "vllm" && family == LATENT && !collected_fused(&base.join(&version)));
    // A prompt's lengths: every power of two where SGLang switches from dense to sparse
    // prefill (2 048 to 4 096 tokens), every other below; a decode step's every other power
    // of two (its curves bend slowly).
    let context_lengths = vec![
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0,
    ];
    let generation_lengths: Vec<f64> = (0..9).map(|k| 4f64.powi(k)).chain([131072.0]).collect();
    for (generation, length_axis, batches, lengths) in [
        (false, "isl", &CONTEXT_BATCH[..], context_lengths),
        (true, "kv_len", &GENERATION_BATCH[..], generation_lengths),
    ] {
        let phase = usize::from(generation);
        let (file, table, wanted_op) =
            (family.files[phase], family.tables[phase], family.ops[phase]);
        let df = read(&base.join(&version).join(file))?;
        let (op, arch, kv, gemm) = (
            strings(&df, "op_name")?,
            strings(&df, "architecture")?,
            strings(&df, "kv_cache_dtype")?,
            strings(&df, "gemm_type")?,
        );
        let (heads, batch, isl, step, latency) = (
            floats(&df, "num_heads")?,
            floats(&df, "batch_size")?,
            floats(&df, "isl")?,
            floats(&df, "step")?,
            floats(&df, "latency")?,
        );
        // (variant, heads, batch) → length → fastest µs.
        let mut curves: BTreeMap<(String, u64, u64), BTreeMap<u64, f64>> = BTreeMap::new();
        for i in 0..latency.len() {
            // The whole module; a prompt with nothing cached before it.
            if op[i] != wanted_op || latency[i] <= 0.0 || (!generation && step[i] != 0.0) {
                continue;
            }
            let Some(found) = family.architectures.iter().find(|a| a.name == arch[i]) else {
                continue;
            };
            let shape = shape(found.hidden);
            let (Some(&(_, g)), Some(&(_, k))) = (
                GEMM_FORMATS.iter().find(|(name, _)| *name == gemm[i]),
                KV_FORMATS.iter().find(|(name, _)| *name == kv[i]),
            ) else {
                continue;
            };
            if !shapes.contains(&shape) {
                continue;
            }
            // A decode step attends over the prompt and the tokens generated so far.
            let length = if generation { isl[i] + step[i] } else { isl[i] };
            let best = curves
                .entry((variant(g, k, &shape), heads[i] as u64, batch[i] as u64))
                .or_default()
                .entry(length as u64)
                .or_insert(f64::MAX);
            // Milliseconds in the collection, µs here.
            *best = best.min(latency[i] * 1e3);
        }
        let variants: Vec<String> = {
            let mut v: Vec<String> = curves.keys().map(|(name, _, _)| name.clone()).collect();
            v.dedup();
            // The 16-bit cache only where the FP8 one is missing.
            let all = v.clone();
            v.retain(|name| {
                !name.contains(".kv_bf16.") || !all.contains(&name.replace(".kv_bf16.", ".kv_fp8."))
            });
            v
        };
        let mut lines = String::new();
        for name in &variants {
            // ln µs by [heads][batch][length]: each measured curve read at the lengths kept,
            // then the gaps filled along batch, along length, and along heads.
            let mut grid = vec![vec![vec![f64::NAN; lengths.len()]; batches.len()]; HEADS.len()];
            for (h, heads_value) in HEADS.iter().enumerate() {
                for (b, batch_value) in batches.iter().enumerate() {
                    let key = (name.clone(), *heads_value as u64, *batch_value as u64);
                    if let Some(curve) = curves.get(&key) {
                        grid[h][b] = read_at(curve, &lengths);
                    }
                }
                let slab = &mut grid[h];
                out.filled += along_columns(slab, |column| {
                    // Prompt steps past the collected ones (it kept a step's tokens under
                    // 16 384 or 32 768) grow with their prompts: the card is busy there.
                    let past = if generation {
                        0
                    } else {
                        proportional_past_end(column)
                    };
                    past + fill(column)
                });
                for row in slab.iter_mut() {
                    out.filled += fill(row);
                }
            }
            for b in 0..batches.len() {
                for j in 0..lengths.len() {
                    let mut column: Vec<f64> = grid.iter().map(|slab| slab[b][j]).collect();
                    out.filled += fill(&mut column);
                    for (slab, value) in grid.iter_mut().zip(column) {
                        slab[b][j] = value;
                    }
                }
            }
            if grid.iter().flatten().flatten().any(|v| !v.is_finite()) {
                continue;
            }
            for (h, slab) in grid.iter().enumerate() {
                for (b, row) in slab.iter().enumerate() {
                    // A longer prompt or context never measured faster (collection noise).
                    let mut values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                    let (heads, batch) = (HEADS[h] as u64, batches[b] as u64);
                    if let Some(factors) =
                        native_chain.and_then(|f| f.of(table, name, heads, batch))
                    {
                        if factors.len() != values.len() {
                            anyhow::bail!(
                                "{}: {table},{name},{heads},{batch} has {} factors, the table {} lengths",
                                super::native_chain::FILE,
                                factors.len(),
                                values.len()
                            );
                        }
                        for (value, factor) in values.iter_mut().zip(factors) {
                            *value *= factor;
                        }
                        out.unchained += 1;
                    }
                    never_slower_than_larger(&mut values);
                    lines.push_str(&format!(
                        "{table},{name},{},{},{}\n",
                        HEADS[h] as u64,
                        batches[b] as u64,
                        join(&values)
                    ));
                }
            }
        }
        if !lines.is_empty() {
            out.axes.push_str(&axis_line(table, "heads", &HEADS));
            out.axes.push_str(&axis_line(table, "batch", batches));
            out.axes.push_str(&axis_line(table, length_axis, &lengths));
            out.data.push_str(&lines);
        }
    }
    if !out.data.is_empty() {
        out.version = Some(version);
    }
    Ok(out)
}

/// Fills the missing `ln µs` entries past the last known one of a column along a doubling
/// axis in proportion to it (twice the sequences, twice the time). Returns how many.
fn proportional_past_end(column: &mut [f64]) -> usize {
    let Some(last) = column.iter().rposition(|v| v.is_finite()) else {
        return 0;
    };
    let mut filled = 0;
    for j in last + 1..column.len() {
        column[j] = column[last] + (j - last) as f64 * std::f64::consts::LN_2;
        filled += 1;
    }
    filled
}

/// `ln µs` of a measured curve (length → µs) at each of `lengths`, read in log–log between
/// its points; NaN outside them, but for a length within 1 % of an end (1 024 against a
/// curve measured from 1 025 positions).
fn read_at(curve: &BTreeMap<u64, f64>, lengths: &[f64]) -> Vec<f64> {
    let points: Vec<(f64, f64)> = curve
        .iter()
        .map(|(&l, &us)| ((l.max(1) as f64).ln(), us.ln()))
        .collect();
    lengths
        .iter()
        .map(|&length| {
            let x = length.ln();
            let near = |(px, py): (f64, f64)| ((px - x).abs() < 0.01).then_some(py);
            let Some(hi) = points.iter().position(|&(px, _)| px >= x) else {
                return points.last().and_then(|&p| near(p)).unwrap_or(f64::NAN);
            };
            let (x1, y1) = points[hi];
            if (x1 - x).abs() < 1e-12 {
                return y1;
            }
            if hi == 0 {
                return near(points[0]).unwrap_or(f64::NAN);
            }
            let (x0, y0) = points[hi - 1];
            y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_curve_is_read_between_its_points_and_not_past_them() {
        let curve: BTreeMap<u64, f64> = [(3, 10.0), (1025, 40.0)].into_iter().collect();
        let read = read_at(&curve, &[1.0, 4.0, 1024.0, 2048.0]);
        assert!(read[0].is_nan() && read[3].is_nan());
        // 4 and 1 024 lie inside [3, 1 025]: near its ends, in log–log.
        assert!((read[1].exp() - 10.0).abs() < 1.0, "{}", read[1].exp());
        assert!((read[2].exp() - 40.0).abs() < 0.1, "{}", read[2].exp());
        // 1 024 is within 1 % of a curve's first point at 1 025; 2 is not of one at 3.
        let from: BTreeMap<u64, f64> = [(1025, 40.0), (4097, 80.0)].into_iter().collect();
        assert!((read_at(&from, &[1024.0])[0].exp() - 40.0).abs() < 1e-9);
        assert!(read_at(&curve, &[2.0])[0].is_nan());
    }

    /// One collected row: op, architecture, heads, batch, isl, step, ms.
    type Row<'a> = (&'a str, &'a str, i64, i64, i64, i64, f64);

    /// One collection file of `rows`, FP8 projections over an FP8 cache, written where the
    /// reduction looks.
    fn write(dir: &Path, file: &str, rows: &[Row]) {
        write_in(&dir.join("sparse_attention/sglang/0.5.14"), file, rows);
    }

    /// The same, into `folder`.
    fn write_in(folder: &Path, file: &str, rows: &[Row]) {
        use polars::prelude::*;
        let column = |f: fn(&Row) -> i64| -> Vec<i64> { rows.iter().map(f).collect() };
        let mut df = df!(
            "op_name" => rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            "architecture" => rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            "kv_cache_dtype" => vec!["fp8"; rows.len()],
            "gemm_type" => vec!["fp8_block"; rows.len()],
            "num_heads" => column(|r| r.2),
            "batch_size" => column(|r| r.3),
            "isl" => column(|r| r.4),
            "step" => column(|r| r.5),
            "latency" => rows.iter().map(|r| r.6).collect::<Vec<_>>(),
        )
        .unwrap();
        std::fs::create_dir_all(folder).unwrap();
        let out = std::fs::File::create(folder.join(file)).unwrap();
        ParquetWriter::new(out).finish(&mut df).unwrap();
    }

    /// GLM-5's module rows become `dsa_*` lines: the fastest kernel per cell, a prompt only
    /// with nothing cached, a decode step at its prompt and generated tokens together, GLM-5.2's
    /// `_skip_indexer` layers and the shapes no catalog model has left out.
    #[test]
    fn module_rows_reduce_to_the_tables_the_step_model_reads() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let glm = "GlmMoeDsaForCausalLM";
        let mut context = Vec::new();
        let mut generation = Vec::new();
        for heads in [8, 16] {
            for batch in [1, 2] {
                for isl in [1024, 8192] {
                    let ms = f64::from(heads as i32) / 8.0 * f64::from(batch as i32) * isl as f64
                        / 1024.0;
                    context.push(("dsa_context_module", glm, heads, batch, isl, 0, ms));
                    // A slower kernel source of the same cell, a cached prefix, a skip layer.
                    context.push(("dsa_context_module", glm, heads, batch, isl, 0, 9.0 * ms));
                    context.push(("dsa_context_module", glm, heads, batch, isl, 512, 0.001));
                    let skip = "dsa_context_module_skip_indexer";
                    context.push((skip, glm, heads, batch, isl, 0, 0.001));
                    generation.push((
                        "dsa_generation_module",
                        glm,
                        heads,
                        batch,
                        1,
                        isl,
                        ms / 100.0,
                    ));
                }
            }
        }
        // DeepSeek-V3.2's shape is not asked for.
        context.push((
            "dsa_context_module",
            "DeepseekV32ForCausalLM",
            8,
            1,
            1024,
            0,
            1.0,
        ));
        generation.push((
            "dsa_generation_module",
            "DeepseekV32ForCausalLM",
            8,
            1,
            1,
            1024,
            1.0,
        ));
        write(dir, SPARSE.files[0], &context);
        write(dir, SPARSE.files[1], &generation);

        let out = reduce(dir, "sglang", "0.5.14", SPARSE, &[shape(6144)], None).unwrap();
        assert_eq!(out.version.as_deref(), Some("0.5.14"));
        assert!(!out.data.contains("h7168"), "{}", out.data);
        let text = format!(
            "meta,system,test\nmeta,engine,sglang\n{}{}",
            out.axes, out.data
        );
        let tables = crate::catalog::operators::OperatorTables::parse(&text, "test").unwrap();
        let name = variant("fp8_block", "kv_fp8", "h6144");
        let prompt = |heads: f64, batch: f64, isl: f64| {
            tables
                .module_us("dsa_context", &name, heads, batch, isl)
                .unwrap()
        };
        // Measured cells read back (ms → µs, three significant digits).
        assert!((prompt(8.0, 1.0, 1024.0) - 1000.0).abs() < 1.0);
        assert!((prompt(16.0, 2.0, 8192.0) - 32_000.0).abs() < 50.0);
        // Past the collected sequences, in proportion to them.
        let four = prompt(16.0, 4.0, 8192.0);
        assert!((four / 64_000.0 - 1.0).abs() < 0.01, "{four}");
        // A decode step over 1 + 1 023 positions is the row of isl 1, step 1 024 minus one.
        let step = tables
            .module_us("dsa_generation", &name, 8.0, 1.0, 1025.0)
            .unwrap();
        assert!((step - 10.0).abs() < 0.5, "{step}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// vLLM's latent-attention module collected with the native norm chain is scaled by the
    /// factors, cell by cell; the same collection marked as run with the fused ops is not, nor
    /// is another engine's.
    #[test]
    fn the_native_norm_chain_is_taken_out_of_vllm_latent_attention() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let v3 = "DeepseekV3ForCausalLM";
        let (mut context, mut generation) = (Vec::new(), Vec::new());
        for heads in [8, 16] {
            for batch in [1, 2] {
                for length in [1024, 8192] {
                    let ms =
                        f64::from(heads as i32) * f64::from(batch as i32) * length as f64 / 8192.0;
                    context.push(("mla_context_module", v3, heads, batch, length, 0, ms));
                    generation.push((
                        "mla_generation_module",
                        v3,
                        heads,
                        batch,
                        1,
                        length,
                        ms / 100.0,
                    ));
                }
            }
        }
        for engine in ["vllm", "sglang"] {
            let folder = dir.join("mla").join(engine).join("0.24.0");
            write_in(&folder, LATENT.files[0], &context);
            write_in(&folder, LATENT.files[1], &generation);
        }
        let folder = dir.join("mla/vllm/0.24.0");
        let name = variant("fp8_block", "kv_fp8", "h7168");
        let factors: String = ["mla_module_context", "mla_module_generation"]
            .iter()
            .flat_map(|table| {
                let name = name.clone();
                let (batches, lengths) = if *table == "mla_module_context" {
                    (&CONTEXT_BATCH[..], 11)
                } else {
                    (&GENERATION_BATCH[..], 10)
                };
                HEADS.iter().flat_map(move |h| {
                    let name = name.clone();
                    batches.iter().map(move |b| {
                        format!(
                            "{table},{name},{h},{b},{}\n",
                            vec!["0.5"; lengths].join(" ")
                        )
                    })
                })
            })
            .collect();
        let factors = NativeChainFactors::parse(&factors).unwrap();
        let decode_at = |engine: &str| {
            let out = reduce(
                dir,
                engine,
                "0.24.0",
                LATENT,
                &[shape(7168)],
                Some(&factors),
            )
            .unwrap();
            let text = format!(
                "meta,system,test\nmeta,engine,{engine}\n{}{}",
                out.axes, out.data
            );
            let tables = crate::catalog::operators::OperatorTables::parse(&text, "test").unwrap();
            let us = tables
                .module_us("mla_module_generation", &name, 8.0, 1.0, 1024.0)
                .unwrap();
            (us, out.unchained)
        };
        // 1 024 positions at 8 heads and one sequence: 10 µs as collected.
        let (scaled, rows) = decode_at("vllm");
        assert!((scaled - 5.0).abs() < 0.1, "{scaled}");
        assert_eq!(
            rows,
            HEADS.len() * (CONTEXT_BATCH.len() + GENERATION_BATCH.len())
        );
        let (sglang, rows) = decode_at("sglang");
        assert!((sglang - 10.0).abs() < 0.2, "{sglang}");
        assert_eq!(rows, 0);
        std::fs::write(
            folder.join("collection_meta.yaml"),
            "tables:\n  mla_generation_module_perf:\n    norm_dispatch: vllm_c_eager_surrogate\n",
        )
        .unwrap();
        let (fused, rows) = decode_at("vllm");
        assert!((fused - 10.0).abs() < 0.2, "{fused}");
        assert_eq!(rows, 0);
        // A row whose factors do not match the table's lengths is refused, naming the file.
        std::fs::remove_file(folder.join("collection_meta.yaml")).unwrap();
        let short =
            NativeChainFactors::parse(&format!("mla_module_generation,{name},8,1,0.5 0.5\n"))
                .unwrap();
        let err = reduce(dir, "vllm", "0.24.0", LATENT, &[shape(7168)], Some(&short)).unwrap_err();
        assert!(
            err.to_string().contains(super::super::native_chain::FILE),
            "{err}"
        );
    }

    /// The catalog's latent-attention models are timed by the architecture of their widths:
    /// DeepSeek-V3, R1 and Kimi's latent attention by DeepSeek-V3's module (other head counts,
    /// the same widths), DeepSeek-V3.2's and GLM-5's sparse attention by theirs; a model whose
    /// widths the collection did not use, or without latent attention, by none.
    #[test]
    fn models_are_timed_by_the_architecture_of_their_widths() {
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let of = |name: &str| {
            let model = catalog.model(name).unwrap();
            shape_of(model).map(|(family, shape)| (family.tables[0], shape))
        };
        let latent = Some(("mla_module_context", "h7168".to_string()));
        assert_eq!(of("deepseek-v3"), latent);
        assert_eq!(of("deepseek-r1"), latent);
        assert_eq!(of("kimi-k2.5"), latent);
        assert_eq!(
            of("deepseek-v3.2"),
            Some(("dsa_context", "h7168".to_string()))
        );
        assert_eq!(of("glm-5"), Some(("dsa_context", "h6144".to_string())));
        assert_eq!(of("qwen3-235b-a22b"), None);
        let wider = crate::catalog::Model {
            v_head_dim: Some(256),
            ..catalog.model("deepseek-v3").unwrap().clone()
        };
        assert_eq!(shape_of(&wider), None);
    }

    #[test]
    fn prompt_steps_past_the_collected_ones_grow_with_their_prompts() {
        let mut column = vec![f64::NAN, 100f64.ln(), 150f64.ln(), f64::NAN, f64::NAN];
        assert_eq!(proportional_past_end(&mut column), 2);
        assert!((column[3].exp() - 300.0).abs() < 1e-9);
        assert!((column[4].exp() - 600.0).abs() < 1e-9);
        assert!(column[0].is_nan());
    }
}

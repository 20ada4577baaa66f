//! Reducing NVIDIA AIConfigurator's collected operator timings (Parquet, one table per
//! operator family, GPU system, engine and engine version) to capplan's compact text tables.
//!
//! What is kept, and why (the reduction's errors were measured when it was designed, H100
//! under vLLM): GEMM time on a grid of powers of two in tokens (m), outputs (n) and inputs
//! (k), the fastest kernel per shape — interpolating shapes between the grid's points costs a
//! median 3 % (bf16) to 9 % (FP8 block-scaled); context attention as a function of sequences
//! × query heads and prompt length (dropping the KV-head count: median 4 %), generation
//! attention of sequences × KV heads and KV length (dropping the query-head count: median
//! 2 %); all-reduce per GPU count and message size; the FP8 activation-scale kernel by inputs
//! and tokens (the FP8 GEMM timings include it; engines with static scales take it off). The
//! newest engine version with data is
//! taken per operator family, and each file says which. A GEMM is never slower than the one
//! measured for more tokens of the same shape (kernel-selection noise at small batches).
//!
//! Mixture-of-experts layers are kept whole, as the engines' fused kernels ran them: per
//! expert format, model shape (only the shapes of the catalog's models) and expert layout
//! (experts' tp × ep), the fastest kernel along the layer's tokens, with routing skewed as
//! real traffic is (AIConfigurator's `power_law_1.01` distribution, its default family).
//! Latent attention (DeepSeek's MLA) has tables of its own: heads per card × sequences ×
//! length, per KV format. The same MoE layers as large expert-parallel deployments run them,
//! behind an all-to-all, come from their own collections (`wide_ep.rs`).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use polars::prelude::{DataFrame, DataType, ParquetReader, SerReader};

/// Systems reduced by default: those the catalog's cards name (`operators = "…"`).
pub const DEFAULT_SYSTEMS: [&str; 9] = [
    "a100_sxm",
    "h100_sxm",
    "h200_sxm",
    "b200_sxm",
    "b300_sxm",
    "gb200",
    "gb300",
    "l40s",
    "rtx_pro_6000_server",
];
const ENGINES: [&str; 3] = ["vllm", "sglang", "trtllm"];
/// The routing skew MoE layers are kept at: AIConfigurator's power-law family at its mildest
/// collected exponent (its models use `power_law` with a per-model exponent of 1.01 or 1.2).
const MOE_DISTRIBUTION: &str = "power_law_1.01";
/// Where the data sits in an AIConfigurator checkout.
const DATA_PATH: &str = "aic-core/src/aiconfigurator_core/systems/data";

/// What a conversion wrote.
#[derive(Debug, Clone, Default)]
pub struct ConvertSummary {
    /// (file, bytes, versions, cells filled by extrapolation).
    pub files: Vec<(PathBuf, u64, String, usize)>,
}

impl fmt::Display for ConvertSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.files.iter().map(|(_, bytes, _, _)| bytes).sum();
        for (path, bytes, versions, filled) in &self.files {
            writeln!(
                f,
                "{}: {bytes} bytes ({versions}; {filled} cells extrapolated)",
                path.display()
            )?;
        }
        write!(f, "{} files, {total} bytes", self.files.len())
    }
}

/// Converts the AIConfigurator data under `from` (the repository, or its `systems/data`
/// folder) for the catalog's systems into `out/<system>/<engine>.csv`.
pub fn convert_aiconfigurator(
    from: &Path,
    out: &Path,
    shapes: &ModelShapes,
) -> anyhow::Result<ConvertSummary> {
    let data = if from.join(DATA_PATH).is_dir() {
        from.join(DATA_PATH)
    } else {
        from.to_path_buf()
    };
    let mut summary = ConvertSummary::default();
    let native_chain = super::native_chain::NativeChainFactors::read(out)?;
    for system in DEFAULT_SYSTEMS {
        let dir = data.join(system);
        if !dir.is_dir() {
            return Err(anyhow!(
                "{} has no folder {system}: give the AIConfigurator repository or its {DATA_PATH}",
                data.display()
            ));
        }
        for engine in ENGINES {
            let Some(text) = convert_one(&dir, system, engine, shapes, native_chain.as_ref())?
            else {
                continue;
            };
            let path = out.join(system).join(format!("{engine}.csv"));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, &text.body)
                .with_context(|| format!("writing {}", path.display()))?;
            summary
                .files
                .push((path, text.body.len() as u64, text.versions, text.filled));
        }
    }
    Ok(summary)
}

/// The catalog's model shapes the reduction keeps layers for: fused-MoE shapes
/// (`h7168.i2048.k8.e256`), linear-attention heads per card (`linear_attention::variant`)
/// and the architectures whose attention is timed whole, sparse and latent
/// (`attention_module::shape_of`).
#[derive(Debug, Clone, Default)]
pub struct ModelShapes {
    pub moe: Vec<String>,
    pub linear_attention: Vec<String>,
    pub sparse_attention: Vec<String>,
    pub latent_attention: Vec<String>,
}

struct Converted {
    body: String,
    versions: String,
    filled: usize,
}

/// Version folders ordered oldest to newest: numerically, a release candidate before its
/// release.
fn version_key(version: &str) -> (Vec<u64>, u64, u64) {
    let (main, rc) = match version.split_once("rc") {
        Some((main, rc)) => (main, rc.parse().unwrap_or(0)),
        None => (version, u64::MAX),
    };
    let (main, post) = match main.split_once(".post") {
        Some((main, post)) => (main, post.parse().unwrap_or(0)),
        None => (main, 0),
    };
    let numbers = main
        .split('.')
        .filter_map(|part| part.parse().ok())
        .collect();
    (numbers, rc, post)
}

/// The newest version folder under `dir` holding every file in `files`.
pub(super) fn newest(dir: &Path, files: &[&str]) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| files.iter().all(|f| e.path().join(f).is_file()))
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .max_by_key(|v| version_key(v))
}

pub(super) fn read(path: &Path) -> anyhow::Result<DataFrame> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    ParquetReader::new(file)
        .finish()
        .with_context(|| format!("reading {}", path.display()))
}

pub(super) fn floats(df: &DataFrame, name: &str) -> anyhow::Result<Vec<f64>> {
    let column = df
        .column(name)
        .with_context(|| format!("no column {name}"))?
        .cast(&DataType::Float64)?;
    Ok(column
        .f64()?
        .iter()
        .map(|v| v.unwrap_or(f64::NAN))
        .collect())
}

pub(super) fn strings(df: &DataFrame, name: &str) -> anyhow::Result<Vec<String>> {
    let column = df
        .column(name)
        .with_context(|| format!("no column {name}"))?
        .cast(&DataType::String)?;
    Ok(column
        .str()?
        .iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect())
}

/// Powers of two from `low` up to the largest not above `high`.
fn powers(low: f64, high: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut v = low;
    while v <= high {
        out.push(v);
        v *= 2.0;
    }
    out
}

/// The largest finite value, at least 1.
fn finite_max(values: &[f64]) -> f64 {
    values
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(1.0, f64::max)
}

fn largest_power_below(v: f64) -> f64 {
    2f64.powi(v.max(1.0).log2().floor() as i32)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Fills the missing (NaN) entries of `row` — log values along one axis — by linear
/// extrapolation from their neighbours (non-decreasing past the end). Returns how many.
pub(super) fn fill(row: &mut [f64]) -> usize {
    let known: Vec<usize> = (0..row.len()).filter(|&i| row[i].is_finite()).collect();
    if known.is_empty() || known.len() == row.len() {
        return 0;
    }
    let mut filled = 0;
    for j in 0..row.len() {
        if row[j].is_finite() {
            continue;
        }
        let value = if known.len() == 1 {
            row[known[0]]
        } else if j < known[0] {
            let (a, b) = (known[0], known[1]);
            row[a] + (row[b] - row[a]) / (b - a) as f64 * (j as f64 - a as f64)
        } else if j > known[known.len() - 1] {
            let (a, b) = (known[known.len() - 2], known[known.len() - 1]);
            let slope = ((row[b] - row[a]) / (b - a) as f64).max(0.0);
            row[b] + slope * (j - b) as f64
        } else {
            let b = known.iter().position(|&k| k > j).unwrap_or(known.len() - 1);
            let (lo, hi) = (known[b - 1], known[b]);
            row[lo] + (row[hi] - row[lo]) * (j - lo) as f64 / (hi - lo) as f64
        };
        row[j] = value;
        filled += 1;
    }
    filled
}

/// Each value at most every later one (values of a larger problem along an axis).
pub(super) fn never_slower_than_larger(row: &mut [f64]) {
    for i in (0..row.len().saturating_sub(1)).rev() {
        if row[i + 1].is_finite() {
            row[i] = row[i].min(row[i + 1]);
        }
    }
}

/// `12.3`, `0.0456`, `1230` — three significant digits.
fn number(v: f64) -> String {
    if v >= 1000.0 {
        format!(
            "{}",
            (v / 10f64.powi(v.log10().floor() as i32 - 2)).round()
                * 10f64.powi(v.log10().floor() as i32 - 2)
        )
    } else {
        let digits = (2 - v.log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.digits$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

pub(super) fn join(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| number(*v))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn axis_line(table: &str, name: &str, values: &[f64]) -> String {
    let text: Vec<String> = values.iter().map(|v| format!("{}", *v as u64)).collect();
    format!("axis,{table},{name},{}\n", text.join(" "))
}

/// A 2-D table (leading axis × last axis) of medians, filled along both axes.
fn grid2(leading: &[f64], last: &[f64], points: &[(f64, f64, f64)]) -> (Vec<Vec<f64>>, usize) {
    let mut cells: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for &(a, b, latency) in points {
        let (Some(i), Some(j)) = (
            leading.iter().position(|v| *v == a),
            last.iter().position(|v| *v == b),
        ) else {
            continue;
        };
        cells.entry((i, j)).or_default().push(latency);
    }
    let mut grid = vec![vec![f64::NAN; last.len()]; leading.len()];
    for ((i, j), mut values) in cells {
        grid[i][j] = (median(&mut values) * 1000.0).ln();
    }
    // Along the leading axis first (missing large batches), then along the last.
    let mut filled = along_columns(&mut grid, fill);
    for row in &mut grid {
        filled += fill(row);
    }
    (grid, filled)
}

/// Applies `f` to each column of `grid` (rows of equal length), writing the column back;
/// returns the sum of what `f` returns (cells it filled).
pub(super) fn along_columns(
    grid: &mut [Vec<f64>],
    mut f: impl FnMut(&mut [f64]) -> usize,
) -> usize {
    let width = grid.first().map_or(0, Vec::len);
    let mut total = 0;
    for j in 0..width {
        let mut column: Vec<f64> = grid.iter().map(|row| row[j]).collect();
        total += f(&mut column);
        for (row, value) in grid.iter_mut().zip(column) {
            row[j] = value;
        }
    }
    total
}

/// A MoE collection's fastest time (ms) per curve (`<dtype>.<shape>`, tp, ep) and token index.
pub(super) type MoeCells = BTreeMap<(String, u64, u64), BTreeMap<usize, f64>>;

/// The fastest time per MoE curve and token count of a MoE collection `df`, on powers of two
/// in tokens up to `max_tokens`: rows routed as [`MOE_DISTRIBUTION`], of the shapes
/// `moe_shapes`, that `keep` accepts (by row and experts' tp). Returns the token axis beside
/// them.
pub(super) fn fastest_moe_cells(
    df: &DataFrame,
    max_tokens: f64,
    moe_shapes: &[String],
    keep: impl Fn(usize, f64) -> bool,
) -> anyhow::Result<(Vec<f64>, MoeCells)> {
    let (dtype, hidden, inter, topk, experts) = (
        strings(df, "moe_dtype")?,
        floats(df, "hidden_size")?,
        floats(df, "inter_size")?,
        floats(df, "topk")?,
        floats(df, "num_experts")?,
    );
    let (tp, ep, tokens, distribution, latency) = (
        floats(df, "moe_tp_size")?,
        floats(df, "moe_ep_size")?,
        floats(df, "num_tokens")?,
        strings(df, "distribution")?,
        floats(df, "latency")?,
    );
    let token_axis = powers(
        1.0,
        largest_power_below(finite_max(&tokens)).min(max_tokens),
    );
    let mut fastest = MoeCells::new();
    for i in 0..tokens.len() {
        let shape = format!(
            "h{}.i{}.k{}.e{}",
            hidden[i] as u64, inter[i] as u64, topk[i] as u64, experts[i] as u64
        );
        if distribution[i] != MOE_DISTRIBUTION || !moe_shapes.contains(&shape) || !keep(i, tp[i]) {
            continue;
        }
        let Some(t) = token_axis.iter().position(|v| *v == tokens[i]) else {
            continue;
        };
        let name = if dtype[i] == "bfloat16" {
            "bf16"
        } else {
            dtype[i].as_str()
        };
        let curve = fastest
            .entry((format!("{name}.{shape}"), tp[i] as u64, ep[i] as u64))
            .or_default();
        let cell = curve.entry(t).or_insert(f64::INFINITY);
        *cell = cell.min(latency[i]);
    }
    Ok((token_axis, fastest))
}

/// A MoE table's lines (`<table>,<variant>,<tp>,<ep>,<µs along tokens>`) from the fastest
/// kernel measured per cell (`fastest`: (variant, tp, ep) → token index → ms), and the cells
/// extrapolated. A curve measured at fewer than half the token counts is left out rather
/// than extrapolated across most of its length; none is slower than at more tokens.
pub(super) fn token_curves(table: &str, token_axis: &[f64], fastest: MoeCells) -> (String, usize) {
    let mut lines = String::new();
    let mut filled = 0;
    for ((variant, tp, ep), curve) in fastest {
        let mut row = vec![f64::NAN; token_axis.len()];
        for (t, l) in curve {
            row[t] = (l * 1000.0).ln();
        }
        if let Some((values, n)) = finished_curve(row) {
            filled += n;
            lines.push_str(&format!("{table},{variant},{tp},{ep},{values}\n"));
        }
    }
    (lines, filled)
}

/// A curve along tokens from its measured cells (logarithms, NaN where none was measured):
/// the gaps filled from the neighbours, none slower than at more tokens, written as a data
/// line's values, with the cells filled; `None` for a curve measured at fewer than half the
/// points, which would be extrapolated across most of its length.
pub(super) fn finished_curve(mut row: Vec<f64>) -> Option<(String, usize)> {
    if row.iter().filter(|v| v.is_finite()).count() * 2 < row.len() {
        return None;
    }
    let filled = fill(&mut row);
    never_slower_than_larger(&mut row);
    let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
    Some((join(&values), filled))
}

fn convert_one(
    dir: &Path,
    system: &str,
    engine: &str,
    shapes: &ModelShapes,
    native_chain: Option<&super::native_chain::NativeChainFactors>,
) -> anyhow::Result<Option<Converted>> {
    let moe_shapes = &shapes.moe[..];
    let gemm_dir = dir.join("gemm").join(engine);
    let attention_dir = dir.join("attention").join(engine);
    let (Some(gemm_version), Some(attention_version)) = (
        newest(&gemm_dir, &["gemm_perf.parquet"]),
        newest(
            &attention_dir,
            &[
                "context_attention_perf.parquet",
                "generation_attention_perf.parquet",
            ],
        ),
    ) else {
        return Ok(None);
    };
    let comm_version = newest(
        &dir.join("comm").join(engine),
        &["custom_allreduce_perf.parquet"],
    );
    let nccl_version = newest(&dir.join("comm").join("nccl"), &["nccl_perf.parquet"]);
    let quantize_version = newest(
        &dir.join("quantize").join(engine),
        &["computescale_perf.parquet"],
    );
    let mut filled = 0;
    let mut data = String::new();
    let mut axes = String::new();
    let mut notes = Vec::new();

    // GEMM.
    let gemm = read(&gemm_dir.join(&gemm_version).join("gemm_perf.parquet"))?;
    let device = strings(&gemm, "device")?
        .into_iter()
        .next()
        .unwrap_or_default();
    let dtypes = strings(&gemm, "gemm_dtype")?;
    let kernels = strings(&gemm, "kernel_source")?;
    let (m, n, k, latency) = (
        floats(&gemm, "m")?,
        floats(&gemm, "n")?,
        floats(&gemm, "k")?,
        floats(&gemm, "latency")?,
    );
    let ms = powers(1.0, largest_power_below(finite_max(&m)).min(32768.0));
    let ns = powers(512.0, largest_power_below(finite_max(&n)).min(65536.0));
    let ks = powers(512.0, largest_power_below(finite_max(&k)).min(65536.0));
    axes.push_str(&axis_line("gemm", "m", &ms));
    axes.push_str(&axis_line("gemm", "n", &ns));
    axes.push_str(&axis_line("gemm", "k", &ks));
    let mut fastest: BTreeMap<(String, usize, usize, usize), f64> = BTreeMap::new();
    for i in 0..m.len() {
        let (Some(a), Some(b), Some(c)) = (
            ns.iter().position(|v| *v == n[i]),
            ks.iter().position(|v| *v == k[i]),
            ms.iter().position(|v| *v == m[i]),
        ) else {
            continue;
        };
        let dtype = if dtypes[i] == "bfloat16" {
            "bf16".to_string()
        } else {
            dtypes[i].clone()
        };
        let entry = fastest.entry((dtype, a, b, c)).or_insert(f64::INFINITY);
        *entry = entry.min(latency[i]);
    }
    let mut names: Vec<String> = fastest.keys().map(|(d, ..)| d.clone()).collect();
    names.dedup();
    for dtype in &names {
        // [n][k][m] of log µs, filled along m, then k, then n (a shape never measured at
        // any token count is extrapolated from its measured neighbours).
        let mut cube = vec![vec![vec![f64::NAN; ms.len()]; ks.len()]; ns.len()];
        for (a, plane) in cube.iter_mut().enumerate() {
            for (b, row) in plane.iter_mut().enumerate() {
                for (c, cell) in row.iter_mut().enumerate() {
                    if let Some(l) = fastest.get(&(dtype.clone(), a, b, c)) {
                        *cell = (l * 1000.0).ln();
                    }
                }
            }
        }
        for plane in cube.iter_mut() {
            for row in plane.iter_mut() {
                filled += fill(row);
            }
        }
        for plane in cube.iter_mut() {
            for c in 0..ms.len() {
                let mut line: Vec<f64> = plane.iter().map(|row| row[c]).collect();
                filled += fill(&mut line);
                for (row, v) in plane.iter_mut().zip(line) {
                    row[c] = v;
                }
            }
        }
        for b in 0..ks.len() {
            for c in 0..ms.len() {
                let mut line: Vec<f64> = cube.iter().map(|plane| plane[b][c]).collect();
                filled += fill(&mut line);
                for (plane, v) in cube.iter_mut().zip(line) {
                    plane[b][c] = v;
                }
            }
        }
        // A GEMM of m tokens can always run as the kernel measured for more tokens (engines
        // pad batches up to captured sizes anyway), so no size is slower than a larger one:
        // the minimum over the larger sizes removes kernel-selection noise at small m.
        for plane in cube.iter_mut() {
            for row in plane.iter_mut() {
                for c in (0..row.len().saturating_sub(1)).rev() {
                    row[c] = row[c].min(row[c + 1]);
                }
            }
        }
        for (a, nv) in ns.iter().enumerate() {
            for (b, kv) in ks.iter().enumerate() {
                let row = &cube[a][b];
                if row.iter().any(|v| !v.is_finite()) {
                    continue;
                }
                let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                data.push_str(&format!(
                    "gemm,{dtype},{},{},{}\n",
                    *nv as u64,
                    *kv as u64,
                    join(&values)
                ));
            }
        }
    }
    let mut kernel_names = kernels.clone();
    kernel_names.sort();
    kernel_names.dedup();
    notes.push(format!(
        "gemm kernels: {} (fastest per shape)",
        kernel_names.join(", ")
    ));

    // Attention.
    let attention = attention_dir.join(&attention_version);
    let context = read(&attention.join("context_attention_perf.parquet"))?;
    let generation = read(&attention.join("generation_attention_perf.parquet"))?;
    let keep = |df: &DataFrame| -> anyhow::Result<Vec<bool>> {
        let rows = df.height();
        let window = floats(df, "window_size").unwrap_or_else(|_| vec![0.0; rows]);
        let beam = floats(df, "beam_width").unwrap_or_else(|_| vec![1.0; rows]);
        let attn = strings(df, "attn_dtype").unwrap_or_else(|_| vec!["bfloat16".into(); rows]);
        let any_bf16 = attn.iter().any(|a| a == "bfloat16");
        Ok((0..rows)
            .map(|i| window[i] == 0.0 && beam[i] == 1.0 && (!any_bf16 || attn[i] == "bfloat16"))
            .collect())
    };
    let (c_keep, g_keep) = (keep(&context)?, keep(&generation)?);
    let c = (
        floats(&context, "batch_size")?,
        floats(&context, "isl")?,
        floats(&context, "num_heads")?,
        floats(&context, "head_dim")?,
        strings(&context, "kv_cache_dtype")?,
        floats(&context, "latency")?,
    );
    let g = (
        floats(&generation, "batch_size")?,
        floats(&generation, "isl")?,
        floats(&generation, "step")?,
        floats(&generation, "num_key_value_heads")?,
        floats(&generation, "head_dim")?,
        strings(&generation, "kv_cache_dtype")?,
        floats(&generation, "latency")?,
    );
    let mut isls: Vec<f64> = c.1.clone();
    isls.sort_by(f64::total_cmp);
    isls.dedup();
    let batch_heads = powers(
        1.0,
        largest_power_below(finite_max(
            &(0..c.0.len()).map(|i| c.0[i] * c.2[i]).collect::<Vec<_>>(),
        )),
    );
    let mut kv_lens: Vec<f64> = (0..g.0.len()).map(|i| g.1[i] + g.2[i]).collect();
    kv_lens.sort_by(f64::total_cmp);
    kv_lens.dedup();
    let batch_kv = powers(
        1.0,
        largest_power_below(finite_max(
            &(0..g.0.len()).map(|i| g.0[i] * g.3[i]).collect::<Vec<_>>(),
        )),
    );
    axes.push_str(&axis_line("context_attention", "batch_heads", &batch_heads));
    axes.push_str(&axis_line("context_attention", "isl", &isls));
    axes.push_str(&axis_line(
        "generation_attention",
        "batch_kv_heads",
        &batch_kv,
    ));
    axes.push_str(&axis_line("generation_attention", "kv_len", &kv_lens));
    for head_dim in [64.0, 128.0] {
        for (kv, name) in [("bfloat16", "kv_bf16"), ("fp8", "kv_fp8")] {
            let points: Vec<(f64, f64, f64)> = (0..c.0.len())
                .filter(|&i| c_keep[i] && c.3[i] == head_dim && c.4[i] == kv)
                .map(|i| (c.0[i] * c.2[i], c.1[i], c.5[i]))
                .collect();
            if !points.is_empty() {
                let (grid, n) = grid2(&batch_heads, &isls, &points);
                filled += n;
                for (row, b) in grid.iter().zip(&batch_heads) {
                    if row.iter().all(|v| v.is_finite()) {
                        let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                        data.push_str(&format!(
                            "context_attention,hd{}.{name},{},,{}\n",
                            head_dim as u64,
                            *b as u64,
                            join(&values)
                        ));
                    }
                }
            }
            let points: Vec<(f64, f64, f64)> = (0..g.0.len())
                .filter(|&i| g_keep[i] && g.4[i] == head_dim && g.5[i] == kv)
                .map(|i| (g.0[i] * g.3[i], g.1[i] + g.2[i], g.6[i]))
                .collect();
            if !points.is_empty() {
                let (grid, n) = grid2(&batch_kv, &kv_lens, &points);
                filled += n;
                for (row, b) in grid.iter().zip(&batch_kv) {
                    if row.iter().all(|v| v.is_finite()) {
                        let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                        data.push_str(&format!(
                            "generation_attention,hd{}.{name},{},,{}\n",
                            head_dim as u64,
                            *b as u64,
                            join(&values)
                        ));
                    }
                }
            }
        }
    }

    // All-reduce: the engine's own kernels and NCCL's; message sizes are bf16 elements.
    let mut reduce: Vec<(String, f64, f64, f64)> = Vec::new();
    if let Some(version) = &comm_version {
        let df = read(
            &dir.join("comm")
                .join(engine)
                .join(version)
                .join("custom_allreduce_perf.parquet"),
        )?;
        let (kernel, gpus, size, latency) = (
            strings(&df, "kernel_source")?,
            floats(&df, "num_gpus")?,
            floats(&df, "message_size")?,
            floats(&df, "latency")?,
        );
        for i in 0..gpus.len() {
            let lower = kernel[i].to_ascii_lowercase();
            let variant = if lower.contains("graph") {
                "graph"
            } else if lower.contains("eager") {
                "eager"
            } else {
                "custom"
            };
            reduce.push((variant.into(), gpus[i], size[i] * 2.0, latency[i]));
        }
    }
    if let Some(version) = &nccl_version {
        let df = read(
            &dir.join("comm")
                .join("nccl")
                .join(version)
                .join("nccl_perf.parquet"),
        )?;
        let (op, dtype, gpus, size, latency) = (
            strings(&df, "op_name")?,
            strings(&df, "nccl_dtype")?,
            floats(&df, "num_gpus")?,
            floats(&df, "message_size")?,
            floats(&df, "latency")?,
        );
        for i in 0..gpus.len() {
            if op[i] == "all_reduce" && dtype[i] == "half" {
                reduce.push(("nccl".into(), gpus[i], size[i] * 2.0, latency[i]));
            }
        }
    }
    if !reduce.is_empty() {
        let mut sizes: Vec<f64> = reduce.iter().map(|r| r.2).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        axes.push_str(&axis_line("all_reduce", "bytes", &sizes));
        let mut groups: BTreeMap<(String, u64), Vec<(f64, f64)>> = BTreeMap::new();
        for (variant, gpus, bytes, latency) in &reduce {
            groups
                .entry((variant.clone(), *gpus as u64))
                .or_default()
                .push((*bytes, *latency));
        }
        for ((variant, gpus), points) in groups {
            let points: Vec<(f64, f64, f64)> = points.iter().map(|(b, l)| (1.0, *b, *l)).collect();
            let (grid, n) = grid2(&[1.0], &sizes, &points);
            filled += n;
            if let Some(row) = grid.first().filter(|r| r.iter().all(|v| v.is_finite())) {
                let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                data.push_str(&format!("all_reduce,{variant},{gpus},,{}\n", join(&values)));
            }
        }
    }

    // Activation quantisation: the kernel that computes a dynamic per-tensor scale before an
    // FP8 GEMM. The FP8 GEMM table includes it (the collection quantises its input on the
    // fly); an engine serving checkpoints with static activation scales skips it.
    if let Some(version) = &quantize_version {
        let df = read(
            &dir.join("quantize")
                .join(engine)
                .join(version)
                .join("computescale_perf.parquet"),
        )?;
        let (dtype, m, k, latency) = (
            strings(&df, "quant_dtype")?,
            floats(&df, "m")?,
            floats(&df, "k")?,
            floats(&df, "latency")?,
        );
        let qm = powers(1.0, largest_power_below(finite_max(&m)).min(32768.0));
        let mut dtypes: Vec<String> = dtype.clone();
        dtypes.sort();
        dtypes.dedup();
        let mut any = false;
        for name in &dtypes {
            let points: Vec<(f64, f64, f64)> = (0..m.len())
                .filter(|&i| &dtype[i] == name)
                .map(|i| (k[i], m[i], latency[i]))
                .collect();
            let (grid, n) = grid2(&ks, &qm, &points);
            if grid.iter().flatten().any(|v| !v.is_finite()) {
                continue;
            }
            filled += n;
            if !any {
                axes.push_str(&axis_line("quantize", "k", &ks));
                axes.push_str(&axis_line("quantize", "m", &qm));
                any = true;
            }
            for (kv, row) in ks.iter().zip(&grid) {
                let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                data.push_str(&format!(
                    "quantize,{name}.compute_scale,{},,{}\n",
                    *kv as u64,
                    join(&values)
                ));
            }
        }
    }

    // Fused MoE layers.
    // MoE layers and latent attention only from the GEMMs' own engine version: another
    // release runs other kernels with other overheads (vLLM 0.14's latent attention on H200
    // costs 160 µs a layer at any batch, its 0.24 GEMMs a fraction of that), and mixing them
    // in one step would time a step no release runs.
    let moe_dir = dir.join("moe").join(engine);
    let moe_version = moe_dir
        .join(&gemm_version)
        .join("moe_perf.parquet")
        .is_file()
        .then(|| gemm_version.clone());
    if let Some(version) = &moe_version {
        let df = read(
            &dir.join("moe")
                .join(engine)
                .join(version)
                .join("moe_perf.parquet"),
        )?;
        // Experts split at most eight ways inside (one node's tensor parallelism).
        let (token_axis, fastest) = fastest_moe_cells(&df, 16384.0, moe_shapes, |_, tp| tp <= 8.0)?;
        let (lines, n) = token_curves("moe", &token_axis, fastest);
        filled += n;
        if !lines.is_empty() {
            axes.push_str(&axis_line("moe", "tokens", &token_axis));
            data.push_str(&lines);
        }
    }
    let wide = super::wide_ep::reduce(dir, engine, moe_shapes)?;
    filled += wide.filled;
    axes.push_str(&wide.axes);
    data.push_str(&wide.data);
    let exchange = super::expert_exchange::reduce(dir, engine, moe_shapes)?;
    filled += exchange.filled;
    axes.push_str(&exchange.axes);
    data.push_str(&exchange.data);
    let linear =
        super::linear_attention::reduce(dir, engine, &gemm_version, &shapes.linear_attention)?;
    axes.push_str(&linear.axes);
    data.push_str(&linear.data);
    let mut modules = Vec::new();
    for (family, family_shapes) in [
        (super::attention_module::LATENT, &shapes.latent_attention),
        (super::attention_module::SPARSE, &shapes.sparse_attention),
    ] {
        let tables = super::attention_module::reduce(
            dir,
            engine,
            &gemm_version,
            family,
            family_shapes,
            native_chain,
        )?;
        filled += tables.filled;
        if tables.unchained > 0 {
            notes.push(format!(
                "{}: collected with vLLM's native norm chain; {} rows scaled to the fused ops by {}",
                family.tables.join(" and "),
                tables.unchained,
                super::native_chain::FILE
            ));
        }
        axes.push_str(&tables.axes);
        data.push_str(&tables.data);
        if let Some(version) = tables.version {
            modules.push((family.version_key, version));
        }
    }

    // Latent attention.
    let mla_dir = dir.join("mla").join(engine);
    let mla_version = ["context_mla_perf.parquet", "generation_mla_perf.parquet"]
        .iter()
        .all(|file| mla_dir.join(&gemm_version).join(file).is_file())
        .then(|| gemm_version.clone());
    if let Some(version) = &mla_version {
        for (file, table, length_axis) in [
            ("context_mla_perf.parquet", "context_mla", "isl"),
            ("generation_mla_perf.parquet", "generation_mla", "kv_len"),
        ] {
            let df = read(&mla_dir.join(version).join(file))?;
            let (kv, heads, batch, isl, step, latency) = (
                strings(&df, "kv_cache_dtype")?,
                floats(&df, "num_heads")?,
                floats(&df, "batch_size")?,
                floats(&df, "isl")?,
                floats(&df, "step")?,
                floats(&df, "latency")?,
            );
            // A decode step attends over the prompt and the tokens generated so far.
            let length: Vec<f64> = (0..isl.len())
                .map(|i| {
                    if table == "generation_mla" {
                        isl[i] + step[i]
                    } else {
                        isl[i]
                    }
                })
                .collect();
            let sorted = |values: &[f64]| {
                let mut v = values.to_vec();
                v.sort_by(f64::total_cmp);
                v.dedup();
                v
            };
            let (head_axis, batch_axis, length_axis_values) =
                (sorted(&heads), sorted(&batch), sorted(&length));
            let mut lines = String::new();
            let mut complete = true;
            for (kv_name, name) in [("bfloat16", "kv_bf16"), ("fp8", "kv_fp8")] {
                if !kv.iter().any(|k| k == kv_name) {
                    continue;
                }
                for h in &head_axis {
                    let points: Vec<(f64, f64, f64)> = (0..heads.len())
                        .filter(|&i| kv[i] == kv_name && heads[i] == *h)
                        .map(|i| (batch[i], length[i], latency[i]))
                        .collect();
                    let (mut grid, n) = grid2(&batch_axis, &length_axis_values, &points);
                    filled += n;
                    // Collection noise (single runs several times their neighbours) goes the
                    // way the GEMMs' does: no cell slower than a larger problem's.
                    for row in grid.iter_mut() {
                        never_slower_than_larger(row);
                    }
                    along_columns(&mut grid, |column| {
                        never_slower_than_larger(column);
                        0
                    });
                    for (row, b) in grid.iter().zip(&batch_axis) {
                        if row.iter().any(|v| !v.is_finite()) {
                            complete = false;
                            continue;
                        }
                        let values: Vec<f64> = row.iter().map(|v| v.exp()).collect();
                        lines.push_str(&format!(
                            "{table},{name},{},{},{}\n",
                            *h as u64,
                            *b as u64,
                            join(&values)
                        ));
                    }
                }
            }
            if complete && !lines.is_empty() {
                axes.push_str(&axis_line(table, "heads", &head_axis));
                axes.push_str(&axis_line(table, "batch", &batch_axis));
                axes.push_str(&axis_line(table, length_axis, &length_axis_values));
                data.push_str(&lines);
            }
        }
    }

    let mut versions = vec![
        format!("gemm {gemm_version}"),
        format!("attention {attention_version}"),
    ];
    let mut body = format!(
        "# capplan operator timings (µs) for {system} under {engine}, reduced from NVIDIA AIConfigurator\n\
         # (Apache-2.0; see hardware/operators/README.md): {DATA_PATH}/{system}/\n"
    );
    for note in &notes {
        body.push_str(&format!("# {note}\n"));
    }
    body.push_str(&format!(
        "# {filled} grid cells extrapolated from their neighbours\n"
    ));
    body.push_str(&format!(
        "meta,system,{system}\nmeta,device,{device}\nmeta,engine,{engine}\n"
    ));
    body.push_str(&format!(
        "meta,version.gemm,{gemm_version}\nmeta,version.attention,{attention_version}\n"
    ));
    if let Some(v) = &comm_version {
        body.push_str(&format!("meta,version.all_reduce,{v}\n"));
        versions.push(format!("all-reduce {v}"));
    }
    if let Some(v) = &nccl_version {
        body.push_str(&format!("meta,version.nccl,{v}\n"));
        versions.push(format!("nccl {v}"));
    }
    if let Some(v) = &quantize_version {
        body.push_str(&format!("meta,version.quantize,{v}\n"));
        versions.push(format!("quantize {v}"));
    }
    if let Some(v) = &moe_version {
        body.push_str(&format!("meta,version.moe,{v}\n"));
        versions.push(format!("moe {v}"));
    }
    if let Some(v) = &wide.version {
        body.push_str(&format!("meta,version.moe_a2a,{v}\n"));
        versions.push(format!("moe_a2a {v}"));
    }
    if let Some(v) = &exchange.version {
        body.push_str(&format!("meta,version.expert_exchange,{v}\n"));
        versions.push(format!("expert_exchange {v}"));
    }
    if let Some(v) = &mla_version {
        body.push_str(&format!("meta,version.mla,{v}\n"));
        versions.push(format!("mla {v}"));
    }
    if let Some(v) = &linear.version {
        body.push_str(&format!("meta,version.gdn,{v}\n"));
        versions.push(format!("gdn {v}"));
    }
    for (key, v) in &modules {
        body.push_str(&format!("meta,version.{key},{v}\n"));
        versions.push(format!("{key} {v}"));
    }
    body.push_str(&axes);
    body.push_str(&data);
    Ok(Some(Converted {
        body,
        versions: versions.join(", "),
        filled,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically_with_candidates_before_releases() {
        let mut versions = vec![
            "0.5.9",
            "0.5.10",
            "1.3.0rc10",
            "1.3.0rc9",
            "1.3.0",
            "0.5.6.post2",
        ];
        versions.sort_by_key(|v| version_key(v));
        assert_eq!(
            versions,
            vec![
                "0.5.6.post2",
                "0.5.9",
                "0.5.10",
                "1.3.0rc9",
                "1.3.0rc10",
                "1.3.0"
            ]
        );
    }

    #[test]
    fn gaps_fill_along_the_row_and_never_fall_past_its_end() {
        let mut row = vec![f64::NAN, 1.0, 2.0, f64::NAN, 4.0, f64::NAN];
        assert_eq!(fill(&mut row), 3);
        assert_eq!(row, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let mut falling = vec![3.0, 2.0, f64::NAN];
        fill(&mut falling);
        assert_eq!(falling[2], 2.0);
    }

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(number(3.3912), "3.39");
        assert_eq!(number(0.045678), "0.0457");
        assert_eq!(number(123.456), "123");
        assert_eq!(number(12345.0), "12300");
        assert_eq!(number(10.0), "10");
    }
}

//! Experts behind an all-to-all: AIConfigurator's large expert-parallel ("WideEP") MoE
//! timings, reduced to the `moe_a2a_decode` and `moe_a2a_prefill` tables.
//!
//! Why a table of its own: the fused-MoE collection (`moe_perf`) runs a rank's experts over
//! every token of the group and lets the kernel skip the pairs routed elsewhere, as an
//! engine does when attention replicas all-gather their tokens. A deployment that spreads
//! its experts wide sends each token to its experts' cards instead (SGLang's DeepEP path,
//! TensorRT-LLM's wide-EP all-to-all), and each card computes only what it receives. At
//! DeepSeek-V3's shape over 32 GB200s, 1 024 tokens of the whole group cost 260 µs a layer in
//! the first collection and 100 µs in the second (SGLang, FP8 block-scaled experts); at 8 192
//! tokens, 1 650 µs against about 200. The token axis is the whole group's tokens in both
//! (AIConfigurator globalizes the attention replicas' tokens before either lookup).
//!
//! Kept: per expert format and model shape (the catalog's), per expert-parallel width, the
//! fastest kernel along powers of two in tokens; routing skewed as `power_law_1.01`, as the
//! fused-MoE table is, without EPLB's redundant experts. SGLang measured decode and prefill
//! iterations apart (DeepEP's low-latency and normal modes); TensorRT-LLM one curve, which
//! serves both. Only SGLang's and TensorRT-LLM's releases that collected them have these
//! files (0.5.10 and 1.3.0rc10 in the shipped data), so the tables may come from an older
//! release than the same file's GEMMs — the header says which — where the fused-MoE table
//! would time a kernel these deployments do not run at all.

use std::collections::BTreeMap;
use std::path::Path;

use super::convert::{axis_line, fastest_moe_cells, floats, newest, read, strings, token_curves};
use super::tables::MoePhase;

/// Largest token count kept: prefill iterations of wide attention-data-parallel groups pass
/// hundreds of thousands of tokens through one expert layer.
const MAX_TOKENS: f64 = 524_288.0;

/// What the reduction wrote for one system × engine.
#[derive(Debug, Default)]
pub(super) struct WideEp {
    pub axes: String,
    pub data: String,
    /// Engine release the tables come from, when any.
    pub version: Option<String>,
    pub filled: usize,
}

/// One collected file and the phases its rows time.
struct Source {
    file: &'static str,
    phases: &'static [MoePhase],
    /// Rows kept by `op_name` (TensorRT-LLM's file also holds EPLB runs).
    op_name: Option<&'static str>,
}

fn sources(engine: &str) -> &'static [Source] {
    match engine {
        "sglang" => &[
            Source {
                file: "wideep_generation_moe_perf.parquet",
                phases: &[MoePhase::Decode],
                op_name: None,
            },
            Source {
                file: "wideep_context_moe_perf.parquet",
                phases: &[MoePhase::Prefill],
                op_name: None,
            },
        ],
        "trtllm" => &[Source {
            file: "wideep_moe_perf.parquet",
            phases: &[MoePhase::Decode, MoePhase::Prefill],
            op_name: Some("wideep_moe"),
        }],
        _ => &[],
    }
}

fn table_name(phase: MoePhase) -> &'static str {
    match phase {
        MoePhase::Decode => "moe_a2a_decode",
        MoePhase::Prefill => "moe_a2a_prefill",
    }
}

/// Reduces `dir`'s (one system's data folder) wide-EP MoE files under `engine`, for the
/// model shapes `moe_shapes`.
pub(super) fn reduce(dir: &Path, engine: &str, moe_shapes: &[String]) -> anyhow::Result<WideEp> {
    let sources = sources(engine);
    let files: Vec<&str> = sources.iter().map(|s| s.file).collect();
    let moe_dir = dir.join("moe").join(engine);
    let Some(version) = (!files.is_empty())
        .then(|| newest(&moe_dir, &files))
        .flatten()
    else {
        return Ok(WideEp::default());
    };
    let mut out = WideEp {
        version: Some(version.clone()),
        ..WideEp::default()
    };
    let mut by_phase: BTreeMap<MoePhase, (Vec<f64>, String)> = BTreeMap::new();
    for source in sources {
        let df = read(&moe_dir.join(&version).join(source.file))?;
        let op_name = match source.op_name {
            Some(_) => Some(strings(&df, "op_name")?),
            None => None,
        };
        // EPLB's redundant slots change what a card holds; only runs without them are kept.
        let redundant = if df.column("num_slots").is_ok() {
            let (slots, experts) = (floats(&df, "num_slots")?, floats(&df, "num_experts")?);
            slots.iter().zip(&experts).map(|(s, e)| s != e).collect()
        } else {
            Vec::new()
        };
        let (token_axis, fastest) = fastest_moe_cells(&df, MAX_TOKENS, moe_shapes, |i, tp| {
            let kept_op = match (&op_name, source.op_name) {
                (Some(names), Some(wanted)) => names[i] == wanted,
                _ => true,
            };
            kept_op && tp == 1.0 && !redundant.get(i).copied().unwrap_or(false)
        })?;
        for &phase in source.phases {
            let (lines, filled) = token_curves(table_name(phase), &token_axis, fastest.clone());
            if lines.is_empty() {
                continue;
            }
            out.filled += filled;
            by_phase.insert(phase, (token_axis.clone(), lines));
        }
    }
    for (phase, (axis, lines)) in by_phase {
        out.axes
            .push_str(&axis_line(table_name(phase), "tokens", &axis));
        out.data.push_str(&lines);
    }
    if out.data.is_empty() {
        out.version = None;
    }
    Ok(out)
}

//! Tokens to their experts' cards and back: the engines' measured all-to-all (dispatch and
//! combine), reduced to the `expert_exchange_prefill` and `expert_exchange_decode` tables.
//!
//! Why measured: a deployment that spreads its experts over attention replicas' cards
//! (SGLang's DeepEP path, TensorRT-LLM's wide-EP all-to-all) sends each token to the cards of
//! its experts and the results back, every expert layer. Timed as bytes over the link, a
//! decode step of DeepSeek-V3 on eight B200s (DP 8, EP 8) exchanged in 6 µs a layer, 0.36 ms
//! over its 58 expert layers; DeepEP's low-latency kernels, as AIConfigurator collected them
//! there, take 44 µs a layer for one token a card (2.6 ms of an 18 ms step for one sequence
//! at 8 K of context). A prompt step runs DeepEP's normal kernels: 2.62 ms a layer for
//! 8 192 tokens a card, where the link model gave 1.96.
//!
//! Kept, per model shape as the exchange sees it (`h<hidden>.k<experts per token>.e<experts>`:
//! the catalog's mixtures of experts that a collection covers), payload and expert-parallel
//! width, dispatch plus combine of one layer along the tokens one card sends (powers of two
//! as collected), the fastest kernel per cell:
//! - SGLang (`comm/sglang/<release>/wideep_deepep_normal_perf.parquet` for prompt steps, at
//!   DeepEP's default 20 SMs, 1 … 131 072 tokens; `wideep_deepep_ll_perf.parquet` for decode
//!   steps, 1 … 1 024): one node of eight cards (`node_num × 8`), no payload format recorded
//!   (variant `deepep.<shape>`).
//! - TensorRT-LLM (`comm/trtllm/<release>/trtllm_alltoall_perf.parquet`, GB200 only): per
//!   payload (`bf16`, `fp8`, `nvfp4`) and width (2 … 64 cards), the two-sided kernels'
//!   prepare, dispatch and combine or the one-sided ones' dispatch and combine; one curve
//!   for both phases, as the engine runs one all-to-all for both.
//!
//! The release is the newest that collected the files, which may be older than the same
//! file's GEMMs — the header says which (`version.expert_exchange`).

use std::collections::BTreeMap;
use std::path::Path;

use super::convert::{axis_line, finished_curve, floats, newest, read, strings};

/// DeepEP's default SM budget for its normal (prompt) kernels (`Buffer.num_sms`), the one
/// SGLang runs unless told otherwise.
const NORMAL_SMS: f64 = 20.0;

/// Cards per collected node: the collection's expert-parallel width is `node_num` of them.
const CARDS_PER_NODE: f64 = 8.0;

/// The payload format DeepEP's rows stand for: the collection records none.
pub(crate) const DEEPEP: &str = "deepep";

const NORMAL_FILE: &str = "wideep_deepep_normal_perf.parquet";
const TRTLLM_FILE: &str = "trtllm_alltoall_perf.parquet";
const LOW_LATENCY_FILE: &str = "wideep_deepep_ll_perf.parquet";

/// What the reduction wrote for one system × engine.
#[derive(Debug, Default)]
pub(super) struct ExpertExchange {
    pub axes: String,
    pub data: String,
    /// Engine release the tables come from, when any.
    pub version: Option<String>,
    pub filled: usize,
}

/// `h7168.k8.e256` from a fused-MoE shape `h7168.i2048.k8.e256`: the expert width does not
/// enter the exchange.
pub(crate) fn exchange_shape(moe_shape: &str) -> Option<String> {
    let parts: Vec<&str> = moe_shape.split('.').collect();
    let find = |prefix: char| parts.iter().find(|p| p.starts_with(prefix)).copied();
    Some(format!("{}.{}.{}", find('h')?, find('k')?, find('e')?))
}

/// One measured cell: the exchange of one layer (out and back) for `tokens` a card sends.
struct Cell {
    table: &'static str,
    variant: String,
    ep: u64,
    tokens: f64,
    us: f64,
}

/// Reduces `dir`'s (one system's data folder) all-to-all files under `engine`, for the model
/// shapes `moe_shapes` (fused-MoE form).
pub(super) fn reduce(
    dir: &Path,
    engine: &str,
    moe_shapes: &[String],
) -> anyhow::Result<ExpertExchange> {
    let mut shapes: Vec<String> = moe_shapes
        .iter()
        .filter_map(|s| exchange_shape(s))
        .collect();
    shapes.sort();
    shapes.dedup();
    let comm_dir = dir.join("comm").join(engine);
    let (version, cells) = match engine {
        "sglang" => match newest(&comm_dir, &[NORMAL_FILE, LOW_LATENCY_FILE]) {
            Some(version) => {
                let cells = deepep_cells(&comm_dir.join(&version), &shapes)?;
                (version, cells)
            }
            None => return Ok(ExpertExchange::default()),
        },
        "trtllm" => match newest(&comm_dir, &[TRTLLM_FILE]) {
            Some(version) => {
                let cells = trtllm_cells(&comm_dir.join(&version).join(TRTLLM_FILE), &shapes)?;
                (version, cells)
            }
            None => return Ok(ExpertExchange::default()),
        },
        _ => return Ok(ExpertExchange::default()),
    };
    let mut out = ExpertExchange::default();
    for table in ["expert_exchange_prefill", "expert_exchange_decode"] {
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.table == table).collect();
        // Powers of two in tokens, as collected.
        let mut axis: Vec<f64> = mine
            .iter()
            .map(|c| c.tokens)
            .filter(|t| *t >= 1.0 && (*t as u64).is_power_of_two())
            .collect();
        axis.sort_by(f64::total_cmp);
        axis.dedup();
        let mut curves: BTreeMap<(String, u64), Vec<f64>> = BTreeMap::new();
        for cell in mine {
            let Some(at) = axis.iter().position(|t| *t == cell.tokens) else {
                continue;
            };
            let row = curves
                .entry((cell.variant.clone(), cell.ep))
                .or_insert_with(|| vec![f64::NAN; axis.len()]);
            // Repeated cells (another kernel): the fastest. An empty cell is NaN.
            let value = cell.us.ln();
            if row[at].is_nan() || value < row[at] {
                row[at] = value;
            }
        }
        let mut lines = String::new();
        for ((variant, ep), row) in curves {
            if let Some((values, filled)) = finished_curve(row) {
                out.filled += filled;
                lines.push_str(&format!("{table},{variant},{ep},,{values}\n"));
            }
        }
        if !lines.is_empty() {
            out.axes.push_str(&axis_line(table, "tokens", &axis));
            out.data.push_str(&lines);
        }
    }
    if !out.data.is_empty() {
        out.version = Some(version);
    }
    Ok(out)
}

/// SGLang's DeepEP collection: the normal kernels for prompt steps, the low-latency ones for
/// decode steps; one node of eight cards (`node_num` × 8); no payload format recorded.
fn deepep_cells(release: &Path, shapes: &[String]) -> anyhow::Result<Vec<Cell>> {
    let mut cells = Vec::new();
    for (table, file) in [
        ("expert_exchange_prefill", NORMAL_FILE),
        ("expert_exchange_decode", LOW_LATENCY_FILE),
    ] {
        let df = read(&release.join(file))?;
        let (nodes, hidden, tokens, topk, experts) = (
            floats(&df, "node_num")?,
            floats(&df, "hidden_size")?,
            floats(&df, "num_token")?,
            floats(&df, "num_topk")?,
            floats(&df, "num_experts")?,
        );
        let kernel = strings(&df, "kernel_source").unwrap_or_default();
        // Dispatch and combine, each the sum of the parts the collection timed apart; the
        // normal kernels at DeepEP's default SM budget.
        let (latency, sms): (Vec<f64>, Vec<f64>) = if file == NORMAL_FILE {
            let parts = [
                "dispatch_transmit_us",
                "dispatch_notify_us",
                "combine_transmit_us",
                "combine_notify_us",
            ]
            .iter()
            .map(|c| floats(&df, c))
            .collect::<anyhow::Result<Vec<_>>>()?;
            let sum = (0..tokens.len())
                .map(|i| parts.iter().map(|p| p[i]).sum())
                .collect();
            (sum, floats(&df, "dispatch_sms")?)
        } else {
            let (dispatch, combine) = (
                floats(&df, "dispatch_avg_t_us")?,
                floats(&df, "combine_avg_t_us")?,
            );
            let sum = dispatch.iter().zip(&combine).map(|(d, c)| d + c).collect();
            (sum, vec![NORMAL_SMS; tokens.len()])
        };
        for i in 0..tokens.len() {
            let shape = format!("h{}.k{}.e{}", hidden[i], topk[i], experts[i]);
            let deepep = kernel.get(i).is_none_or(|k| k == "deepep");
            if !deepep || sms[i] != NORMAL_SMS || !shapes.contains(&shape) || latency[i] <= 0.0 {
                continue;
            }
            cells.push(Cell {
                table,
                variant: format!("{DEEPEP}.{shape}"),
                ep: (nodes[i] * CARDS_PER_NODE) as u64,
                tokens: tokens[i],
                us: latency[i],
            });
        }
    }
    Ok(cells)
}

/// A TensorRT-LLM exchange cell: kernel source, payload, shape, cards, tokens a card sends.
type TrtllmCell = (String, String, String, u64, u64);

/// TensorRT-LLM's all-to-all collection (`trtllm_alltoall_perf.parquet`, milliseconds): per
/// payload format and expert-parallel width; one curve serves both phases, as the engine
/// runs one all-to-all for both. The two-sided kernels prepare, dispatch and combine; the
/// one-sided ones dispatch and combine; the faster of the two per cell, results back in 16
/// bits (`alltoall_combine`).
fn trtllm_cells(file: &Path, shapes: &[String]) -> anyhow::Result<Vec<Cell>> {
    let df = read(file)?;
    let (ops, kernel, dtype) = (
        strings(&df, "op_name")?,
        strings(&df, "kernel_source")?,
        strings(&df, "moe_dtype")?,
    );
    let (tokens, hidden, topk, experts, ep, latency) = (
        floats(&df, "num_tokens")?,
        floats(&df, "hidden_size")?,
        floats(&df, "topk")?,
        floats(&df, "num_experts")?,
        floats(&df, "moe_ep_size")?,
        floats(&df, "latency")?,
    );
    // (kernel, payload, shape, ep, tokens) → the phases' sum and the phases seen.
    let mut sums: BTreeMap<TrtllmCell, (f64, u32)> = BTreeMap::new();
    for i in 0..tokens.len() {
        let phase = match ops[i].as_str() {
            "alltoall_prepare" => 1,
            "alltoall_dispatch" => 2,
            "alltoall_combine" => 4,
            _ => continue,
        };
        let payload = match dtype[i].as_str() {
            "bfloat16" => "bf16",
            "fp8" => "fp8",
            "nvfp4" => "nvfp4",
            _ => continue,
        };
        let shape = format!("h{}.k{}.e{}", hidden[i], topk[i], experts[i]);
        if !shapes.contains(&shape) || latency[i] <= 0.0 {
            continue;
        }
        let entry = sums
            .entry((
                kernel[i].clone(),
                payload.to_string(),
                shape,
                ep[i] as u64,
                tokens[i] as u64,
            ))
            .or_insert((0.0, 0));
        entry.0 += latency[i] * 1000.0;
        entry.1 |= phase;
    }
    let mut cells = Vec::new();
    for ((kernel, payload, shape, ep, tokens), (us, seen)) in sums {
        let complete = match kernel.as_str() {
            "NVLinkTwoSided" => seen == 7,
            _ => seen & 6 == 6,
        };
        if !complete {
            continue;
        }
        for table in ["expert_exchange_prefill", "expert_exchange_decode"] {
            cells.push(Cell {
                table,
                variant: format!("{payload}.{shape}"),
                ep,
                tokens: tokens as f64,
                us,
            });
        }
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::operators::{MoePhase, OperatorTables};
    use polars::prelude::*;

    #[test]
    fn the_exchange_sees_the_width_the_routing_and_the_experts() {
        assert_eq!(
            exchange_shape("h7168.i2048.k8.e256").as_deref(),
            Some("h7168.k8.e256")
        );
        assert_eq!(exchange_shape("h7168.i2048"), None);
    }

    fn parquet(dir: &Path, engine: &str, file: &str, df: &mut DataFrame) {
        let folder = dir.join("comm").join(engine).join("9.9");
        std::fs::create_dir_all(&folder).unwrap();
        let out = std::fs::File::create(folder.join(file)).unwrap();
        ParquetWriter::new(out).finish(df).unwrap();
    }

    /// DeepEP's rows become SGLang's two tables: dispatch and combine summed (the normal
    /// kernels' transmit and notify parts), only at DeepEP's default SM budget, only the
    /// powers of two in tokens, only the catalog's shapes, eight cards a node.
    #[test]
    fn deepep_rows_reduce_to_an_exchange_per_phase() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let tokens: Vec<i64> = vec![1, 12, 1024, 1024, 1, 1024];
        let sms: Vec<i64> = vec![20, 20, 20, 24, 20, 20];
        let hidden: Vec<i64> = vec![7168, 7168, 7168, 7168, 2880, 2880];
        let n = tokens.len();
        let mut normal = df!(
            "kernel_source" => vec!["deepep"; n],
            "node_num" => vec![1i64; n],
            "hidden_size" => hidden.clone(),
            "num_token" => tokens.clone(),
            "num_topk" => vec![8i64; n],
            "num_experts" => vec![256i64; n],
            "dispatch_sms" => sms,
            "dispatch_transmit_us" => vec![30.0, 31.0, 150.0, 1.0, 1.0, 1.0],
            "dispatch_notify_us" => vec![1.0; n],
            "combine_transmit_us" => vec![50.0, 51.0, 250.0, 1.0, 1.0, 1.0],
            "combine_notify_us" => vec![1.0; n],
        )
        .unwrap();
        parquet(dir, "sglang", NORMAL_FILE, &mut normal);
        let mut low_latency = df!(
            "kernel_source" => vec!["deepep"; 2],
            "node_num" => vec![1i64; 2],
            "hidden_size" => vec![7168i64; 2],
            "num_token" => vec![1i64, 1024],
            "num_topk" => vec![8i64; 2],
            "num_experts" => vec![256i64; 2],
            "dispatch_avg_t_us" => vec![20.0, 130.0],
            "combine_avg_t_us" => vec![22.0, 190.0],
        )
        .unwrap();
        parquet(dir, "sglang", LOW_LATENCY_FILE, &mut low_latency);

        let out = reduce(dir, "sglang", &["h7168.i2048.k8.e256".to_string()]).unwrap();
        assert_eq!(out.version.as_deref(), Some("9.9"));
        assert!(!out.data.contains("h2880"), "{}", out.data);
        let text = format!(
            "meta,system,test\nmeta,engine,sglang\n{}{}",
            out.axes, out.data
        );
        let tables = OperatorTables::parse(&text, "test").unwrap();
        let shape = "deepep.h7168.k8.e256";
        let at = |phase, tokens, us: f64| {
            let (ep, read) = tables.exchange_us(phase, shape, 8, tokens).unwrap();
            assert!(
                ep == 8 && (read - us).abs() < 1e-6,
                "{read} µs at {ep}, not {us}"
            );
        };
        at(MoePhase::Prefill, 1.0, 82.0);
        at(MoePhase::Prefill, 1024.0, 402.0);
        at(MoePhase::Decode, 1.0, 42.0);
        at(MoePhase::Decode, 1024.0, 320.0);
        // A width not collected reads the nearest one measured (the caller scales it).
        assert_eq!(
            tables
                .exchange_us(MoePhase::Decode, shape, 32, 1.0)
                .unwrap()
                .0,
            8
        );
        // No engine but SGLang and TensorRT-LLM collected the exchange.
        assert!(reduce(dir, "vllm", &["h7168.i2048.k8.e256".to_string()])
            .unwrap()
            .version
            .is_none());
    }

    /// TensorRT-LLM's rows become one curve per payload and width, serving both phases: the
    /// two-sided kernels' three phases summed (ms → µs), against the one-sided kernels' two,
    /// the faster kept; a cell missing a phase is not a measurement of the exchange.
    #[test]
    fn trtllm_rows_reduce_to_one_curve_for_both_phases() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let mut rows: Vec<(&str, &str, i64, f64)> = Vec::new();
        for tokens in [1i64, 1024] {
            let scale = tokens as f64 / 1024.0 + 0.01;
            rows.push(("alltoall_prepare", "NVLinkTwoSided", tokens, 0.01));
            rows.push(("alltoall_dispatch", "NVLinkTwoSided", tokens, 0.1 * scale));
            rows.push(("alltoall_combine", "NVLinkTwoSided", tokens, 0.2 * scale));
            rows.push((
                "alltoall_combine_low_precision",
                "NVLinkTwoSided",
                tokens,
                1e-4,
            ));
            rows.push(("alltoall_dispatch", "NVLinkOneSided", tokens, 0.5 * scale));
            rows.push(("alltoall_combine", "NVLinkOneSided", tokens, 0.5 * scale));
        }
        // A one-sided cell with its combine missing.
        rows.push(("alltoall_dispatch", "NVLinkOneSided", 4, 1e-4));
        let n = rows.len();
        let mut df = df!(
            "op_name" => rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            "kernel_source" => rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            "moe_dtype" => vec!["fp8"; n],
            "num_tokens" => rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            "hidden_size" => vec![7168i64; n],
            "topk" => vec![8i64; n],
            "num_experts" => vec![256i64; n],
            "moe_ep_size" => vec![16i64; n],
            "latency" => rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        )
        .unwrap();
        parquet(dir, "trtllm", TRTLLM_FILE, &mut df);
        let out = reduce(dir, "trtllm", &["h7168.i2048.k8.e256".to_string()]).unwrap();
        let text = format!(
            "meta,system,test\nmeta,engine,trtllm\n{}{}",
            out.axes, out.data
        );
        let tables = OperatorTables::parse(&text, "test").unwrap();
        for phase in [MoePhase::Prefill, MoePhase::Decode] {
            let (ep, us) = tables
                .exchange_us(phase, "fp8.h7168.k8.e256", 16, 1024.0)
                .unwrap();
            assert_eq!(ep, 16);
            // Two-sided: 10 + 101 + 202 µs, against one-sided 505 + 505.
            assert!((us - 313.0).abs() < 0.5, "{us}");
            // One token: one-sided 5.49 + 5.49, against two-sided 10 + 1.10 + 2.20.
            let (_, one) = tables
                .exchange_us(phase, "fp8.h7168.k8.e256", 16, 1.0)
                .unwrap();
            assert!((one - 11.0).abs() < 0.05, "{one}");
        }
        assert!(out.axes.contains("tokens,1 1024\n"), "{}", out.axes);
    }
}

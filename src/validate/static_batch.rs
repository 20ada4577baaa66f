//! TensorRT-LLM 0.9's static-batch benchmark: one batch of identical requests run from start
//! to end with no arrivals and no queueing, so its figures are engine step times — the first
//! token latency is the prefill of the whole batch, the token-to-token latency a decode step
//! at that batch size. It checks the step model itself, free of any scheduler.
//!
//! The step model is scored leave-one-out: for each GPU (and, separately, each model) the
//! engine's overhead constants — per iteration, per sequence and per layer — and how many
//! masked-MHA decode re-reads per KV head it takes for half to reach memory (Falcon's,
//! Mistral's and Mixtral's head shapes have no XQA kernel in 0.9) are fitted on the other
//! GPUs' rows timed from measured operators, then, those held, the roofline's compute and
//! memory efficiencies on the other rows of cards without operator tables ([`fit`] says
//! why in two stages); the held-out GPU's rows are predicted with them. The engine is
//! TensorRT-LLM 0.9 (profile `trtllm-0.x`), which launched every kernel without CUDA graphs:
//! the host's launches cost per layer, so a per-iteration constant alone came out too high
//! for 32-layer models and too low for 80-layer ones.

use std::collections::BTreeMap;

use argmin::core::{CostFunction, Error as ArgminError};
use serde::{Deserialize, Serialize};

use super::fit::log_error;
use super::score::{relative_error, ErrorStats};
use crate::catalog::{Catalog, Dtype, EngineProfile, MemoryOptions, Model, Parallelism};
use crate::error::InputError;
use crate::fit::simplex::minimise_settled;
use crate::sim::engine::EngineOptions;
use crate::sim::predict::{engine_for, Calibration, Layout};
use crate::sim::StepWork;

/// The fixture, compiled in.
pub const FIXTURE: &str =
    include_str!("../../tests/fixtures/validation/trtllm-0.9-static-batch.csv");
pub const FIXTURE_NAME: &str = "tests/fixtures/validation/trtllm-0.9-static-batch.csv";

/// One measured static batch.
#[derive(Debug, Clone, Deserialize)]
pub struct StaticRow {
    pub gpu: String,
    pub model: String,
    pub precision: String,
    pub tp: u32,
    pub pp: u32,
    pub batch_size: u32,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub first_token_latency_ms: Option<f64>,
    pub token_to_token_latency_ms: Option<f64>,
}

pub fn read_rows(text: &str, origin: &str) -> Result<Vec<StaticRow>, InputError> {
    super::read_table(text, origin)
}

/// A row the model can time: its layout resolved against the catalog.
#[derive(Debug, Clone)]
struct Timed {
    row: StaticRow,
    /// The model as the benchmark ran it ([`fake_weight_routing`]), resolved once.
    model: Model,
    card: String,
    dtype: Option<Dtype>,
    operators: bool,
}

/// Parameters fitted on the training rows.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StepParameters {
    pub step_overhead_ms: f64,
    pub seq_overhead_us: f64,
    /// Per layer of an iteration launched without a CUDA graph, µs.
    pub eager_layer_us: f64,
    pub roofline_compute: f64,
    pub roofline_memory: f64,
    /// Of a masked-MHA decode's extra KV reads (a shape TensorRT-LLM 0.9's grouped-query
    /// kernel was not built for), how many per KV head it takes for half to reach memory.
    pub reread_half_group: f64,
}

impl StepParameters {
    fn from_log(p: &[f64]) -> StepParameters {
        StepParameters {
            step_overhead_ms: p[0].exp().clamp(0.001, 100.0),
            seq_overhead_us: p[1].exp().clamp(0.001, 1000.0),
            eager_layer_us: p[2].exp().clamp(0.001, 1000.0),
            roofline_compute: p[3].exp().clamp(0.05, 1.0),
            roofline_memory: p[4].exp().clamp(0.05, 1.0),
            reread_half_group: p[5].exp().clamp(0.001, 1000.0),
        }
    }

    fn to_log(self) -> Vec<f64> {
        vec![
            self.step_overhead_ms.ln(),
            self.seq_overhead_us.ln(),
            self.eager_layer_us.ln(),
            self.roofline_compute.ln(),
            self.roofline_memory.ln(),
            self.reread_half_group.ln(),
        ]
    }
}

/// The model as the benchmark ran it. Its rows were run with fake weights (`Use Fake Weight =
/// Yes`), which leaves a dense model's timing alone but not a mixture of experts': with
/// weights that carry no signal, the router sends every token to the same experts, so a batch
/// reads and multiplies through `k` experts, not the up to `k × batch` a trained router
/// spreads it over. The measurements show it: Mixtral-8x7B's token-to-token time on H100 (TP 2,
/// FP16 weights — 49 GB peak memory per GPU) is 6.5 ms at batch 1 and 7.8 ms at batch 16,
/// where reading every expert once (what 16 tokens over 8 experts, 2 each, all but
/// certainly touch) takes 14 ms at the card's bandwidth. So a mixture is timed as the dense
/// model of its `k` experts (an FFN `k` experts wide, the active parameters); a mixture with
/// dense layers or shared experts beside the routed ones is left as it is.
fn fake_weight_routing(model: &Model) -> Model {
    let (Some(experts), Some(k)) = (model.experts, model.experts_per_token) else {
        return model.clone();
    };
    if experts <= 1 || model.dense_layers.unwrap_or(0) > 0 || model.shared_experts.unwrap_or(0) > 0
    {
        return model.clone();
    }
    let width = model
        .expert_intermediate_size
        .unwrap_or(model.intermediate_size);
    Model {
        params_b: model.active_params_b.unwrap_or(model.params_b),
        active_params_b: None,
        intermediate_size: k * width,
        experts: None,
        experts_per_token: None,
        expert_intermediate_size: None,
        ..model.clone()
    }
}

/// Predicted (first-token latency, token-to-token latency) of a row, seconds.
fn predict(
    catalog: &Catalog,
    engine: &EngineProfile,
    timed: &Timed,
    p: StepParameters,
) -> Option<(f64, f64)> {
    let model = &timed.model;
    let card = catalog.card(&timed.card).ok()?;
    let row = &timed.row;
    let layout = Layout {
        memory: MemoryOptions {
            dtype: timed.dtype,
            // An FP8 row keeps its KV cache in FP8 too: its peak memory says so (GPT-J 6B,
            // batch 32 of 128 + 2 048 tokens: 24.0 GB with FP8 weights, where an FP16 cache
            // alone would take 31.9 GB; 45.6 GB in the FP16 row).
            kv_dtype: (timed.dtype == Some(Dtype::Fp8)).then_some(Dtype::Fp8),
            context_tokens: Some(row.input_tokens + row.output_tokens),
            memory_utilization: 0.95,
            reserve_gib: 0.5,
            ..MemoryOptions::default()
        },
        ..Layout::on_card(model, card, row.tp)
    }
    // The rows name no server: timed on the node shape `predict` and `solve` take for the
    // card (its largest), as the other sources' deployments are.
    .with_parallel(Parallelism::tensor(row.tp), catalog.largest_node_of(card));
    let mut calibration =
        Calibration::for_engine(card, &card.interconnect, engine, &catalog.operators);
    calibration.efficiency.step_overhead_ms = p.step_overhead_ms;
    calibration.efficiency.seq_overhead_ms = p.seq_overhead_us / 1000.0;
    calibration.efficiency.eager_layer_overhead_us = p.eager_layer_us;
    calibration.efficiency.compute = p.roofline_compute;
    calibration.efficiency.memory = p.roofline_memory;
    if let Some(kernels) = calibration.grouped_decode.as_mut() {
        kernels.reread_half_group = p.reread_half_group;
    }
    let options = EngineOptions::for_card(engine, card);
    let (engine, _) = engine_for(&layout, &calibration, &options, false).ok()?;
    let perf = engine.perf();
    let batch = f64::from(row.batch_size);
    let mut prefill = StepWork::default();
    for _ in 0..row.batch_size {
        prefill.add_prefill_chunk(0.0, f64::from(row.input_tokens));
    }
    let mut decode = StepWork::default();
    // Mean context over the decode steps: the input plus half the output.
    let context = f64::from(row.input_tokens) + f64::from(row.output_tokens) / 2.0;
    decode.add_decode(batch, batch * context);
    Some((
        perf.step_time(&prefill).total,
        perf.step_time(&decode).total,
    ))
}

/// `rows` that could be timed under `p`, each with its predicted (first token, token to
/// token) latency in seconds.
fn predictions<'a>(
    catalog: &Catalog,
    engine: &EngineProfile,
    rows: &[&'a Timed],
    p: StepParameters,
) -> Vec<(&'a Timed, f64, f64)> {
    rows.iter()
        .filter_map(|&timed| {
            let (first, t2t) = predict(catalog, engine, timed, p)?;
            Some((timed, first, t2t))
        })
        .collect()
}

/// The relative errors of `predicted` rows: (first token, token to token) per row.
fn relative_errors(predicted: &[(&Timed, f64, f64)]) -> Vec<(f64, f64)> {
    predicted
        .iter()
        .filter_map(|&(timed, first, t2t)| {
            let e1 = relative_error(first, timed.row.first_token_latency_ms? / 1e3)?;
            let e2 = relative_error(t2t, timed.row.token_to_token_latency_ms? / 1e3)?;
            Some((e1, e2))
        })
        .collect()
}

/// The relative errors of `rows` under `p`: (first token, token to token) per row.
fn errors(
    catalog: &Catalog,
    engine: &EngineProfile,
    rows: &[&Timed],
    p: StepParameters,
) -> Vec<(f64, f64)> {
    relative_errors(&predictions(catalog, engine, rows, p))
}

/// The cost of a fold's rows under the parameters, some of them held at `base`: the mean
/// squared log ratio of predicted to measured first-token and token-to-token latency.
struct Problem<'a> {
    catalog: &'a Catalog,
    engine: &'a EngineProfile,
    rows: Vec<&'a Timed>,
    /// Every parameter, in [`StepParameters::to_log`]'s order.
    base: Vec<f64>,
    /// The indices into `base` the simplex moves; the others stay as they are.
    free: &'static [usize],
}

impl Problem<'_> {
    fn parameters(&self, free: &[f64]) -> StepParameters {
        let mut all = self.base.clone();
        for (&i, &value) in self.free.iter().zip(free) {
            all[i] = value;
        }
        StepParameters::from_log(&all)
    }
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Self::Param) -> Result<f64, ArgminError> {
        let errors = errors(self.catalog, self.engine, &self.rows, self.parameters(p));
        if errors.is_empty() {
            return Ok(f64::INFINITY);
        }
        let sum: f64 = errors
            .iter()
            .map(|(a, b)| log_error(*a).powi(2) + log_error(*b).powi(2))
            .sum();
        Ok(sum / errors.len() as f64)
    }
}

/// The engine's constants: per iteration, per sequence, per eager layer, and the masked-MHA
/// re-reads ([`StepParameters::to_log`]'s indices).
const ENGINE_CONSTANTS: &[usize] = &[0, 1, 2, 5];
/// The roofline's compute and memory efficiencies.
const ROOFLINE_EFFICIENCIES: &[usize] = &[3, 4];
const EVERY_PARAMETER: &[usize] = &[0, 1, 2, 3, 4, 5];

/// Fits a fold in two stages: the engine's constants on the rows whose kernels are timed
/// from measured operators, then — those constants held — the roofline's efficiencies on the
/// rows of cards without operator tables.
///
/// Why not all six on every row together: the constants are the engine's, the same on any
/// card, but on a roofline card a per-sequence constant also soaks up the roofline's own
/// error (a decode step taken as the longer of its compute and its memory traffic is short
/// at mid-sized batches, where the two overlap only in part). Fitted on each card alone, the
/// roofline cards asked for 18–31 µs a sequence and the measured ones 0.6–16; fitted jointly,
/// the roofline cards' share pushed the constant to 10–17 µs in every fold and H100 SXM's
/// held-out decode steps 14 % too slow. Staged, the folds' constants agree (3–9 µs a
/// sequence) and the roofline cards keep efficiencies of their own.
fn fit(catalog: &Catalog, engine: &EngineProfile, rows: Vec<&Timed>) -> StepParameters {
    let start = StepParameters {
        step_overhead_ms: engine.step_overhead_ms.max(0.01),
        seq_overhead_us: engine.seq_overhead_us.max(0.01),
        eager_layer_us: engine.eager_layer_overhead_us.max(0.01),
        roofline_compute: 0.5,
        roofline_memory: 0.75,
        reread_half_group: engine
            .grouped_decode
            .as_ref()
            .map_or(3.0, |kernels| kernels.reread_half_group)
            .max(0.01),
    };
    let (measured, roofline): (Vec<&Timed>, Vec<&Timed>) =
        rows.iter().partition(|timed| timed.operators);
    if measured.is_empty() || roofline.is_empty() {
        return fit_some(catalog, engine, rows, start, EVERY_PARAMETER);
    }
    let constants = fit_some(catalog, engine, measured, start, ENGINE_CONSTANTS);
    fit_some(catalog, engine, roofline, constants, ROOFLINE_EFFICIENCIES)
}

/// `base` with the parameters at `free` fitted on `rows` (`base` itself if the fit fails).
fn fit_some(
    catalog: &Catalog,
    engine: &EngineProfile,
    rows: Vec<&Timed>,
    base: StepParameters,
    free: &'static [usize],
) -> StepParameters {
    let log = base.to_log();
    let origin: Vec<f64> = free.iter().map(|&i| log[i]).collect();
    let problem = || Problem {
        catalog,
        engine,
        rows: rows.clone(),
        base: log.clone(),
        free,
    };
    // A fold's cost is flat along some mixes of overhead and efficiency, where one simplex
    // stops wherever its start leads it: restarted until it settles, the fit no longer
    // depends on where the engine profile begins it.
    match minimise_settled(problem, &origin, 0.5, 1e-5, 400) {
        Ok(minimum) => minimum
            .best
            .map_or(base, |best| problem().parameters(&best)),
        Err(_) => base,
    }
}

/// One row predicted with the GPU it ran on held out: what `validate --details` lists.
#[derive(Debug, Clone, Serialize)]
pub struct StaticRowResult {
    pub gpu: String,
    pub model: String,
    pub precision: String,
    pub tp: u32,
    pub batch_size: u32,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub first_token_ms: f64,
    pub first_token_predicted_ms: f64,
    pub token_to_token_ms: f64,
    pub token_to_token_predicted_ms: f64,
}

/// `predicted` rows with their measurements.
fn row_results(predicted: &[(&Timed, f64, f64)]) -> Vec<StaticRowResult> {
    predicted
        .iter()
        .filter_map(|&(timed, first, t2t)| {
            let row = &timed.row;
            Some(StaticRowResult {
                gpu: timed.card.clone(),
                model: timed.model.name.clone(),
                precision: row.precision.clone(),
                tp: row.tp,
                batch_size: row.batch_size,
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                first_token_ms: row.first_token_latency_ms?,
                first_token_predicted_ms: first * 1e3,
                token_to_token_ms: row.token_to_token_latency_ms?,
                token_to_token_predicted_ms: t2t * 1e3,
            })
        })
        .collect()
}

/// One held-out group's score.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutScore {
    /// `gpu` or `model`.
    pub by: String,
    pub held_out: String,
    pub basis_class: String,
    pub parameters: StepParameters,
    pub first_token: Option<ErrorStats>,
    pub token_to_token: Option<ErrorStats>,
}

/// The static-batch score: leave one GPU out, then leave one model out.
#[derive(Debug, Clone, Serialize)]
pub struct StaticBatchScore {
    pub file: String,
    pub rows: usize,
    pub timed: usize,
    pub skipped: BTreeMap<String, usize>,
    pub by_gpu: Vec<HeldOutScore>,
    pub by_model: Vec<HeldOutScore>,
    /// Over all held-out GPUs together.
    pub first_token: Option<ErrorStats>,
    pub token_to_token: Option<ErrorStats>,
    /// Every row as predicted with its GPU held out, when details were asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<StaticRowResult>,
}

/// Scores the fixture under `engine` (`trtllm-0.x`, the engine it ran on); with `details`, keeps every
/// row's prediction (its GPU held out).
pub fn score(
    catalog: &Catalog,
    engine: &EngineProfile,
    details: bool,
) -> Result<StaticBatchScore, InputError> {
    let rows = read_rows(FIXTURE, FIXTURE_NAME)?;
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut timed = Vec::new();
    for row in &rows {
        let mut skip = |reason: String| *skipped.entry(reason).or_default() += 1;
        if row.pp > 1 {
            skip("pipeline parallelism".into());
            continue;
        }
        if row.first_token_latency_ms.is_none() || row.token_to_token_latency_ms.is_none() {
            skip("no latency measured".into());
            continue;
        }
        let Ok(card) = catalog.card(&row.gpu) else {
            skip(format!("GPU {} not in the catalog", row.gpu));
            continue;
        };
        let Ok(model) = catalog.model(&row.model) else {
            skip(format!("model {} not in the catalog", row.model));
            continue;
        };
        let dtype = match row.precision.as_str() {
            "FP8" => Some(Dtype::Fp8),
            _ => Some(Dtype::Fp16),
        };
        timed.push(Timed {
            row: row.clone(),
            model: fake_weight_routing(model),
            card: card.name.clone(),
            dtype,
            operators: card.operators.is_some(),
        });
    }
    let mut listed = Vec::new();
    let mut held_out =
        |by: &str, key: fn(&Timed) -> String, list: bool| -> (Vec<HeldOutScore>, Vec<(f64, f64)>) {
            let mut keys: Vec<String> = timed.iter().map(key).collect();
            keys.sort();
            keys.dedup();
            let mut scores = Vec::new();
            let mut all = Vec::new();
            for held in keys {
                let training: Vec<&Timed> = timed.iter().filter(|t| key(t) != held).collect();
                let testing: Vec<&Timed> = timed.iter().filter(|t| key(t) == held).collect();
                let parameters = fit(catalog, engine, training);
                let predicted = predictions(catalog, engine, &testing, parameters);
                if list {
                    listed.extend(row_results(&predicted));
                }
                let errors = relative_errors(&predicted);
                let first: Vec<f64> = errors.iter().map(|e| e.0).collect();
                let t2t: Vec<f64> = errors.iter().map(|e| e.1).collect();
                all.extend(errors.iter().copied());
                let with_operators = testing.iter().filter(|t| t.operators).count();
                scores.push(HeldOutScore {
                    by: by.to_string(),
                    held_out: held,
                    basis_class: if with_operators == testing.len() {
                        "measured operators".into()
                    } else if with_operators == 0 {
                        "roofline".into()
                    } else {
                        "mixed".into()
                    },
                    parameters,
                    first_token: ErrorStats::of(&first),
                    token_to_token: ErrorStats::of(&t2t),
                });
            }
            (scores, all)
        };
    let (by_gpu, all) = held_out("gpu", |t| t.card.clone(), details);
    let (by_model, _) = held_out("model", |t| t.model.name.clone(), false);
    let first: Vec<f64> = all.iter().map(|e| e.0).collect();
    let t2t: Vec<f64> = all.iter().map(|e| e.1).collect();
    Ok(StaticBatchScore {
        file: FIXTURE_NAME.into(),
        rows: rows.len(),
        timed: timed.len(),
        skipped,
        by_gpu,
        by_model,
        first_token: ErrorStats::of(&first),
        token_to_token: ErrorStats::of(&t2t),
        details: listed,
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    fn timed(catalog: &Catalog, gpu: &str, model: &str, batch: u32) -> Timed {
        let row = StaticRow {
            gpu: gpu.into(),
            model: model.into(),
            precision: "Mixed".into(),
            tp: 2,
            pp: 1,
            batch_size: batch,
            input_tokens: 128,
            output_tokens: 128,
            first_token_latency_ms: None,
            token_to_token_latency_ms: None,
        };
        Timed {
            row,
            model: fake_weight_routing(catalog.model(model).unwrap()),
            card: catalog.card(gpu).unwrap().name.clone(),
            dtype: Some(Dtype::Fp16),
            operators: true,
        }
    }

    #[test]
    fn fake_weights_route_a_mixture_through_the_same_experts() {
        let catalog = Catalog::shipped().unwrap();
        let mixtral = catalog.model("mixtral-8x7b").unwrap();
        let routed = fake_weight_routing(mixtral);
        assert_eq!(routed.experts, None);
        assert_eq!(routed.intermediate_size, 2 * mixtral.intermediate_size);
        assert_eq!(routed.params_b, mixtral.active_params_b.unwrap());
        // Its shapes still add up to its parameters (the catalog's own check).
        let (total, _) = routed.params_from_shapes().unwrap();
        assert!(
            (total / 1e9 / routed.params_b - 1.0).abs() < 0.05,
            "{total}"
        );
        // Dense models, and mixtures with shared experts or dense layers, are left alone.
        for name in ["llama-2-70b", "deepseek-r1"] {
            let model = catalog.model(name).unwrap();
            assert_eq!(fake_weight_routing(model).experts, model.experts);
        }
    }

    #[test]
    fn a_fake_weight_mixtures_decode_step_barely_grows_with_the_batch() {
        let catalog = Catalog::shipped().unwrap();
        let engine = catalog.engine("trtllm").unwrap();
        let p = StepParameters {
            step_overhead_ms: 1.5,
            seq_overhead_us: 20.0,
            eager_layer_us: 0.0,
            roofline_compute: 0.5,
            roofline_memory: 0.7,
            reread_half_group: 3.0,
        };
        let step = |batch| {
            predict(
                &catalog,
                engine,
                &timed(&catalog, "H100-SXM", "mixtral-8x7b", batch),
                p,
            )
            .unwrap()
            .1
        };
        // Measured on H100, TP 2: 6.5 ms at batch 1, 7.8 ms at batch 16. A trained router
        // would touch all eight experts at 16 tokens and read 3–4 times the weights.
        let (one, sixteen) = (step(1), step(16));
        assert!(sixteen < 1.4 * one, "{one} s vs {sixteen} s");
    }

    #[test]
    fn a_row_that_names_no_server_is_timed_on_the_node_predict_takes() {
        let catalog = Catalog::shipped().unwrap();
        let engine = catalog.engine("trtllm-0.x").unwrap();
        let p = StepParameters {
            step_overhead_ms: 0.1,
            seq_overhead_us: 20.0,
            eager_layer_us: 50.0,
            roofline_compute: 0.5,
            roofline_memory: 0.7,
            reread_half_group: 3.0,
        };
        let mut row = timed(&catalog, "L40S", "llama-2-70b", 1);
        row.row.tp = 8;
        row.row.input_tokens = 2048;
        row.dtype = Some(Dtype::Fp8);
        let first_token = |catalog: &Catalog| predict(catalog, engine, &row, p).unwrap().0;
        // The catalog's largest L40S node has every card behind a PCIe switch, so the
        // all-reduce AIConfigurator measured through its box's host (8 GPUs at a sixteenth of
        // the pair's bus bandwidth) is set aside. Without that node shape, the largest left
        // pairs its cards off and keeps the box as measured.
        let card = catalog.card("L40S").unwrap();
        assert_eq!(
            catalog.largest_node_of(card).and_then(|n| n.switched()),
            Some(true)
        );
        let mut paired = catalog.clone();
        paired
            .nodes
            .retain(|n| !(n.card == "L40S" && n.switched() == Some(true)));
        assert_eq!(
            paired.largest_node_of(card).and_then(|n| n.switched()),
            Some(false)
        );
        let (switched, boxed) = (first_token(&catalog), first_token(&paired));
        assert!(switched < 0.5 * boxed, "{switched} s vs {boxed} s");
    }
}

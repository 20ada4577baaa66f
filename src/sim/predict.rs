//! Predicting C* for a layout nobody measured: simulate closed-loop users at growing
//! concurrency, in virtual time, until the SLO breaks; then bisect.
//!
//! The same seed drives every level (common random numbers), so the difference between two
//! levels is the load, not the draw of request lengths.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use std::sync::Arc;

use super::engine::{Engine, EngineConfig, EngineOptions};
use super::fabric::Fabric;
use super::measuring_client::{LevelSample, MeasuredAs};
use super::operator_step::OperatorStep;
use super::perf::{Efficiency, PerfModel, StepWork};
use super::virtual_run::{
    run_virtual, run_virtual_until, Arrivals, Phases, RunResult, RunSpec,
    DEFAULT_CLIENT_TURNAROUND_S,
};
use crate::catalog::band::CStarRange;
use crate::catalog::memory::LayoutRejected;
use crate::catalog::operators::{OperatorLibrary, OperatorTables};
use crate::catalog::{
    memory_fit_layout, ActivationScales, Card, Dtype, EngineProfile, GroupedDecodeKernels,
    MemoryFit, MemoryOptions, Model, Node, Parallelism,
};
use crate::slo::{format_seconds, Slo};
use crate::stats::{SortedSample, Summary};
use crate::workload::Workload;

/// One serving instance to model: a model on `tp` cards linked by `interconnect` — or, with
/// `parallel` beyond tensor parallelism, on `parallel.cards()` cards, as many per scale-up
/// domain as `domain_cards`, the domains joined by `scale_out_gbs` per card.
/// Cards one scale-up link joins when no node shape says: an eight-GPU HGX-class board (or the
/// instance itself, when wider).
pub const DEFAULT_DOMAIN_CARDS: u32 = 8;

#[derive(Debug, Clone)]
pub struct Layout<'a> {
    pub model: &'a Model,
    pub card: &'a Card,
    pub interconnect: String,
    pub tp: u32,
    pub memory: MemoryOptions,
    /// The whole layout; its `tp` is `tp` above.
    pub parallel: Parallelism,
    /// Cards one scale-up link joins (a node's cards; 72 in an NVL72 rack).
    pub domain_cards: u32,
    /// The network between domains, GB/s per card one way (`None`: unknown, the instance
    /// must stay in one domain).
    pub scale_out_gbs: Option<f64>,
    /// Whether the node shape's cards all reach each other at the link's rate (`None`: no
    /// node shape given; see `Node::switched`).
    pub switched: Option<bool>,
    /// The node shape the instance is timed on, with its topology (`8xL40S-PCIe
    /// (pcie-switch)`), for the prediction to say; `None` when none was given.
    pub node: Option<String>,
}

impl<'a> Layout<'a> {
    /// `model` on `tp` cards of `card` over the card's own link, default memory options.
    pub fn on_card(model: &'a Model, card: &'a Card, tp: u32) -> Layout<'a> {
        Layout {
            model,
            card,
            interconnect: card.interconnect.clone(),
            tp,
            memory: MemoryOptions::default(),
            parallel: Parallelism::tensor(tp),
            domain_cards: tp.max(DEFAULT_DOMAIN_CARDS),
            scale_out_gbs: None,
            switched: None,
            node: None,
        }
    }

    /// The same instance laid out as `parallel` on cards of `node` (its domain and network).
    pub fn with_parallel(mut self, parallel: Parallelism, node: Option<&Node>) -> Layout<'a> {
        self.tp = parallel.tp;
        self.parallel = parallel;
        if let Some(node) = node {
            self.domain_cards = node.cards_per_node;
            self.scale_out_gbs = node.scale_out_gbs_per_card;
            self.switched = node.switched();
            self.node = Some(format!("{} ({})", node.name, node.topology));
        }
        self
    }

    /// The links between this instance's cards.
    pub fn fabric(&self, efficiency: &Efficiency) -> Fabric {
        let link_gbs = if self.interconnect == self.card.interconnect || self.interconnect == "none"
        {
            self.card.link_bandwidth_gbs
        } else {
            super::perf::pcie_bidirectional_gbs(self.card.pcie_gen)
        };
        Fabric {
            domain_cards: self.domain_cards.max(1),
            scale_up_bytes_per_s: link_gbs * 1e9 / 2.0,
            scale_out_bytes_per_s: self.scale_out_gbs.map(|gbs| gbs * 1e9),
            hop_latency_s: efficiency.link_latency_us * 1e-6,
            efficiency: efficiency.link,
            switched: self.switched,
        }
    }

    /// Independent batches in flight: a pipeline of `pp` stages keeps `pp` of them (vLLM's
    /// and TensorRT-LLM's micro-batches), each with `1/pp` of the KV cache and of the
    /// running requests — modelled as that many engines sharing the users.
    pub fn virtual_engines(&self) -> u32 {
        self.parallel.pp.max(1)
    }
}

/// What an instance's step times rest on: efficiency factors and fixed costs (and where they
/// came from), the engine profile, and the measured operator timings when the card and engine
/// have them.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// `defaults (uncalibrated)`, `catalog efficiency for X`, or the calibration's name.
    pub name: String,
    pub efficiency: Efficiency,
    /// The engine profile whose scheduler and overheads are modelled (`generic` when none).
    pub engine: String,
    /// Where kernel times come from: measured operator tables (which system, engine and
    /// version) or the roofline (and why).
    pub basis: String,
    /// The measured operator tables for this card under this engine, when there are any.
    #[serde(skip)]
    pub operators: Option<Arc<OperatorTables>>,
    /// Decode batch sizes the engine runs as CUDA graphs.
    #[serde(skip)]
    pub graph_sizes: Vec<u32>,
    /// How the engine scales FP8 GEMM inputs (static scales skip a kernel per GEMM).
    #[serde(skip)]
    pub fp8_activation_scales: ActivationScales,
    /// The shapes the engine's grouped-query decode kernel covers, where it lacks some.
    #[serde(skip)]
    pub grouped_decode: Option<GroupedDecodeKernels>,
}

impl Calibration {
    /// The roofline defaults, with whatever the card's catalog entry overrides, and no engine
    /// profile: what tests of the scheduler and the roofline use.
    pub fn for_card(card: &Card, interconnect: &str) -> Calibration {
        Calibration {
            name: if card.efficiency.is_some() {
                format!("catalog efficiency for {}", card.name)
            } else {
                "defaults (uncalibrated)".into()
            },
            efficiency: Efficiency::for_card(card, interconnect),
            engine: "generic".into(),
            basis: ROOFLINE_BASIS.into(),
            operators: None,
            graph_sizes: Vec::new(),
            fp8_activation_scales: ActivationScales::Dynamic,
            grouped_decode: None,
        }
    }

    /// The step model of `card` under `engine`: the engine's per-step overheads (unless the
    /// card's catalog entry sets its own), its CUDA-graph sizes, and the card's measured
    /// operator timings under that engine where `operators` has them — else the roofline,
    /// which the basis then says.
    pub fn for_engine(
        card: &Card,
        interconnect: &str,
        engine: &EngineProfile,
        operators: &OperatorLibrary,
    ) -> Calibration {
        let mut efficiency = Efficiency::for_card(card, interconnect);
        let overrides = card.efficiency.unwrap_or_default();
        if overrides.step_overhead_ms.is_none() {
            efficiency.step_overhead_ms = engine.step_overhead_ms;
        }
        if overrides.seq_overhead_ms.is_none() {
            efficiency.seq_overhead_ms = engine.seq_overhead_us / 1000.0;
        }
        efficiency.eager_layer_overhead_us = engine.eager_layer_overhead_us;
        efficiency.request_overhead_ms = engine.request_overhead_ms;
        efficiency.moe_layer_overhead_us = engine.moe_layer_overhead_us;
        efficiency.handoff_ms = engine.handoff_ms;
        let tables = card
            .operators
            .as_deref()
            .and_then(|system| operators.get(system, &engine.operators));
        let basis = match (&tables, card.operators.as_deref()) {
            (Some(tables), _) => operator_basis(tables),
            (None, Some(system)) => format!(
                "{ROOFLINE_BASIS}: no {} operator timings for {system}",
                engine.operators
            ),
            // The card is named wherever a basis is shown (a prediction's heading, a plan's
            // row), so the basis does not repeat it: cards without tables share one basis.
            (None, None) => format!("{ROOFLINE_BASIS}: no measured operator timings"),
        };
        Calibration {
            name: if card.efficiency.is_some() {
                format!("catalog efficiency for {}", card.name)
            } else {
                "defaults (uncalibrated)".into()
            },
            efficiency,
            engine: engine.name.clone(),
            basis,
            operators: tables.map(Arc::clone),
            graph_sizes: engine.cuda_graph_sizes.clone(),
            fp8_activation_scales: engine.fp8_activation_scales,
            grouped_decode: engine.grouped_decode.clone(),
        }
    }

    /// The same step model for a disaggregated deployment's decode worker: a request passes
    /// the deployment's front (`request_overhead_ms`) once, on its way to the prefill worker;
    /// the decode worker's copy waits for the KV, not for the front again.
    pub fn for_decode_worker(mut self) -> Calibration {
        self.efficiency.request_overhead_ms = 0.0;
        self
    }
}

/// What a roofline prediction says it rests on.
pub const ROOFLINE_BASIS: &str = "roofline × efficiency (datasheet peaks)";

/// `measured operators: h100_sxm under vllm (gemm 0.19.0, attention 0.19.0; AIConfigurator)`.
pub fn operator_basis(tables: &OperatorTables) -> String {
    let versions: Vec<String> = tables
        .versions
        .iter()
        .map(|(family, version)| format!("{family} {version}"))
        .collect();
    let paired = match tables.all_reduce_slower_from() {
        Some(gpus) => format!(
            " (all-reduce over {gpus} or more GPUs scaled from the 2-GPU one on node shapes \
             with every card behind a switch: the measuring box's larger groups crossed its \
             host)"
        ),
        None => String::new(),
    };
    format!(
        "measured operator timings: {} ({}) under {} [{}], NVIDIA AIConfigurator's collection{paired}",
        tables.system,
        tables.device,
        tables.engine,
        versions.join(", ")
    )
}

/// How to search.
#[derive(Debug, Clone, Serialize)]
pub struct PredictRequest {
    pub workload: Workload,
    pub slo: Slo,
    /// Highest concurrency tried.
    pub max_concurrency: u32,
    /// Stop bisecting when the bracket is narrower than this share of C* (or 1 user).
    pub resolution: f64,
    pub seed: u64,
    pub engine: EngineOptions,
    /// Requests measured per open-loop level (after a tenth as many of warm-up).
    pub open_loop_requests: usize,
    /// How each closed-loop level is measured: the steady state, unless the prediction is set
    /// beside a benchmark's C* and so measured as that benchmark measured.
    pub measured_as: MeasuredAs,
}

impl PredictRequest {
    pub fn new(workload: Workload, slo: Slo) -> PredictRequest {
        PredictRequest {
            workload,
            slo,
            max_concurrency: 4096,
            resolution: 0.02,
            seed: 1,
            engine: EngineOptions::default(),
            open_loop_requests: 1000,
            measured_as: MeasuredAs::STEADY_STATE,
        }
    }
}

/// Latency and throughput at one load level: closed-loop users, or an open-loop request rate.
#[derive(Debug, Clone, Serialize)]
pub struct LevelResult {
    /// Closed-loop users (0 for an open-loop level).
    pub concurrency: u32,
    /// Open-loop Poisson arrival rate, requests per second (`None` for closed loop).
    pub offered_rate: Option<f64>,
    /// Mean requests in flight (Little's law: completed requests per second × mean E2E).
    pub mean_in_flight: f64,
    pub requests: usize,
    pub ttft: Summary,
    pub tpot: Option<Summary>,
    pub e2e: Summary,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub mean_batch: f64,
    pub preemptions: u64,
    pub pass: bool,
    /// Which limits failed, with the figures.
    pub failed: Vec<String>,
    /// The largest share of a limit the level used (statistic ÷ limit over TTFT and TPOT;
    /// above 1 it failed): what the search interpolates C* on.
    #[serde(skip)]
    pub slo_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub model: String,
    pub card: String,
    pub tp: u32,
    /// The whole layout (`tp` is its tensor-parallel width).
    pub parallel: Parallelism,
    /// Nodes one instance spans (1 unless it needs more cards than a node has).
    pub nodes: u32,
    /// The node shape the instance was timed on, with its topology (`None`: the card's own
    /// link, no node shape).
    pub node: Option<String>,
    pub interconnect: String,
    pub dtype: Dtype,
    pub workload: Workload,
    pub slo: Slo,
    /// Most concurrent users one instance holds within the SLO (0: not even one; 0 too when
    /// the search was over request rates, see `rate_star`).
    pub c_star: u32,
    /// With `--rate`: the highest open-loop (Poisson) request rate one instance holds within
    /// the SLO, requests per second, with its bracket.
    pub rate_star: Option<RateCapacity>,
    /// [last pass, first fail]; no fail when the search reached `max_concurrency`.
    pub last_pass: u32,
    pub first_fail: Option<u32>,
    /// Why the first failing level failed.
    pub limit: String,
    pub curve: Vec<LevelResult>,
    pub calibration: Calibration,
    /// What the step times of this prediction rest on (measured operators or the roofline).
    pub basis: String,
    /// Where the measured C* is expected with 80 % odds, from the model's error on held-out
    /// public measurements (set by the caller, which has the catalog's bands).
    pub band: Option<CStarRange>,
    /// How steeply the binding latency rises around C*, and where C* would be were every
    /// level's latency 5 % off (`None` for a rate search, or without a level on each side).
    pub c_star_slope: Option<super::c_star_slope::CStarSlope>,
    pub engine: EngineConfig,
    pub memory: MemoryFit,
    /// Instances per node the caller plans (users per node = instances × C*).
    pub instances_per_node: u32,
    /// The same workers as a disaggregated deployment (prefill and decode pools), or why
    /// not; set by the caller (`None`: not asked).
    pub disaggregated: Option<Result<super::disagg::Disaggregated, String>>,
    /// With `--breakdown`: where the time of a few telling iterations goes (set by the
    /// caller, see [`super::step_parts::sampled_steps`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<super::step_parts::SampledStep>,
    /// The search stopped once C* proved below this many users (see
    /// [`SearchHints::needed`]): `c_star` is then only the highest level passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub below: Option<u32>,
    /// How each level was measured (`predict --measured-as`): the steady state, or a
    /// benchmark's way.
    pub measured_as: MeasuredAs,
    pub elapsed_ms: f64,
}

/// The outcome of a search over request rates.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RateCapacity {
    pub rate: f64,
    pub last_pass: f64,
    /// `None` when every rate tried passed.
    pub first_fail: Option<f64>,
    /// Mean requests in flight at `rate` (Little's law).
    pub mean_in_flight: f64,
}

/// Which open-loop rates to try.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RateSearch {
    /// Double from one user's request rate until the SLO fails, then bisect.
    Auto,
    /// These rates, requests per second.
    Fixed(Vec<f64>),
}

impl std::str::FromStr for RateSearch {
    type Err = crate::error::InputError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim() == "auto" {
            return Ok(RateSearch::Auto);
        }
        let rates = text
            .split(',')
            .map(|part| {
                let part = part.trim().trim_end_matches("/s");
                match part.parse::<f64>() {
                    Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
                    _ => Err(crate::error::InputError::value(format!(
                        "'{part}' is not a request rate: use auto, or requests per second such as 2.5 or 1,2,4"
                    ))),
                }
            })
            .collect::<Result<Vec<f64>, _>>()?;
        Ok(RateSearch::Fixed(rates))
    }
}

/// Sets up an engine for `layout`, or says why the layout cannot run.
pub fn engine_for(
    layout: &Layout,
    calibration: &Calibration,
    options: &EngineOptions,
    track_tokens: bool,
) -> Result<(Engine, MemoryFit), LayoutRejected> {
    if !layout.model.generates_text() {
        return Err(LayoutRejected {
            reason: format!(
                "capplan's engine simulates text-generating decoder models; {} is not one \
                 (task: {}): measure it with `capplan probe` and plan from the run",
                layout.model.name, layout.model.task
            ),
        });
    }
    let fit = memory_fit_layout(layout.model, layout.card, &layout.parallel, &layout.memory)?;
    fit.dtype
        .runs_on(layout.card)
        .map_err(|reason| LayoutRejected { reason })?;
    let fabric = layout.fabric(&calibration.efficiency);
    if let Some(reason) = fabric.problem(&layout.parallel) {
        return Err(LayoutRejected { reason });
    }
    let mut perf = PerfModel::new(
        layout.model,
        layout.card,
        &layout.interconnect,
        layout.tp,
        fit.dtype,
        fit.kv_dtype,
        calibration.efficiency,
    )
    .with_layout(layout.parallel, fabric);
    // An engine without a grouped-query decode kernel for this shape streams each KV head
    // once per query head (what the L2 cache does not catch of it); the operator step set
    // below takes the same reads from the perf model.
    perf = perf
        .with_decode_kv_reads(
            calibration
                .grouped_decode
                .as_ref()
                .map_or(1.0, |kernels| kernels.kv_reads(layout.model, layout.tp)),
        )
        // Without multi-block mode each decode block streams one KV head of one sequence alone.
        .with_decode_block_stream(calibration.grouped_decode.as_ref().and_then(|kernels| {
            kernels.block_stream(layout.model, layout.tp, layout.card.hbm_bandwidth_gbs)
        }));
    if let Some(tables) = &calibration.operators {
        // Tables that cannot time this model (a dtype or head size they were not measured
        // at, a kind of layer they hold no kernels for) leave the roofline in place; the
        // prediction's basis says which was used, and why.
        match OperatorStep::new(
            Arc::clone(tables),
            layout.model,
            &layout.parallel,
            fit.dtype,
            fit.expert_dtype,
            fit.kv_dtype,
            layout.card.hbm_bandwidth_gbs,
        ) {
            Ok(step) => {
                let step = step
                    .with_fp8_activation_scales(calibration.fp8_activation_scales)
                    .with_fabric(fabric);
                perf = perf.with_operators(step, calibration.graph_sizes.clone());
            }
            Err(gap) => perf.operator_gap = Some(gap.0),
        }
    }
    // Attention replicas each run the engine's batch limits; pipeline stages are separate
    // engines (see `Layout::virtual_engines`), each with its share of the cache and limits.
    let replicas = layout.parallel.dp.max(1);
    let engines = layout.virtual_engines();
    let mut options = *options;
    options.max_running = (options.max_running * replicas as usize / engines as usize).max(1);
    options.token_budget = (options.token_budget * u64::from(replicas)).max(1);
    options.prompt_budget = options
        .prompt_budget
        .map(|budget| (budget * u64::from(replicas)).max(1));
    let mut config = EngineConfig::with(fit.kv_tokens / u64::from(engines), &options);
    let states = fit.state_tokens_per_sequence;
    match options.state_memory_ratio {
        // SGLang splits the cache between a pool of states and the KV pool, ratio : 1, and a
        // running request holds one of the pool's slots.
        Some(ratio) if states > 0 && ratio > 0.0 => {
            let cache = config.kv_capacity as f64;
            let state_share = ratio / (1.0 + ratio);
            let slots = (cache * state_share / states as f64).floor() as usize;
            config.kv_capacity = (cache * (1.0 - state_share)).floor() as u64;
            config.max_running = config.max_running.min(slots.max(1));
        }
        _ => config.state_tokens = states,
    }
    Ok((Engine::new(config, perf, track_tokens), fit))
}

/// The basis an engine's step times actually rest on: its operator tables, or the roofline
/// (with the calibration's reason, or because the tables cannot time this dtype or model).
pub fn step_basis(engine: &Engine, calibration: &Calibration) -> String {
    let basis = match &engine.perf().operators {
        Some(step) => match step.dispatched_experts() {
            Some(ep) => format!(
                "{}; experts timed as dispatched to them by an all-to-all over {ep} cards \
                 (moe_a2a curves)",
                operator_basis(step.tables())
            ),
            None => operator_basis(step.tables()),
        },
        None if calibration.operators.is_some() => format!(
            "{ROOFLINE_BASIS}: the {} operator tables cannot time this model ({})",
            calibration.engine,
            engine
                .perf()
                .operator_gap
                .as_deref()
                .unwrap_or("no timings for its dtype or head size")
        ),
        None => calibration.basis.clone(),
    };
    // A cost the tables did not measure, charged from a fitted cache share: said beside them.
    let reads = engine.perf().decode_kv_reads;
    if reads > 1.0 {
        format!(
            "{basis}; decode attention reads each cached KV head {reads:.1} times: {} has no \
             grouped-query decode kernel for this head shape (masked MHA; how many the L2 cache \
             catches fitted, `grouped_decode` in hardware/engines.toml)",
            calibration.engine
        )
    } else {
        basis
    }
}

/// How closed-loop users begin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClosedStart {
    /// Spread over one request cycle: independent users in steady state (what predictions
    /// assume).
    Staggered,
    /// All at once, each next request after a random send delay of up to `jitter_s`: how a
    /// benchmark's concurrency mode starts its workers — for the warm-up and again, once it
    /// has drained, for the measured requests ([`Phases::Drained`]). After its first measured
    /// request each user falls out of step by up to `out_of_step` of a request cycle (the
    /// engine profile's [`EngineProfile::out_of_step`]; 0 keeps users as the iterations take
    /// them).
    ///
    /// [`EngineProfile::out_of_step`]: crate::catalog::EngineProfile::out_of_step
    Together { jitter_s: f64, out_of_step: f64 },
    /// All at once with no warm-up, measured over Perf Analyzer's time windows
    /// ([`Phases::Windows`]), each next request after up to `jitter_s`.
    Windows {
        window_ms: u32,
        windows: u32,
        jitter_s: f64,
    },
}

/// About how long one user's cycle lasts at `users` concurrency — a prompt's prefill, its
/// output decoded in a batch of `users` at the mean context, and the think time — to spread
/// closed-loop users' first requests over (see `RunSpec::stagger_s`).
pub fn request_cycle_s(engine: &Engine, workload: &Workload, users: u32) -> f64 {
    let input = workload.input_tokens.mean();
    let output = workload.output_tokens.mean();
    let batch = f64::from(users)
        .min(engine.config().max_running as f64)
        .max(1.0);
    let mut prefill = StepWork::default();
    prefill.add_prefill_chunk(0.0, input.min(engine.config().token_budget as f64).max(1.0));
    let chunks = (input / engine.config().token_budget as f64)
        .ceil()
        .max(1.0);
    let mut decode = StepWork::default();
    decode.add_decode(batch, batch * (input + output / 2.0));
    let perf = engine.perf();
    chunks * perf.step_time(&prefill).total
        + (output - 1.0).max(0.0) * perf.step_time(&decode).total
        + workload.think_time.mean_s()
}

/// Runs `arrivals` of `request.workload` for `measured` requests after `warmup`, and judges
/// the level against the request's SLO: the general form of [`evaluate_level`] and
/// [`evaluate_rate`], for callers that choose the load and the sample size (validation).
pub fn evaluate_arrivals(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    arrivals: Arrivals,
    sample: LevelSample,
) -> Result<LevelResult, LayoutRejected> {
    let mut draws = evaluate_draws(layout, calibration, request, arrivals, sample, 1)?;
    Ok(draws.remove(0))
}

/// [`evaluate_arrivals`] run `draws` times with seeds `request.seed`, `request.seed + 1`, …
/// (each its own draws of lengths and the client's delays), one level's runs on one step
/// model: the layer times it remembers carry over from run to run, as [`LevelRunner`]'s do
/// from level to level, where building it anew for each draw made the silicon sample's
/// benchmark rows cost eight step models each.
pub fn evaluate_draws(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    arrivals: Arrivals,
    sample: LevelSample,
    draws: u64,
) -> Result<Vec<LevelResult>, LayoutRejected> {
    let mut runner = LevelRunner::new(layout, calibration, request)?;
    let engines = layout.virtual_engines();
    let arrivals = arrivals.per_engine(engines);
    let (concurrency, rate) = match arrivals {
        Arrivals::Closed { users } => (users * engines, None),
        Arrivals::Open { rate } | Arrivals::Paced { rate } => (0, Some(rate * f64::from(engines))),
    };
    Ok(runner
        .runs(arrivals, sample, draws, None)?
        .iter()
        .map(|run| judge(concurrency, rate, run, &request.slo).across(engines))
        .collect())
}

/// The run of one engine's `arrivals` as `sample` counts and starts them.
fn arrivals_spec(
    engine: &Engine,
    calibration: &Calibration,
    request: &PredictRequest,
    arrivals: Arrivals,
    sample: LevelSample,
) -> RunSpec {
    let LevelSample {
        warmup,
        measured,
        start,
    } = sample;
    let (stagger_s, client_jitter_s) = match (arrivals, start) {
        (Arrivals::Closed { users }, ClosedStart::Staggered) => {
            (request_cycle_s(engine, &request.workload, users), 0.0)
        }
        (_, ClosedStart::Together { jitter_s, .. } | ClosedStart::Windows { jitter_s, .. }) => {
            (0.0, jitter_s)
        }
        _ => (0.0, 0.0),
    };
    let out_of_step_s = match (arrivals, start) {
        (Arrivals::Closed { users }, ClosedStart::Together { out_of_step, .. })
            if out_of_step > 0.0 =>
        {
            out_of_step * request_cycle_s(engine, &request.workload, users)
        }
        _ => 0.0,
    };
    RunSpec {
        arrivals,
        workload: request.workload.clone(),
        warmup_requests: warmup,
        measured_requests: measured.max(1),
        seed: request.seed,
        client_turnaround_s: DEFAULT_CLIENT_TURNAROUND_S,
        stagger_s,
        client_jitter_s,
        request_overhead_s: calibration.efficiency.request_overhead_ms * 1e-3,
        phases: match start {
            ClosedStart::Together { .. } => Phases::Drained,
            ClosedStart::Windows {
                window_ms, windows, ..
            } => Phases::Windows { window_ms, windows },
            ClosedStart::Staggered => Phases::Continuous,
        },
        out_of_step_s,
    }
}

/// Runs one closed-loop level and judges it against the SLO.
pub fn evaluate_level(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    concurrency: u32,
) -> Result<LevelResult, LayoutRejected> {
    LevelRunner::new(layout, calibration, request)?.closed(concurrency)
}

/// Runs one open-loop level (Poisson arrivals at `rate` per second) and judges it.
pub fn evaluate_rate(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    rate: f64,
) -> Result<LevelResult, LayoutRejected> {
    LevelRunner::new(layout, calibration, request)?.open(rate)
}

/// Runs one instance's load levels one after another on the same step model, so that the
/// layer times it remembers by token count carry over from level to level (a search used to
/// rebuild them for every level it ran).
pub struct LevelRunner<'a> {
    layout: &'a Layout<'a>,
    calibration: &'a Calibration,
    request: &'a PredictRequest,
    config: EngineConfig,
    /// Lent to each level's engine while it runs.
    perf: Option<PerfModel>,
}

impl<'a> LevelRunner<'a> {
    pub fn new(
        layout: &'a Layout<'a>,
        calibration: &'a Calibration,
        request: &'a PredictRequest,
    ) -> Result<LevelRunner<'a>, LayoutRejected> {
        let (engine, _) = engine_for(layout, calibration, &request.engine, false)?;
        Ok(LevelRunner::with_engine(
            layout,
            calibration,
            request,
            engine,
        ))
    }

    /// The same with the instance's engine already set up (idle).
    fn with_engine(
        layout: &'a Layout<'a>,
        calibration: &'a Calibration,
        request: &'a PredictRequest,
        engine: Engine,
    ) -> LevelRunner<'a> {
        LevelRunner {
            layout,
            calibration,
            request,
            config: *engine.config(),
            perf: Some(engine.into_perf()),
        }
    }

    /// An idle engine of this instance with the shared step model.
    fn engine(&mut self) -> Result<Engine, LayoutRejected> {
        match self.perf.take() {
            Some(perf) => Ok(Engine::new(self.config, perf, false)),
            None => engine_for(self.layout, self.calibration, &self.request.engine, false)
                .map(|(engine, _)| engine),
        }
    }

    /// Takes the step model back from a level's engine.
    fn keep(&mut self, engine: Engine) {
        self.perf = Some(engine.into_perf());
    }

    /// One closed-loop level of `concurrency` users, judged against the SLO.
    pub fn closed(&mut self, concurrency: u32) -> Result<LevelResult, LayoutRejected> {
        self.closed_level(concurrency, false)
    }

    /// The same when only its verdict matters: the level stops as soon as it is sure to fail
    /// (see [`FailureWatch`](super::virtual_run::FailureWatch)), and then its figures are
    /// those of the requests finished.
    pub fn verdict(&mut self, concurrency: u32) -> Result<LevelResult, LayoutRejected> {
        self.closed_level(concurrency, true)
    }

    fn closed_level(
        &mut self,
        concurrency: u32,
        stop_on_failure: bool,
    ) -> Result<LevelResult, LayoutRejected> {
        let (layout, calibration, request) = (self.layout, self.calibration, self.request);
        // A pipeline's users spread over its batches in flight; the fullest one is simulated.
        let engines = layout.virtual_engines();
        let per_engine = concurrency.max(1).div_ceil(engines);
        if let Some(sample) = request.measured_as.level(per_engine) {
            return self.benchmark_level(concurrency, sample, stop_on_failure);
        }
        let mut engine = self.engine()?;
        let users = per_engine as usize;
        let stagger_s = request_cycle_s(&engine, &request.workload, per_engine);
        let spec = RunSpec {
            arrivals: Arrivals::Closed { users: per_engine },
            workload: request.workload.clone(),
            // Users start spread over one request cycle (`stagger_s`), so the engine is near
            // its steady state from the start: half a round of warm-up settles the rest.
            warmup_requests: (users / 2).max(10),
            // Enough for a stable p90/p99 at small concurrency, two rounds of every user at
            // large, capped (1 500 requests put a p90 within about 1.5 % of itself) to keep a
            // plan over the whole catalog's cards in its time budget.
            measured_requests: (2 * users).clamp(60, 1500),
            seed: request.seed,
            client_turnaround_s: DEFAULT_CLIENT_TURNAROUND_S,
            stagger_s,
            client_jitter_s: 0.0,
            request_overhead_s: calibration.efficiency.request_overhead_ms * 1e-3,
            phases: Phases::Continuous,
            out_of_step_s: 0.0,
        };
        let stop = stop_on_failure.then_some(&request.slo);
        let run = run_virtual_until(&mut engine, &spec, stop);
        self.keep(engine);
        Ok(judge(concurrency, None, &run, &request.slo).across(engines))
    }

    /// A closed-loop level as a benchmark measured it (see [`PredictRequest::measured_as`]):
    /// its requests counted and its users started as `sample` says; where its users fall out
    /// of step by the client's random delays, the requests of several draws pooled
    /// ([`MeasuredAs::draws`]), so that its mean is their average.
    fn benchmark_level(
        &mut self,
        concurrency: u32,
        sample: LevelSample,
        stop_on_failure: bool,
    ) -> Result<LevelResult, LayoutRejected> {
        let (layout, request) = (self.layout, self.request);
        let engines = layout.virtual_engines();
        let arrivals = Arrivals::Closed {
            users: concurrency.max(1).div_ceil(engines),
        };
        let stop = stop_on_failure.then_some(&request.slo);
        let runs = self.runs(arrivals, sample, MeasuredAs::draws(sample.start), stop)?;
        let run = RunResult::pooled(runs);
        Ok(judge(concurrency, None, &run, &request.slo).across(engines))
    }

    /// `draws` runs (at least one) of one engine's `arrivals`, counted and started as `sample`
    /// says, with seeds `request.seed`, `request.seed + 1`, … (each its own draws of lengths
    /// and the client's delays), all on this runner's step model; none after a run that `stop`
    /// ended early.
    fn runs(
        &mut self,
        arrivals: Arrivals,
        sample: LevelSample,
        draws: u64,
        stop: Option<&Slo>,
    ) -> Result<Vec<RunResult>, LayoutRejected> {
        let mut runs = Vec::with_capacity(draws.max(1) as usize);
        for draw in 0..draws.max(1) {
            let mut engine = self.engine()?;
            let mut spec = arrivals_spec(&engine, self.calibration, self.request, arrivals, sample);
            spec.seed = self.request.seed + draw;
            let run = run_virtual_until(&mut engine, &spec, stop);
            self.keep(engine);
            let stopped = run.stopped.is_some();
            runs.push(run);
            if stopped {
                break;
            }
        }
        Ok(runs)
    }

    /// One open-loop level (Poisson arrivals at `rate` per second), judged against the SLO.
    pub fn open(&mut self, rate: f64) -> Result<LevelResult, LayoutRejected> {
        let (layout, calibration, request) = (self.layout, self.calibration, self.request);
        let mut engine = self.engine()?;
        let engines = layout.virtual_engines();
        let spec = RunSpec {
            arrivals: Arrivals::Open {
                rate: rate / f64::from(engines),
            },
            workload: request.workload.clone(),
            warmup_requests: (request.open_loop_requests / 10).max(30),
            measured_requests: request.open_loop_requests.max(100),
            seed: request.seed,
            client_turnaround_s: DEFAULT_CLIENT_TURNAROUND_S,
            stagger_s: 0.0,
            client_jitter_s: 0.0,
            request_overhead_s: calibration.efficiency.request_overhead_ms * 1e-3,
            phases: Phases::Continuous,
            out_of_step_s: 0.0,
        };
        let run = run_virtual(&mut engine, &spec);
        self.keep(engine);
        Ok(judge(0, Some(rate), &run, &request.slo).across(engines))
    }
}

impl LevelResult {
    /// One engine's level as the instance's when `engines` like it run side by side (a
    /// pipeline's batches in flight): throughput and requests in flight add up, latencies
    /// stay.
    fn across(mut self, engines: u32) -> LevelResult {
        let n = f64::from(engines.max(1));
        self.output_tokens_per_s *= n;
        self.requests_per_s *= n;
        self.mean_in_flight *= n;
        self.mean_batch *= n;
        self
    }
}

fn judge(concurrency: u32, offered_rate: Option<f64>, run: &RunResult, slo: &Slo) -> LevelResult {
    let ttfts = SortedSample::new(run.requests.iter().map(|r| r.ttft()).collect());
    let tpots = SortedSample::new(run.requests.iter().filter_map(|r| r.tpot()).collect());
    let e2es = SortedSample::new(run.requests.iter().map(|r| r.e2e()).collect());
    let empty = Summary {
        n: 0,
        mean: f64::NAN,
        p50: f64::NAN,
        p90: f64::NAN,
        p95: f64::NAN,
        p99: f64::NAN,
    };
    let mut failed = Vec::new();
    let ttft_stat = ttfts.statistic(slo.percentile);
    let mut slo_ratio = ttft_stat / slo.ttft_s;
    if ttft_stat.is_nan() || ttft_stat > slo.ttft_s {
        failed.push(format!(
            "TTFT {} {} > {}",
            slo.percentile,
            format_seconds(ttft_stat),
            format_seconds(slo.ttft_s)
        ));
    }
    if let Some(limit) = slo.tpot_s {
        let tpot_stat = tpots.statistic(slo.percentile);
        if !tpots.is_empty() {
            slo_ratio = slo_ratio.max(tpot_stat / limit);
        }
        if !tpots.is_empty() && (tpot_stat.is_nan() || tpot_stat > limit) {
            failed.push(format!(
                "TPOT {} {} > {}",
                slo.percentile,
                format_seconds(tpot_stat),
                format_seconds(limit)
            ));
        }
    }
    if let Some(stopped) = &run.stopped {
        // Its figures are of the requests finished before it stopped: only the verdict holds.
        failed = vec![stopped.clone()];
        slo_ratio = f64::INFINITY;
    } else if run.requests.is_empty() {
        failed.push("no request finished".into());
    }
    let mean_e2e = if e2es.is_empty() {
        0.0
    } else {
        e2es.statistic(crate::slo::Percentile::Mean)
    };
    LevelResult {
        concurrency,
        offered_rate,
        mean_in_flight: run.requests_per_s() * mean_e2e,
        requests: run.requests.len(),
        ttft: ttfts.summary().unwrap_or(empty),
        tpot: tpots.summary(),
        e2e: e2es.summary().unwrap_or(empty),
        output_tokens_per_s: run.output_tokens_per_s(),
        requests_per_s: run.requests_per_s(),
        mean_batch: run.mean_batch,
        preemptions: run.preemptions,
        pass: failed.is_empty(),
        failed,
        slo_ratio: if slo_ratio.is_finite() {
            slo_ratio
        } else {
            f64::INFINITY
        },
    }
}

/// A prediction with no levels yet — the layout checked against memory and the workload —
/// and the engine its levels will run on.
fn predict_shell(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
) -> Result<(Prediction, Engine), LayoutRejected> {
    let (engine, memory) = engine_for(layout, calibration, &request.engine, false)?;
    let longest = u64::from(request.workload.input_tokens.max())
        + u64::from(request.workload.output_tokens.max())
        + memory.state_tokens_per_sequence;
    if longest > memory.kv_tokens {
        return Err(LayoutRejected {
            reason: format!(
                "the workload's longest request needs {longest} KV positions; {} on {} × {} holds {}",
                layout.model.name, layout.tp, layout.card.name, memory.kv_tokens
            ),
        });
    }
    let prediction = Prediction {
        model: layout.model.name.clone(),
        card: layout.card.name.clone(),
        tp: layout.tp,
        parallel: layout.parallel,
        nodes: layout.parallel.cards().div_ceil(layout.domain_cards.max(1)),
        node: layout.node.clone(),
        interconnect: layout.interconnect.clone(),
        dtype: memory.dtype,
        workload: request.workload.clone(),
        slo: request.slo,
        c_star: 0,
        rate_star: None,
        last_pass: 0,
        first_fail: None,
        limit: String::new(),
        curve: Vec::new(),
        calibration: calibration.clone(),
        basis: step_basis(&engine, calibration),
        band: None,
        c_star_slope: None,
        engine: *engine.config(),
        memory,
        instances_per_node: 1,
        disaggregated: None,
        steps: Vec::new(),
        below: None,
        measured_as: request.measured_as,
        elapsed_ms: 0.0,
    };
    Ok((prediction, engine))
}

/// Finds C* for `layout`: concurrency doubles from 1 until the SLO fails, then the bracket is
/// bisected down to `resolution`.
pub fn predict(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
) -> Result<Prediction, LayoutRejected> {
    predict_with(layout, calibration, request, SearchHints::default())
}

/// Where a search starts when its caller needs only C* (not the curve below it) and knows
/// nothing better: one user's levels cost the most (each of a request's tokens an iteration
/// of its own), and nearly every layout worth planning holds sixteen.
pub const SKIPPED_LEVELS_BELOW: u32 = 16;

/// What a caller that asks for many layouts (the planner) knows before a search for C*, to
/// spend fewer levels on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SearchHints {
    /// A level expected to pass: the doubling starts at the power of two at or below it
    /// instead of at 1, and halves down from there if that level fails. Levels below a
    /// passing one are taken to pass (latency grows with load, as the search already assumes
    /// when it stops at the first failure), so the bracket and C* are those doubling from 1
    /// finds; only the curve lacks the small levels skipped, which at one user cost the most
    /// (a request's every token is an iteration of its own).
    pub start: Option<u32>,
    /// The fewest users per instance that would make the layout matter: the search first
    /// asks whether the layout holds them, and stops if not — C* is then known to be below,
    /// which is all the caller needs.
    pub needed: Option<u32>,
    /// With `needed`: a level expected to fail, tried first when lower — a layout far from
    /// the users it needs is then settled by one small level.
    pub probe: Option<u32>,
}

/// [`predict`] with what the caller knows: where to start, and when C* no longer matters
/// (then the prediction's `below` says so, and `c_star` is only the highest level passed).
pub fn predict_with(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    hints: SearchHints,
) -> Result<Prediction, LayoutRejected> {
    let started = Instant::now();
    let (mut prediction, engine) = predict_shell(layout, calibration, request)?;
    let runner = LevelRunner::with_engine(layout, calibration, request, engine);
    let max = request.max_concurrency.max(1);
    let mut search = CStarSearch {
        runner,
        levels: BTreeMap::new(),
        max,
    };
    let found = match hints.needed {
        Some(needed) => search.settle(needed, hints.probe)?,
        None => None,
    };
    let found = match found {
        Some(below) => below,
        None => {
            // Levels up to the users needed pass, when the layout holds them.
            let start = hints.start.unwrap_or(1).max(hints.needed.unwrap_or(1));
            search.bracket(power_of_two_at_most(start.clamp(1, max)))?
        }
    };
    let (last_pass, first_fail) = match found {
        Found::Bracket {
            last_pass,
            first_fail,
        } => match first_fail {
            Some(high) => {
                let (low, high) = search.bisect(last_pass, high, request.resolution)?;
                (low, Some(high))
            }
            None => (last_pass, None),
        },
        Found::Below {
            needed,
            last_pass,
            first_fail,
        } => {
            prediction.below = Some(needed);
            (last_pass, first_fail)
        }
    };
    let levels = search.levels;
    prediction.limit = match first_fail.and_then(|c| levels.get(&c)) {
        Some(level) => format!(
            "at {} users: {}",
            level.concurrency,
            level.failed.join("; ")
        ),
        None => match prediction.below {
            Some(needed) => format!("the search stops at {max} users, below the {needed} needed"),
            None => format!("none found up to {max} users (raise --max-concurrency)"),
        },
    };
    prediction.c_star = last_pass;
    prediction.last_pass = last_pass;
    prediction.first_fail = first_fail;
    prediction.curve = levels.into_values().collect();
    if prediction.below.is_none() {
        prediction.c_star_slope = super::c_star_slope::around(&prediction.curve, last_pass);
    }
    prediction.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(prediction)
}

/// About how many users `layout` holds within the SLO, from its step model alone (no
/// simulation): the running batch whose iteration — every sequence's next token, and the
/// prompts joining meanwhile — takes the TPOT limit, capped by the running-request limit and
/// by the KV cache at the mean context, turned into users by the think time. Over the
/// catalog's mixtures of experts on every node shape, nine C* in ten were within 0.8 and
/// 1.2 times it; it ignores queueing and the percentile asked. The planner orders layouts
/// and starts searches by it, which costs levels when it is wrong, never a different C*.
pub fn estimate_c_star(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
) -> Option<f64> {
    let (engine, _) = engine_for(layout, calibration, &request.engine, false).ok()?;
    let config = engine.config();
    let input = request.workload.input_tokens.mean().max(1.0);
    let output = request.workload.output_tokens.mean().max(1.0);
    let context = input + output / 2.0;
    let cap = (config.max_running as f64)
        .min(config.kv_capacity as f64 / (context + config.state_tokens as f64))
        .max(1.0);
    // Prompts join the running batch as its requests finish: one every `output` iterations
    // per sequence, each computing what the prefix cache does not hold.
    let cached = f64::from(request.workload.prefix_share.of(input as u32)).clamp(0.0, input - 1.0);
    let with_prompts = |running: f64, prompts: f64| {
        let mut work = StepWork::default();
        work.add_decode(running, running * context);
        work.add_prefill_chunks(prompts, cached, input - cached);
        engine.perf().step_time(&work).total
    };
    // A whole number of prompts per iteration: the mean of the two around the average.
    let iteration = |running: f64| {
        let starting = running / output;
        let whole = starting.floor();
        let part = starting - whole;
        (1.0 - part) * with_prompts(running, whole) + part * with_prompts(running, whole + 1.0)
    };
    let limit = request.slo.tpot_s.unwrap_or(f64::INFINITY);
    let running = if iteration(cap) <= limit {
        cap
    } else if iteration(1.0) > limit {
        1.0
    } else {
        // The largest batch within the limit, to a few per cent.
        let (mut low, mut high) = (1.0_f64, cap);
        while high / low > 1.02 {
            let mid = (low * high).sqrt();
            if iteration(mid) <= limit {
                low = mid;
            } else {
                high = mid;
            }
        }
        low
    };
    let e2e = output * iteration(running);
    let think = request.workload.think_time.mean_s();
    let users = running * (e2e + think) / e2e.max(1e-9) * f64::from(layout.virtual_engines());
    users.is_finite().then_some(users)
}

/// The largest power of two not above `c` (at least 1).
fn power_of_two_at_most(c: u32) -> u32 {
    if c <= 1 {
        1
    } else {
        1 << (31 - c.leading_zeros())
    }
}

/// Where the levels of powers of two put C*.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Found {
    /// C* is at least `last_pass` and below `first_fail` (none: every level up to the cap
    /// passed).
    Bracket {
        last_pass: u32,
        first_fail: Option<u32>,
    },
    /// C* is below `needed`: a level no higher failed (or the search's cap is below it).
    Below {
        needed: u32,
        last_pass: u32,
        first_fail: Option<u32>,
    },
}

/// One layout's search for C*: the levels run so far, each run once.
struct CStarSearch<'a> {
    runner: LevelRunner<'a>,
    levels: BTreeMap<u32, LevelResult>,
    max: u32,
}

impl CStarSearch<'_> {
    /// Whether `c` users pass (run once, remembered).
    fn passes(&mut self, c: u32) -> Result<bool, LayoutRejected> {
        self.level(c, false)
    }

    /// The same when a failure ends the search: a level sure to fail stops early (see
    /// [`LevelRunner::verdict`]); one that passes runs whole, as `passes` runs it.
    fn verdict(&mut self, c: u32) -> Result<bool, LayoutRejected> {
        self.level(c, true)
    }

    fn level(&mut self, c: u32, stop_on_failure: bool) -> Result<bool, LayoutRejected> {
        if let Some(level) = self.levels.get(&c) {
            return Ok(level.pass);
        }
        let result = if stop_on_failure {
            self.runner.verdict(c)?
        } else {
            self.runner.closed(c)?
        };
        let pass = result.pass;
        self.levels.insert(c, result);
        Ok(pass)
    }

    /// The share of the SLO level `c` used (NaN when not run).
    fn ratio(&self, c: u32) -> f64 {
        self.levels
            .get(&c)
            .map_or(f64::NAN, |level| level.slo_ratio)
    }

    /// Whether the layout holds the users it `needed`: `Below` when not (after `probe`, when
    /// lower, or `needed` itself failed), `None` when it does and C* must be found.
    fn settle(&mut self, needed: u32, probe: Option<u32>) -> Result<Option<Found>, LayoutRejected> {
        if needed > self.max {
            return Ok(Some(Found::Below {
                needed,
                last_pass: 0,
                first_fail: None,
            }));
        }
        let probe = probe.filter(|&p| p >= 1 && p < needed);
        for level in probe.into_iter().chain([needed]) {
            if !self.verdict(level)? {
                let last_pass = self
                    .levels
                    .range(..level)
                    .filter(|(_, l)| l.pass)
                    .map(|(&c, _)| c)
                    .next_back()
                    .unwrap_or(0);
                return Ok(Some(Found::Below {
                    needed,
                    last_pass,
                    first_fail: Some(level),
                }));
            }
        }
        Ok(None)
    }

    /// The bracket of powers of two around C*: doubling from `start` (a power of two) while
    /// levels pass, halving from it while they fail.
    fn bracket(&mut self, start: u32) -> Result<Found, LayoutRejected> {
        let mut c = start.min(self.max);
        if !self.passes(c)? {
            let mut high = c;
            while high > 1 {
                let low = high / 2;
                if self.passes(low)? {
                    return Ok(Found::Bracket {
                        last_pass: low,
                        first_fail: Some(high),
                    });
                }
                high = low;
            }
            return Ok(Found::Bracket {
                last_pass: 0,
                first_fail: Some(1),
            });
        }
        loop {
            if c >= self.max {
                return Ok(Found::Bracket {
                    last_pass: c,
                    first_fail: None,
                });
            }
            let next = (c * 2).min(self.max);
            if !self.passes(next)? {
                return Ok(Found::Bracket {
                    last_pass: c,
                    first_fail: Some(next),
                });
            }
            c = next;
        }
    }

    /// Narrows [`low`, `high`) to `resolution` of `low` (or one user), returning the last
    /// level passed and the first failed.
    fn bisect(
        &mut self,
        mut low: u32,
        mut high: u32,
        resolution: f64,
    ) -> Result<(u32, u32), LayoutRejected> {
        while low > 0 {
            let width = ((resolution * f64::from(low)).floor() as u32).max(1);
            if high - low <= width {
                break;
            }
            // Where the SLO's share crosses 1 between the bracket's ends, interpolated (latency
            // grows smoothly with users), kept off the ends so the bracket always shrinks by
            // a fifth at least: a few levels fewer than halving, and the largest levels are
            // the costly ones.
            let (r_low, r_high) = (self.ratio(low), self.ratio(high));
            let share = if r_low.is_finite() && r_high.is_finite() && r_high > r_low {
                ((1.0 - r_low) / (r_high - r_low)).clamp(0.2, 0.8)
            } else {
                0.5
            };
            let mid =
                (low + (f64::from(high - low) * share).round() as u32).clamp(low + 1, high - 1);
            if self.passes(mid)? {
                low = mid;
            } else {
                high = mid;
            }
        }
        Ok((low, high))
    }
}

/// Finds the highest open-loop request rate `layout` holds within the SLO (`RateSearch::Auto`:
/// doubling from the rate one user alone sends, then bisection to `resolution`), or judges the
/// given rates. Open-loop arrivals are bursty, so the requests in flight at this rate are fewer
/// than the closed-loop C* — plan with the one that matches how your users arrive.
pub fn predict_rate(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    search: &RateSearch,
) -> Result<Prediction, LayoutRejected> {
    let started = Instant::now();
    let (mut prediction, engine) = predict_shell(layout, calibration, request)?;
    let mut levels: Vec<LevelResult> = Vec::new();
    let mut runner = LevelRunner::with_engine(layout, calibration, request, engine);
    // One user alone sends a request every E2E: a rate that nearly always passes.
    let alone = match search {
        RateSearch::Auto => Some(runner.closed(1)?),
        RateSearch::Fixed(_) => None,
    };
    let mut evaluate = |rate: f64| -> Result<bool, LayoutRejected> {
        let result = runner.open(rate)?;
        let pass = result.pass;
        levels.push(result);
        Ok(pass)
    };
    let (mut last_pass, mut first_fail) = (0.0_f64, None::<f64>);
    match search {
        RateSearch::Fixed(rates) => {
            for &rate in rates {
                if evaluate(rate)? {
                    last_pass = last_pass.max(rate);
                } else {
                    first_fail = Some(first_fail.map_or(rate, |f: f64| f.min(rate)));
                }
            }
        }
        RateSearch::Auto => {
            let alone_e2e = alone.map_or(0.0, |level| level.e2e.mean);
            let mut rate = if alone_e2e > 0.0 {
                1.0 / alone_e2e
            } else {
                1.0
            };
            let ceiling = f64::from(request.max_concurrency.max(1)) * rate;
            // One user's rate already fails where a request alone keeps its server busy (a
            // prompt-only worker): halve until a rate passes, a thousandth of it at most.
            let floor = rate / 1024.0;
            while rate > floor && !evaluate(rate)? {
                first_fail = Some(rate);
                rate /= 2.0;
            }
            if first_fail.is_some() {
                if rate > floor {
                    last_pass = rate;
                }
            } else {
                last_pass = rate;
                rate = (rate * 2.0).min(ceiling);
            }
            while first_fail.is_none() && last_pass < ceiling {
                if evaluate(rate)? {
                    last_pass = rate;
                    if rate >= ceiling {
                        break;
                    }
                    rate = (rate * 2.0).min(ceiling);
                } else {
                    first_fail = Some(rate);
                    break;
                }
            }
            if let Some(mut high) = first_fail {
                let mut low = last_pass;
                while low > 0.0 && (high - low) > request.resolution * low {
                    let mid = (low + high) / 2.0;
                    if evaluate(mid)? {
                        low = mid;
                    } else {
                        high = mid;
                    }
                }
                last_pass = low;
                first_fail = Some(high);
            }
        }
    }
    levels.sort_by(|a, b| {
        a.offered_rate
            .unwrap_or(0.0)
            .total_cmp(&b.offered_rate.unwrap_or(0.0))
    });
    let at = |rate: Option<f64>| {
        levels
            .iter()
            .find(|l| rate.is_some() && l.offered_rate == rate)
    };
    prediction.limit = match at(first_fail) {
        Some(level) => format!(
            "at {:.3} requests/s: {}",
            level.offered_rate.unwrap_or(0.0),
            level.failed.join("; ")
        ),
        None => "no rate tried failed".into(),
    };
    prediction.rate_star = Some(RateCapacity {
        rate: last_pass,
        last_pass,
        first_fail,
        mean_in_flight: at(Some(last_pass)).map_or(0.0, |l| l.mean_in_flight),
    });
    prediction.curve = levels;
    prediction.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(prediction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::slo::Percentile;
    use crate::workload::{PrefixShare, ThinkTime, TokenLengths};

    fn request(ttft: f64, tpot: f64) -> PredictRequest {
        PredictRequest::new(
            Workload {
                input_tokens: TokenLengths::Fixed { tokens: 512 },
                output_tokens: TokenLengths::Fixed { tokens: 256 },
                think_time: ThinkTime::NONE,
                prefix_share: PrefixShare::NONE,
                speculation: None,
            },
            Slo {
                ttft_s: ttft,
                tpot_s: Some(tpot),
                percentile: Percentile::P(90.0),
                e2e_s: None,
            },
        )
    }

    fn predict_on(card: &str, tp: u32, req: &PredictRequest) -> Prediction {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card(card).unwrap();
        let layout = Layout::on_card(model, card, tp);
        predict(
            &layout,
            &Calibration::for_card(card, &card.interconnect),
            req,
        )
        .unwrap()
    }

    /// A decode step of `batch` sequences over 2 048 cached positions, s, and the basis the
    /// prediction states.
    fn decode_step(
        layout: &Layout,
        profile: &EngineProfile,
        calibration: &Calibration,
        batch: f64,
    ) -> (f64, String) {
        let options = EngineOptions::for_card(profile, layout.card);
        let (engine, _) = engine_for(layout, calibration, &options, false).unwrap();
        let mut work = StepWork::default();
        work.add_decode(batch, batch * 2048.0);
        (
            engine.perf().step_time(&work).total,
            step_basis(&engine, calibration),
        )
    }

    /// A hybrid model's recurrent states: vLLM keeps them in the KV pool, each running
    /// sequence's beside its tokens; SGLang splits the cache 0.9 : 1 between a pool of states
    /// and the KV pool (`mamba_full_memory_ratio`), and its slots cap the running requests.
    /// Qwen3.5-397B-A17B in FP8 on four B200s: a state is worth 3 126 KV positions.
    #[test]
    fn recurrent_states_share_the_cache_or_take_a_pool_of_their_own() {
        let catalog = Catalog::shipped().unwrap();
        let card = catalog.card("B200").unwrap();
        let model = catalog.model("qwen3.5-397b-a17b").unwrap();
        let mut layout = Layout::on_card(model, card, 4);
        layout.memory.dtype = Some(crate::catalog::Dtype::Fp8);
        let config = |engine: &str| {
            let profile = catalog.engine(engine).unwrap();
            let calibration =
                Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
            let options = EngineOptions::for_card(profile, card);
            let (engine, fit) = engine_for(&layout, &calibration, &options, false).unwrap();
            (*engine.config(), fit, options)
        };
        let (vllm, fit, vllm_options) = config("vllm");
        assert_eq!(fit.state_tokens_per_sequence, 3126);
        assert_eq!(vllm.state_tokens, 3126);
        assert_eq!(vllm.kv_capacity, fit.kv_tokens);
        assert_eq!(vllm.max_running, vllm_options.max_running);
        let (sglang, _, sglang_options) = config("sglang");
        let cache = fit.kv_tokens as f64;
        assert_eq!(sglang.state_tokens, 0);
        assert_eq!(sglang.kv_capacity, (cache / 1.9).floor() as u64);
        let slots = (cache * 0.9 / 1.9 / 3126.0).floor() as usize;
        assert!(slots < sglang_options.max_running, "{slots}");
        assert_eq!(sglang.max_running, slots);
        // A model without states is untouched by the split.
        let llama = catalog.model("llama-3.1-8b").unwrap();
        let plain = Layout::on_card(llama, card, 1);
        let profile = catalog.engine("sglang").unwrap();
        let calibration =
            Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
        let (engine, fit) = engine_for(&plain, &calibration, &sglang_options, false).unwrap();
        assert_eq!(engine.config().kv_capacity, fit.kv_tokens);
        assert_eq!(engine.config().max_running, sglang_options.max_running);
    }

    /// Each attention replica runs its own scheduler with the engine's limits: DP8 EP8 on
    /// eight B200s holds eight times the token budget and the prompt budget of one.
    #[test]
    fn attention_replicas_each_take_the_engines_budgets() {
        let catalog = Catalog::shipped().unwrap();
        let card = catalog.card("B200").unwrap();
        let model = catalog.model("deepseek-v3").unwrap();
        let wide = crate::catalog::Parallelism {
            tp: 1,
            pp: 1,
            dp: 8,
            ep: 8,
        };
        let mut layout =
            Layout::on_card(model, card, 1).with_parallel(wide, catalog.largest_node_of(card));
        layout.memory.dtype = Some(crate::catalog::Dtype::Fp8);
        let profile = catalog.engine("sglang").unwrap();
        let calibration =
            Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
        let mut options = EngineOptions::for_card(profile, card);
        options.prompt_budget = Some(9692);
        let (engine, _) = engine_for(&layout, &calibration, &options, false).unwrap();
        assert_eq!(engine.config().token_budget, 8 * options.token_budget);
        assert_eq!(engine.config().prompt_budget, Some(8 * 9692));
    }

    #[test]
    fn an_engine_without_a_grouped_kernel_for_the_shape_rereads_the_cache() {
        let catalog = Catalog::shipped().unwrap();
        let engine = catalog.engine("trtllm-0.x").unwrap();
        assert!(engine.grouped_decode.is_some());
        // Measured tables (H100) and the roofline (L40) both read the cache once per KV head
        // where a grouped kernel covers the shape, and more where none does.
        for (card, tp) in [("H100-SXM", 8), ("L40", 8)] {
            let card = catalog.card(card).unwrap();
            let with =
                Calibration::for_engine(card, &card.interconnect, engine, &catalog.operators);
            let without = Calibration {
                grouped_decode: None,
                ..with.clone()
            };
            for (model, slower) in [("falcon-180b", true), ("llama-2-70b", false)] {
                let model = catalog.model(model).unwrap();
                let layout = Layout {
                    memory: MemoryOptions {
                        dtype: Some(Dtype::Fp8),
                        kv_dtype: Some(Dtype::Fp8),
                        ..MemoryOptions::default()
                    },
                    ..Layout::on_card(model, card, tp)
                };
                let ((reread, basis), (once, _)) = (
                    decode_step(&layout, engine, &with, 64.0),
                    decode_step(&layout, engine, &without, 64.0),
                );
                // The prediction says when it charged the re-reads.
                assert_eq!(
                    basis.contains("grouped-query decode kernel"),
                    slower,
                    "{basis}"
                );
                if slower {
                    // Falcon-180B: 29 query heads per KV head, 64 wide; no XQA kernel.
                    assert!(
                        reread > 1.05 * once,
                        "{} {}: {reread} vs {once}",
                        model.name,
                        card.name
                    );
                } else {
                    // Llama-2-70B: 8 per KV head, 128 wide: XQA's shape.
                    assert_eq!(reread, once, "{} {}", model.name, card.name);
                }
            }
        }
    }

    #[test]
    fn c_star_sits_between_a_pass_and_a_fail() {
        let p = predict_on("A100-80G-SXM", 1, &request(2.0, 0.05));
        assert!(p.c_star >= 1);
        let fail = p.first_fail.expect("a fail below 4096");
        assert!(fail > p.c_star);
        assert!(f64::from(fail - p.c_star) <= (0.02 * f64::from(p.c_star)).max(1.0));
        let at = |c: u32| p.curve.iter().find(|l| l.concurrency == c).unwrap();
        assert!(at(p.c_star).pass);
        assert!(!at(fail).pass);
        // Throughput grows with load until the knee.
        assert!(at(p.c_star).output_tokens_per_s > at(1).output_tokens_per_s);
    }

    #[test]
    fn a_looser_slo_and_a_faster_card_hold_more_users() {
        let strict = predict_on("A100-80G-SXM", 1, &request(1.0, 0.03));
        let loose = predict_on("A100-80G-SXM", 1, &request(3.0, 0.06));
        assert!(
            loose.c_star > strict.c_star,
            "{} vs {}",
            loose.c_star,
            strict.c_star
        );
        let h100 = predict_on("H100-SXM", 1, &request(1.0, 0.03));
        assert!(h100.c_star > strict.c_star);
    }

    #[test]
    fn an_impossible_slo_gives_zero() {
        // One 8B token stream on an L4 cannot do 1 ms per token.
        let p = predict_on("L4", 1, &request(5.0, 0.001));
        assert_eq!(p.c_star, 0);
        assert!(p.limit.contains("TPOT"), "{}", p.limit);
    }

    #[test]
    fn the_rate_search_brackets_r_star_and_obeys_littles_law() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("L4").unwrap();
        let layout = Layout::on_card(model, card, 1);
        let calibration = Calibration::for_card(card, &card.interconnect);
        let req = request(2.0, 0.1);
        let open = predict_rate(&layout, &calibration, &req, &RateSearch::Auto).unwrap();
        let rate = open.rate_star.expect("a rate search");
        let fail = rate.first_fail.expect("a failing rate");
        assert!(rate.rate > 0.0 && fail > rate.rate);
        assert!(fail - rate.rate <= 0.02 * rate.rate + 1e-9, "{rate:?}");
        let at = |r: f64| {
            open.curve
                .iter()
                .find(|l| l.offered_rate == Some(r))
                .unwrap()
        };
        assert!(at(rate.rate).pass && !at(fail).pass);
        // Little's law: in flight = achieved rate × mean E2E, and the achieved rate is the
        // offered one (±10 % over 1000 Poisson arrivals) below saturation.
        let level = at(rate.rate);
        assert!(
            (level.requests_per_s - rate.rate).abs() / rate.rate < 0.1,
            "{level:?}"
        );
        assert!(
            (level.mean_in_flight - level.requests_per_s * level.e2e.mean).abs() < 1e-6,
            "{level:?}"
        );
        // Poisson bursts cost capacity: fewer in flight at R* than closed-loop users at C*.
        let closed = predict(&layout, &calibration, &req).unwrap();
        assert!(
            rate.mean_in_flight <= f64::from(closed.c_star) * 1.05,
            "{} in flight vs C* {}",
            rate.mean_in_flight,
            closed.c_star
        );
    }

    #[test]
    fn fixed_rates_are_judged_and_bad_ones_refused() {
        assert_eq!(
            "1,2.5/s".parse::<RateSearch>().unwrap(),
            RateSearch::Fixed(vec![1.0, 2.5])
        );
        assert_eq!("auto".parse::<RateSearch>().unwrap(), RateSearch::Auto);
        for bad in ["0", "-1", "fast", "1,,2"] {
            assert!(bad.parse::<RateSearch>().is_err(), "{bad}");
        }
    }

    /// The search of the planner, given where to start and what it must reach, ends on
    /// the bracket doubling from one user finds — or says the layout is below what it needs.
    #[test]
    fn hints_change_the_levels_run_not_c_star() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("A100-80G-SXM").unwrap();
        let layout = Layout::on_card(model, card, 1);
        let calibration = Calibration::for_card(card, &card.interconnect);
        let mut req = request(2.0, 0.05);
        req.resolution = 0.05;
        let whole = predict(&layout, &calibration, &req).unwrap();
        let fail = whole.first_fail.expect("a fail below 4096");
        let c_star = whole.c_star;
        assert!(c_star > 16, "{c_star}");
        let with = |hints: SearchHints| predict_with(&layout, &calibration, &req, hints).unwrap();
        for start in [2, 16, c_star, fail, 3 * fail] {
            let hinted = with(SearchHints {
                start: Some(start),
                ..SearchHints::default()
            });
            assert_eq!(
                (hinted.c_star, hinted.first_fail),
                (c_star, Some(fail)),
                "{start}"
            );
            assert_eq!(hinted.limit, whole.limit);
            assert!(hinted.curve.len() <= whole.curve.len() + 1, "{start}");
        }
        // Holding the users it needs: C* in full, whatever the probe below them says.
        let held = with(SearchHints {
            start: Some(c_star / 3),
            needed: Some(c_star),
            probe: Some(c_star / 2),
        });
        assert_eq!((held.c_star, held.below), (c_star, None));
        // Needing the first level that failed: below, after at most the probe and that level.
        for probe in [None, Some(fail / 2), Some(fail - 1)] {
            let short = with(SearchHints {
                start: Some(c_star),
                needed: Some(fail),
                probe,
            });
            assert_eq!(short.below, Some(fail), "{probe:?}");
            assert!(short.curve.len() <= 2, "{:?}", short.curve.len());
            assert!(short.limit.starts_with("at "), "{}", short.limit);
            assert!(short.last_pass < fail);
        }
        // Needing more than the search ever tries: below without a level.
        let never = with(SearchHints {
            needed: Some(req.max_concurrency + 1),
            ..SearchHints::default()
        });
        assert!(never.below.is_some() && never.curve.is_empty());
    }

    /// A level asked only for its verdict stops once it is sure to fail, and fails as the
    /// whole level does; a level that passes runs whole, with the same figures.
    #[test]
    fn a_level_stops_early_only_when_it_fails() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("L4").unwrap();
        let layout = Layout::on_card(model, card, 1);
        let calibration = Calibration::for_card(card, &card.interconnect);
        let req = request(2.0, 0.1);
        let mut runner = LevelRunner::new(&layout, &calibration, &req).unwrap();
        let c_star = predict(&layout, &calibration, &req).unwrap().c_star;
        let overloaded = 4 * c_star;
        let whole = runner.closed(overloaded).unwrap();
        let verdict = runner.verdict(overloaded).unwrap();
        assert!(!whole.pass && !verdict.pass);
        assert!(
            verdict.requests < whole.requests,
            "{} vs {}",
            verdict.requests,
            whole.requests
        );
        assert!(
            verdict.failed[0].contains("when the level stopped"),
            "{:?}",
            verdict.failed
        );
        let passing = runner.verdict(c_star).unwrap();
        let again = runner.closed(c_star).unwrap();
        assert!(passing.pass);
        assert_eq!(
            (passing.requests, passing.ttft),
            (again.requests, again.ttft)
        );
    }

    /// The estimate the planner orders layouts by lands near the simulated C*.
    #[test]
    fn the_estimate_is_near_c_star() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        for (card, tp) in [("A100-80G-SXM", 1), ("H100-SXM", 2), ("L4", 1)] {
            let card = catalog.card(card).unwrap();
            let layout = Layout::on_card(model, card, tp);
            let calibration = Calibration::for_card(card, &card.interconnect);
            let req = request(2.0, 0.1);
            let c_star = f64::from(predict(&layout, &calibration, &req).unwrap().c_star);
            let estimate = estimate_c_star(&layout, &calibration, &req).unwrap();
            let ratio = c_star / estimate;
            assert!(
                ratio > 0.5 && ratio < 2.0,
                "{}: C* {c_star}, estimated {estimate}",
                card.name
            );
        }
    }
}

//! A measured deployment as capplan predicts it: the layout, the engine profile, the workload
//! and the load, simulated exactly as `predict` would.

use crate::catalog::{Catalog, Dtype, EngineProfile, MemoryOptions, Parallelism};
use crate::sim::engine::EngineOptions;
use crate::sim::predict::{
    engine_for, evaluate_arrivals, step_basis, Calibration, ClosedStart, Layout, LevelResult,
    PredictRequest,
};
use crate::sim::virtual_run::Arrivals;
use crate::slo::{Percentile, Slo};
use crate::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};

/// One deployment a public table measured.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub model: String,
    pub card: String,
    pub tp: u32,
    /// The layout beyond `tp` (expert and attention-data parallelism, pipeline stages).
    pub parallel: Parallelism,
    /// Weight format; `None` is the model's own.
    pub dtype: Option<Dtype>,
    pub kv_dtype: Option<Dtype>,
    pub engine: String,
    /// Scheduler settings the measurement states, over the profile's defaults.
    pub max_running: Option<usize>,
    pub token_budget: Option<u64>,
    pub input_tokens: TokenLengths,
    pub output_tokens: TokenLengths,
    /// Share of each prompt the engine's prefix cache holds (a benchmark cycling through a
    /// few prompts).
    pub prefix_share: PrefixShare,
    /// Time kernels with the roofline even where operator tables exist (to measure the
    /// roofline's own error).
    pub roofline: bool,
}

/// How a measurement ran a level: how many requests it discarded, how many it counted, and
/// how its users started.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub warmup: usize,
    pub measured: usize,
    pub start: ClosedStart,
}

impl Sample {
    /// `users` closed-loop users in steady state: one warm-up round and two measured rounds
    /// of every user, at least 60 measured requests.
    pub fn closed(users: u32) -> Sample {
        let users = users.max(1) as usize;
        Sample {
            warmup: users,
            measured: (2 * users).max(60),
            start: ClosedStart::Staggered,
        }
    }

    /// A benchmark's concurrency mode (AIPerf, GenAI-Perf, vLLM's `bench serve`): `users`
    /// workers started together for two rounds of warm-up (AIPerf's
    /// `--warmup-request-count`, as AIConfigurator runs it), drained; then `rounds` rounds'
    /// worth of measured requests, every user starting together again ([`Phases::Drained`]);
    /// each next request leaves after up to `jitter_s` of client-side delay.
    ///
    /// [`Phases::Drained`]: crate::sim::virtual_run::Phases::Drained
    pub fn benchmark(users: u32, rounds: usize, jitter_s: f64) -> Sample {
        let users = users.max(1) as usize;
        Sample {
            warmup: 2 * users,
            measured: rounds.max(1) * users,
            start: ClosedStart::Together { jitter_s },
        }
    }
}

/// What a simulated level gave, and what it rested on.
#[derive(Debug, Clone)]
pub struct Simulated {
    pub level: LevelResult,
    pub basis: String,
}

impl Deployment {
    /// Simulates `arrivals` on this deployment; `Err` says why it cannot be predicted (a name
    /// not in the catalog, a layout that does not fit, a dtype the card cannot run).
    pub fn simulate(
        &self,
        catalog: &Catalog,
        arrivals: Arrivals,
        sample: Sample,
        overheads: Option<&EngineProfile>,
    ) -> Result<Simulated, String> {
        let model = catalog.model(&self.model).map_err(|e| e.to_string())?;
        let card = catalog.card(&self.card).map_err(|e| e.to_string())?;
        let profile = match overheads {
            Some(profile) => profile,
            None => catalog.engine(&self.engine).map_err(|e| e.to_string())?,
        };
        let longest = u64::from(self.input_tokens.max()) + u64::from(self.output_tokens.max());
        // The card's largest node shape: its scale-up domain and network, for a layout that
        // spans more than one node's cards.
        let node = catalog
            .nodes
            .iter()
            .filter(|n| n.card == card.name && n.interconnect == card.interconnect)
            .max_by_key(|n| n.cards_per_node);
        let layout = Layout {
            memory: MemoryOptions {
                dtype: self.dtype,
                kv_dtype: self.kv_dtype,
                memory_utilization: profile.memory_utilization,
                context_tokens: Some(longest.min(u64::from(u32::MAX)) as u32),
                ..MemoryOptions::default()
            },
            ..Layout::on_card(model, card, self.tp)
        }
        .with_parallel(self.parallel, node);
        let mut calibration =
            Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
        if self.roofline {
            calibration.operators = None;
            calibration.basis = format!(
                "{}: operator tables set aside",
                crate::sim::predict::ROOFLINE_BASIS
            );
        }
        let mut options = EngineOptions::for_card(profile, card);
        if let Some(max_running) = self.max_running {
            options.max_running = max_running;
        }
        if let Some(budget) = self.token_budget {
            options.token_budget = budget;
        }
        let mut request = PredictRequest::new(
            Workload {
                input_tokens: self.input_tokens.clone(),
                output_tokens: self.output_tokens.clone(),
                think_time: ThinkTime::NONE,
                prefix_share: self.prefix_share,
            },
            Slo {
                ttft_s: f64::INFINITY,
                tpot_s: None,
                percentile: Percentile::Mean,
                e2e_s: None,
            },
        );
        request.engine = options;
        let (engine, _) = engine_for(&layout, &calibration, &request.engine, false)
            .map_err(|rejected| rejected.reason)?;
        let basis = step_basis(&engine, &calibration);
        let level = evaluate_arrivals(
            &layout,
            &calibration,
            &request,
            arrivals,
            sample.warmup,
            sample.measured,
            sample.start,
        )
        .map_err(|rejected| rejected.reason)?;
        Ok(Simulated { level, basis })
    }
}

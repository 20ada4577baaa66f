//! A measured deployment as capplan predicts it: the layout, the engine profile, the workload
//! and the load, simulated exactly as `predict` would.

use crate::catalog::{Catalog, Dtype, EngineProfile, MemoryOptions, Parallelism, StepMix};
use crate::sim::disagg::KvHandover;
use crate::sim::engine::EngineOptions;
use crate::sim::measuring_client::{LevelSample, MeasuredAs};
use crate::sim::predict::{
    engine_for, evaluate_draws, step_basis, Calibration, ClosedStart, Layout, LevelResult,
    PredictRequest,
};
use crate::sim::virtual_run::Arrivals;
use crate::slo::{Percentile, Slo};
use crate::stats::Summary;
use crate::workload::{PrefixShare, Speculation, ThinkTime, TokenLengths, Workload};

/// One deployment a public table measured.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub model: String,
    pub card: String,
    /// The layout: tensor, expert and attention-data parallelism, pipeline stages.
    pub parallel: Parallelism,
    /// Weight format; `None` is the model's own.
    pub dtype: Option<Dtype>,
    pub kv_dtype: Option<Dtype>,
    pub engine: String,
    /// Scheduler settings the measurement states, over the profile's defaults.
    pub max_running: Option<usize>,
    pub token_budget: Option<u64>,
    /// A soft limit on an iteration's prompt tokens (SGLang's `max_prefill_tokens`), where
    /// the deployment set one.
    pub prompt_budget: Option<u64>,
    /// How prompts and decodes share an iteration, where the deployment set it over the
    /// profile's default (SGLang's `--enable-mixed-chunk`).
    pub step_mix: Option<StepMix>,
    /// Decode batch sizes the deployment captured as CUDA graphs, over the profile's.
    pub cuda_graph_sizes: Option<Vec<u32>>,
    pub input_tokens: TokenLengths,
    pub output_tokens: TokenLengths,
    /// Share of each prompt the engine's prefix cache holds (a benchmark cycling through a
    /// few prompts).
    pub prefix_share: PrefixShare,
    /// Time kernels with the roofline even where operator tables exist (to measure the
    /// roofline's own error).
    pub roofline: bool,
    /// A disaggregated deployment's pools (`parallel` is then a decode worker's layout);
    /// `None` for aggregated serving.
    pub pools: Option<Pools>,
    /// Speculative decoding the deployment is simulated with (`validate --speculative`: the
    /// public tables do not record it).
    pub speculation: Option<Speculation>,
}

/// Rounds of simulating a disaggregated deployment's two pools against each other, at most.
const POOL_ROUNDS: usize = 4;

/// The change in a user's time on the prefill side (relative) below which the pools are
/// taken as settled.
const POOL_TOLERANCE: f64 = 0.03;

/// The two pools of a disaggregated deployment: prefill workers compute prompts and hand
/// their KV cache over the network to decode workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pools {
    /// One prefill worker's layout.
    pub prefill: Parallelism,
    pub prefill_workers: u32,
    /// The most requests a prefill worker takes into one iteration, when the deployment set
    /// it (AIConfigurator's generated deployments give every prefill worker a batch of 1:
    /// `prefill max_batch_size`, one prompt per iteration).
    pub prefill_batch: Option<u32>,
    pub decode_workers: u32,
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
        sample: LevelSample,
        overheads: Option<&EngineProfile>,
    ) -> Result<Simulated, String> {
        match self.pools {
            None => self.simulate_worker(
                catalog,
                Worker::aggregated(self),
                arrivals,
                sample,
                overheads,
            ),
            Some(pools) => self.simulate_pools(catalog, pools, arrivals, sample, overheads),
        }
    }

    /// A disaggregated deployment under a closed loop of users: the decode pool's workers
    /// each run their share of the users with every prompt's KV in place (TPOT); the prefill
    /// pool's workers each run theirs with one-token outputs, each user away for the rest of
    /// its request — the transfer and the decode — before its next prompt. The first token the
    /// client sees comes from the decode worker once the KV has arrived (Dynamo routes the
    /// prompt to a prefill worker as a one-token request and streams from the decode worker;
    /// vLLM's decode side recomputes the prompt's last token, TensorRT-LLM's emits it at the
    /// request's first scheduling): TTFT is the prefill worker's, plus the transfer, plus the
    /// decode worker's own wait for its first token (its queue and an iteration; means added,
    /// so the percentiles are the prefill worker's shifted by the other two means). The router
    /// is taken to spread users evenly.
    fn simulate_pools(
        &self,
        catalog: &Catalog,
        pools: Pools,
        arrivals: Arrivals,
        sample: LevelSample,
        overheads: Option<&EngineProfile>,
    ) -> Result<Simulated, String> {
        let Arrivals::Closed { users } = arrivals else {
            return Err("a disaggregated deployment is scored under a closed loop".into());
        };
        let users = users.max(1);
        let rounds = (sample.measured / users as usize).max(1);
        let share = |workers: u32| {
            let per = users.div_ceil(workers.max(1));
            let sample = LevelSample {
                warmup: sample.warmup / users as usize * per as usize,
                measured: rounds.saturating_mul(per as usize),
                ..sample
            };
            (Arrivals::Closed { users: per }, sample)
        };
        let (decode_users, decode_sample) = share(pools.decode_workers);
        let (prefill_users, prefill_sample) = share(pools.prefill_workers);
        let handoff_ms = self.profile(catalog, overheads)?.handoff_ms;
        let transfer = self.kv_transfer_s(catalog, pools, handoff_ms)?;
        // A user's cycle passes through both pools: its prompt waits and runs on a prefill
        // worker, its KV moves, then it decodes. Each pool is simulated with its users away
        // for the other's part of the cycle, and the two are solved together: when prefill
        // is the bottleneck, fewer users are decoding at once than the client holds (and the
        // other way round). Starting from no time on the prefill side, a few rounds settle.
        let mut prefill_side = 0.0;
        let mut settled = None;
        for _ in 0..POOL_ROUNDS {
            let decode = self.simulate_worker(
                catalog,
                Worker::decode(self, prefill_side),
                decode_users,
                decode_sample,
                overheads,
            )?;
            let tpot = decode.level.tpot.map_or(0.0, |t| t.mean);
            let decode_first = decode.level.ttft.mean;
            let after_prefill = transfer + decode_first;
            let away = (self.output_tokens.mean() - 1.0).max(0.0) * tpot + after_prefill;
            let prefill = self.simulate_worker(
                catalog,
                Worker::prefill(self, pools, away),
                prefill_users,
                prefill_sample,
                overheads,
            )?;
            let side = prefill.level.ttft.mean + transfer;
            let moved = (side - prefill_side).abs();
            prefill_side = side;
            settled = Some((decode, prefill, after_prefill, away));
            if moved <= POOL_TOLERANCE * side.max(1e-3) {
                break;
            }
        }
        let Some((decode, prefill, after_prefill, away)) = settled else {
            return Err("no pool rounds".into());
        };
        let mut level = decode.level;
        let first = prefill.level.ttft;
        level.ttft = Summary {
            mean: first.mean + after_prefill,
            p50: first.p50 + after_prefill,
            p90: first.p90 + after_prefill,
            p95: first.p95 + after_prefill,
            p99: first.p99 + after_prefill,
            ..first
        };
        let e2e = level.ttft.mean + away - after_prefill;
        level.e2e = Summary {
            mean: e2e,
            ..level.e2e
        };
        level.output_tokens_per_s *= f64::from(pools.decode_workers);
        level.requests_per_s *= f64::from(pools.decode_workers);
        Ok(Simulated {
            level,
            basis: decode.basis,
        })
    }

    /// Handing one prompt's KV cache from a prefill worker to a decode worker over the node
    /// shape's network, with the engine's own `handoff_ms`, as `predict --pd` prices it.
    fn kv_transfer_s(
        &self,
        catalog: &Catalog,
        pools: Pools,
        handoff_ms: f64,
    ) -> Result<f64, String> {
        // The bytes each card takes depend on the layout, not on the memory share.
        let utilization = MemoryOptions::default().memory_utilization;
        let prefill = self.layout(catalog, pools.prefill, utilization)?;
        let decode = self.layout(catalog, self.parallel, utilization)?;
        let handover = KvHandover::between(&prefill, &decode, handoff_ms)
            .map_err(|rejected| rejected.reason)?;
        Ok(handover.seconds(self.input_tokens.mean()))
    }

    /// The layout of one worker of `parallel` cards (memory at `memory_utilization`).
    fn layout<'a>(
        &self,
        catalog: &'a Catalog,
        parallel: Parallelism,
        memory_utilization: f64,
    ) -> Result<Layout<'a>, String> {
        let model = catalog.model(&self.model).map_err(|e| e.to_string())?;
        let card = catalog.card(&self.card).map_err(|e| e.to_string())?;
        let longest = u64::from(self.input_tokens.max()) + u64::from(self.output_tokens.max());
        // The card's largest node shape, as `predict` takes: its scale-up domain and network
        // (a layout may span more than one node's cards) and whether its cards are all peers.
        let node = catalog.largest_node_of(card);
        Ok(Layout {
            memory: MemoryOptions {
                dtype: self.dtype,
                kv_dtype: self.kv_dtype,
                memory_utilization,
                context_tokens: Some(longest.min(u64::from(u32::MAX)) as u32),
                drafter: Speculation::draft_weights_of(self.speculation.as_ref()),
                ..MemoryOptions::default()
            },
            ..Layout::on_card(model, card, parallel.tp)
        }
        .with_parallel(parallel, node))
    }

    /// The engine profile this deployment is simulated with: `overheads` where given (a fit's
    /// candidate), else the catalog's for its engine.
    fn profile<'a>(
        &self,
        catalog: &'a Catalog,
        overheads: Option<&'a EngineProfile>,
    ) -> Result<&'a EngineProfile, String> {
        match overheads {
            Some(profile) => Ok(profile),
            None => catalog.engine(&self.engine).map_err(|e| e.to_string()),
        }
    }

    /// Simulates one worker of this deployment.
    fn simulate_worker(
        &self,
        catalog: &Catalog,
        worker: Worker,
        arrivals: Arrivals,
        sample: LevelSample,
        overheads: Option<&EngineProfile>,
    ) -> Result<Simulated, String> {
        let card = catalog.card(&self.card).map_err(|e| e.to_string())?;
        let profile = self.profile(catalog, overheads)?;
        let deployed;
        let profile = match &self.cuda_graph_sizes {
            Some(sizes) => {
                deployed = EngineProfile {
                    cuda_graph_sizes: sizes.clone(),
                    ..profile.clone()
                };
                &deployed
            }
            None => profile,
        };
        let layout = self.layout(catalog, worker.parallel, profile.memory_utilization)?;
        let mut calibration =
            Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
        if worker.kv_arrives {
            calibration = calibration.for_decode_worker();
        }
        if self.roofline {
            calibration.operators = None;
            calibration.basis = format!(
                "{}: operator tables set aside",
                crate::sim::predict::ROOFLINE_BASIS
            );
        }
        let mut options = EngineOptions::for_card(profile, card);
        if let Some(max_running) = worker.max_running.or(self.max_running) {
            options.max_running = max_running;
        }
        if let Some(budget) = self.token_budget {
            options.token_budget = budget;
        }
        if self.prompt_budget.is_some() {
            options.prompt_budget = self.prompt_budget;
        }
        if let Some(step_mix) = self.step_mix {
            options.step_mix = step_mix;
        }
        // A decode worker's prompts arrive with their KV: in place whatever the engine's
        // prefix caching. A measurement that states a share of each prompt held in the cache
        // ran with the cache on (vLLM V0 had it off unless asked).
        options.prefix_caching |= worker.kv_arrives || !self.prefix_share.is_none();
        // How far a benchmark's users fall out of step after its first wave is the server's.
        let sample = LevelSample {
            start: match sample.start {
                ClosedStart::Together { jitter_s, .. } => ClosedStart::Together {
                    jitter_s,
                    out_of_step: profile.out_of_step,
                },
                other => other,
            },
            ..sample
        };
        let mut request = PredictRequest::new(
            worker.workload,
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
        // Users that fall out of step do so by the client's random amounts, so one run's
        // means are a single draw: the benchmark's figure is predicted by several draws'
        // average (see `measuring_client::CLIENT_DRAWS`).
        request.seed = 1;
        let levels = evaluate_draws(
            &layout,
            &calibration,
            &request,
            arrivals,
            sample,
            MeasuredAs::draws(sample.start),
        )
        .map_err(|rejected| rejected.reason)?;
        Ok(Simulated {
            level: mean_of_draws(levels),
            basis,
        })
    }
}

/// The draws of one level as one: their means averaged (the figures the sources are scored
/// on), the rest — percentiles, counts — the first draw's.
fn mean_of_draws(levels: Vec<LevelResult>) -> LevelResult {
    let n = levels.len().max(1) as f64;
    let average = |field: fn(&LevelResult) -> f64| levels.iter().map(field).sum::<f64>() / n;
    let ttft = average(|l| l.ttft.mean);
    let e2e = average(|l| l.e2e.mean);
    let tpot = levels
        .iter()
        .map(|l| l.tpot.map(|t| t.mean))
        .sum::<Option<f64>>()
        .map(|sum| sum / n);
    let output_tokens_per_s = average(|l| l.output_tokens_per_s);
    let requests_per_s = average(|l| l.requests_per_s);
    let mean_in_flight = average(|l| l.mean_in_flight);
    let mean_batch = average(|l| l.mean_batch);
    let mut level = levels.into_iter().next().expect("at least one draw");
    level.ttft.mean = ttft;
    level.e2e.mean = e2e;
    if let (Some(summary), Some(mean)) = (level.tpot.as_mut(), tpot) {
        summary.mean = mean;
    }
    level.output_tokens_per_s = output_tokens_per_s;
    level.requests_per_s = requests_per_s;
    level.mean_in_flight = mean_in_flight;
    level.mean_batch = mean_batch;
    level
}

/// What one simulated worker runs: its layout and its requests.
struct Worker {
    parallel: Parallelism,
    workload: Workload,
    /// Whether every prompt's KV arrives with the request (a decode worker).
    kv_arrives: bool,
    /// The worker's own limit on running requests, where its pool sets one.
    max_running: Option<usize>,
}

impl Worker {
    fn aggregated(deployment: &Deployment) -> Worker {
        Worker {
            parallel: deployment.parallel,
            workload: deployment.workload(),
            kv_arrives: false,
            max_running: None,
        }
    }

    /// A decode worker: every prompt's KV arrives with its request, from users away
    /// `prefill_side_s` (their next prompt's wait, prefill and transfer) between requests.
    fn decode(deployment: &Deployment, prefill_side_s: f64) -> Worker {
        Worker {
            parallel: deployment.parallel,
            workload: Workload {
                prefix_share: PrefixShare::new(1.0).unwrap_or(PrefixShare::NONE),
                think_time: ThinkTime::fixed(prefill_side_s),
                ..deployment.workload()
            },
            kv_arrives: true,
            max_running: None,
        }
    }

    /// A prefill worker: one-token requests from users away `away_s` between them, at most
    /// the pool's batch of them in an iteration.
    fn prefill(deployment: &Deployment, pools: Pools, away_s: f64) -> Worker {
        Worker {
            parallel: pools.prefill,
            workload: Workload {
                output_tokens: TokenLengths::Fixed { tokens: 1 },
                think_time: ThinkTime::fixed(away_s),
                ..deployment.workload()
            },
            kv_arrives: false,
            // The batch is each attention replica's (as AIConfigurator counts batches).
            max_running: pools
                .prefill_batch
                .map(|batch| batch as usize * pools.prefill.dp.max(1) as usize),
        }
    }
}

impl Deployment {
    /// The requests as measured: lengths and shared prefix, no think time (benchmarks send
    /// back to back).
    fn workload(&self) -> Workload {
        Workload {
            input_tokens: self.input_tokens.clone(),
            output_tokens: self.output_tokens.clone(),
            think_time: ThinkTime::NONE,
            prefix_share: self.prefix_share,
            speculation: self.speculation.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level whose every figure is `x` (TTFT and E2E means `x`, p90s `10 x`).
    fn level_of(x: f64) -> LevelResult {
        let summary = Summary {
            n: 10,
            mean: x,
            p50: x,
            p90: 10.0 * x,
            p95: 10.0 * x,
            p99: 10.0 * x,
        };
        LevelResult {
            concurrency: 4,
            offered_rate: None,
            mean_in_flight: x,
            requests: 10,
            ttft: summary,
            tpot: Some(summary),
            e2e: summary,
            output_tokens_per_s: x,
            requests_per_s: x,
            mean_batch: x,
            preemptions: 0,
            pass: true,
            failed: Vec::new(),
            slo_ratio: 0.0,
        }
    }

    /// The draws' means are averaged — the figures the sources are scored on — and the rest
    /// is the first draw's.
    #[test]
    fn draws_average_their_means() {
        let level = mean_of_draws(vec![level_of(1.0), level_of(2.0), level_of(6.0)]);
        assert_eq!(level.ttft.mean, 3.0);
        assert_eq!(level.e2e.mean, 3.0);
        assert_eq!(level.tpot.map(|t| t.mean), Some(3.0));
        assert_eq!(level.output_tokens_per_s, 3.0);
        assert_eq!(level.requests_per_s, 3.0);
        assert_eq!((level.mean_in_flight, level.mean_batch), (3.0, 3.0));
        assert_eq!(level.ttft.p90, 10.0);
        let one = mean_of_draws(vec![level_of(2.0)]);
        assert_eq!((one.ttft.mean, one.ttft.p90), (2.0, 20.0));
    }

    /// Llama-3.1-8B on H100s, 2 048 tokens in, 256 out, 16 users, disaggregated.
    fn deployment(prefill_workers: u32, decode_workers: u32) -> Deployment {
        Deployment {
            model: "llama-3.1-8b".into(),
            card: "H100-SXM".into(),
            parallel: Parallelism::tensor(1),
            dtype: None,
            kv_dtype: None,
            engine: "vllm".into(),
            max_running: None,
            token_budget: None,
            input_tokens: TokenLengths::Fixed { tokens: 2048 },
            output_tokens: TokenLengths::Fixed { tokens: 256 },
            prefix_share: PrefixShare::NONE,
            roofline: false,
            pools: Some(Pools {
                prefill: Parallelism::tensor(1),
                prefill_workers,
                prefill_batch: None,
                decode_workers,
            }),
            speculation: None,
            prompt_budget: None,
            step_mix: None,
            cuda_graph_sizes: None,
        }
    }

    /// More decode workers share the users into smaller batches (lower TPOT); more prefill
    /// workers queue fewer prompts each (lower TTFT); a prompt's first token never comes
    /// before its KV has moved.
    #[test]
    fn each_pool_sets_its_own_latency() {
        let catalog = Catalog::shipped().unwrap();
        let run = |p: u32, d: u32| {
            deployment(p, d)
                .simulate(
                    &catalog,
                    Arrivals::Closed { users: 16 },
                    LevelSample::benchmark(16, 4, 0.0),
                    None,
                )
                .unwrap()
                .level
        };
        let (one, wide_decode, wide_prefill) = (run(1, 1), run(1, 4), run(4, 1));
        let tpot = |l: &LevelResult| l.tpot.map_or(f64::NAN, |t| t.mean);
        assert!(
            tpot(&wide_decode) < tpot(&one),
            "{} vs {}",
            tpot(&wide_decode),
            tpot(&one)
        );
        assert!(wide_prefill.ttft.mean < one.ttft.mean);
        let transfer = deployment(1, 1)
            .kv_transfer_s(&catalog, deployment(1, 1).pools.unwrap(), 0.0)
            .unwrap();
        assert!(transfer > 0.0 && one.ttft.mean > transfer);
    }

    /// A request passes the deployment's front once: at one user (no queue) the time a
    /// profile spends before the engine adds to a disaggregated first token once, on the
    /// prefill side, not again when the decode worker takes the request over.
    #[test]
    fn the_front_is_passed_once_on_the_way_to_the_prefill_worker() {
        let catalog = Catalog::shipped().unwrap();
        let base = catalog.engine("vllm").unwrap();
        let run = |request_overhead_ms: f64| {
            let profile = EngineProfile {
                request_overhead_ms,
                ..base.clone()
            };
            deployment(1, 1)
                .simulate(
                    &catalog,
                    Arrivals::Closed { users: 1 },
                    LevelSample::benchmark(1, 4, 0.0),
                    Some(&profile),
                )
                .unwrap()
                .level
                .ttft
                .mean
        };
        let added = run(200.0) - run(0.0);
        assert!(
            (added - 0.2).abs() < 1e-3,
            "{added} s added by a 200 ms front"
        );
    }

    /// A prefill worker allowed one request per iteration runs a wave of prompts one after
    /// another: the mean first token waits for half the wave, where a worker that batches
    /// them all ends every prompt with the last.
    #[test]
    fn a_prefill_batch_of_one_runs_prompts_one_after_another() {
        let catalog = Catalog::shipped().unwrap();
        let run = |prefill_batch: Option<u32>| {
            let mut d = deployment(1, 4);
            d.token_budget = Some(16_384);
            if let Some(pools) = d.pools.as_mut() {
                pools.prefill_batch = prefill_batch;
            }
            d.simulate(
                &catalog,
                Arrivals::Closed { users: 8 },
                LevelSample::benchmark(8, 4, 0.0),
                None,
            )
            .unwrap()
            .level
        };
        let (one, any) = (run(Some(1)), run(None));
        assert!(
            one.ttft.mean < any.ttft.mean,
            "{} vs {}",
            one.ttft.mean,
            any.ttft.mean
        );
    }

    /// A deployment that captured every decode batch size as a CUDA graph pads no decode
    /// step: 20 users decode in 20-wide graphs, not in the profile's 24-wide ones.
    #[test]
    fn a_deployments_own_graph_sizes_replace_the_profiles() {
        let catalog = Catalog::shipped().unwrap();
        let profile = catalog.engine("vllm").unwrap();
        assert!(!profile.cuda_graph_sizes.contains(&20));
        let run = |sizes: Option<Vec<u32>>| {
            let mut d = deployment(1, 1);
            d.pools = None;
            d.output_tokens = TokenLengths::Fixed { tokens: 1024 };
            d.cuda_graph_sizes = sizes;
            d.simulate(
                &catalog,
                Arrivals::Closed { users: 20 },
                LevelSample::benchmark(20, 4, 0.0),
                None,
            )
            .unwrap()
            .level
        };
        let tpot = |l: &LevelResult| l.tpot.map_or(f64::NAN, |t| t.mean);
        let (padded, exact) = (run(None), run(Some((1..=20).collect())));
        assert!(
            tpot(&exact) < tpot(&padded),
            "{} vs {}",
            tpot(&exact),
            tpot(&padded)
        );
    }
}

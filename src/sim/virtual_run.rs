//! Driving the engine with simulated users in virtual time.
//!
//! Closed loop: each of C users sends a request, waits for the whole response, thinks, and
//! sends the next. Open loop: requests arrive as a Poisson process whatever the engine does.
//! Requests that *arrive* during the measurement window are measured, and the load keeps going
//! until every one of them has finished, so slow requests are not cut off (survivor bias).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;

use super::engine::{Engine, EngineRequest, SpeculativeStep, StepOutcome};
use crate::slo::{format_seconds, Percentile, Slo};
use crate::workload::Workload;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// This many users, each with one request in flight or thinking.
    Closed { users: u32 },
    /// Poisson arrivals at this many requests per second.
    Open { rate: f64 },
    /// Arrivals evenly spaced at this many requests per second (a load generator's
    /// "constant" schedule).
    Paced { rate: f64 },
}

impl Arrivals {
    /// One of `engines` equal engines' share of these arrivals (users rounded up).
    pub fn per_engine(self, engines: u32) -> Arrivals {
        let n = engines.max(1);
        match self {
            Arrivals::Closed { users } => Arrivals::Closed {
                users: users.div_ceil(n),
            },
            Arrivals::Open { rate } => Arrivals::Open {
                rate: rate / f64::from(n),
            },
            Arrivals::Paced { rate } => Arrivals::Paced {
                rate: rate / f64::from(n),
            },
        }
    }

    /// Arrivals at a rate, independent of how fast the server answers.
    pub fn is_open_loop(&self) -> bool {
        !matches!(self, Arrivals::Closed { .. })
    }
}

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub arrivals: Arrivals,
    pub workload: Workload,
    /// Requests completed before the window opens (warm-up, discarded).
    pub warmup_requests: usize,
    /// Requests measured: the ones arriving after the window opens.
    pub measured_requests: usize,
    pub seed: u64,
    /// Seconds between a response's end and the same user's next request, on top of think
    /// time: the client's turnaround. However small, it means the next request misses the
    /// engine step that starts the moment the previous one finished, as with a real server.
    pub client_turnaround_s: f64,
    /// Closed loop: the users' first requests are spread evenly over this many seconds (user
    /// i sends at i/users of it) rather than all at once. Independent users are not in step:
    /// started together with equal request lengths, a simulated engine would keep them in
    /// lockstep forever, every request queueing behind all the others' prompts — a wave no
    /// real service sees in steady state. Spread over one request cycle they arrive as
    /// independent users do.
    pub stagger_s: f64,
    /// Closed loop: a further random delay, uniform in [0, this], before each next request —
    /// a real client's send-time jitter. A few milliseconds do not part users started
    /// together: they finish an iteration apart, leave a few milliseconds later and still
    /// land on each other's prompts (`out_of_step_s` is what parts them).
    pub client_jitter_s: f64,
    /// Time between a request's arrival and its reaching the engine's queue (the server's
    /// HTTP front, tokenisation, request set-up): part of its TTFT, none of the GPU's.
    pub request_overhead_s: f64,
    /// Closed loop: how the measured requests follow the warm-up.
    pub phases: Phases,
    /// [`Phases::Drained`]: after its first measured request, each user's next one leaves
    /// after a further random delay, uniform in [0, this] (seconds): users that the benchmark
    /// started together falling out of step, once, as some servers' users do within a round
    /// (see `EngineProfile::out_of_step`). Zero keeps them as the engine's iterations take
    /// them: a deterministic engine never parts users that finish an iteration apart.
    pub out_of_step_s: f64,
}

/// How a closed loop's measured requests follow its warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phases {
    /// The load never pauses: the window opens once `warmup_requests` have finished, the
    /// requests sent from then on are measured, and the load goes on until they are done —
    /// a service in steady state.
    #[default]
    Continuous,
    /// A benchmark's two phases (AIPerf in every release; GenAI-Perf from 0.0.9 with
    /// `--warmup-request-count`): the warm-up requests are sent at the concurrency and
    /// drained; then every user starts again at once, the measured requests are sent, and
    /// each is counted — the first wave, started together, and the last, with fewer in
    /// flight, included.
    Drained,
    /// Perf Analyzer's time windows (GenAI-Perf before its warm-up option, which runs on
    /// Perf Analyzer): every user starts at once with no warm-up, and the requests that
    /// finish within `windows` consecutive windows of `window_ms` are measured, whenever they
    /// were sent — so with requests longer than a window, the first wave, started together,
    /// is most of what is measured. While a window would hold no finished request, the
    /// interval is lengthened by `window_ms` (Perf Analyzer stops with "Please use a larger
    /// time window" and the run is repeated with a longer one; the client does the same
    /// whatever the interval, so one simulated run answers for every length).
    Windows { window_ms: u32, windows: u32 },
}

/// Where a [`Phases::Windows`] measurement stands: the interval tried so far.
#[derive(Debug, Clone, Copy)]
struct WindowClock {
    step_s: f64,
    length_s: f64,
    windows: u32,
}

impl WindowClock {
    fn new(window_ms: u32, windows: u32) -> WindowClock {
        let step_s = f64::from(window_ms.max(1)) * 1e-3;
        WindowClock {
            step_s,
            length_s: step_s,
            windows: windows.max(1),
        }
    }

    /// When the measurement ends: the last window's close.
    fn end_s(&self) -> f64 {
        self.length_s * f64::from(self.windows)
    }

    /// Whether the measurement is over at `now`, given every finish time so far: the
    /// windows have all closed and each holds a finish. A window without one lengthens the
    /// interval.
    fn settled(&mut self, now: f64, finishes: &[f64]) -> bool {
        while now >= self.end_s() {
            let length = self.length_s;
            let filled = (0..self.windows).all(|i| {
                let (from, to) = (f64::from(i) * length, f64::from(i + 1) * length);
                finishes.iter().any(|&f| f >= from && f < to)
            });
            if filled {
                return true;
            }
            self.length_s += self.step_s;
        }
        false
    }
}

/// A client on the same network reads a response and sends the next request within about a
/// millisecond.
pub const DEFAULT_CLIENT_TURNAROUND_S: f64 = 1e-3;

/// One measured request, times in seconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RequestTiming {
    pub arrival: f64,
    pub first_token: f64,
    pub finish: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
}

impl RequestTiming {
    pub fn ttft(&self) -> f64 {
        self.first_token - self.arrival
    }

    pub fn e2e(&self) -> f64 {
        self.finish - self.arrival
    }

    /// (E2E − TTFT) / (output − 1); `None` for one-token outputs.
    pub fn tpot(&self) -> Option<f64> {
        (self.output_tokens > 1)
            .then(|| (self.finish - self.first_token) / f64::from(self.output_tokens - 1))
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub requests: Vec<RequestTiming>,
    /// From the window opening to the last measured request finishing.
    pub window_s: f64,
    /// Tokens generated (by any request) inside the window.
    pub output_tokens_in_window: u64,
    pub mean_batch: f64,
    pub preemptions: u64,
    /// Why the run stopped before its measured requests all finished (see
    /// [`run_virtual_until`]): the SLO was sure to fail, and `requests` holds those finished.
    pub stopped: Option<String>,
}

impl RunResult {
    pub fn output_tokens_per_s(&self) -> f64 {
        self.output_tokens_in_window as f64 / self.window_s.max(1e-12)
    }

    pub fn requests_per_s(&self) -> f64 {
        self.requests.len() as f64 / self.window_s.max(1e-12)
    }

    /// Several runs of one level as one: their requests, windows and tokens together (so the
    /// pooled means are the runs' average where they counted alike), the iterations' mean
    /// batch averaged, and the first reason one stopped early.
    pub fn pooled(runs: Vec<RunResult>) -> RunResult {
        let n = runs.len().max(1) as f64;
        let mut pooled = RunResult {
            requests: Vec::new(),
            window_s: 0.0,
            output_tokens_in_window: 0,
            mean_batch: 0.0,
            preemptions: 0,
            stopped: None,
        };
        for run in runs {
            pooled.requests.extend(run.requests);
            pooled.window_s += run.window_s;
            pooled.output_tokens_in_window += run.output_tokens_in_window;
            pooled.mean_batch += run.mean_batch / n;
            pooled.preemptions += run.preemptions;
            pooled.stopped = pooled.stopped.or(run.stopped);
        }
        pooled
    }
}

struct InFlight {
    user: u32,
    arrival: f64,
    first_token: Option<f64>,
    input_tokens: u32,
    output_tokens: u32,
    measured: bool,
}

/// Runs `spec` against `engine` in virtual time.
pub fn run_virtual(engine: &mut Engine, spec: &RunSpec) -> RunResult {
    run_virtual_until(engine, spec, None)
}

/// Runs `spec` against `engine` in virtual time — stopping early, with `slo`, once the level
/// is sure to fail it whatever the measured requests still running or to come do (see
/// [`FailureWatch`]): a search that only asks whether a level passes need not simulate the
/// rest.
pub fn run_virtual_until(engine: &mut Engine, spec: &RunSpec, slo: Option<&Slo>) -> RunResult {
    let speculative = (spec.workload.speculation.as_ref())
        .map(|speculation| SpeculativeStep::new(speculation, engine.perf()));
    engine.set_speculation(speculative);
    let watch = slo.map(|slo| FailureWatch::new(*slo, spec.measured_requests));
    let mut steps_since_check = 0usize;
    let mut stopped = None;
    // Ids of the measured requests, in the order sent.
    let mut measured_ids: Vec<u64> = Vec::new();
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut now = 0.0_f64;
    let mut next_id: u64 = 0;
    // Future sends: (time in ns, user).
    let mut sends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let to_ns = |t: f64| (t * 1e9).round() as u64;
    let open_gap = match spec.arrivals {
        Arrivals::Open { rate } => Exp::new(rate).ok(),
        Arrivals::Closed { .. } | Arrivals::Paced { .. } => None,
    };
    let paced_gap = match spec.arrivals {
        Arrivals::Paced { rate } if rate > 0.0 => Some(1.0 / rate),
        _ => None,
    };
    match spec.arrivals {
        Arrivals::Closed { users } => {
            for user in 0..users {
                let offset = spec.stagger_s.max(0.0) * f64::from(user) / f64::from(users.max(1));
                sends.push(Reverse((to_ns(offset), user)));
            }
        }
        Arrivals::Open { .. } | Arrivals::Paced { .. } => sends.push(Reverse((0, 0))),
    }

    // By request id: ids count up from 0, one per send.
    let mut in_flight: Vec<Option<InFlight>> = Vec::new();
    let mut completed = 0usize;
    let mut window_start: Option<f64> = None;
    let mut measured_sent = 0usize;
    let mut measured_done: Vec<RequestTiming> = Vec::new();
    let mut window_tokens = 0u64;
    let mut batch_sum = 0.0;
    let mut steps_in_window = 0u64;
    let preemptions_before = engine.counters().preemptions;

    let overhead_ns = to_ns(spec.request_overhead_s.max(0.0));
    // A shared prefix saves prefill only where the engine keeps earlier prompts' blocks.
    let prefix_share = if engine.config().prefix_caching {
        spec.workload.prefix_share
    } else {
        crate::workload::PrefixShare::NONE
    };
    let closed = matches!(spec.arrivals, Arrivals::Closed { .. });
    let drained = spec.phases == Phases::Drained && closed;
    let mut windows = match spec.phases {
        Phases::Windows { window_ms, windows } if closed => {
            Some(WindowClock::new(window_ms, windows))
        }
        _ => None,
    };
    // Requests sent so far in the current phase, and accepted ones not yet finished, for the
    // drained phases.
    let mut issued = sends.len();
    let mut running = 0usize;
    if (drained && spec.warmup_requests == 0) || windows.is_some() {
        window_start = Some(0.0);
    }
    let mut windows_over = false;
    // Users whose first measured request has finished (they have fallen out of step, where
    // `out_of_step_s` says they do).
    let mut out_of_step = vec![
        false;
        match spec.arrivals {
            Arrivals::Closed { users } => users as usize,
            Arrivals::Open { .. } | Arrivals::Paced { .. } => 0,
        }
    ];
    let mut finish_times: Vec<f64> = Vec::new();
    let mut outcome = StepOutcome::default();
    loop {
        // Submit every send whose request has reached the engine by now.
        while let Some(Reverse((due, user))) = sends.peek().copied() {
            if due + overhead_ns > to_ns(now) {
                break;
            }
            sends.pop();
            // Under time windows every request may be measured: when it finishes decides.
            let measured = window_start.is_some()
                && (windows.is_some() || measured_sent < spec.measured_requests);
            if measured {
                measured_sent += 1;
            }
            let input_tokens = spec.workload.input_tokens.sample(&mut rng);
            let output_tokens = spec.workload.output_tokens.sample(&mut rng);
            let id = next_id;
            next_id += 1;
            let request = EngineRequest {
                id,
                input_tokens,
                output_tokens,
                cached_tokens: prefix_share.of(input_tokens),
            };
            let accepted = engine.submit(request).is_ok();
            if measured && watch.is_some() {
                measured_ids.push(id);
            }
            running += usize::from(accepted);
            in_flight.push(accepted.then_some(InFlight {
                user,
                arrival: due as f64 * 1e-9,
                first_token: None,
                input_tokens,
                output_tokens,
                measured,
            }));
            if let Some(gap) = &open_gap {
                let next = due as f64 * 1e-9 + gap.sample(&mut rng);
                sends.push(Reverse((to_ns(next), 0)));
            }
            if let Some(gap) = paced_gap {
                sends.push(Reverse((to_ns(due as f64 * 1e-9 + gap), 0)));
            }
        }

        if windows_over
            || (windows.is_none()
                && measured_sent >= spec.measured_requests
                && measured_done.len() >= measured_sent
                && window_start.is_some())
        {
            break;
        }

        if !engine.step_into(&mut outcome) {
            // Idle: jump to the next send.
            match sends.peek() {
                Some(Reverse((due, _))) => {
                    now = now.max((*due + overhead_ns) as f64 * 1e-9);
                    continue;
                }
                None => break,
            }
        }
        now += outcome.duration;
        if window_start.is_some() {
            window_tokens += outcome.tokens_out;
            batch_sum += outcome.batch as f64;
            steps_in_window += 1;
        }
        for &id in &outcome.first_tokens {
            if let Some(request) = in_flight.get_mut(id as usize).and_then(Option::as_mut) {
                request.first_token = Some(now);
            }
        }
        for &id in &outcome.finished {
            let Some(request) = in_flight.get_mut(id as usize).and_then(Option::take) else {
                continue;
            };
            running = running.saturating_sub(1);
            completed += 1;
            if !drained && window_start.is_none() && completed >= spec.warmup_requests {
                window_start = Some(now);
            }
            if let Some(clock) = windows.as_mut() {
                if clock.settled(now, &finish_times) {
                    windows_over = true;
                }
                finish_times.push(now);
            }
            if request.measured && !windows_over {
                measured_done.push(RequestTiming {
                    arrival: request.arrival,
                    first_token: request.first_token.unwrap_or(now),
                    finish: now,
                    input_tokens: request.input_tokens,
                    output_tokens: request.output_tokens,
                });
            }
            if let Arrivals::Closed { users } = spec.arrivals {
                let turnaround = |rng: &mut StdRng| {
                    let jitter = if spec.client_jitter_s > 0.0 {
                        rand::RngExt::random_range(rng, 0.0..spec.client_jitter_s)
                    } else {
                        0.0
                    };
                    spec.client_turnaround_s + jitter
                };
                let think = spec.workload.think_time.sample(&mut rng);
                if !drained {
                    let next = now + think + turnaround(&mut rng);
                    sends.push(Reverse((to_ns(next), request.user)));
                } else if window_start.is_none() {
                    // Warm-up: send until its count is out, then let it drain and start
                    // every user of the measured phase at once.
                    if issued < spec.warmup_requests {
                        issued += 1;
                        let next = now + think + turnaround(&mut rng);
                        sends.push(Reverse((to_ns(next), request.user)));
                    } else if running == 0 && sends.is_empty() {
                        window_start = Some(now);
                        let first_wave = (users as usize).min(spec.measured_requests);
                        for user in 0..first_wave as u32 {
                            let next = now + turnaround(&mut rng);
                            sends.push(Reverse((to_ns(next), user)));
                        }
                        issued = first_wave;
                    }
                } else if issued < spec.measured_requests {
                    issued += 1;
                    let mut next = now + think + turnaround(&mut rng);
                    if let Some(first) = out_of_step.get_mut(request.user as usize) {
                        if !*first && spec.out_of_step_s > 0.0 {
                            next += rand::RngExt::random_range(&mut rng, 0.0..spec.out_of_step_s);
                        }
                        *first = true;
                    }
                    sends.push(Reverse((to_ns(next), request.user)));
                }
            }
        }

        if let (Some(watch), Some(_)) = (&watch, window_start) {
            steps_since_check += 1;
            if steps_since_check >= FailureWatch::EVERY_STEPS {
                steps_since_check = 0;
                let running = measured_ids
                    .iter()
                    .filter_map(|&id| in_flight.get(id as usize).and_then(Option::as_ref));
                stopped = watch.certain_failure(now, running, &measured_done);
                if stopped.is_some() {
                    break;
                }
            }
        }
    }

    let mut start = window_start.unwrap_or(0.0);
    if let Some(clock) = windows {
        // Only what finished inside the windows counts (a finish at the step that settled
        // them may be past their end).
        measured_done.retain(|r| r.finish < clock.end_s());
        // Time windows count whole requests: their tokens over the span from the first one
        // sent to the last one finished (GenAI-Perf's output token throughput).
        window_tokens = measured_done
            .iter()
            .map(|r| u64::from(r.output_tokens))
            .sum();
        start = measured_done
            .iter()
            .map(|r| r.arrival)
            .fold(f64::INFINITY, f64::min)
            .min(start.max(0.0));
    }
    let end = measured_done.iter().map(|r| r.finish).fold(start, f64::max);
    RunResult {
        requests: measured_done,
        window_s: (end - start).max(1e-9),
        output_tokens_in_window: window_tokens,
        mean_batch: batch_sum / steps_in_window.max(1) as f64,
        preemptions: engine.counters().preemptions - preemptions_before,
        stopped,
    }
}

/// Tells when a level is sure to fail its SLO before its measured requests have all
/// finished: TTFT and TPOT are known once a request has its first token or its last, and
/// bounded below while it waits (TTFT is at least the time waited so far) or decodes (TPOT
/// at least the time since its first token over the tokens it must produce). A percentile
/// of `measured` values is above a limit once enough values are (the interpolated quantile
/// is at least the value at its lower rank); the mean, once their lower bounds sum above
/// `measured` times the limit.
pub struct FailureWatch {
    slo: Slo,
    measured: usize,
}

impl FailureWatch {
    /// Iterations between checks: a check reads every measured request.
    const EVERY_STEPS: usize = 64;

    pub fn new(slo: Slo, measured: usize) -> FailureWatch {
        FailureWatch {
            slo,
            measured: measured.max(1),
        }
    }

    /// Why the level fails for sure at `now`, given the measured requests `running` and
    /// `done`; `None` while it may still pass.
    fn certain_failure<'a>(
        &self,
        now: f64,
        running: impl Iterator<Item = &'a InFlight> + Clone,
        done: &[RequestTiming],
    ) -> Option<String> {
        let ttft = running
            .clone()
            .map(|r| r.first_token.unwrap_or(now) - r.arrival)
            .chain(done.iter().map(RequestTiming::ttft));
        if let Some(over) = self.over(ttft, self.slo.ttft_s) {
            return Some(self.reason("TTFT", self.slo.ttft_s, over));
        }
        let limit = self.slo.tpot_s?;
        let tpot = running
            .filter(|r| r.output_tokens > 1)
            .map(|r| {
                r.first_token
                    .map_or(0.0, |first| (now - first) / f64::from(r.output_tokens - 1))
            })
            .chain(done.iter().filter_map(RequestTiming::tpot));
        self.over(tpot, limit)
            .map(|over| self.reason("TPOT", limit, over))
    }

    /// How many `lower_bounds` are above `limit` when that settles the statistic above it.
    fn over(&self, lower_bounds: impl Iterator<Item = f64>, limit: f64) -> Option<usize> {
        let n = self.measured;
        match self.slo.percentile {
            Percentile::Mean => {
                let (mut sum, mut over) = (0.0, 0);
                for value in lower_bounds {
                    sum += value;
                    over += usize::from(value > limit);
                }
                (sum > limit * n as f64).then_some(over)
            }
            Percentile::P(q) => {
                // Above the limit for sure once the values from the quantile's lower rank up
                // are (with fewer values than `measured`, fewer are needed: this errs safe).
                let lower_rank = ((q / 100.0).clamp(0.0, 1.0) * (n - 1) as f64).floor() as usize;
                let over = lower_bounds.filter(|&value| value > limit).count();
                (over >= n - lower_rank).then_some(over)
            }
        }
    }

    fn reason(&self, what: &str, limit: f64, over: usize) -> String {
        format!(
            "{what} {} > {}, {over} of {} measured requests over it when the level stopped",
            self.slo.percentile,
            format_seconds(limit),
            self.measured
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Dtype, MemoryOptions};
    use crate::sim::engine::EngineConfig;
    use crate::sim::perf::{Efficiency, PerfModel};
    use crate::workload::{PrefixShare, ThinkTime, TokenLengths};

    fn engine() -> Engine {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("A100-80G-SXM").unwrap();
        let fit = crate::catalog::memory_fit(model, card, 1, &MemoryOptions::default()).unwrap();
        let perf = PerfModel::new(
            model,
            card,
            "nvlink",
            1,
            Dtype::Bf16,
            Dtype::Fp16,
            Efficiency::for_card(card, "nvlink"),
        );
        Engine::new(EngineConfig::new(fit.kv_tokens), perf, false)
    }

    fn spec(arrivals: Arrivals, think: ThinkTime) -> RunSpec {
        RunSpec {
            arrivals,
            workload: Workload {
                input_tokens: TokenLengths::Fixed { tokens: 200 },
                output_tokens: TokenLengths::Fixed { tokens: 100 },
                think_time: think,
                prefix_share: PrefixShare::NONE,
                speculation: None,
            },
            warmup_requests: 20,
            measured_requests: 200,
            seed: 1,
            client_turnaround_s: DEFAULT_CLIENT_TURNAROUND_S,
            stagger_s: 0.0,
            client_jitter_s: 0.0,
            request_overhead_s: 0.0,
            phases: Phases::Continuous,
            out_of_step_s: 0.0,
        }
    }

    #[test]
    fn closed_loop_obeys_littles_law() {
        // In-flight requests = throughput × E2E (Little's law) must equal the users when they
        // do not think.
        let users = 16;
        let result = run_virtual(
            &mut engine(),
            &spec(Arrivals::Closed { users }, ThinkTime::NONE),
        );
        assert_eq!(result.requests.len(), 200);
        let mean_e2e: f64 =
            result.requests.iter().map(|r| r.e2e()).sum::<f64>() / result.requests.len() as f64;
        let in_flight = result.requests_per_s() * mean_e2e;
        assert!(
            (in_flight - f64::from(users)).abs() / f64::from(users) < 0.1,
            "{in_flight}"
        );
        // Every measured request produced its tokens and a first token before finishing.
        for r in &result.requests {
            assert!(r.first_token >= r.arrival && r.finish >= r.first_token);
        }
    }

    #[test]
    fn think_time_lowers_the_load() {
        let busy = run_virtual(
            &mut engine(),
            &spec(Arrivals::Closed { users: 64 }, ThinkTime::NONE),
        );
        let thinking = run_virtual(
            &mut engine(),
            &spec(Arrivals::Closed { users: 64 }, ThinkTime::fixed(5.0)),
        );
        let tpot = |r: &RunResult| {
            r.requests.iter().filter_map(|x| x.tpot()).sum::<f64>() / r.requests.len() as f64
        };
        assert!(thinking.mean_batch < busy.mean_batch);
        assert!(tpot(&thinking) < tpot(&busy));
    }

    #[test]
    fn open_loop_matches_its_rate_below_saturation() {
        let result = run_virtual(
            &mut engine(),
            &spec(Arrivals::Open { rate: 5.0 }, ThinkTime::NONE),
        );
        // 200 Poisson arrivals at 5/s: the measured rate is within a few standard errors
        // (√200 / 200 ≈ 7 %).
        let rate = result.requests_per_s();
        assert!((rate - 5.0).abs() < 1.25, "{rate}");
    }

    #[test]
    fn a_drained_benchmark_starts_every_user_together_and_counts_every_request() {
        // 8 users, 16 warm-up requests, 40 measured: the warm-up drains, then all 8 start at
        // the same instant; with equal requests and no jitter they stay in step, so the 40
        // measured requests arrive in 5 waves of 8, every one of them counted.
        let mut spec = spec(Arrivals::Closed { users: 8 }, ThinkTime::NONE);
        spec.phases = Phases::Drained;
        spec.warmup_requests = 16;
        spec.measured_requests = 40;
        let result = run_virtual(&mut engine(), &spec);
        assert_eq!(result.requests.len(), 40);
        let mut waves: Vec<(u64, usize)> = Vec::new();
        for r in &result.requests {
            let at = (r.arrival * 1e9).round() as u64;
            match waves.iter_mut().find(|(t, _)| *t == at) {
                Some(wave) => wave.1 += 1,
                None => waves.push((at, 1)),
            }
        }
        assert_eq!(waves.len(), 5, "{waves:?}");
        assert!(waves.iter().all(|(_, n)| *n == 8), "{waves:?}");
        // The first wave met an idle engine (the warm-up drained): it waited for nothing, so
        // its first tokens came as fast as a cold start's.
        let mut cold = spec.clone();
        cold.warmup_requests = 0;
        let cold = run_virtual(&mut engine(), &cold);
        let first_wave_ttft = |r: &RunResult| {
            let start = r
                .requests
                .iter()
                .map(|x| x.arrival)
                .fold(f64::MAX, f64::min);
            r.requests
                .iter()
                .filter(|x| x.arrival == start)
                .map(|x| x.ttft())
                .fold(0.0, f64::max)
        };
        assert!((first_wave_ttft(&result) - first_wave_ttft(&cold)).abs() < 1e-9);
    }

    #[test]
    fn users_started_together_stay_in_step_unless_they_fall_out_of_it() {
        // Four users of long prompts and short outputs, started together after a drained
        // warm-up. Equal requests finish an iteration apart, so in a deterministic engine every
        // round's prompts arrive within a few decode steps of each other and each waits behind
        // the one before: the three after the first take about twice the prompt alone.
        // Spread once over a request cycle after the first wave, they stay apart, and a prompt
        // waits behind another only when it lands on one (here p / cycle ≈ 1/16 each: an
        // expected wait of about 3 × 1/16 × p/2 ≈ 0.1 of a prompt).
        let mut spec = spec(Arrivals::Closed { users: 4 }, ThinkTime::NONE);
        spec.workload.input_tokens = TokenLengths::Fixed { tokens: 2000 };
        spec.workload.output_tokens = TokenLengths::Fixed { tokens: 200 };
        spec.phases = Phases::Drained;
        spec.warmup_requests = 8;
        spec.measured_requests = 80;
        let mut alone = spec.clone();
        alone.arrivals = Arrivals::Closed { users: 1 };
        alone.warmup_requests = 1;
        alone.measured_requests = 2;
        let alone = run_virtual(&mut engine(), &alone);
        let prompt_alone = alone.requests.last().unwrap().ttft();

        // TTFT over the rounds after the first wave, and that wave's arrival instant.
        let after_first_wave = |result: &RunResult| {
            let start = result
                .requests
                .iter()
                .map(|r| r.arrival)
                .fold(f64::MAX, f64::min);
            let first_wave = result
                .requests
                .iter()
                .filter(|r| r.arrival == start)
                .count();
            let later: Vec<f64> = result
                .requests
                .iter()
                .filter(|r| r.arrival > start)
                .map(|r| r.ttft())
                .collect();
            (first_wave, later.iter().sum::<f64>() / later.len() as f64)
        };
        let in_step = run_virtual(&mut engine(), &spec);
        let (wave, in_step_ttft) = after_first_wave(&in_step);
        assert_eq!(wave, 4);
        assert!(
            in_step_ttft > 1.6 * prompt_alone,
            "{in_step_ttft} vs {prompt_alone}"
        );

        let cycle =
            in_step.requests.iter().map(|r| r.e2e()).sum::<f64>() / in_step.requests.len() as f64;
        assert!(prompt_alone / cycle < 0.1, "{prompt_alone} of {cycle}");
        spec.out_of_step_s = cycle;
        let apart = run_virtual(&mut engine(), &spec);
        let (wave, apart_ttft) = after_first_wave(&apart);
        // The first measured wave is still sent together; every request is counted.
        assert_eq!(wave, 4);
        assert_eq!(apart.requests.len(), 80);
        assert!(
            apart_ttft < 1.3 * prompt_alone,
            "{apart_ttft} vs {prompt_alone}"
        );
        // Users fall out of step once: the run lasts a cycle longer at most, not a cycle a
        // round.
        let span = |r: &RunResult| {
            r.requests.iter().map(|x| x.finish).fold(0.0, f64::max)
                - r.requests
                    .iter()
                    .map(|x| x.arrival)
                    .fold(f64::MAX, f64::min)
        };
        assert!(span(&apart) < span(&in_step) + 1.1 * cycle);
    }

    #[test]
    fn a_window_without_a_finish_lengthens_the_interval() {
        // 10 s windows, three of them.
        let mut clock = WindowClock::new(10_000, 3);
        assert!(!clock.settled(25.0, &[]));
        // Finishes at 25 and 29 s: [0, 10) is empty, so 20 s windows; [20, 40) holds both,
        // [0, 20) neither: 30 s windows, then [0, 30) holds them and [30, 60) none yet.
        assert!(!clock.settled(61.0, &[25.0, 29.0]));
        assert!((clock.length_s - 30.0).abs() < 1e-9, "{}", clock.length_s);
        assert!(!clock.settled(61.0, &[25.0, 29.0, 31.0]));
        // A finish in the third window settles it once it has closed.
        assert!(clock.settled(95.0, &[25.0, 29.0, 31.0, 61.0, 70.0]));
        assert!((clock.end_s() - 90.0).abs() < 1e-9);
        // Had the third window closed empty, the interval would have grown again.
        let mut clock = WindowClock::new(10_000, 3);
        assert!(!clock.settled(95.0, &[25.0, 29.0, 31.0]));
        assert!(clock.length_s > 30.0);
    }

    #[test]
    fn time_windows_measure_the_cold_starts_first_wave_of_long_requests() {
        let workload = |output: u32| Workload {
            input_tokens: TokenLengths::Fixed { tokens: 512 },
            output_tokens: TokenLengths::Fixed { tokens: output },
            think_time: ThinkTime::NONE,
            prefix_share: PrefixShare::NONE,
            speculation: None,
        };
        let run = |output: u32, window_ms: u32| {
            let mut spec = spec(Arrivals::Closed { users: 8 }, ThinkTime::NONE);
            spec.workload = workload(output);
            spec.phases = Phases::Windows {
                window_ms,
                windows: 3,
            };
            spec.warmup_requests = 0;
            spec.measured_requests = usize::MAX;
            run_virtual(&mut engine(), &spec)
        };
        // Requests far longer than a window: the interval grows to about one request's
        // length, and the three windows hold the first three waves — the first of them sent
        // together at the start, every user's request in it.
        let long = run(2000, 100);
        let e2e = long
            .requests
            .iter()
            .map(RequestTiming::e2e)
            .fold(0.0, f64::max);
        assert!(
            e2e > 1.0,
            "requests of {e2e} s are longer than the 0.1 s windows"
        );
        let first_wave = long.requests.iter().filter(|r| r.arrival == 0.0).count();
        assert_eq!(first_wave, 8);
        assert!(long.requests.len() <= 3 * 8, "{}", long.requests.len());
        // Short requests: several rounds, every one finished inside the three windows.
        let short = run(16, 1000);
        let rounds = short.requests.len() / 8;
        assert!(rounds >= 3, "{} requests", short.requests.len());
        assert!(short.requests.iter().any(|r| r.arrival > 0.0));
        assert!(short.requests.iter().all(|r| r.finish < 3.0 + 1e-9));
        // Throughput counts the measured requests' tokens over their span.
        let tokens: u64 = short
            .requests
            .iter()
            .map(|r| u64::from(r.output_tokens))
            .sum();
        assert_eq!(short.output_tokens_in_window, tokens);
    }

    #[test]
    fn a_shared_prefix_saves_nothing_without_prefix_caching() {
        let run = |caching: bool| {
            let mut engine = engine();
            let mut config = *engine.config();
            config.prefix_caching = caching;
            engine = Engine::new(config, engine.perf().clone(), false);
            let mut spec = spec(Arrivals::Closed { users: 4 }, ThinkTime::NONE);
            spec.workload.prefix_share = PrefixShare::new(0.9).unwrap_or(PrefixShare::NONE);
            let result = run_virtual(&mut engine, &spec);
            result.requests.iter().map(|r| r.ttft()).sum::<f64>() / result.requests.len() as f64
        };
        assert!(
            run(true) < 0.8 * run(false),
            "{} vs {}",
            run(true),
            run(false)
        );
        let mut plain = spec(Arrivals::Closed { users: 4 }, ThinkTime::NONE);
        plain.workload.prefix_share = PrefixShare::NONE;
        let unshared = run_virtual(&mut engine(), &plain);
        let unshared_ttft = unshared.requests.iter().map(|r| r.ttft()).sum::<f64>()
            / unshared.requests.len() as f64;
        assert!((run(false) - unshared_ttft).abs() < 1e-12);
    }

    #[test]
    fn same_seed_same_result() {
        let a = run_virtual(
            &mut engine(),
            &spec(Arrivals::Closed { users: 8 }, ThinkTime::fixed(1.0)),
        );
        let b = run_virtual(
            &mut engine(),
            &spec(Arrivals::Closed { users: 8 }, ThinkTime::fixed(1.0)),
        );
        assert_eq!(a.requests, b.requests);
    }
}

//! How the client that measured a curve ran its closed-loop levels, so that a simulated level
//! is the same experiment.
//!
//! The clients people import differ in the one thing that decides a level's mean TTFT most:
//! whether its users arrive spread out or all at once. A benchmark's concurrency mode starts
//! every user together (AIPerf, vLLM's `bench serve`, GuideLLM, EvalScope), and on most engines
//! its users stay bunched for many rounds: each prompt of a wave waits behind the ones before
//! it. capplan's predictions spread users over a request cycle, a steady state with no such
//! waves. Scored against the public benchmark tables, the steady state puts mean TTFT 50–80 %
//! under what the benchmarks measured (`capplan validate --benchmark-start staggered`), so
//! calibrating on a benchmark's levels while simulating the steady state would read the
//! benchmark's waves as a slow card. Each level is therefore simulated as its client ran it.

use serde::Serialize;

use super::predict::ClosedStart;

/// Send-time jitter of a Python asyncio load generator on the same network, seconds: a few
/// milliseconds between a response's end and the next request leaving.
pub const CLIENT_JITTER_S: f64 = 0.005;

/// GenAI-Perf's measurement interval when none is given, ms, and Perf Analyzer's windows per
/// measurement (a stability percentage of 999, GenAI-Perf's default, accepts the first three).
pub const GENAI_PERF_WINDOW_MS: u32 = 10_000;
pub const PERF_ANALYZER_WINDOWS: u32 = 3;

/// Rounds of every user a started-together level is simulated for when its file does not say
/// how many requests it counted (every importer records the count, so this is a fallback).
pub const FALLBACK_ROUNDS: usize = 10;

/// Runs of a level whose users fall out of step (an engine profile's `out_of_step`), each with
/// its own draws of the client's delays. One run's mean TTFT is a sample of where the users
/// happened to land: over the silicon sample's 1 139 vLLM rows, four single runs' predicted
/// TTFT lie 5.4 % apart (largest ÷ smallest) in the median row, 20 % at the 90th percentile and
/// up to 2.5 times. The draws' average is the prediction of what the benchmark measures. Held-out
/// vLLM MoE TTFT, median |error|: one draw 21.1 % and four 20.5 % (`out_of_step` 0.279, fitted
/// on one draw), eight 20.1 % (0.244, refitted on eight), sixteen 19.7 % (0.245); eight cost
/// the silicon sources about 2.4 times the time of one.
pub const CLIENT_DRAWS: u64 = 8;

/// How a measurement ran a level: how many requests it discarded, how many it counted, and
/// how its users started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelSample {
    pub warmup: usize,
    pub measured: usize,
    pub start: ClosedStart,
}

impl LevelSample {
    /// `users` closed-loop users in steady state: one warm-up round and two measured rounds
    /// of every user, at least 60 measured requests.
    pub fn closed(users: u32) -> LevelSample {
        let users = users.max(1) as usize;
        LevelSample {
            warmup: users,
            measured: (2 * users).max(60),
            start: ClosedStart::Staggered,
        }
    }

    /// One user's requests one after another on an idle deployment: the prompt's time to
    /// first token with nothing to wait behind (the first request of a cold server is not
    /// counted).
    pub fn alone() -> LevelSample {
        LevelSample {
            warmup: 1,
            measured: 2,
            start: ClosedStart::Staggered,
        }
    }

    /// GenAI-Perf on Perf Analyzer's time windows ([`Phases::Windows`]): `users` workers
    /// started together with no warm-up, the requests finishing within `windows` windows of
    /// `window_ms` measured.
    ///
    /// [`Phases::Windows`]: crate::sim::virtual_run::Phases::Windows
    pub fn time_windows(window_ms: u32, windows: u32, jitter_s: f64) -> LevelSample {
        LevelSample {
            warmup: 0,
            // Which requests count is decided by when they finish.
            measured: usize::MAX,
            start: ClosedStart::Windows {
                window_ms,
                windows,
                jitter_s,
            },
        }
    }

    /// A client that pushes `requests` requests through `users` slots, every slot started
    /// together, no warm-up, every request counted: SGLang's and vLLM's `bench_serving` with
    /// `--max-concurrency` (each prompt a task waiting on one semaphore).
    pub fn counted(users: u32, requests: usize, jitter_s: f64) -> LevelSample {
        LevelSample {
            warmup: 0,
            measured: requests.max(users.max(1) as usize),
            start: ClosedStart::Together {
                jitter_s,
                out_of_step: 0.0,
            },
        }
    }

    /// A benchmark's concurrency mode (AIPerf, GenAI-Perf, vLLM's `bench serve`): `users`
    /// workers started together for two rounds of warm-up (AIPerf's
    /// `--warmup-request-count`, as AIConfigurator runs it), drained; then `rounds` rounds'
    /// worth of measured requests, every user starting together again ([`Phases::Drained`]);
    /// each next request leaves after up to `jitter_s` of client-side delay. How far the users
    /// then fall out of step is the engine's (validation's deployments take it from the
    /// profile).
    ///
    /// [`Phases::Drained`]: crate::sim::virtual_run::Phases::Drained
    pub fn benchmark(users: u32, rounds: usize, jitter_s: f64) -> LevelSample {
        let users = users.max(1) as usize;
        LevelSample {
            warmup: 2 * users,
            measured: rounds.max(1) * users,
            start: ClosedStart::Together {
                jitter_s,
                out_of_step: 0.0,
            },
        }
    }
}

/// How a closed-loop level's users were started and which requests were counted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum MeasuringClient {
    /// Users spread over one request cycle and measured in steady state: capplan's own probe
    /// (its warm-up and counted window), and a table that does not say how it was measured.
    SteadyState,
    /// Every user started together, every request counted (after a drained warm-up, where the
    /// client has one): the concurrency modes of AIPerf, vLLM's `bench serve`, GuideLLM and
    /// EvalScope.
    StartedTogether,
    /// Perf Analyzer's time windows from a cold start, every user started together: GenAI-Perf
    /// without a request count.
    TimeWindows { window_ms: u32, windows: u32 },
}

impl MeasuringClient {
    /// The client an imported curve's tool (`ImportFormat::name`) ran; `None` (a probe, a
    /// table) is the steady state.
    pub fn of_tool(tool: Option<&str>) -> MeasuringClient {
        match tool {
            Some("aiperf" | "vllm-bench" | "guidellm" | "evalscope") => {
                MeasuringClient::StartedTogether
            }
            Some("genai-perf") => MeasuringClient::TimeWindows {
                window_ms: GENAI_PERF_WINDOW_MS,
                windows: PERF_ANALYZER_WINDOWS,
            },
            _ => MeasuringClient::SteadyState,
        }
    }

    /// How to simulate one of its levels of `users`: the warm-up requests discarded, the
    /// requests measured and how the users start, or `None` for the steady state (which
    /// [`evaluate_level`] runs). `counted` is the level's own request count where the file
    /// gives it; `out_of_step` is the engine profile's (how far its benchmark users fall out
    /// of step after the first wave).
    ///
    /// [`evaluate_level`]: super::predict::evaluate_level
    pub fn level(self, users: u32, counted: Option<u64>, out_of_step: f64) -> Option<LevelSample> {
        let users = users.max(1);
        match self {
            MeasuringClient::SteadyState => None,
            MeasuringClient::StartedTogether => {
                let requests = counted
                    .map(|n| n as usize)
                    .unwrap_or(FALLBACK_ROUNDS * users as usize);
                let mut sample = LevelSample::counted(users, requests, CLIENT_JITTER_S);
                sample.start = ClosedStart::Together {
                    jitter_s: CLIENT_JITTER_S,
                    out_of_step,
                };
                Some(sample)
            }
            MeasuringClient::TimeWindows { window_ms, windows } => Some(LevelSample::time_windows(
                window_ms,
                windows,
                CLIENT_JITTER_S,
            )),
        }
    }

    /// How the client ran its levels, in a few words for reports.
    pub fn describe(self) -> &'static str {
        match self {
            MeasuringClient::SteadyState => "users spread over a request cycle (steady state)",
            MeasuringClient::StartedTogether => {
                "every user started together, every request counted"
            }
            MeasuringClient::TimeWindows { .. } => {
                "every user started together, Perf Analyzer's time windows"
            }
        }
    }
}

/// How the levels of a C* search are measured: capplan's steady state for a prediction, or,
/// to set a prediction beside an imported benchmark's C*, the way that benchmark measured its
/// levels. A benchmark that starts every user together measures a lower C* at a TTFT limit
/// than the steady state holds (its waves of prompts wait behind each other), and a correction
/// read off the two would charge the benchmark's waves to the card.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeasuredAs {
    pub client: MeasuringClient,
    /// Requests the client counted per user at a level (a level of n users counts about n ×
    /// this), where its file said; else [`FALLBACK_ROUNDS`].
    pub requests_per_user: Option<f64>,
    /// The engine profile's `out_of_step`.
    pub out_of_step: f64,
}

impl Default for MeasuredAs {
    fn default() -> Self {
        MeasuredAs::STEADY_STATE
    }
}

impl MeasuredAs {
    pub const STEADY_STATE: MeasuredAs = MeasuredAs {
        client: MeasuringClient::SteadyState,
        requests_per_user: None,
        out_of_step: 0.0,
    };

    /// [`MeasuringClient::level`] for a level of `users`.
    pub fn level(&self, users: u32) -> Option<LevelSample> {
        let counted = self
            .requests_per_user
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| (r * f64::from(users.max(1))).round() as u64);
        self.client.level(users, counted, self.out_of_step)
    }

    /// How the levels were measured, in a sentence for reports; `None` for the steady state
    /// (what every prediction assumes unless asked otherwise).
    pub fn describe(&self) -> Option<String> {
        if self.client == MeasuringClient::SteadyState {
            return None;
        }
        let counted = match (self.client, self.requests_per_user) {
            (MeasuringClient::StartedTogether, Some(n)) => format!(", {n} requests per user"),
            (MeasuringClient::StartedTogether, None) => {
                format!(", {FALLBACK_ROUNDS} requests per user")
            }
            _ => String::new(),
        };
        let parted =
            if MeasuredAs::draws(self.level(1).map_or(ClosedStart::Staggered, |l| l.start)) > 1 {
                format!(
                    "; users fall out of step by up to {:.3} of a request cycle after the first \
                 wave (the engine profile's out_of_step), each level the average of {CLIENT_DRAWS} \
                 draws of the client's delays",
                    self.out_of_step
                )
            } else {
                String::new()
            };
        Some(format!(
            "Levels measured as a benchmark measures them, not in the steady state plans \
             assume: {}{counted}{parted}.",
            self.client.describe()
        ))
    }

    /// How many runs, each with its own draws of the client's delays, a level of this client
    /// is the average of ([`CLIENT_DRAWS`] where users fall out of step, else one).
    pub fn draws(start: ClosedStart) -> u64 {
        match start {
            ClosedStart::Together { out_of_step, .. } if out_of_step > 0.0 => CLIENT_DRAWS,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmarks_start_their_users_together_and_probes_do_not() {
        for tool in ["aiperf", "vllm-bench", "guidellm", "evalscope"] {
            assert_eq!(
                MeasuringClient::of_tool(Some(tool)),
                MeasuringClient::StartedTogether,
                "{tool}"
            );
        }
        assert!(matches!(
            MeasuringClient::of_tool(Some("genai-perf")),
            MeasuringClient::TimeWindows { .. }
        ));
        assert_eq!(
            MeasuringClient::of_tool(Some("steps-csv")),
            MeasuringClient::SteadyState
        );
        assert_eq!(MeasuringClient::of_tool(None), MeasuringClient::SteadyState);
    }

    #[test]
    fn a_started_together_level_counts_what_its_file_counted() {
        let client = MeasuringClient::StartedTogether;
        let LevelSample {
            warmup,
            measured,
            start,
        } = client.level(8, Some(160), 0.25).unwrap();
        assert_eq!((warmup, measured), (0, 160));
        assert_eq!(
            start,
            ClosedStart::Together {
                jitter_s: CLIENT_JITTER_S,
                out_of_step: 0.25
            }
        );
        // Without a count, ten rounds; never fewer requests than users.
        assert_eq!(client.level(8, None, 0.0).unwrap().measured, 80);
        assert_eq!(client.level(8, Some(3), 0.0).unwrap().measured, 8);
        assert!(MeasuringClient::SteadyState
            .level(8, Some(160), 0.0)
            .is_none());
    }

    #[test]
    fn a_search_level_counts_the_benchmarks_requests_per_user_and_draws_where_users_part() {
        let aiperf = MeasuredAs {
            client: MeasuringClient::StartedTogether,
            requests_per_user: Some(12.5),
            out_of_step: 0.25,
        };
        // 12.5 requests a user: 150 at 12 users, 400 at 32.
        assert_eq!(aiperf.level(12).unwrap().measured, 150);
        let LevelSample {
            measured, start, ..
        } = aiperf.level(32).unwrap();
        assert_eq!(measured, 400);
        assert_eq!(MeasuredAs::draws(start), CLIENT_DRAWS);
        // Users that stay in step, and time windows, need one draw.
        let in_step = MeasuredAs {
            out_of_step: 0.0,
            ..aiperf
        };
        assert_eq!(MeasuredAs::draws(in_step.level(32).unwrap().start), 1);
        assert!(MeasuredAs::STEADY_STATE.level(32).is_none());
    }
}

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

/// How a closed-loop level's users were started and which requests were counted.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    pub fn level(
        self,
        users: u32,
        counted: Option<u64>,
        out_of_step: f64,
    ) -> Option<(usize, usize, ClosedStart)> {
        let users = users.max(1) as usize;
        match self {
            MeasuringClient::SteadyState => None,
            MeasuringClient::StartedTogether => {
                let measured = counted
                    .map(|n| n as usize)
                    .unwrap_or(FALLBACK_ROUNDS * users)
                    .max(users);
                Some((
                    0,
                    measured,
                    ClosedStart::Together {
                        jitter_s: CLIENT_JITTER_S,
                        out_of_step,
                    },
                ))
            }
            // Which requests count is decided by when they finish.
            MeasuringClient::TimeWindows { window_ms, windows } => Some((
                0,
                usize::MAX,
                ClosedStart::Windows {
                    window_ms,
                    windows,
                    jitter_s: CLIENT_JITTER_S,
                },
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
        let (warmup, measured, start) = client.level(8, Some(160), 0.25).unwrap();
        assert_eq!((warmup, measured), (0, 160));
        assert_eq!(
            start,
            ClosedStart::Together {
                jitter_s: CLIENT_JITTER_S,
                out_of_step: 0.25
            }
        );
        // Without a count, ten rounds; never fewer requests than users.
        assert_eq!(client.level(8, None, 0.0).unwrap().1, 80);
        assert_eq!(client.level(8, Some(3), 0.0).unwrap().1, 8);
        assert!(MeasuringClient::SteadyState
            .level(8, Some(160), 0.0)
            .is_none());
    }
}

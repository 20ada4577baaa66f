//! The server's own counters around each step: `GET /metrics` (Prometheus text) before and
//! after, and the differences turned into mean queue, prefill, decode and compute time per
//! request — what perf_analyzer reports from Triton's statistics, for every engine that
//! exports the counters. Known families (seconds unless noted):
//!
//! | engine | queue | prefill | decode | compute | requests |
//! |---|---|---|---|---|---|
//! | vLLM | `vllm:request_queue_time_seconds` | `vllm:request_prefill_time_seconds` | `vllm:request_decode_time_seconds` | `vllm:request_inference_time_seconds` | its `_count` |
//! | TGI | `tgi_request_queue_duration` | | | `tgi_request_inference_duration` | its `_count` |
//! | SGLang | `sglang:queue_time_seconds` | | | | its `_count` |
//! | Triton (µs counters) | `nv_inference_queue_duration_us` | | | `nv_inference_compute_{input,infer,output}_duration_us` | `nv_inference_request_success` |
//! | llama.cpp | | `llamacpp:prompt_seconds_total` | `llamacpp:tokens_predicted_seconds_total` | | requests the step finished |
//! | capplan serve | | | | | `capplan_requests_finished_total`; busy time `capplan_engine_busy_seconds_total` |
//!
//! The server's own mean time to first token (`vllm:time_to_first_token_seconds`,
//! `sglang:time_to_first_token_seconds`) is kept beside them, and capplan serve's lateness of
//! first tokens against its engine's schedule (`capplan_first_token_lateness_seconds`): what a
//! busy machine added to a time-scaled simulator's TTFTs.
//!
//! Histograms are read through their `_sum` and `_count`; label sets are summed (one model per
//! server is the probe's case).

use std::collections::HashMap;

use serde::Serialize;

/// One scrape: each series name (labels dropped) with its value summed over label sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape(HashMap<String, f64>);

impl Scrape {
    /// Reads Prometheus text exposition; lines that are not samples are skipped.
    pub fn parse(text: &str) -> Scrape {
        let mut values: HashMap<String, f64> = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // name{labels} value [timestamp]; label values may hold spaces, so split after '}'.
            let (name, rest) = match line.find('{') {
                Some(open) => match line[open..].find('}') {
                    Some(close) => (&line[..open], &line[open + close + 1..]),
                    None => continue,
                },
                None => match line.split_once(char::is_whitespace) {
                    Some((name, rest)) => (name, rest),
                    None => continue,
                },
            };
            let Some(value) = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
            else {
                continue;
            };
            if value.is_finite() {
                *values.entry(name.trim().to_string()).or_default() += value;
            }
        }
        Scrape(values)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }
}

/// What the server's counters say about one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MetricsSplit {
    /// Whose counters these are: vllm, tgi, sglang, triton, llama.cpp, capplan.
    pub engine: String,
    /// Requests the counters saw finish in the step.
    pub requests: f64,
    pub queue_mean_s: Option<f64>,
    pub prefill_mean_s: Option<f64>,
    pub decode_mean_s: Option<f64>,
    pub compute_mean_s: Option<f64>,
    /// Share of the step's wall time the engine reports being busy (capplan serve, SGLang).
    pub busy_share: Option<f64>,
    /// The server's own mean time to first token over the step (vLLM, SGLang).
    pub ttft_mean_s: Option<f64>,
    /// capplan serve with a time scale: how late, on average, first tokens went out against
    /// the engine's schedule (engine seconds) — what the machine added to every TTFT.
    pub first_token_lateness_s: Option<f64>,
    /// Share of the step's engine iterations that ended late on the wall clock (capplan serve
    /// with a time scale: the machine could not keep the engine on schedule).
    pub late_step_share: Option<f64>,
}

/// The change of `name` between two scrapes (a counter reset gives `None`).
fn delta(before: &Scrape, after: &Scrape, name: &str) -> Option<f64> {
    let d = after.get(name)? - before.get(name).unwrap_or(0.0);
    (d >= 0.0).then_some(d)
}

/// Mean of a histogram's observations made between two scrapes.
fn histogram_mean(before: &Scrape, after: &Scrape, family: &str) -> Option<(f64, f64)> {
    let sum = delta(before, after, &format!("{family}_sum"))?;
    let count = delta(before, after, &format!("{family}_count"))?;
    (count > 0.0).then(|| (sum / count, count))
}

/// The split between two scrapes `wall_s` apart, during which the client saw `finished`
/// requests end; `None` when no known family moved.
pub fn split(
    before: &Scrape,
    after: &Scrape,
    wall_s: f64,
    finished: usize,
) -> Option<MetricsSplit> {
    let hist = |family: &str| histogram_mean(before, after, family);
    let mut out = MetricsSplit::default();
    if let Some((queue, n)) = hist("vllm:request_queue_time_seconds") {
        out.engine = "vllm".into();
        out.requests = n;
        out.queue_mean_s = Some(queue);
        out.prefill_mean_s = hist("vllm:request_prefill_time_seconds").map(|h| h.0);
        out.decode_mean_s = hist("vllm:request_decode_time_seconds").map(|h| h.0);
        out.compute_mean_s = hist("vllm:request_inference_time_seconds").map(|h| h.0);
    } else if let Some((queue, n)) = hist("tgi_request_queue_duration") {
        out.engine = "tgi".into();
        out.requests = n;
        out.queue_mean_s = Some(queue);
        out.compute_mean_s = hist("tgi_request_inference_duration").map(|h| h.0);
    } else if let Some((queue, n)) = hist("sglang:queue_time_seconds") {
        out.engine = "sglang".into();
        out.requests = n;
        out.queue_mean_s = Some(queue);
    } else if let Some(n) =
        delta(before, after, "nv_inference_request_success").filter(|n| *n > 0.0)
    {
        let us = |name: &str| delta(before, after, name).map(|d| d / 1e6 / n);
        out.engine = "triton".into();
        out.requests = n;
        out.queue_mean_s = us("nv_inference_queue_duration_us");
        let parts: Vec<f64> = [
            "nv_inference_compute_input_duration_us",
            "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us",
        ]
        .iter()
        .filter_map(|name| us(name))
        .collect();
        out.compute_mean_s = (!parts.is_empty()).then(|| parts.iter().sum());
    } else if let Some(prefill) = delta(before, after, "llamacpp:prompt_seconds_total") {
        if finished == 0 {
            return None;
        }
        let n = finished as f64;
        out.engine = "llama.cpp".into();
        out.requests = n;
        out.prefill_mean_s = Some(prefill / n);
        out.decode_mean_s =
            delta(before, after, "llamacpp:tokens_predicted_seconds_total").map(|d| d / n);
    } else if let Some(n) = delta(before, after, "capplan_requests_finished_total") {
        out.engine = "capplan".into();
        out.requests = n;
    } else {
        return None;
    }
    if out.compute_mean_s.is_none() {
        if let (Some(prefill), Some(decode)) = (out.prefill_mean_s, out.decode_mean_s) {
            out.compute_mean_s = Some(prefill + decode);
        }
    }
    let busy = delta(before, after, "capplan_engine_busy_seconds_total")
        .or_else(|| delta(before, after, "sglang:gpu_execution_seconds_total"));
    out.busy_share = busy.filter(|_| wall_s > 0.0).map(|b| b / wall_s);
    out.ttft_mean_s = [
        "vllm:time_to_first_token_seconds",
        "sglang:time_to_first_token_seconds",
    ]
    .iter()
    .find_map(|family| hist(family))
    .map(|(mean, _)| mean);
    out.first_token_lateness_s = hist("capplan_first_token_lateness_seconds").map(|h| h.0);
    out.late_step_share = delta(before, after, "capplan_timer_late_steps_total")
        .zip(delta(before, after, "capplan_engine_steps_total"))
        .filter(|(_, steps)| *steps > 0.0)
        .map(|(late, steps)| late / steps);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_histograms_give_means_per_request() {
        let before = Scrape::parse(
            "# HELP vllm:request_queue_time_seconds x\n\
             # TYPE vllm:request_queue_time_seconds histogram\n\
             vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 10.0\n\
             vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 100\n\
             vllm:request_prefill_time_seconds_sum{model_name=\"m\"} 5\n\
             vllm:request_prefill_time_seconds_count{model_name=\"m\"} 100\n\
             vllm:request_decode_time_seconds_sum{model_name=\"m\"} 50\n\
             vllm:request_decode_time_seconds_count{model_name=\"m\"} 100\n",
        );
        let after = Scrape::parse(
            "vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 14.0\n\
             vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 120\n\
             vllm:request_prefill_time_seconds_sum{model_name=\"m\"} 7\n\
             vllm:request_prefill_time_seconds_count{model_name=\"m\"} 120\n\
             vllm:request_decode_time_seconds_sum{model_name=\"m\"} 70\n\
             vllm:request_decode_time_seconds_count{model_name=\"m\"} 120\n",
        );
        let s = split(&before, &after, 30.0, 20).unwrap();
        assert_eq!(s.engine, "vllm");
        assert_eq!(s.requests, 20.0);
        assert_eq!(s.queue_mean_s, Some(0.2));
        assert_eq!(s.prefill_mean_s, Some(0.1));
        assert_eq!(s.decode_mean_s, Some(1.0));
        assert_eq!(s.compute_mean_s, Some(1.1));
    }

    #[test]
    fn server_ttft_first_token_lateness_and_late_steps_are_step_means() {
        let before = Scrape::parse(
            "capplan_requests_finished_total 4\n\
             vllm:time_to_first_token_seconds_sum 2.0\n\
             vllm:time_to_first_token_seconds_count 4\n\
             capplan_first_token_lateness_seconds_sum 0.1\n\
             capplan_first_token_lateness_seconds_count 4\n\
             capplan_engine_steps_total 100\ncapplan_timer_late_steps_total 1\n",
        );
        let after = Scrape::parse(
            "capplan_requests_finished_total 14\n\
             vllm:time_to_first_token_seconds_sum 7.0\n\
             vllm:time_to_first_token_seconds_count 14\n\
             capplan_first_token_lateness_seconds_sum 0.3\n\
             capplan_first_token_lateness_seconds_count 14\n\
             capplan_engine_steps_total 300\ncapplan_timer_late_steps_total 11\n",
        );
        let s = split(&before, &after, 6.0, 10).unwrap();
        assert_eq!(s.ttft_mean_s, Some(0.5));
        assert_eq!(s.late_step_share, Some(0.05));
        assert!((s.first_token_lateness_s.unwrap() - 0.02).abs() < 1e-12);
        let none = split(&before, &before, 6.0, 0).unwrap();
        assert_eq!(none.ttft_mean_s, None);
    }

    #[test]
    fn triton_counters_are_microseconds_summed_over_models() {
        let before = Scrape::parse(
            "nv_inference_request_success{model=\"a\",version=\"1\"} 10\n\
             nv_inference_queue_duration_us{model=\"a\",version=\"1\"} 1000000\n\
             nv_inference_compute_infer_duration_us{model=\"a\",version=\"1\"} 5000000\n",
        );
        let after = Scrape::parse(
            "nv_inference_request_success{model=\"a\",version=\"1\"} 20\n\
             nv_inference_queue_duration_us{model=\"a\",version=\"1\"} 1500000\n\
             nv_inference_compute_infer_duration_us{model=\"a\",version=\"1\"} 8000000\n",
        );
        let s = split(&before, &after, 10.0, 10).unwrap();
        assert_eq!(s.engine, "triton");
        assert_eq!(s.queue_mean_s, Some(0.05));
        assert_eq!(s.compute_mean_s, Some(0.3));
    }

    #[test]
    fn llama_cpp_totals_divide_by_the_requests_seen() {
        let before = Scrape::parse(
            "llamacpp:prompt_seconds_total 2\nllamacpp:tokens_predicted_seconds_total 10\n",
        );
        let after = Scrape::parse(
            "llamacpp:prompt_seconds_total 6\nllamacpp:tokens_predicted_seconds_total 30\n",
        );
        let s = split(&before, &after, 20.0, 8).unwrap();
        assert_eq!((s.prefill_mean_s, s.decode_mean_s), (Some(0.5), Some(2.5)));
        assert_eq!(s.compute_mean_s, Some(3.0));
        assert_eq!(split(&before, &after, 20.0, 0), None);
    }

    #[test]
    fn unknown_or_reset_counters_give_nothing() {
        let text = "# a comment\nsome_metric{label=\"with } brace\"} 3\nbad line\n";
        let scrape = Scrape::parse(text);
        assert_eq!(split(&scrape, &scrape, 1.0, 5), None);
        let before = Scrape::parse(
            "tgi_request_queue_duration_sum 5\ntgi_request_queue_duration_count 10\n",
        );
        let after =
            Scrape::parse("tgi_request_queue_duration_sum 1\ntgi_request_queue_duration_count 2\n");
        assert_eq!(
            split(&before, &after, 1.0, 5),
            None,
            "a restarted server's counters"
        );
        let busy_before = Scrape::parse(
            "capplan_requests_finished_total 4\ncapplan_engine_busy_seconds_total 1\n",
        );
        let busy_after = Scrape::parse(
            "capplan_requests_finished_total 14\ncapplan_engine_busy_seconds_total 4\n",
        );
        let s = split(&busy_before, &busy_after, 6.0, 10).unwrap();
        assert_eq!((s.engine.as_str(), s.busy_share), ("capplan", Some(0.5)));
    }
}

//! The layouts of mixture-of-experts models from the command line: expert and attention-data
//! parallelism, instances over several nodes, disaggregated prefill and decode.

mod common;

use common::{capplan, json, predict_r1};
use serde_json::Value;

/// DeepSeek-R1 on H200s under SGLang at TTFT ≤ 2 s, TPOT ≤ 50 ms, laid out as `layout`.
fn r1_json(layout: &[&str]) -> Value {
    let mut args = vec!["--engine", "sglang", "--tpot", "50ms", "--format", "json"];
    args.extend(layout);
    let run = predict_r1(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)
}

/// Eight attention replicas keep eight latent caches where TP8 keeps one, and the
/// prediction names its layout and sets the disaggregated deployment of the same workers
/// beside it.
#[test]
fn attention_replicas_hold_more_cache_and_the_layout_is_named() {
    let tp8 = r1_json(&["--tp", "8"]);
    let dp8 = r1_json(&["--tp", "1", "--attention-dp", "8", "--ep", "8"]);
    assert_eq!(dp8["parallel"]["dp"], 8);
    assert_eq!(dp8["parallel"]["ep"], 8);
    let kv = |p: &Value| p["memory"]["kv_tokens"].as_f64().unwrap();
    // Not quite eight times: each card also holds all the non-expert weights.
    let ratio = kv(&dp8) / kv(&tp8);
    assert!(ratio > 4.0 && ratio < 8.0, "{} vs {}", kv(&dp8), kv(&tp8));
    let pd = &dp8["disaggregated"]["Ok"];
    assert!(
        pd["users"].as_f64().unwrap() > 0.0,
        "{}",
        dp8["disaggregated"]
    );
    assert!(pd["tpot_s"].as_f64().unwrap() <= 0.05);
    assert!(pd["split"]["prefill"].as_u64().unwrap() >= 1);
}

/// DeepSeek-R1 in FP8 does not fit eight H100s: the plan spans two nodes per instance, in
/// whole pairs of nodes; on H200 expert-parallel layouts and a disaggregated deployment are
/// among the splits tried.
#[test]
fn solve_spans_nodes_where_one_is_too_small_and_tries_expert_layouts() {
    let run = capplan(&[
        "solve",
        "--users",
        "2000",
        "--ttft",
        "2s",
        "--tpot",
        "50ms",
        "--model",
        "deepseek-r1",
        "--cards",
        "H100-SXM,H200",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let plans = report["plans"].as_array().unwrap();
    let plan = |node: &str| {
        plans
            .iter()
            .find(|p| p["node"] == node)
            .unwrap_or_else(|| panic!("no plan for {node}: {report}"))
    };
    let h100 = plan("8xH100-SXM");
    let group = h100["split"]["nodes_per_instance_group"].as_u64().unwrap();
    assert!(group >= 2, "{}", h100["split"]);
    assert_eq!(h100["nodes"].as_u64().unwrap() % group, 0);
    let h200 = plan("8xH200");
    let tried: Vec<&Value> = h200["splits"].as_array().unwrap().iter().collect();
    assert!(
        tried.iter().any(|s| s["split"]["ep"].as_u64() > Some(1)),
        "{}",
        h200["splits"]
    );
    assert!(
        tried
            .iter()
            .any(|s| !s["split"]["disaggregated"].is_null() || s["status"] == "not disaggregated"),
        "{}",
        h200["splits"]
    );
}

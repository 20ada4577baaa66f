//! `capplan compare` on the shipped seed scenario: the node counts the seed table proves, the
//! ranking by total cost, a mixed fleet cheaper than any single node type (checked by an
//! independent exhaustive method), sensitivity and sources in every report format.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{capplan, json, scratch};

const SEED: &str = "plans/seed-10000-users.toml";

fn seed_compare(out: &Path, format: &str) -> common::Run {
    capplan(&[
        "compare",
        SEED,
        "--out",
        out.to_str().unwrap(),
        "--format",
        format,
    ])
}

#[test]
fn the_seed_scenario_reproduces_the_ceilings_and_ranks_by_total_cost() {
    let out = scratch("compare-seed");
    let run = seed_compare(&out, "json");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let options = report["costed"].as_array().unwrap();
    let nodes: HashMap<(String, String), u64> = options
        .iter()
        .map(|o| {
            (
                (
                    o["model"].as_str().unwrap().to_string(),
                    o["node"].as_str().unwrap().to_string(),
                ),
                o["nodes"].as_u64().unwrap(),
            )
        })
        .collect();
    let at = |model: &str, node: &str| nodes[&(model.to_string(), node.to_string())];
    // The counts of the solve issue: ceilings of 10 000 over users per node.
    assert_eq!(at("llama-13b", "8xA30-PCIe"), 112);
    assert_eq!(at("llama-13b", "4xA40-PCIe"), 36);
    assert_eq!(at("llama-13b", "8xV100-32G-SXM2"), 32);
    assert_eq!(at("llama-13b", "8xA100-40G-SXM"), 12);
    assert_eq!(at("llama-65b", "8xA30-PCIe"), 1000);
    assert_eq!(at("llama-65b", "4xA40-PCIe"), 1000);
    assert_eq!(at("llama-65b", "8xV100-32G-SXM2"), 112);
    assert_eq!(at("llama-65b", "8xA100-40G-SXM"), 56);
    assert_eq!(at("llama-2-70b", "8xV100-32G-SXM2"), 223);
    assert_eq!(at("llama-2-70b", "8xA100-40G-SXM"), 223);
    assert_eq!(at("llama-2-70b", "8xA40-PCIe"), 56);
    // Ranked by total cost within each model, and the total is capex + energy.
    for model in ["llama-13b", "llama-65b", "llama-2-70b"] {
        let ranked: Vec<&serde_json::Value> =
            options.iter().filter(|o| o["model"] == model).collect();
        for (i, pair) in ranked.windows(2).enumerate() {
            assert_eq!(pair[0]["cost_rank"], i + 1);
            let (a, b) = (
                pair[0]["cost"]["total_usd"].as_f64().unwrap(),
                pair[1]["cost"]["total_usd"].as_f64().unwrap(),
            );
            assert!(a <= b, "{model}: {a} before {b}");
        }
        for o in ranked {
            let c = &o["cost"];
            let sum = c["capex_usd"].as_f64().unwrap() + c["energy_usd"].as_f64().unwrap();
            assert!((c["total_usd"].as_f64().unwrap() - sum).abs() < 1e-6);
            assert_eq!(o["source"], "imported", "every number is the report's");
        }
    }
    // The report files, beside each other.
    for name in [
        "json",
        "md",
        "html",
        "cost.svg",
        "cost.png",
        "nodes.svg",
        "nodes.png",
    ] {
        assert!(
            out.join(format!("seed-10000-users.{name}")).is_file(),
            "{name}"
        );
    }
}

/// Minimum cost to carry at least `demand` with whole nodes of integer capacities: dynamic
/// programming over capacity, a different method from the capplan's branch and bound.
fn exhaustive_min_cost(items: &[(u64, f64)], demand: u64) -> f64 {
    let mut best = vec![f64::INFINITY; demand as usize + 1];
    best[0] = 0.0;
    for c in 1..=demand as usize {
        for &(capacity, cost) in items {
            let before = c.saturating_sub(capacity as usize);
            best[c] = best[c].min(best[before] + cost);
        }
    }
    best[demand as usize]
}

#[test]
fn a_mixed_fleet_beats_every_single_type_and_is_the_true_minimum() {
    let out = scratch("compare-mix");
    let report = json(&seed_compare(&out, "json"));
    let mix = report["mixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == "llama-65b")
        .expect("a llama-65b mix");
    assert_eq!(mix["beats_every_single_type"], true, "{mix}");
    assert!(
        mix["parts"].as_array().unwrap().len() >= 2,
        "a real mix: {mix}"
    );
    let total = mix["total_usd"].as_f64().unwrap();
    assert!(total < mix["best_single_usd"].as_f64().unwrap());
    // Every llama-65b option as (users per node, cost per node).
    let items: Vec<(u64, f64)> = report["costed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["model"] == "llama-65b")
        .map(|o| {
            let nodes = o["nodes"].as_f64().unwrap();
            (
                o["users_per_node"].as_f64().unwrap() as u64,
                o["cost"]["total_usd"].as_f64().unwrap() / nodes,
            )
        })
        .collect();
    let exhaustive = exhaustive_min_cost(&items, 10_000);
    assert!(
        (total - exhaustive).abs() < 1e-3,
        "branch and bound {total} vs exhaustive {exhaustive}"
    );
}

#[test]
fn every_format_carries_sources_and_sensitivity() {
    let out = scratch("compare-formats");
    for format in ["table", "markdown", "csv", "html"] {
        let run = seed_compare(&out, format);
        assert_eq!(run.code, 0, "{format}: {}", run.stderr);
        assert!(run.stdout.contains("imported"), "{format}: sources");
        assert!(
            run.stdout.contains("demand −20 %") && run.stdout.contains("no plan"),
            "{format}: sensitivity"
        );
    }
    let json = json(&seed_compare(&out, "json"));
    assert_eq!(json["sensitivity"]["variants"].as_array().unwrap().len(), 5);
    for file in ["seed-10000-users.md", "seed-10000-users.html"] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(
            text.contains("imported") && text.contains("stricter SLO"),
            "{file}"
        );
    }
}

#[test]
fn solve_with_a_scenario_writes_the_same_reports_and_flags_override_it() {
    let out = scratch("solve-scenario");
    let run = capplan(&[
        "solve",
        SEED,
        "--users",
        "5000",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan = json(&run);
    assert_eq!(plan["request"]["demand"]["users"], 5000);
    let a30 = plan["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["model"] == "llama-13b" && p["node"] == "8xA30-PCIe")
        .unwrap();
    assert_eq!(a30["nodes"], 56, "⌈5000 / 90⌉");
    assert!(out.join("seed-10000-users.html").is_file());
}

#[test]
fn bad_cost_input_exits_2() {
    let out = scratch("compare-bad");
    let base = ["compare", SEED, "--out", out.to_str().unwrap()];
    for extra in [
        vec!["--pue", "0.5"],
        vec!["--years", "0"],
        vec!["--inventory", "8xA99:3"],
        vec!["--inventory", "8xA30-PCIe:many"],
    ] {
        let mut args = base.to_vec();
        args.extend(extra.iter().copied());
        let run = capplan(&args);
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(
            run.stderr.contains(extra[1].split(':').next().unwrap())
                || run.stderr.contains(extra[0]),
            "{extra:?}: {}",
            run.stderr
        );
    }
    let run = capplan(&["compare", "plans/none.toml"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("none.toml"));
}

//! `capplan calibrate` on a curve whose truth is known: measured levels made by the engine
//! itself with other efficiency factors than the defaults. The calibration must move the
//! factors towards the truth, bring the model's error down, and `predict` must then use it
//! and say so.

mod common;

use capplan::catalog::Catalog;
use capplan::sim::engine::EngineOptions;
use capplan::sim::measuring_client::MeasuringClient;
use capplan::sim::predict::{
    evaluate_arrivals, evaluate_level, Calibration, Layout, PredictRequest,
};
use capplan::sim::virtual_run::Arrivals;
use capplan::sim::Efficiency;
use capplan::slo::{Percentile, Slo};
use capplan::store::steps::{write_steps_csv, Level, Metric};
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};
use common::{capplan, json, scratch};

/// Levels of llama-3.1-8b on one L4 as an engine with `truth` would serve them to capplan's
/// probe (users in steady state).
fn measured_levels(truth: Efficiency) -> Vec<Level> {
    measured_by(truth, MeasuringClient::SteadyState)
}

/// The same levels as `client` would measure them.
fn measured_by(truth: Efficiency, client: MeasuringClient) -> Vec<Level> {
    let catalog = Catalog::shipped().unwrap();
    let (model, card) = (
        catalog.model("llama-3.1-8b").unwrap(),
        catalog.card("L4").unwrap(),
    );
    // The engine `capplan calibrate` assumes by default: vLLM's profile.
    let vllm = catalog.engine("vllm").unwrap();
    let mut layout = Layout::on_card(model, card, 1);
    layout.memory.memory_utilization = vllm.memory_utilization;
    let calibration = Calibration {
        name: "truth".into(),
        efficiency: truth,
        ..Calibration::for_engine(card, &card.interconnect, vllm, &catalog.operators)
    };
    let mut request = PredictRequest::new(
        Workload {
            input_tokens: TokenLengths::Fixed { tokens: 512 },
            output_tokens: TokenLengths::Fixed { tokens: 128 },
            think_time: ThinkTime::NONE,
            prefix_share: PrefixShare::NONE,
            speculation: None,
        },
        Slo {
            ttft_s: f64::INFINITY,
            tpot_s: None,
            percentile: Percentile::Mean,
            e2e_s: None,
        },
    );
    request.seed = 7;
    request.engine = EngineOptions::from_profile(vllm);
    [1, 4, 16, 32, 64]
        .iter()
        .map(|&n| {
            let simulated = match client.level(n, Some(20 * u64::from(n)), vllm.out_of_step) {
                None => evaluate_level(&layout, &calibration, &request, n),
                Some((warmup, measured, start)) => evaluate_arrivals(
                    &layout,
                    &calibration,
                    &request,
                    Arrivals::Closed { users: n },
                    warmup,
                    measured,
                    start,
                ),
            }
            .unwrap();
            let mut level = Level {
                concurrency: Some(f64::from(n)),
                requests: Some(simulated.requests as u64),
                failures: Some(0),
                output_tokens_per_s: Some(simulated.output_tokens_per_s),
                requests_per_s: Some(simulated.requests_per_s),
                ..Level::default()
            };
            level
                .stats_mut(Metric::Ttft)
                .set(Percentile::Mean, simulated.ttft.mean);
            level
                .stats_mut(Metric::Tpot)
                .set(Percentile::Mean, simulated.tpot.unwrap().mean);
            level
                .stats_mut(Metric::E2e)
                .set(Percentile::Mean, simulated.e2e.mean);
            level
        })
        .collect()
}

#[test]
fn calibration_recovers_the_engine_and_predict_uses_it() {
    let catalog = Catalog::shipped().unwrap();
    let card = catalog.card("L4").unwrap();
    let defaults = Efficiency::for_card(card, &card.interconnect);
    let truth = Efficiency {
        memory: 0.45,
        step_overhead_ms: 6.0,
        ..defaults
    };
    let root = scratch("calibrate");
    let run = write_run(&root, &measured_levels(truth), None);

    let measurements = root.to_str().unwrap();
    let out = capplan(&[
        "--measurements",
        measurements,
        "calibrate",
        run.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = json(&out);
    let card_fit = &report["cards"][0];
    let (before, after) = (
        card_fit["fit"]["median_error_before"].as_f64().unwrap(),
        card_fit["fit"]["median_error_after"].as_f64().unwrap(),
    );
    println!("median error {before:.3} → {after:.3}");
    println!("factors {}", card_fit["fit"]["factors"]);
    // The defaults are far off (memory 0.75 vs 0.45, 2 vs 6 ms a step)...
    assert!(before > 0.15, "{before}");
    // ...the calibrated model is within a few percent of every figure.
    assert!(after < 0.05, "{after}");
    let memory = card_fit["fit"]["factors"]["memory"].as_f64().unwrap();
    assert!(
        (memory - 0.45).abs() < (0.75 - 0.45) / 2.0,
        "memory efficiency {memory} moved towards 0.45"
    );
    let stored = root.join("calibrations").join("L4.json");
    assert!(stored.is_file(), "stored under measurements/calibrations");

    let prediction = capplan(&[
        "--measurements",
        measurements,
        "predict",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--ttft",
        "2s",
        "--format",
        "json",
    ]);
    assert_eq!(prediction.code, 0, "{}", prediction.stderr);
    let name = json(&prediction)["calibration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(name.starts_with("calibrated on 1 run"), "{name}");
    // Another card has no calibration: the defaults, said so.
    let other = capplan(&[
        "--measurements",
        measurements,
        "predict",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--ttft",
        "2s",
        "--format",
        "json",
    ]);
    assert!(json(&other)["calibration"]["name"]
        .as_str()
        .unwrap()
        .contains("uncalibrated"));
}

/// Writes `levels` as a run folder of llama-3.1-8b on one L4 under `root`: a probe's, or an
/// import from `tool`.
fn write_run(root: &std::path::Path, levels: &[Level], tool: Option<&str>) -> std::path::PathBuf {
    let run = root
        .join("llama-3.1-8b")
        .join("L4-tp1")
        .join("20261206T000000Z");
    std::fs::create_dir_all(&run).unwrap();
    write_steps_csv(&run.join("steps.csv"), levels).unwrap();
    let mut config = serde_json::json!({
        "kind": "probe",
        "status": "finished",
        "config": {
            "layout": {"model": "llama-3.1-8b", "card": "L4", "tp": 1, "interconnect": "pcie",
                       "instances_per_node": 1, "cards_per_node": null},
            "input": {"kind": "synthetic", "tokens": {"kind": "fixed", "tokens": 512}},
            "output_tokens": {"kind": "fixed", "tokens": 128},
            "think_time": {"kind": "fixed", "seconds": 0.0}
        }
    });
    if let Some(tool) = tool {
        config["kind"] = "import".into();
        config["source"] = serde_json::json!({"tool": tool});
    }
    std::fs::write(run.join("run.json"), config.to_string()).unwrap();
    run
}

/// `capplan calibrate --dry-run` on one run: its JSON report.
fn calibrate_dry(run: &std::path::Path) -> serde_json::Value {
    let out = capplan(&[
        "calibrate",
        "--dry-run",
        "--format",
        "json",
        run.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    json(&out)
}

#[test]
fn a_benchmarks_levels_are_simulated_as_it_ran_them() {
    // The model is right (the defaults are the truth), but the levels were measured the way
    // AIPerf's concurrency mode measures: every user started together, every request counted.
    let catalog = Catalog::shipped().unwrap();
    let card = catalog.card("L4").unwrap();
    let truth = Efficiency::for_card(card, &card.interconnect);
    let levels = measured_by(truth, MeasuringClient::StartedTogether);
    let fit_of = |report: &serde_json::Value| {
        let card_fit = report["cards"][0].clone();
        let error = |when: &str| card_fit["fit"][when].as_f64().unwrap();
        let drift = |factor: &str| {
            (card_fit["fit"]["factors"][factor].as_f64().unwrap()
                / card_fit["start"][factor].as_f64().unwrap())
            .ln()
            .abs()
        };
        (
            error("median_error_before"),
            error("median_error_after"),
            drift("compute"),
            drift("memory"),
        )
    };

    // Imported from AIPerf, they are simulated the same way: the starting factors reproduce
    // them (up to the client's send jitter, drawn from another seed: how the users bunch
    // after the first wave moves a level's mean TTFT by up to a few tens of per cent), and the
    // calibration keeps the factors near the truth.
    let imported = calibrate_dry(&write_run(
        &scratch("calibrate-aiperf"),
        &levels,
        Some("aiperf"),
    ));
    assert_eq!(
        imported["cards"][0]["measured_by"][0],
        "every user started together, every request counted"
    );
    let (before, after, compute, memory) = fit_of(&imported);
    println!(
        "as measured: median error {before:.3} -> {after:.3}, |ln| drift compute {compute:.3}, memory {memory:.3}"
    );
    assert!(before < 0.05 && after < 0.05, "{before} -> {after}");
    assert!(compute < 0.2 && memory < 0.2, "{compute}, {memory}");

    // Read as steady-state levels (how calibrate read every curve before), the waves of
    // prompts the benchmark sent are missing from the simulation: no factors fit them, and the
    // fit drags the true ones far off to make up TTFT.
    let steady = calibrate_dry(&write_run(&scratch("calibrate-steady"), &levels, None));
    let (_, steady_after, steady_compute, steady_memory) = fit_of(&steady);
    println!(
        "as steady state: median error after {steady_after:.3}, |ln| drift compute {steady_compute:.3}, memory {steady_memory:.3}"
    );
    assert!(steady_after > 3.0 * after, "{steady_after} vs {after}");
    assert!(
        steady_compute.max(steady_memory) > 2.0 * compute.max(memory),
        "{steady_compute}, {steady_memory} vs {compute}, {memory}"
    );
}

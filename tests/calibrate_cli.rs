//! `capplan calibrate` on a curve whose truth is known: measured levels made by the engine
//! itself with other efficiency factors than the defaults. The calibration must move the
//! factors towards the truth, bring the model's error down, and `predict` must then use it
//! and say so.

mod common;

use capplan::catalog::Catalog;
use capplan::sim::measuring_client::MeasuringClient;
use capplan::sim::Efficiency;
use capplan::store::steps::Level;
use common::simulated_run::{measured_by, write_run, CALIBRATION_LEVELS};
use common::{capplan, json, scratch};

/// Levels of llama-3.1-8b on one L4 as an engine with `truth` would serve them to capplan's
/// probe (users in steady state).
fn measured_levels(truth: Efficiency) -> Vec<Level> {
    measured_by(truth, MeasuringClient::SteadyState, &CALIBRATION_LEVELS)
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
    let levels = measured_by(truth, MeasuringClient::StartedTogether, &CALIBRATION_LEVELS);
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

//! Curves whose truth is known: levels of llama-3.1-8b on one L4 made by capplan's own engine
//! (vLLM's profile) at chosen efficiency factors, measured the way a chosen client measures, and
//! written as a run folder that `calibrate`, `fit` and `solve` read like any other.

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

/// The levels the calibration tests measure.
pub const CALIBRATION_LEVELS: [u32; 5] = [1, 4, 16, 32, 64];

/// Requests a started-together client counts per user at each level.
pub const ROUNDS: u64 = 20;

/// Levels of `users` as an engine with `truth` serves them to `client` (ROUNDS requests per
/// user where the client counts requests; one draw of its delays, seed 7).
pub fn measured_by(truth: Efficiency, client: MeasuringClient, users: &[u32]) -> Vec<Level> {
    let catalog = Catalog::shipped().unwrap();
    let (model, card) = (
        catalog.model("llama-3.1-8b").unwrap(),
        catalog.card("L4").unwrap(),
    );
    // The engine `capplan calibrate` and `solve` assume by default: vLLM's profile.
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
    users
        .iter()
        .map(|&n| {
            let simulated = match client.level(n, Some(ROUNDS * u64::from(n)), vllm.out_of_step) {
                None => evaluate_level(&layout, &calibration, &request, n),
                Some(sample) => evaluate_arrivals(
                    &layout,
                    &calibration,
                    &request,
                    Arrivals::Closed { users: n },
                    sample,
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

/// Writes `levels` as a run folder of llama-3.1-8b on one L4 under `root`: a probe's, or an
/// import from `tool`.
pub fn write_run(
    root: &std::path::Path,
    levels: &[Level],
    tool: Option<&str>,
) -> std::path::PathBuf {
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

//! What finding C* costs: capplan's search (doubling, then bisection, with confidence-judged
//! windows) against the fixed sweep the public reports run (levels 8, 16, 32, 64, 128, 150,
//! 200, 256, 300, 400, 512 × 1000 requests each), for three layouts of the simulated engine.
//! Run with `cargo bench --bench probe_cost`.
//!
//! The sweep is costed in virtual time (the same engine, 1000 closed-loop requests a level:
//! server time = 1000 / throughput); its C* is the highest level that met the SLO, and `read`
//! is where its table puts the crossing between that level and the next (linear in the binding
//! percentile), which is what a reader of such a table would quote. capplan's
//! probe runs for real against `capplan serve` at 20× speed, and its server time is the
//! engine's. Both are compared with `predict`'s C* (2 % resolution) as the reference.
//! Target (issue 7): ≤ 15 % of the sweep's server time, C* within ±5 % of the sweep's.

use capplan::catalog::Catalog;
use capplan::probe::run::{run_probe, Input, LayoutInfo, ProbeConfig, RunFolder, Target};
use capplan::probe::search::Ramp;
use capplan::sim::predict::{engine_for, predict, Calibration, Layout, PredictRequest};
use capplan::sim::serve::fault::FaultPlan;
use capplan::sim::serve::{start, ServeConfig};
use capplan::sim::virtual_run::{
    run_virtual, Arrivals, Phases, RunSpec, DEFAULT_CLIENT_TURNAROUND_S,
};
use capplan::slo::{Percentile, Slo};
use capplan::stats::statistic;
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};

const SWEEP: [u32; 11] = [8, 16, 32, 64, 128, 150, 200, 256, 300, 400, 512];
const SCALE: f64 = 20.0;

fn workload() -> Workload {
    Workload {
        input_tokens: TokenLengths::Uniform { min: 100, max: 700 },
        output_tokens: TokenLengths::Uniform { min: 50, max: 350 },
        think_time: ThinkTime::NONE,
        prefix_share: PrefixShare::NONE,
        speculation: None,
    }
}

fn slo() -> Slo {
    Slo {
        ttft_s: 2.0,
        tpot_s: Some(0.1),
        percentile: Percentile::P(90.0),
        e2e_s: None,
    }
}

fn main() {
    let catalog = Catalog::shipped().expect("catalog");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "probe cost: {} · {} · capplan probe against serve at {SCALE}× vs the public sweep (virtual time)",
        workload(),
        slo().describe()
    );
    println!(
        "{:<28} {:>8} {:>10} {:>8} {:>9} {:>11} {:>10} {:>9} {:>8} {:>10} {:>10}",
        "layout",
        "predict",
        "sweep C*",
        "read",
        "sweep s",
        "capplan C*",
        "capplan s",
        "requests",
        "time %",
        "vs read",
        "vs predict"
    );
    let (mut total_sweep, mut total_probe) = (0.0, 0.0);
    for (model, card, tp) in [
        ("llama-3.1-8b", "L4", 1),
        ("llama-13b", "A30", 2),
        ("qwen2.5-7b", "A100-80G-SXM", 1),
    ] {
        let (model, card) = (catalog.model(model).unwrap(), catalog.card(card).unwrap());
        let layout = Layout::on_card(model, card, tp);
        let calibration = Calibration::for_card(card, &card.interconnect);
        let request = PredictRequest::new(workload(), slo());
        let reference = predict(&layout, &calibration, &request).unwrap().c_star;

        // The sweep, in virtual time: 1000 requests a level, judged on those 1000; its C* is
        // the last level before the first that fails (how the reports read their tables).
        let (mut sweep_seconds, mut sweep_c_star, mut failed) = (0.0, 0, false);
        // Each level's binding percentile over its limit, to read the sweep's C* between its
        // levels the way a reader of its table would (linearly between last pass, first fail).
        let mut loads: Vec<(u32, f64)> = Vec::new();
        for &users in &SWEEP {
            let (mut engine, _) =
                engine_for(&layout, &calibration, &request.engine, false).unwrap();
            let run = run_virtual(
                &mut engine,
                &RunSpec {
                    arrivals: Arrivals::Closed { users },
                    workload: workload(),
                    warmup_requests: 0,
                    measured_requests: 1000,
                    seed: 1,
                    client_turnaround_s: DEFAULT_CLIENT_TURNAROUND_S,
                    stagger_s: 0.0,
                    client_jitter_s: 0.0,
                    request_overhead_s: 0.0,
                    phases: Phases::Continuous,
                    out_of_step_s: 0.0,
                },
            );
            sweep_seconds += 1000.0 / run.requests_per_s().max(1e-9);
            let ttfts: Vec<f64> = run.requests.iter().map(|r| r.ttft()).collect();
            let tpots: Vec<f64> = run.requests.iter().filter_map(|r| r.tpot()).collect();
            let limits = slo();
            let load = (statistic(&ttfts, limits.percentile) / limits.ttft_s)
                .max(statistic(&tpots, limits.percentile) / limits.tpot_s.unwrap_or(f64::INFINITY));
            let pass = load <= 1.0;
            if pass && !failed {
                sweep_c_star = users;
            }
            if !failed {
                loads.push((users, load));
            }
            failed |= !pass;
        }
        let sweep_read = match loads.as_slice() {
            [.., (low, at_low), (fail, at_fail)] if *at_fail > 1.0 && at_fail > at_low => {
                f64::from(*low) + (1.0 - at_low) / (at_fail - at_low) * f64::from(fail - low)
            }
            _ => f64::from(sweep_c_star),
        };

        // capplan's search against the served engine.
        let (engine, _) = engine_for(&layout, &calibration, &request.engine, true).unwrap();
        let out = std::env::temp_dir().join(format!("capplan-probe-cost-{}", std::process::id()));
        let (c_star, seconds, requests) = runtime.block_on(async {
            let server = start(
                engine,
                ServeConfig {
                    host: "127.0.0.1".into(),
                    port: 0,
                    time_scale: SCALE,
                    seed: 1,
                    model_name: model.name.clone(),
                    output_tokens: TokenLengths::Fixed { tokens: 256 },
                    faults: FaultPlan::new(Vec::new(), 1).unwrap(),
                    stall_for: std::time::Duration::from_secs(1),
                    log: None,
                },
            )
            .await
            .expect("server");
            let config = ProbeConfig {
                target: Target::Sim {
                    time_scale: SCALE,
                    faults: Vec::new(),
                },
                api: "chat".into(),
                api_template: None,
                metrics_url: None,
                served_model: model.name.clone(),
                stream: true,
                layout: LayoutInfo {
                    model: model.name.clone(),
                    card: card.name.clone(),
                    tp,
                    cards_per_node: None,
                    instances_per_node: 1,
                    instances_per_card: 1,
                    interconnect: card.interconnect.clone(),
                    pp: 1,
                    ep: 1,
                    attention_dp: 1,
                    pd: None,
                    speculation: None,
                },
                slo: slo(),
                e2e_limit_s: None,
                max_error_rate: 0.01,
                input: Input::Synthetic {
                    tokens: workload().input_tokens,
                    prefix_share: PrefixShare::NONE,
                },
                output_tokens: workload().output_tokens,
                think_time: ThinkTime::NONE,
                ramp: Ramp::Auto {
                    start: 8,
                    max: 1024,
                    resolution: 0.05,
                },
                warmup: None,
                window: None,
                timeout_s: 600.0,
                idle_timeout_s: 60.0,
                api_key_env: None,
                tokenizer: None,
                seed: 1,
                load: Default::default(),
                client_threads: 1,
                command: vec!["bench".into()],
            };
            let report = run_probe(
                config,
                &server.url,
                RunFolder::New { out: out.clone() },
                false,
            )
            .await
            .expect("probe");
            drop(server);
            (
                report.result.c_star,
                report.server_seconds * SCALE,
                report.requests_sent,
            )
        });
        let _ = std::fs::remove_dir_all(&out);
        total_sweep += sweep_seconds;
        total_probe += seconds;
        println!(
            "{:<28} {:>8} {:>10} {:>8.0} {:>9.0} {:>11} {:>10.0} {:>9} {:>7.1}% {:>+9.1}% {:>+9.1}%",
            format!("{} {}×{}", model.name, tp, card.name),
            reference,
            sweep_c_star,
            sweep_read,
            sweep_seconds,
            c_star,
            seconds,
            requests,
            seconds / sweep_seconds * 100.0,
            (f64::from(c_star) / sweep_read.max(1.0) - 1.0) * 100.0,
            (f64::from(c_star) / f64::from(reference.max(1)) - 1.0) * 100.0
        );
    }
    println!(
        "all three: capplan spent {:.0} server-s against the sweep's {:.0} ({:.1} %); target ≤ 15 %",
        total_probe,
        total_sweep,
        total_probe / total_sweep * 100.0
    );
}

//! How long `solve` takes over the whole catalog: every model × every node shape, with a
//! capacity point for every layout that fits (so every split of every node is evaluated), plus
//! the shipped seed table. Goal: under 100 ms. And two questions as a user types them (the
//! release binary, start-up to plan, predictions included): the README's
//! `capplan solve --users 10000 --ttft 3s`, goal under 1 s; and every mixture-of-experts
//! model of the catalog over every node shape, nothing measured (each of its rows a
//! prediction: tensor, expert and data-parallel layouts, instances over several nodes, the
//! leading node shapes disaggregated), goal under 2 s. Run with `cargo bench --bench solve`.

use std::path::Path;
use std::time::Instant;

use capplan::catalog::{memory_fit, Catalog, MemoryOptions, Parallelism};
use capplan::plan::{solve, Demand, SolveRequest};
use capplan::slo::{Percentile, Slo};
use capplan::store::{load_capacity_dir, CapacityPoint, PointSource};
use capplan::workload::ThinkTime;

fn main() {
    let catalog = Catalog::shipped().expect("built-in catalog");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut points = load_capacity_dir(&root.join("measurements"), &catalog).expect("seed table");
    let slo = Slo {
        ttft_s: 3.15,
        tpot_s: Some(0.1),
        percentile: Percentile::Mean,
        e2e_s: None,
    };
    for model in &catalog.models {
        for card in &catalog.cards {
            for tp in [1, 2, 4, 8] {
                if memory_fit(model, card, tp, &MemoryOptions::default()).is_err() {
                    continue;
                }
                points.push(CapacityPoint {
                    pd: None,
                    speculation: None,
                    model: model.name.clone(),
                    card: card.name.clone(),
                    interconnect: card.interconnect.clone(),
                    cards_per_node: None,
                    instances_per_node: None,
                    instances_per_card: 1,
                    tp,
                    parallel: Parallelism::tensor(tp),
                    users_per_instance: 10.0 * f64::from(tp),
                    slo,
                    think_time: ThinkTime::parse_table_seconds("1-3").expect("range"),
                    source: PointSource::Predicted,
                    note: String::new(),
                    e2e_mean_s: None,
                    output_tokens: None,
                    engine: None,
                    band: None,
                    measured_by: None,
                    requests_per_user: None,
                    origin: "bench".into(),
                });
            }
        }
    }
    let request = SolveRequest {
        demand: Demand::Users(10_000),
        slo,
        think_time: None,
        models: catalog.models.iter().map(|m| m.name.clone()).collect(),
        cards: Vec::new(),
        headroom: 0.1,
        spares: 1,
        memory: MemoryOptions::default(),
        speculation: None,
    };

    // Load + solve, as one `capplan solve` does after start-up.
    let mut times = Vec::new();
    let mut plans = 0;
    for _ in 0..50 {
        let start = Instant::now();
        let catalog = Catalog::shipped().expect("built-in catalog");
        let report = solve(&catalog, &points, &request, None).expect("solve");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        plans = report.plans.len();
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let typed_args = ["solve", "--users", "10000", "--ttft", "3s"];
    let typed = typed_solve(&typed_args, &typed_args.join(" "), 5, 1.0);
    let mixtures: Vec<&str> = catalog
        .models
        .iter()
        .filter(|m| m.experts.is_some_and(|e| e > 1))
        .map(|m| m.name.as_str())
        .collect();
    let label = format!(
        "solve --users 10000 --ttft 2s --tpot 50ms --model <the catalog's {} mixtures of experts>",
        mixtures.len()
    );
    let mixtures = mixtures.join(",");
    let every_mixture = typed_solve(
        &[
            "solve", "--users", "10000", "--ttft", "2s", "--tpot", "50ms", "--model", &mixtures,
        ],
        &label,
        3,
        2.0,
    );
    println!(
        "solve over the whole catalog ({} models × {} node shapes, {} capacity points, {plans} plans): \
         median {median:.2} ms, max {:.2} ms over {} runs (goal: < 100 ms) → {}",
        catalog.models.len(),
        catalog.nodes.len(),
        points.len(),
        times[times.len() - 1],
        times.len(),
        if median < 100.0 { "met" } else { "MISSED" }
    );
    println!("{typed}");
    println!("{every_mixture}");
}

/// `capplan ARGS` (shown as `capplan LABEL`) run `runs` times as a user runs it: the median
/// against `goal_s` seconds.
fn typed_solve(args: &[&str], label: &str, runs: usize, goal_s: f64) -> String {
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_capplan"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("capplan runs");
        assert!(output.status.success(), "capplan {}", args.join(" "));
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    format!(
        "capplan {label} (release binary, predictions included): median {median:.2} s, max \
         {:.2} s over {} runs (goal: < {goal_s} s) → {}",
        times[times.len() - 1],
        times.len(),
        if median < goal_s { "met" } else { "MISSED" }
    )
}

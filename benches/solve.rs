//! How long `solve` takes over the whole catalog: every model × every node shape, with a
//! capacity point for every layout that fits (so every split of every node is evaluated), plus
//! the shipped seed table. Goal: under 100 ms. And the README's question as a user types it,
//! `capplan solve --users 10000 --ttft 3s` (the release binary, start-up to plan, predictions
//! included): goal under 1 s. Run with `cargo bench --bench solve`.

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
    let typed = typed_solve();
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
}

/// `capplan solve --users 10000 --ttft 3s` run five times as a user runs it.
fn typed_solve() -> String {
    let args = ["solve", "--users", "10000", "--ttft", "3s"];
    let mut times = Vec::new();
    for _ in 0..5 {
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
        "capplan {} (release binary, predictions included): median {median:.2} s, max {:.2} s \
         over {} runs (goal: < 1 s) → {}",
        args.join(" "),
        times[times.len() - 1],
        times.len(),
        if median < 1.0 { "met" } else { "MISSED" }
    )
}

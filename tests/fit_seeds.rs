//! `fit` on published measurements (the project's seeds): leave-one-out prediction of each
//! interior level's throughput and p90 latency from the other levels.
//!
//! The bound, 10 %: two levels of the same run measured again differ by a few percent (the
//! seeds' E2E p90 moves 3–8 % between neighbouring levels below saturation), and a planner that
//! sizes a fleet to ±10 % in users is inside the headroom people add anyway (20 %). A fit that
//! predicts a held-out level worse than that is not worth having over interpolation.

use std::path::Path;

use capplan::fit::{capacity_at, fit_curve, FitOptions, Limits};
use capplan::slo::Percentile;
use capplan::store::steps::{read_steps_csv, Level, Metric};

fn seed(name: &str) -> Vec<Level> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seeds")
        .join(name);
    read_steps_csv(&path).expect("seed table").levels
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// (throughput errors, p90 latency errors) of each interior level predicted from the others;
/// latency only at levels the fit would use (within the error budget).
fn leave_one_out(name: &str) -> (Vec<f64>, Vec<f64>) {
    let levels = seed(name);
    let p90 = Percentile::P(90.0);
    let (mut throughput, mut latency) = (Vec::new(), Vec::new());
    println!("{name}:");
    println!("  users | tok/s measured  predicted   error | E2E p90 measured  predicted   error");
    for held in 1..levels.len() - 1 {
        let rest: Vec<Level> = levels
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != held)
            .map(|(_, l)| l.clone())
            .collect();
        let fit = fit_curve(&rest, FitOptions::default());
        let level = &levels[held];
        let n = level.concurrency.unwrap();
        let usl = fit
            .throughput_fit("output_tokens_per_s")
            .expect("a USL fit");
        let (x, x_hat) = (level.output_tokens_per_s.unwrap(), usl.at(n));
        throughput.push((x_hat - x).abs() / x);
        let mut line = format!(
            "  {n:>5} | {x:>14.1} {x_hat:>10.1} {:>+6.1} %",
            (x_hat / x - 1.0) * 100.0
        );
        let within_budget = level.error_rate() <= FitOptions::default().max_error_rate;
        let curve = fit.latency_fit(Metric::E2e, p90).expect("a p90 fit");
        let (l, l_hat) = (level.value(Metric::E2e, p90).unwrap(), curve.at(n));
        if within_budget {
            latency.push((l_hat - l).abs() / l);
            line += &format!(
                " | {l:>16.2} {l_hat:>10.2} {:>+6.1} %",
                (l_hat / l - 1.0) * 100.0
            );
        } else {
            line += &format!(
                " | {l:>16.2}   (not predicted: {:.1} % failed)",
                level.error_rate() * 100.0
            );
        }
        println!("{line}");
    }
    println!(
        "  median error: throughput {:.1} %, E2E p90 {:.1} %",
        median(throughput.clone()) * 100.0,
        median(latency.clone()) * 100.0
    );
    (throughput, latency)
}

#[test]
fn held_out_levels_are_predicted_within_ten_percent() {
    for name in [
        "mindie--qwen1-5-7b-chat.csv",
        "nvidia-t4-vllm--qwen2-7b-instruct.csv",
    ] {
        let (throughput, latency) = leave_one_out(name);
        assert!(
            median(throughput.clone()) <= 0.10,
            "{name}: throughput {throughput:?}"
        );
        assert!(!latency.is_empty());
        assert!(
            median(latency.clone()) <= 0.10,
            "{name}: latency {latency:?}"
        );
    }
}

#[test]
fn levels_that_cannot_be_taken_as_measured_are_flagged() {
    // MindIE: a fixed 1000 requests at 720 users drains long before the run ends.
    let fit = fit_curve(&seed("mindie--qwen1-5-7b-chat.csv"), FitOptions::default());
    let drained = fit
        .flags
        .iter()
        .find(|f| f.load == 720.0)
        .expect("720 flagged");
    assert!(drained.reason.contains("Little"), "{drained:?}");
    assert!(
        drained.excluded_from.is_empty(),
        "a warning, not an exclusion"
    );
    assert!(fit.flags.iter().all(|f| f.load > 100.0), "{:?}", fit.flags);
    // T4: from 100 users on, requests time out; their latency is not the server's.
    let fit = fit_curve(
        &seed("nvidia-t4-vllm--qwen2-7b-instruct.csv"),
        FitOptions::default(),
    );
    for load in [100.0, 128.0, 150.0] {
        let flag = fit.flags.iter().find(|f| f.load == load).expect("flagged");
        assert!(flag.excluded_from.contains(&"latency"), "{flag:?}");
    }
    let usl = fit.throughput_fit("output_tokens_per_s").unwrap();
    let peak = usl.peak_concurrency.unwrap();
    assert!(
        (60.0..200.0).contains(&peak),
        "T4 peaks near 100 users: {peak}"
    );
}

#[test]
fn c_star_at_any_slo_sits_in_the_measured_bracket() {
    let levels = seed("mindie--qwen1-5-7b-chat.csv");
    let fit = fit_curve(&levels, FitOptions::default());
    let limits = |e2e: f64| Limits {
        ttft_s: None,
        tpot_s: None,
        e2e_s: Some(e2e),
        statistic: Percentile::P(90.0),
        max_error_rate: 0.01,
    };
    // p90 E2E 9.57 s at 128 users, 10.20 s at 150.
    let estimate = capacity_at(&levels, &fit, &limits(10.0)).unwrap();
    assert_eq!(
        (estimate.measured_pass, estimate.measured_fail),
        (Some(128.0), Some(150.0))
    );
    assert!((128.0..150.0).contains(&estimate.c_star), "{estimate:?}");
    assert!(estimate.low <= estimate.c_star && estimate.c_star <= estimate.high);
    // A looser limit holds more users; one below every level holds none measured.
    let looser = capacity_at(&levels, &fit, &limits(14.0)).unwrap();
    assert!(looser.c_star > estimate.c_star);
    let impossible = capacity_at(&levels, &fit, &limits(1.0)).unwrap();
    assert_eq!(impossible.c_star, 0.0);
    assert_eq!(impossible.measured_fail, Some(8.0));
    // TTFT was never measured (non-streaming): say so.
    let ttft = Limits {
        ttft_s: Some(1.0),
        ..limits(10.0)
    };
    let gap = capacity_at(&levels, &fit, &ttft).unwrap_err().to_string();
    assert!(gap.contains("TTFT p90") && gap.contains("E2E p90"), "{gap}");
}

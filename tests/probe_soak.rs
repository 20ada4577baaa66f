//! `capplan probe --duration`: one level held for a time against the time-scaled simulator,
//! statistics per interval from HDR histograms that add up to the whole run, every request on
//! record, the probe's own footprint beside each interval.

mod common;

use std::path::{Path, PathBuf};

use capplan::probe::record::Phase;
use capplan::probe::run_dir::read_requests;

fn run_folder(out: &Path) -> PathBuf {
    let model = out.join("llama-3.1-8b").join("L4-tp1");
    std::fs::read_dir(&model)
        .expect("a run folder")
        .flatten()
        .map(|e| e.path())
        .next()
        .expect("one run")
}

#[test]
fn a_soak_reports_intervals_that_add_up_to_the_whole() {
    let out = common::scratch("soak");
    // 120 s of the server's time at 40× (3 s of wall time), an interval every 20 s.
    let run = common::capplan(&[
        "probe",
        "--sim",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--ttft",
        "2s",
        "--tpot",
        "200ms",
        "--max-error-rate",
        "0.1",
        "--concurrency",
        "8",
        "--warmup",
        "8",
        "--output-tokens",
        "32",
        "--duration",
        "120s",
        "--interval",
        "20s",
        "--sim-time-scale",
        "40",
        "--sim-fault",
        "reset:0.05",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = common::json(&run);
    let soak = &report["soak"];
    let intervals = soak["intervals"].as_array().expect("intervals");
    // Six closes on schedule, give or take the last partial one.
    assert!((5..=7).contains(&intervals.len()), "{}", intervals.len());
    let sum = |key: &str| -> u64 { intervals.iter().map(|i| i[key].as_u64().unwrap()).sum() };
    assert_eq!(sum("requests"), soak["requests"].as_u64().unwrap());
    assert_eq!(sum("ok"), soak["ok"].as_u64().unwrap());
    assert!(soak["requests"].as_u64().unwrap() > 50);

    // Every request is on record: counted ones, warm-up, and those cut off at the end.
    let dir = run_folder(&out);
    let records = read_requests(&dir).unwrap();
    assert_eq!(records.len() as u64, soak["sent"].as_u64().unwrap());
    assert_eq!(
        report["requests_sent"].as_u64().unwrap(),
        soak["sent"].as_u64().unwrap()
    );
    let measured = records
        .iter()
        .filter(|r| r.phase == Phase::Measured)
        .count() as u64;
    assert_eq!(measured, soak["requests"].as_u64().unwrap());
    let cut = records
        .iter()
        .filter(|r| r.phase == Phase::Cancelled)
        .count() as u64;
    assert_eq!(cut, soak["cut_off"].as_u64().unwrap());
    assert!(cut <= 8);
    let resets = soak["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0] == "reset")
        .map_or(0, |f| f[1].as_u64().unwrap());
    let logged_resets = records
        .iter()
        .filter(|r| r.phase == Phase::Measured && !r.ok)
        .count() as u64;
    assert_eq!(resets, logged_resets);

    // The whole run's median lies between its intervals' medians (a merged histogram, not an
    // average of percentiles).
    let p50s: Vec<f64> = intervals
        .iter()
        .filter_map(|i| i["ttft"]["p50_s"].as_f64())
        .collect();
    let whole = soak["ttft"]["p50_s"].as_f64().unwrap();
    let (low, high) = p50s
        .iter()
        .fold((f64::INFINITY, 0.0_f64), |(l, h), v| (l.min(*v), h.max(*v)));
    assert!(
        low <= whole && whole <= high,
        "{whole} outside [{low}, {high}]"
    );

    // soak.csv: a header and a line per interval, written as each closed.
    let csv = std::fs::read_to_string(dir.join("soak.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("interval,start_s,end_s,requests,ok,failed,ttft_mean_s"));
    assert_eq!(lines.len(), intervals.len() + 1);
    if cfg!(target_os = "linux") {
        assert!(intervals
            .iter()
            .all(|i| i["rss_mib"].as_f64().is_some_and(|m| m > 1.0)));
        assert!(intervals
            .iter()
            .all(|i| i["open_fds"].as_u64().is_some_and(|n| n > 2)));
    }
    // No Parquet copy for a soak (it would read every request back into memory).
    assert!(!dir.join("requests.parquet").exists());
}

#[test]
fn a_soak_needs_one_level_and_an_interval_within_it() {
    let out = common::scratch("soak-bad");
    let base = [
        "probe",
        "--sim",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--ttft",
        "2s",
        "--out",
    ];
    let mut args: Vec<&str> = base.to_vec();
    args.push(out.to_str().unwrap());
    let with = |extra: &[&str]| {
        let mut all = args.clone();
        all.extend_from_slice(extra);
        common::capplan(&all)
    };
    let run = with(&["--duration", "10m"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("exactly one --concurrency"),
        "{}",
        run.stderr
    );
    let run = with(&["--duration", "1m", "--interval", "5m", "--concurrency", "4"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--interval 5 min") || run.stderr.contains("--interval"),
        "{}",
        run.stderr
    );
    let run = with(&["--interval", "1m", "--concurrency", "4"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--duration"), "{}", run.stderr);
    assert!(
        std::fs::read_dir(out.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

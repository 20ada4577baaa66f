//! A probe killed mid-run (SIGKILL) loses no finished request, and `--resume` finishes the run.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capplan::probe::record::RequestRecord;

fn run_folder(out: &std::path::Path) -> Option<std::path::PathBuf> {
    let base = out.join("llama-3.1-8b").join("H100-SXM-tp1");
    std::fs::read_dir(base)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .next()
}

#[test]
fn sigkill_loses_no_finished_request_and_resume_finishes() {
    let out = common::scratch("kill");
    let mut child = Command::new(env!("CARGO_BIN_EXE_capplan"))
        .args([
            "probe",
            "--sim",
            "--model",
            "llama-3.1-8b",
            "--card",
            "H100-SXM",
            "--ttft",
            "2s",
            "--tpot",
            "50ms",
            "--input-tokens",
            "64",
            "--output-tokens",
            "32",
            "--concurrency",
            "4,8,16",
            "--window",
            "60",
            "--sim-time-scale",
            "5",
            "--out",
        ])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("probe starts");

    // Wait until some requests have finished, then kill without warning.
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        if let Some(dir) = run_folder(&out) {
            let log = dir.join("requests.ndjson");
            let lines = std::fs::read_to_string(&log)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if lines >= 40 {
                break log;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the probe wrote too little in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'), "no torn last line");
    let records: Vec<RequestRecord> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is a whole record"))
        .collect();
    assert!(records.len() >= 40);
    let run = std::fs::read_to_string(log.with_file_name("run.json")).unwrap();
    assert!(
        run.contains("\"running\""),
        "the killed run is marked as not finished"
    );

    // Resume: the run continues in the same folder and finishes.
    let dir = log.parent().unwrap().to_path_buf();
    let resumed = Command::new(env!("CARGO_BIN_EXE_capplan"))
        .args(["probe", "--resume"])
        .arg(&dir)
        .args(["--format", "json"])
        .output()
        .expect("resume runs");
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(report["status"], "finished");
    let after: Vec<RequestRecord> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(after.len() > records.len(), "resume appended");
    assert_eq!(
        &after[..records.len()],
        &records[..],
        "nothing recorded before the kill changed"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "finished");
    // The request log as Parquet: magic bytes at both ends.
    let parquet = std::fs::read(dir.join("requests.parquet")).expect("requests.parquet");
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));
    use polars::prelude::SerReader;
    let frame = polars::prelude::ParquetReader::new(
        std::fs::File::open(dir.join("requests.parquet")).unwrap(),
    )
    .finish()
    .expect("polars reads it back");
    assert_eq!(frame.height(), after.len(), "one row per request");
    let c_star = run["result"]["c_star"].as_u64().unwrap();
    assert!(
        c_star >= 4,
        "an H100 holds 4 users of a 64/32-token chat: {c_star}"
    );

    // solve takes the finished run as a measured capacity point.
    let plan = common::capplan(&[
        "--measurements",
        out.to_str().unwrap(),
        "solve",
        "--users",
        "1000",
        "--ttft",
        "2s",
        "--tpot",
        "50ms",
        "--model",
        "llama-3.1-8b",
        "--cards",
        "8xH100-SXM",
        "--no-predict",
        "--format",
        "json",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let row = &plan["plans"][0];
    assert_eq!(row["source"], "measured");
    assert_eq!(row["users_per_instance"].as_f64(), Some(c_star as f64));
    assert_eq!(row["split"]["label"], "8×TP1");
    // The run's curve, fitted at the SLO asked (the probe's own): its C* and E2E latency.
    assert_eq!(row["evidence"].as_str(), dir.to_str());
    assert!(row["evidence_note"].as_str().unwrap().starts_with("fitted"));
}

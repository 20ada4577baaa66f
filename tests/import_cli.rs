//! `capplan import` from the command line: each tool's real result files become a run folder
//! that `fit` and `solve` read like a probe's; bad input names the file.

mod common;

use std::path::{Path, PathBuf};

use common::{capplan, json, scratch};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(path)
}

fn import(out: &Path, tool: &str, path: &Path) -> serde_json::Value {
    let run = capplan(&[
        "import",
        "--from",
        tool,
        path.to_str().unwrap(),
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{tool}: {}", run.stderr);
    json(&run)
}

/// `import` of the EvalScope closed-loop fixture (llama-3.1-8b on H100-SXM) into `out`'s
/// run folders, then `extra`.
fn import_evalscope(out: &Path, extra: &[&str]) -> common::Run {
    import_evalscope_as(out, "llama-3.1-8b", extra)
}

/// The same import recorded as `model` on H100-SXM.
fn import_evalscope_as(out: &Path, model: &str, extra: &[&str]) -> common::Run {
    let fixture = fixture("evalscope/v1.14.1-closed-loop");
    let mut args = vec![
        "--measurements",
        out.to_str().unwrap(),
        "import",
        "--from",
        "evalscope",
        fixture.to_str().unwrap(),
        "--model",
        model,
        "--card",
        "H100-SXM",
        "--format",
        "json",
    ];
    args.extend(extra);
    capplan(&args)
}

/// `solve` for 100 llama-3.1-8b users on 8xH100-SXM nodes from what `out` holds alone, then
/// `extra`; must plan.
fn solve_measured_only(out: &Path, extra: &[&str]) -> serde_json::Value {
    let run = solve_from(out, extra);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)
}

/// The same `solve`, whatever its exit.
fn solve_from(out: &Path, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "--measurements",
        out.to_str().unwrap(),
        "solve",
        "--users",
        "100",
        "--ttft",
        "50ms",
        "--tpot",
        "20ms",
        "--model",
        "llama-3.1-8b",
        "--cards",
        "8xH100-SXM",
        "--no-predict",
        "--format",
        "json",
    ];
    args.extend(extra);
    capplan(&args)
}

#[test]
fn every_tool_becomes_a_run_folder_with_its_levels() {
    let out = scratch("import-all");
    // (tool, fixture, closed-loop levels expected)
    for (tool, path, levels) in [
        (
            "evalscope",
            "evalscope/v1.14.1-closed-loop",
            vec![1.0, 4.0, 8.0],
        ),
        (
            "evalscope",
            "evalscope/v1.6.0-closed-loop-seconds",
            vec![1.0, 4.0, 8.0],
        ),
        (
            "guidellm",
            "guidellm/v0.8.1/benchmarks-concurrent-1-4-8.json",
            vec![1.0, 4.0, 8.0],
        ),
        (
            "aiperf",
            "aiperf/v0.13.0-concurrency-sweep",
            vec![1.0, 4.0, 8.0],
        ),
    ] {
        let report = import(&out, tool, &fixture(path));
        let got: Vec<f64> = report["imported"]["levels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["concurrency"].as_f64())
            .collect();
        assert_eq!(got, levels, "{tool} {path}");
        let dir = PathBuf::from(report["run_dir"].as_str().unwrap());
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(run["kind"], "import");
        assert_eq!(run["source"]["tool"], tool);
        assert!(dir.join("steps.csv").is_file());
        // Every level's TTFT is in seconds whatever the tool wrote (the server's is ~10–30 ms).
        for level in report["imported"]["levels"].as_array().unwrap() {
            let ttft = level["latency"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m[0] == "ttft")
                .map(|m| m[1]["mean"].as_f64().unwrap());
            if let Some(ttft) = ttft {
                assert!((0.001..0.2).contains(&ttft), "{tool} {path}: TTFT {ttft} s");
            }
        }
    }
}

#[test]
fn solve_and_fit_use_an_import_as_imported_capacity() {
    let out = scratch("import-solve");
    // No --out: the global --measurements folder is where the run goes (and where solve reads).
    let imported = import_evalscope(&out, &[]);
    assert_eq!(imported.code, 0, "{}", imported.stderr);
    let run_dir = json(&imported)["run_dir"].as_str().unwrap().to_string();
    assert!(Path::new(&run_dir).starts_with(&out), "{run_dir}");
    let plans = solve_measured_only(&out, &[]);
    let row = &plans["plans"][0];
    assert_eq!(row["source"], "imported");
    // Every level passed (8 users at ~23 ms p90 TTFT): at least 8 users per instance.
    assert_eq!(row["evidence_c_star"], 8.0);
    assert!(row["evidence_note"].as_str().unwrap().contains("≥"));
}

#[test]
fn an_import_records_the_deployment_and_plans_it_per_worker() {
    let out = scratch("import-pd");
    let imported = import_evalscope(&out, &["--pd", "1:1", "--speculative", "eagle:2@0.6"]);
    assert_eq!(imported.code, 0, "{}", imported.stderr);
    let run_dir = json(&imported)["run_dir"].as_str().unwrap().to_string();
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&run_dir).join("run.json")).unwrap(),
    )
    .unwrap();
    let layout = &run["config"]["layout"];
    assert_eq!(layout["pd"]["prefill"], 1);
    assert_eq!(layout["pd"]["decode"], 1);
    assert_eq!(layout["speculation"]["draft_tokens"], 2);
    // The deployment held 8 users over its two workers: 4 a worker — evidence for a plan
    // with the same drafter, and set aside by one without.
    assert_eq!(
        solve_measured_only(&out, &["--speculative", "eagle:2@0.6"])["plans"][0]["evidence_c_star"],
        4.0
    );
    let without = solve_from(&out, &[]);
    assert!(
        json(&without)["skipped"]
            .to_string()
            .contains("run with speculative decoding"),
        "{}",
        without.stdout
    );

    // Calibration compares a curve with one simulated instance: the deployment is left out,
    // and says why, rather than fitted as if one aggregated instance had served it.
    let calibrated = capplan(&["calibrate", "--dry-run", "--format", "json", &run_dir]);
    assert_eq!(calibrated.code, 0, "{}", calibrated.stderr);
    let skipped = json(&calibrated)["skipped"].to_string();
    assert!(
        skipped.contains("disaggregated deployment (1P:1D)"),
        "{skipped}"
    );

    // A layout the model cannot take, or a split without workers: exit 2, nothing written.
    for (extra, says) in [(&["--ep", "2"][..], "dense"), (&["--pd", "0:2"][..], "0:2")] {
        let before = std::fs::read_dir(&out).unwrap().count();
        let run = import_evalscope(&out, extra);
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{extra:?}: {}", run.stderr);
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), before);
    }
}

#[test]
fn the_wrong_tool_or_a_missing_file_exits_2() {
    let out = scratch("import-bad");
    let run = capplan(&[
        "import",
        "--from",
        "guidellm",
        fixture("evalscope/v1.14.1-closed-loop").to_str().unwrap(),
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = capplan(&[
        "import",
        "--from",
        "locust",
        "x.csv",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("evalscope"),
        "lists the valid tools: {}",
        run.stderr
    );
    let run = capplan(&[
        "import",
        "--from",
        "evalscope",
        "nowhere",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("nowhere"), "{}", run.stderr);
}

#[test]
fn calibration_simulates_the_layout_a_run_recorded() {
    // The same measured levels recorded once as TP 2 and once as TP 2 with EP 2: calibrating
    // on them starts from different simulations (the expert layout changes the step), so the
    // layout the run names is the one simulated, not TP alone.
    let before = |extra: &[&str]| {
        let out = scratch(&format!("import-calibrate-{}", extra.len()));
        let imported =
            import_evalscope_as(&out, "qwen3-30b-a3b", &[&["--tp", "2"][..], extra].concat());
        assert_eq!(imported.code, 0, "{}", imported.stderr);
        let run_dir = json(&imported)["run_dir"].as_str().unwrap().to_string();
        let calibrated = capplan(&[
            "calibrate",
            "--dry-run",
            "--iterations",
            "1",
            "--format",
            "json",
            &run_dir,
        ]);
        assert_eq!(calibrated.code, 0, "{}", calibrated.stderr);
        json(&calibrated)["cards"][0]["fit"]["median_error_before"]
            .as_f64()
            .expect("a calibrated card")
    };
    let (tensor, experts) = (before(&[]), before(&["--ep", "2"]));
    assert!((tensor - experts).abs() > 1e-3, "{tensor} vs {experts}");
}

//! `capplan fit` from the command line: files beside the data, JSON, and bad input.

mod common;

use common::{capplan, json, scratch};

fn seed_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seeds/mindie--qwen1-5-7b-chat.csv");
    let copy = dir.join("mindie.csv");
    std::fs::copy(source, &copy).unwrap();
    copy
}

#[test]
fn writes_fit_json_and_charts_beside_a_table() {
    let dir = scratch("fit-cli");
    let table = seed_copy(&dir);
    let run = capplan(&[
        "fit",
        table.to_str().unwrap(),
        "--e2e",
        "10s",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let curve = &report["curves"][0];
    assert_eq!(curve["capacity"]["measured_pass"], 128.0);
    let c_star = curve["capacity"]["c_star"].as_f64().unwrap();
    assert!((128.0..150.0).contains(&c_star), "{c_star}");
    for name in [
        "mindie.fit.json",
        "mindie.throughput.svg",
        "mindie.throughput.png",
        "mindie.latency.svg",
        "mindie.latency.png",
    ] {
        assert!(dir.join(name).is_file(), "{name} written");
    }
    // fit.json is the same fit.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("mindie.fit.json")).unwrap())
            .unwrap();
    assert_eq!(saved["capacity"]["c_star"], curve["capacity"]["c_star"]);
    let svg = std::fs::read_to_string(dir.join("mindie.latency.svg")).unwrap();
    assert!(
        svg.contains("SLO") && svg.contains("C* = "),
        "SLO line and C* marked"
    );

    // Without limits there is still a fit, and the table says what would give a C*.
    let run = capplan(&[
        "fit",
        table.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("No C*") && run.stdout.contains("--e2e"),
        "{}",
        run.stdout
    );
    assert!(dir.join("out").join("mindie.fit.json").is_file());
}

#[test]
fn bad_paths_and_tables_exit_2_naming_them() {
    let dir = scratch("fit-bad");
    let run = capplan(&["fit", dir.join("nothing.csv").to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("nothing.csv"), "{}", run.stderr);
    let run = capplan(&["fit", dir.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no run folder"), "{}", run.stderr);
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "concurrency,qps\n8,2\n16,many\n").unwrap();
    let run = capplan(&["fit", bad.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bad.csv:3"), "{}", run.stderr);
}

//! The planner against the published seed capacity table: the node counts must be the ceilings.

mod common;

use common::{capplan, json};
use serde_json::Value;

const SEED_SOLVE: [&str; 11] = [
    "solve",
    "--users",
    "10000",
    "--ttft",
    "3.15s",
    "--tpot",
    "100ms",
    "--percentile",
    "mean",
    "--format",
    "json",
];

fn plan<'a>(report: &'a Value, model: &str, node: &str) -> &'a Value {
    report["plans"]
        .as_array()
        .expect("plans array")
        .iter()
        .find(|p| p["model"] == model && p["node"] == node)
        .unwrap_or_else(|| panic!("no plan for {model} on {node}"))
}

#[test]
fn seed_table_gives_the_ceilings() {
    let run = capplan(&SEED_SOLVE);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    // (model, node, nodes, split): 10000 users / users per node, rounded up.
    let expected = [
        ("llama-13b", "8xA30-PCIe", 112, "2×TP4"),
        ("llama-13b", "4xA40-PCIe", 36, "2×TP2"),
        ("llama-13b", "8xV100-32G-SXM2", 32, "1×TP8"),
        ("llama-13b", "8xA100-40G-SXM", 12, "2×TP4"),
        ("llama-65b", "8xA30-PCIe", 1000, "1×TP8"),
        ("llama-65b", "4xA40-PCIe", 1000, "1×TP4"),
        ("llama-65b", "8xV100-32G-SXM2", 112, "1×TP8"),
        ("llama-65b", "8xA100-40G-SXM", 56, "1×TP8"),
        ("llama-2-70b", "8xV100-32G-SXM2", 223, "1×TP8"),
        ("llama-2-70b", "8xA100-40G-SXM", 223, "1×TP8"),
        ("llama-2-70b", "8xA40-PCIe", 56, "2×TP4"),
    ];
    for (model, node, nodes, split) in expected {
        let p = plan(&report, model, node);
        assert_eq!(p["nodes"], nodes, "{model} on {node}: {p}");
        assert_eq!(p["split"]["label"], split, "{model} on {node}");
        assert_eq!(p["source"], "imported");
        assert!(p["evidence"]
            .as_str()
            .unwrap()
            .contains("llm-perf-plan--capacity.csv:"));
        let cards = p["cards_per_node"].as_u64().unwrap() * nodes;
        assert_eq!(p["cards"], cards);
    }
}

#[test]
fn two_tp4_beats_one_tp8_on_a100_40g() {
    let report = json(&capplan(&SEED_SOLVE));
    let p = plan(&report, "llama-13b", "8xA100-40G-SXM");
    let splits = p["splits"].as_array().unwrap();
    let tp8 = splits
        .iter()
        .find(|s| s["split"]["label"] == "1×TP8")
        .unwrap();
    // 700 users per node → ⌈10000/700⌉ = 15 nodes, against 12 for 2×TP4 (900 per node).
    assert_eq!(tp8["nodes"], 15);
    assert_eq!(p["users_per_node"], 900.0);
    let tp1 = splits
        .iter()
        .find(|s| s["split"]["label"] == "8×TP1")
        .unwrap();
    // 13B fits one 40 GiB card; nobody measured it, so it is predicted, and the imported
    // 2×TP4 still wins: a prediction never overrides evidence for the same node shape.
    assert_eq!(tp1["status"], "planned");
    assert_eq!(tp1["source"], "predicted");
    assert_eq!(p["source"], "imported");

    let a30 = plan(&report, "llama-13b", "8xA30-PCIe");
    let a30_tp1 = a30["splits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["split"]["label"] == "8×TP1")
        .unwrap();
    // 26 GB of fp16 weights against 0.9 × 24 GiB = 21.6 GiB usable.
    assert_eq!(a30_tp1["status"], "does not fit");
    assert!(a30_tp1["reason"].as_str().unwrap().contains("26.0 GB"));
}

#[test]
fn headroom_and_spares_are_added() {
    let mut args = SEED_SOLVE.to_vec();
    args.extend(["--headroom", "0.2", "--spares", "1", "--model", "llama-13b"]);
    let report = json(&capplan(&args));
    // ⌈10000 × 1.2 / 90⌉ + 1 = 134 + 1.
    assert_eq!(plan(&report, "llama-13b", "8xA30-PCIe")["nodes"], 135);
    assert!(report["plans"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["model"] == "llama-13b"));
}

#[test]
fn a_stricter_slo_is_not_proved_by_the_seed() {
    let run = capplan(&[
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3s",
        "--tpot",
        "100ms",
        "--percentile",
        "mean",
        "--no-predict",
    ]);
    assert_eq!(run.code, 1, "no plan is not success");
    assert!(
        run.stdout.contains("does not prove TTFT ≤ 3 s"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("No plan"), "{}", run.stdout);
}

#[test]
fn the_mean_does_not_prove_a_percentile() {
    let run = capplan(&[
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3.15s",
        "--tpot",
        "100ms",
        "--percentile",
        "p90",
        "--format",
        "json",
        "--no-predict",
    ]);
    assert_eq!(run.code, 1);
    let report = json(&run);
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(
        skipped.len(),
        12,
        "every seed point is skipped, and said so"
    );
    assert!(skipped[0]["reason"].as_str().unwrap().contains("mean"));
}

#[test]
fn think_time_must_match_the_points() {
    let base = [
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3.15s",
        "--tpot",
        "100ms",
        "--percentile",
        "mean",
        "--model",
        "llama-13b",
    ];
    let mut same = base.to_vec();
    same.extend(["--think-time", "2s", "--format", "json"]);
    let run = capplan(&same);
    assert_eq!(run.code, 0, "the seed's 1–3 s pauses have a 2 s mean");
    assert_eq!(plan(&json(&run), "llama-13b", "8xA30-PCIe")["nodes"], 112);

    let mut none = base.to_vec();
    none.extend(["--think-time", "0s", "--no-predict"]);
    let run = capplan(&none);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("think time"), "{}", run.stdout);
}

#[test]
fn a_request_rate_needs_the_latency_at_c_star() {
    let rps = [
        "solve",
        "--rps",
        "50",
        "--ttft",
        "3.15s",
        "--tpot",
        "100ms",
        "--percentile",
        "mean",
        "--model",
        "llama-13b",
    ];
    // The seed table has no E2E latency: its points cannot carry a rate, and it says so.
    let mut table_only = rps.to_vec();
    table_only.push("--no-predict");
    let run = capplan(&table_only);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("E2E latency"), "{}", run.stdout);
    // Predictions carry their E2E latency: rate = C* / (R + Z), and each row says so.
    let mut predicted = rps.to_vec();
    predicted.extend(["--cards", "A100-40G", "--format", "json"]);
    let run = capplan(&predicted);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let row = &report["plans"][0];
    assert_eq!(row["source"], "predicted");
    let conversion = row["conversion"].as_str().expect("a conversion");
    assert!(conversion.contains("requests/s"), "{conversion}");
    let per_instance = row["users_per_instance"].as_f64().unwrap();
    let c_star = row["evidence_c_star"].as_f64().unwrap();
    assert!(
        per_instance > 0.0 && per_instance < c_star,
        "{per_instance} req/s from {c_star} users"
    );
    let nodes = row["nodes"].as_f64().unwrap();
    let per_node = row["users_per_node"].as_f64().unwrap();
    assert_eq!(nodes, (50.0 / per_node).ceil());
}

#[test]
fn human_formats_carry_the_same_plan() {
    for format in ["table", "markdown", "csv"] {
        let mut args = SEED_SOLVE[..9].to_vec();
        args.extend(["--format", format, "--model", "llama-13b"]);
        let run = capplan(&args);
        assert_eq!(run.code, 0, "{format}: {}", run.stderr);
        let a30 = run
            .stdout
            .lines()
            .find(|line| line.contains("8xA30-PCIe"))
            .unwrap_or_else(|| panic!("{format} has the A30 row:\n{}", run.stdout));
        assert!(
            a30.contains("112") && a30.contains("2×TP4"),
            "{format}: {a30}"
        );
    }
    let csv = capplan(&[
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3.15s",
        "--tpot",
        "100ms",
        "--percentile",
        "mean",
        "--format",
        "csv",
    ]);
    let mut reader = csv::Reader::from_reader(csv.stdout.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert!(headers.iter().any(|h| h == "nodes"));
    assert!(reader.records().count() >= 11);
}

#[test]
fn json_carries_every_table_field() {
    let report = json(&capplan(&SEED_SOLVE));
    for p in report["plans"].as_array().unwrap() {
        for key in [
            "model",
            "rank",
            "card",
            "node",
            "split",
            "users_per_instance",
            "users_per_node",
            "nodes",
            "cards",
            "capex_usd",
            "source",
            "evidence",
        ] {
            assert!(p.get(key).is_some(), "plan lacks {key}: {p}");
        }
    }
    assert_eq!(report["request"]["demand"]["users"], 10000);
}

#[test]
fn predictions_fill_gaps_but_never_override_evidence() {
    let report = json(&capplan(&SEED_SOLVE));
    // The seed's node shapes keep their imported answer...
    assert_eq!(
        plan(&report, "llama-13b", "8xA30-PCIe")["source"],
        "imported"
    );
    // ...and node shapes nobody measured are predicted, and say so.
    let h100 = plan(&report, "llama-13b", "8xH100-SXM");
    assert_eq!(h100["source"], "predicted");
    assert!(h100["evidence"].as_str().unwrap().contains("predicted"));
    assert!(report["predictions"]["summary"]
        .as_str()
        .unwrap()
        .contains("uncalibrated"));
}

#[test]
fn one_ranking_counts_users_one_way() {
    // The seed's points count users pausing 1–3 s; without --think-time the predicted rows of
    // the same model assume that pause too, and the report says so.
    let report = json(&capplan(&SEED_SOLVE));
    let plans = report["plans"].as_array().unwrap();
    for model in ["llama-13b", "llama-65b", "llama-2-70b"] {
        let rows: Vec<&Value> = plans.iter().filter(|p| p["model"] == model).collect();
        assert!(rows.iter().any(|p| p["source"] == "predicted"), "{model}");
        for row in &rows {
            assert_eq!(
                row["evidence_think_time"]["kind"], "uniform",
                "{model}: {row}"
            );
            assert_eq!(row["evidence_think_time"]["min_s"], 1.0);
            assert_eq!(row["evidence_think_time"]["max_s"], 3.0);
        }
    }
    let meaning = report["users_meaning"].as_str().unwrap();
    assert!(
        meaning.contains("llama-13b pausing 1–3 s uniform"),
        "{meaning}"
    );
    assert!(report["predictions"]["summary"]
        .as_str()
        .unwrap()
        .contains("as each model's measured points"));
    // Asking for a think time counts every model's users that way instead.
    let mut asked = SEED_SOLVE.to_vec();
    asked.extend(["--think-time", "0s", "--no-predict"]);
    let report = json(&capplan(&asked));
    assert!(report["plans"].as_array().unwrap().is_empty());
    assert!(report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["reason"].as_str().unwrap().contains("think time")));
}

#[test]
fn a_fresh_clone_plans_from_predictions() {
    // Nothing measured proves TTFT ≤ 3 s: every row is predicted, with the defaults printed.
    let run = capplan(&[
        "solve", "--users", "10000", "--ttft", "3s", "--format", "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let plans = report["plans"].as_array().unwrap();
    assert!(plans.len() > 20);
    assert!(plans.iter().all(|p| p["source"] == "predicted"));
    let assumptions = report["predictions"]["summary"].as_str().unwrap();
    for default in ["512 tokens in", "256 out", "TPOT ≤ 100 ms", "p90"] {
        assert!(assumptions.contains(default), "{assumptions}");
    }
    // What the step times rest on is listed per card, apart from the summary: each predicted
    // card once, the cards without operator tables together on the roofline's row.
    assert!(!assumptions.contains("operator timings"), "{assumptions}");
    let step_times = report["predictions"]["step_times"].as_array().unwrap();
    let mut cards: Vec<&str> = step_times
        .iter()
        .flat_map(|b| b["cards"].as_array().unwrap())
        .map(|c| c.as_str().unwrap())
        .collect();
    let listed = cards.len();
    cards.sort_unstable();
    cards.dedup();
    assert_eq!(cards.len(), listed, "a card listed twice: {step_times:?}");
    for plan in plans {
        let card = plan["card"].as_str().unwrap();
        assert!(cards.contains(&card), "{card} missing from {step_times:?}");
    }
    let basis = |card: &str| {
        step_times
            .iter()
            .find(|b| b["cards"].as_array().unwrap().iter().any(|c| c == card))
            .map(|b| b["basis"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(basis("H100-SXM").starts_with("measured operator timings: h100_sxm"));
    assert!(basis("T4").starts_with("roofline"));
    assert_eq!(basis("T4"), basis("L4"));
    let table = capplan(&[
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3s",
        "--model",
        "llama-3.1-8b",
    ]);
    assert_eq!(table.code, 0);
    assert!(table.stdout.contains("predicted"));
    assert!(table
        .stdout
        .contains("What the predicted rows' step times rest on, per card:"));
}

#[test]
fn measured_points_correct_the_predictions_of_their_card() {
    // The seed measured llama-13b on A30 (TP4, 1–3 s think time); TTFT ≤ 3 s p90 is not what it
    // proved, so every A30 row is predicted — and corrected by measured ÷ predicted there.
    let run = capplan(&[
        "solve",
        "--users",
        "10000",
        "--ttft",
        "3s",
        "--cards",
        "A30,H100-SXM",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let checks = report["measured_vs_predicted"].as_array().unwrap();
    let a30: Vec<&Value> = checks.iter().filter(|c| c["card"] == "A30").collect();
    assert!(!a30.is_empty(), "{checks:?}");
    // Nothing was measured on H100-SXM: nothing to set beside a prediction there.
    assert!(checks.iter().all(|c| c["card"] != "H100-SXM"));
    let same_model: Vec<f64> = a30
        .iter()
        .filter(|c| c["model"] == "llama-13b")
        .map(|c| c["measured"].as_f64().unwrap() / c["predicted"].as_f64().unwrap())
        .collect();
    let factor = (same_model.iter().map(|r| r.ln()).sum::<f64>() / same_model.len() as f64).exp();
    let row = plan(&report, "llama-13b", "8xA30-PCIe");
    assert_eq!(row["source"], "predicted");
    let note = row["evidence_note"].as_str().unwrap();
    assert!(
        note.contains(&format!("×{factor:.2}")) && note.contains("same model"),
        "{note}"
    );
    // The corrected C* is the uncorrected one × the factor.
    let uncorrected: f64 = note
        .rsplit('(')
        .next()
        .and_then(|tail| tail.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    let corrected = row["evidence_c_star"].as_f64().unwrap();
    assert_eq!(corrected, (uncorrected * factor).floor().max(1.0), "{note}");
    let h100 = plan(&report, "llama-13b", "8xH100-SXM");
    assert!(!h100["evidence_note"]
        .as_str()
        .unwrap()
        .contains("measured point"));
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("predictions for A30 are corrected")),
        "{notes:?}"
    );
}

#[test]
fn predictions_ranked_above_evidence_are_flagged_when_their_band_reaches_past_it() {
    // On the README's main command the first llama-13b rows are cards predicted on the roofline
    // alone; every plan ranked above the first one with imported evidence whose cost at the low
    // end of its band exceeds that plan's is named in one note, and no other is.
    let report = json(&capplan(&SEED_SOLVE));
    let plans: Vec<&Value> = report["plans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["model"] == "llama-13b")
        .collect();
    let proven = plans
        .iter()
        .filter(|p| p["source"] != "predicted")
        .min_by_key(|p| p["rank"].as_u64().unwrap())
        .expect("an imported llama-13b plan");
    let proven_capex = proven["capex_usd"].as_f64().unwrap();
    let mut flagged = Vec::new();
    for plan in &plans {
        if plan["source"] != "predicted" || plan["rank"].as_u64() >= proven["rank"].as_u64() {
            continue;
        }
        let low_nodes = plan["nodes_at_band_low"]
            .as_u64()
            .expect("a predicted plan's band");
        assert!(low_nodes >= 1);
        let price = plan["capex_usd"].as_f64().unwrap() / plan["nodes"].as_f64().unwrap();
        if price * low_nodes as f64 > proven_capex {
            flagged.push(plan["node"].as_str().unwrap().to_string());
        }
    }
    assert!(
        !flagged.is_empty(),
        "the seed's leading predictions have wide bands"
    );
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| n.starts_with("llama-13b: ") && n.contains("ranked above the first"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    for node in &flagged {
        assert!(
            notes[0].contains(&format!(" {node} (")),
            "{node}: {}",
            notes[0]
        );
    }
    assert!(notes[0].contains(proven["node"].as_str().unwrap()));
    // The same rows carry the rank they may not beat, in the JSON and on the table's row.
    let marked: Vec<String> = plans
        .iter()
        .filter(|p| p["may_not_beat_rank"] == proven["rank"])
        .map(|p| p["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(marked, flagged);
    assert!(plans
        .iter()
        .all(|p| p["may_not_beat_rank"].is_null() || p["may_not_beat_rank"] == proven["rank"]));
    let table = capplan(&SEED_SOLVE[..SEED_SOLVE.len() - 2]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let mark = format!("predicted (may not beat #{})", proven["rank"]);
    for node in &flagged {
        assert!(
            table.stdout.lines().any(|l| l.contains("llama-13b")
                && l.contains(&format!(" {node} "))
                && l.contains(&mark)),
            "{node} row without '{mark}'"
        );
    }
}

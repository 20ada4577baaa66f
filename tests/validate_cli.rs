//! `capplan validate` against the shipped public tables: the split holds (no fit row is scored
//! as held out), every row is either compared or skipped with a reason, and the summary
//! figures are what the rows say.

mod common;

use common::{capplan, json};
use serde_json::Value;

fn relative(predicted: &Value, measured: &Value) -> Option<f64> {
    let (p, m) = (predicted.as_f64()?, measured.as_f64()?);
    (m > 0.0).then(|| (p - m) / m)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let position = 0.5 * (n - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    values[low] + (values[high] - values[low]) * (position - low as f64)
}

#[test]
fn silicon_rows_keep_their_split_and_the_summary_matches_the_rows() {
    let run = capplan(&[
        "validate",
        "--source",
        "silicon",
        "--engine",
        "sglang",
        "--details",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let source = &report["sources"][0];
    let rows = source["rows"].as_array().expect("rows with --details");
    assert!(rows.len() > 100, "{} rows", rows.len());
    assert_eq!(source["compared"].as_u64(), Some(rows.len() as u64));
    // The split is by model: SGLang's Llama-3.1-8B rows fit its overheads and are never
    // scored as held out; every other model's rows are.
    for row in rows {
        assert_eq!(row["engine"], "sglang");
        let fit = row["model"] == "llama-3.1-8b";
        assert_eq!(
            row["subset"],
            if fit { "fit on" } else { "held out" },
            "{row}"
        );
    }
    // Skip reasons account for rows of other models and layouts, each with a count.
    let skipped: u64 = source["skipped"]["reasons"]
        .as_object()
        .expect("reasons")
        .values()
        .map(|n| n.as_u64().unwrap_or(0))
        .sum();
    assert!(skipped > 1000, "{skipped}");
    // The held-out TTFT median in the summary is the median of the rows' own errors.
    let held_out: Vec<f64> = rows
        .iter()
        .filter(|r| r["subset"] == "held out")
        .filter_map(|r| relative(&r["predicted"]["ttft_s"], &r["measured"]["ttft_s"]))
        .map(f64::abs)
        .collect();
    let group = source["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["subset"] == "held out")
        .expect("a held-out group");
    let ttft = group["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "TTFT")
        .expect("TTFT scored");
    assert_eq!(ttft["stats"]["n"].as_u64(), Some(held_out.len() as u64));
    let reported = ttft["stats"]["median_abs"].as_f64().unwrap();
    assert!(
        (reported - median(held_out)).abs() < 1e-9,
        "{reported} vs the rows"
    );
    // Every prediction states what its step times rest on.
    assert!(rows.iter().all(|r| r["basis"]
        .as_str()
        .is_some_and(|b| b.starts_with("measured operator"))));
    // Each row's prompt is also simulated alone: a queue can only add to it, so no row's TTFT
    // at its load is below it, and the queueing table's ratios are the rows' own medians.
    for row in rows {
        let alone = row["predicted_alone_ttft_s"]
            .as_f64()
            .expect("the prompt alone");
        let at_load = row["predicted"]["ttft_s"].as_f64().expect("a TTFT");
        assert!(alone > 0.0 && at_load >= alone * 0.999, "{row}");
    }
    let queueing = source["queueing"].as_array().expect("queueing ratios");
    let counted: u64 = queueing.iter().map(|q| q["rows"].as_u64().unwrap()).sum();
    assert_eq!(
        counted,
        rows.len() as u64,
        "every closed-loop row in one band"
    );
    let band = queueing
        .iter()
        .find(|q| q["subset"] == "held out" && q["users"] == "5-16")
        .expect("held-out rows at 5 to 16 users");
    let in_band: Vec<&Value> = rows
        .iter()
        .filter(|r| r["subset"] == "held out")
        .filter(|r| r["users"].as_u64().is_some_and(|u| (5..=16).contains(&u)))
        .collect();
    let ratio = |r: &&Value, of: &str| {
        r[of]["ttft_s"].as_f64().unwrap() / r["predicted_alone_ttft_s"].as_f64().unwrap()
    };
    let measured = median(in_band.iter().map(|r| ratio(r, "measured")).collect());
    let predicted = median(in_band.iter().map(|r| ratio(r, "predicted")).collect());
    assert_eq!(band["rows"].as_u64(), Some(in_band.len() as u64));
    assert!((band["measured_over_alone"].as_f64().unwrap() - measured).abs() < 1e-9);
    assert!((band["predicted_over_alone"].as_f64().unwrap() - predicted).abs() < 1e-9);
}

#[test]
fn static_batches_hold_each_gpu_out_in_turn() {
    let run = capplan(&[
        "validate",
        "--source",
        "static-batch",
        "--details",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let score = &report["static_batch"];
    // --details lists every timed row once, as predicted with its GPU held out.
    let details = score["details"].as_array().expect("every row");
    assert_eq!(details.len() as u64, score["timed"].as_u64().unwrap());
    assert!(details.iter().all(|r| {
        r["first_token_predicted_ms"]
            .as_f64()
            .is_some_and(|v| v > 0.0)
            && r["token_to_token_predicted_ms"]
                .as_f64()
                .is_some_and(|v| v > 0.0)
    }));
    let by_gpu = score["by_gpu"].as_array().expect("per GPU");
    // Seven GPUs in the table, all in the catalog.
    assert_eq!(by_gpu.len(), 7, "{by_gpu:?}");
    let mut fitted = Vec::new();
    for held in by_gpu {
        assert!(
            held["first_token"]["n"].as_u64().unwrap_or(0) > 100,
            "{held}"
        );
        fitted.push(held["parameters"]["step_overhead_ms"].as_f64().unwrap());
    }
    // Each GPU's rows were predicted with constants fitted without them: not all the same.
    fitted.sort_by(f64::total_cmp);
    fitted.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    assert!(fitted.len() > 1, "{fitted:?}");
    // The engine's constants come from the rows with operator tables only: the folds holding
    // out a roofline GPU fit them on the same rows and agree, while each fits the roofline's
    // efficiencies on its own other roofline GPUs.
    let roofline: Vec<&Value> = by_gpu
        .iter()
        .filter(|held| held["basis_class"] == "roofline")
        .collect();
    assert!(roofline.len() >= 3, "{by_gpu:?}");
    let parameter = |held: &Value, name: &str| held["parameters"][name].as_f64();
    for held in &roofline[1..] {
        for constant in ["step_overhead_ms", "seq_overhead_us", "eager_layer_us"] {
            assert_eq!(
                parameter(held, constant),
                parameter(roofline[0], constant),
                "{constant}: {held} against {}",
                roofline[0]
            );
        }
        assert_ne!(
            parameter(held, "roofline_memory"),
            parameter(roofline[0], "roofline_memory"),
            "{held}"
        );
    }
    assert!(score["by_model"].as_array().is_some_and(|m| m.len() >= 6));
}

#[test]
fn a_speculative_what_if_changes_only_the_models_that_can_run_it() {
    let rows = |extra: &[&str]| {
        let mut args = vec![
            "validate",
            "--source",
            "silicon-disagg",
            "--engine",
            "trtllm",
            "--details",
            "--format",
            "json",
        ];
        args.extend(extra);
        let run = capplan(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report = json(&run);
        let source = report["sources"][0].clone();
        (
            source["source"].as_str().unwrap_or_default().to_string(),
            source["rows"].as_array().expect("rows").clone(),
        )
    };
    let (plain_name, plain) = rows(&[]);
    let (mtp_name, mtp) = rows(&["--speculative", "mtp"]);
    assert!(!plain_name.contains("what if"), "{plain_name}");
    assert!(
        mtp_name.contains("what if") && mtp_name.contains("MTP"),
        "{mtp_name}"
    );
    let tpot = |row: &serde_json::Value| row["predicted"]["tpot_s"].as_f64();
    let (mut faster, mut deepseek) = (0, 0);
    for (before, after) in plain.iter().zip(&mtp) {
        assert_eq!(before["id"], after["id"]);
        if before["model"] == "deepseek-v3" {
            deepseek += 1;
            faster += usize::from(tpot(after) < tpot(before));
        } else {
            // Kimi-K2.5 ships no MTP module, Qwen3 none either: simulated as before.
            assert_eq!(tpot(after), tpot(before), "{}", before["id"]);
        }
    }
    // DeepSeek decode pools hold few sequences per card: a verify of two tokens costs little
    // more than one, so most of them decode faster.
    assert!(
        deepseek > 50 && 2 * faster > deepseek,
        "{faster} of {deepseek}"
    );
    // A what-if no row can take is refused.
    let run = capplan(&["validate", "--source", "blis", "--speculative", "mtp"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no row"), "{}", run.stderr);
}

/// dstack's DeepSeek-R1 rows are all predicted and held out, each on the basis its card has
/// (no operator tables for the MI300X), and a run whose prompts share a cached system prompt
/// reaches its first tokens sooner than the same server's run of unshared prompts at the same
/// concurrency — vLLM 0.7's included, whose engine caches prefixes only when asked, as those
/// runs asked.
#[test]
fn the_dstack_rows_run_as_their_servers_did() {
    let run = capplan(&[
        "validate",
        "--source",
        "dstack",
        "--details",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let rows = report["sources"][0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 54);
    for row in rows {
        assert_eq!(row["subset"], "held out", "{row}");
        assert!(row["predicted"]["ttft_s"].as_f64().is_some(), "{row}");
        let roofline = row["basis"]
            .as_str()
            .is_some_and(|b| b.starts_with("roofline"));
        assert_eq!(roofline, row["card"] == "MI300X", "{row}");
    }
    let ttft = |engine: &str, card: &str, dataset: &str, users: u32| {
        let prefix = format!("{engine} 8 × {card}");
        let tail = format!("{dataset} 3200x800 c{users}");
        rows.iter()
            .find(|r| {
                let id = r["id"].as_str().unwrap_or_default();
                id.starts_with(&prefix) && id.ends_with(&tail)
            })
            .and_then(|r| r["predicted"]["ttft_s"].as_f64())
            .unwrap_or_else(|| panic!("no {prefix} … {tail}"))
    };
    for (engine, card) in [("sglang", "H200"), ("sglang", "MI300X"), ("vllm", "H200")] {
        for users in [32, 64, 128] {
            let shared = ttft(engine, card, "generated-shared-prefix", users);
            let unshared = ttft(engine, card, "random", users);
            assert!(
                shared < 0.8 * unshared,
                "{engine} on {card} at {users}: {shared} s shared, {unshared} s not"
            );
        }
    }
}

#[test]
fn an_unknown_source_or_engine_is_refused() {
    let run = capplan(&["validate", "--source", "mlperf"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("'mlperf'") && run.stderr.contains("silicon"));
    let run = capplan(&["validate", "--engine", "vlm"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("vlm") && run.stderr.contains("vllm"));
}

#[test]
fn a_closed_loop_source_fits_its_request_overhead_on_the_rows_that_barely_queue() {
    let catalog = std::fs::read_to_string("hardware/engines.toml").unwrap();
    let shipped = catalog
        .split("[[engine]]")
        .find(|e| e.contains("name = \"trtllm-0.x\""))
        .and_then(|e| e.lines().find(|l| l.starts_with("request_overhead_ms")))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("trtllm-0.x request_overhead_ms in hardware/engines.toml");
    // Fitted from none: a catalog whose trtllm-0.x profile has no request overhead.
    let from_none = catalog.replace(
        &format!("request_overhead_ms = {shipped}"),
        "request_overhead_ms = 0.0",
    );
    assert_ne!(from_none, catalog);
    let hardware = common::scratch("request-overhead-fit");
    std::fs::write(hardware.path().join("engines.toml"), from_none).unwrap();
    let run = capplan(&[
        "validate",
        "--hardware",
        hardware.path().to_str().unwrap(),
        "--source",
        "nim,silicon",
        "--engine",
        "trtllm-0.x,trtllm",
        "--fit",
        "--details",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let fitted = report["fitted"].as_array().expect("fitted profiles");
    let request_ms = |engine: &str| {
        fitted
            .iter()
            .find(|f| f["engine"] == engine)
            .and_then(|f| f["request_overhead_ms"].as_f64())
            .unwrap_or_else(|| panic!("{engine} fitted"))
    };
    // The NIM sweeps' H100 rows at one and two users set it, to what the shipped profile
    // carries.
    let nim = request_ms("trtllm-0.x");
    assert!(
        nim > 1.0 && (nim - shipped).abs() < 0.05,
        "{nim} vs {shipped}"
    );
    // Scored with it, those rows' median TTFT residual is gone...
    let nim_rows = report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"].as_str().is_some_and(|n| n.starts_with("NIM (")))
        .expect("the NIM source")["rows"]
        .as_array()
        .unwrap()
        .clone();
    let mut residuals: Vec<f64> = nim_rows
        .iter()
        .filter(|r| r["subset"] == "fit on" && r["load"].as_f64().is_some_and(|l| l <= 2.0))
        .map(|r| {
            r["measured"]["ttft_s"].as_f64().unwrap() - r["predicted"]["ttft_s"].as_f64().unwrap()
        })
        .collect();
    assert!(residuals.len() >= 8, "{}", residuals.len());
    residuals.sort_by(f64::total_cmp);
    let middle = residuals[residuals.len() / 2];
    assert!(middle.abs() < 1e-3, "median residual {middle} s");
    // ...while the silicon sample's TensorRT-LLM fit rows (four users and more: queueing)
    // leave the profile's own, none.
    assert_eq!(request_ms("trtllm"), 0.0);
}

/// TensorRT-LLM 0.x decodes without multi-block mode, one thread block per KV head per
/// sequence: Llama-3-70B on eight A100s decodes a 7 000-token prompt's answer about 9 ms a
/// token slower than a 200-token one's, at a handful of users. The shipped profile's floor
/// under a decode step takes most of that shortfall away on those held-out rows; with
/// `block_stream_share = 0` (no floor, the other constants as shipped) they are short again.
#[test]
fn a_long_history_decodes_slower_without_multi_block_mode() {
    let shortfall = |hardware: Option<&str>| {
        let mut command = vec![
            "validate",
            "--source",
            "nim",
            "--details",
            "--format",
            "json",
        ];
        if let Some(folder) = hardware {
            command.extend_from_slice(&["--hardware", folder]);
        }
        let run = capplan(&command);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report = json(&run);
        let rows = report["sources"][0]["rows"].as_array().unwrap().clone();
        let errors: Vec<f64> = rows
            .iter()
            .filter(|r| {
                r["subset"] == "held out"
                    && r["model"] == "llama-3-70b"
                    && r["tp"] == 8
                    && r["load"].as_f64().is_some_and(|users| users <= 10.0)
                    && r["sweep"]
                        .as_str()
                        .is_some_and(|s| s.ends_with("7000x1000"))
            })
            .filter_map(|r| relative(&r["predicted"]["tpot_s"], &r["measured"]["tpot_s"]))
            .collect();
        assert!(errors.len() >= 4, "{} rows", errors.len());
        median(errors)
    };
    let shipped = shortfall(None);
    let hardware = common::scratch_engines_with(
        "no-block-stream",
        "block_stream_share",
        "block_stream_share = 0.0",
    );
    let without = shortfall(hardware.path().to_str());
    assert!(without < -0.12, "without the floor: {without}");
    assert!(
        shipped.abs() < 0.5 * without.abs(),
        "{without} -> {shipped}"
    );
}

/// `validate --fit` (JSON) with one line of the shipped engines.toml replaced, in a scratch
/// catalog named `scratch`: the first engine's fitted overheads.
fn fitted_with(scratch: &str, (key, line): (&str, &str), args: &[&str]) -> Value {
    let hardware = common::scratch_engines_with(scratch, key, line);
    let folder = hardware.path().to_str().unwrap();
    let mut command = vec![
        "validate",
        "--hardware",
        folder,
        "--fit",
        "--format",
        "json",
    ];
    command.extend_from_slice(args);
    let run = capplan(&command);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)["fitted"][0].clone()
}

/// TensorRT-LLM 0.x decodes Llama-3-8B's four query heads per KV head without a grouped-query
/// kernel: fitted from a catalog that says the L2 cache catches all but a trace of the
/// re-reads, the NIM sweeps' H100 rows ask for a share of them to reach memory, and scoring
/// with it beats the catalog's on those rows.
#[test]
fn the_nim_fit_finds_the_masked_attention_rereads() {
    let fitted = fitted_with(
        "reread-share-fit",
        ("reread_half_group", "reread_half_group = 1000.0"),
        &["--source", "nim", "--engine", "trtllm-0.x"],
    );
    assert_eq!(fitted["engine"], "trtllm-0.x");
    // Llama-3-8B's 3 re-reads per KV head reach memory with a share 3 / (3 + h): over a
    // tenth of them once h is under 27.
    let half = fitted["reread_half_group"].as_f64().expect("a fitted h");
    assert!(half > 0.0 && half < 27.0, "{half}");
    let (before, after) = (
        fitted["rms_log_error_before"].as_f64().unwrap(),
        fitted["rms_log_error_after"].as_f64().unwrap(),
    );
    assert!(after < 0.95 * before, "{before} -> {after}");
}

/// The NIM's engines were built with a `max_num_tokens` nobody published: `--fit` scores each
/// budget of the profile's grid on the fit rows' TTFT, keeps the closest, and fits the
/// overheads at it.
#[test]
fn the_nim_fit_keeps_the_budget_whose_first_tokens_come_closest() {
    let fitted = fitted_with(
        "budget-fit",
        ("token_budget_grid", "token_budget_grid = [8192, 32768]"),
        &["--source", "nim", "--engine", "trtllm-0.x"],
    );
    let scores = fitted["token_budget_scores"]
        .as_array()
        .expect("a score for each budget");
    let error = |score: &Value| score["median_abs_ttft_error"].as_f64().expect("an error");
    let budgets: Vec<u64> = scores
        .iter()
        .map(|score| score["token_budget"].as_u64().expect("a budget"))
        .collect();
    assert_eq!(budgets, [8192, 32768], "{fitted}");
    // The budget decides how a wave of prompts queues: the rows tell the two apart.
    assert!(
        (error(&scores[0]) - error(&scores[1])).abs() > 1e-3,
        "{fitted}"
    );
    let closest = scores
        .iter()
        .min_by(|a, b| error(a).total_cmp(&error(b)))
        .expect("two scores");
    assert_eq!(fitted["token_budget"], closest["token_budget"], "{fitted}");
}

/// BLIS's vLLM fit from a per-step overhead ten times the shipped one and from a tenth of it:
/// restarted until its loss stops falling, the fit lands on the same minimum either way, so
/// the constants `--fit` prints are the data's, not the start's.
#[test]
fn the_overhead_fit_lands_on_the_same_minimum_from_either_side() {
    let fit_from = |step_ms: &str| {
        let fitted = fitted_with(
            &format!("fit-from-{step_ms}"),
            ("step_overhead_ms", &format!("step_overhead_ms = {step_ms}")),
            &["--source", "blis"],
        );
        assert_eq!(fitted["engine"], "vllm");
        // vLLM's budget is its documented default: not fitted.
        assert!(fitted.get("token_budget").is_none(), "{fitted}");
        (
            fitted["step_overhead_ms"].as_f64().expect("a fitted step"),
            fitted["rms_log_error_after"].as_f64().expect("an rms"),
        )
    };
    let (high_step, high_rms) = fit_from("5.0");
    let (low_step, low_rms) = fit_from("0.05");
    assert!(
        (high_rms - low_rms).abs() < 0.002,
        "rms {high_rms} from above, {low_rms} from below"
    );
    assert!(
        (high_step / low_step - 1.0).abs() < 0.1,
        "{high_step} ms from above, {low_step} ms from below"
    );
}

/// One constant of `engine` fitted alone by `validate --fit STAGE` on `source`'s fit rows,
/// from a scratch catalog whose profile has `key` at 0 (the profile's own line is the first
/// starting with `key` and its shipped value): checks the fit started from 0, came back to
/// the shipped value within `tolerance` and took the fit rows' median |error| below
/// `shrink` of where it started; returns the whole report.
fn constant_refitted(
    engine: &str,
    key: &str,
    (source, stage): (&str, &str),
    tolerance: f64,
    shrink: f64,
) -> Value {
    let shipped = capplan::catalog::Catalog::shipped().unwrap();
    let shipped = serde_json::to_value(shipped.engine(engine).unwrap()).unwrap()[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{engine}'s {key}"));
    assert!(shipped > 0.0);
    let hardware = common::scratch_engines_with(
        &format!("{stage}-fit"),
        &format!("{key} = {shipped}"),
        &format!("{key} = 0.0"),
    );
    let run = capplan(&[
        "validate",
        "--hardware",
        hardware.path().to_str().unwrap(),
        "--source",
        source,
        "--engine",
        engine,
        "--fit",
        stage,
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    let fitted = &report["fitted_constants"][0];
    assert_eq!(fitted["engine"], engine);
    assert_eq!(fitted["constant"], key);
    assert_eq!(fitted["before"].as_f64(), Some(0.0));
    let value = fitted["value"].as_f64().unwrap();
    assert!((value - shipped).abs() < tolerance, "{value} vs {shipped}");
    let (before, after) = (
        fitted["median_abs_error_before"].as_f64().unwrap(),
        fitted["median_abs_error_after"].as_f64().unwrap(),
    );
    assert!(after < before * shrink, "{before} → {after}");
    report
}

/// How far a benchmark's users fall out of step behind vLLM's server, fitted from a catalog
/// whose vLLM profile keeps them in step, on vLLM's mixture-of-experts fit rows (Kimi-K2.5):
/// it comes back to what the shipped profile carries and takes those rows' TTFT far closer.
#[test]
fn the_benchmark_fit_finds_vllm_users_falling_out_of_step() {
    constant_refitted(
        "vllm",
        "out_of_step",
        ("silicon-moe", "out-of-step"),
        0.01,
        0.5,
    );
}

/// The time from a request's arrival to SGLang's engine, fitted from a catalog whose SGLang
/// profile has none on SGLang's mixture-of-experts fit rows (DeepSeek-V3's architecture),
/// comes back to what the shipped profile carries and takes those rows' TTFT closer: at one
/// to four users they measure 0.1–0.25 s more than their prompts' prefill.
#[test]
fn the_request_fit_finds_sglangs_front() {
    constant_refitted(
        "sglang",
        "request_overhead_ms",
        ("silicon-moe", "request"),
        1.0,
        0.95,
    );
}

/// The hand-off between a disaggregated deployment's pools, fitted from a catalog whose vLLM
/// profile has none on vLLM's 1 024-token disaggregated rows (the fit subset), comes back to
/// what the shipped profile carries and takes those rows' TTFT closer; a bad stage name is
/// refused.
#[test]
fn the_disaggregated_fit_finds_the_handoff() {
    let report = constant_refitted(
        "vllm",
        "handoff_ms",
        ("silicon-disagg", "handoff"),
        1.0,
        0.5,
    );
    assert!(report["fitted"].as_array().unwrap().is_empty());

    let run = capplan(&[
        "validate",
        "--source",
        "silicon-disagg",
        "--fit",
        "handoffs",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("handoffs")
            && run
                .stderr
                .contains("overheads, moe, request, out-of-step, handoff")
    );
}

//! Speculative decoding from the command line: what it buys, what it costs, and the set-ups
//! that cannot run.

mod common;

use common::{capplan, json, predict_r1};

/// DeepSeek-R1 on eight H200s, 50 ms TPOT, JSON, then `extra`.
fn r1(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--tp", "8", "--tpot", "50ms", "--format", "json"];
    args.extend(extra);
    let run = predict_r1(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)
}

#[test]
fn mtp_speeds_decoding_by_less_than_its_accepted_length_and_holds_its_module() {
    let plain = r1(&[]);
    let mtp = r1(&["--speculative", "mtp"]);
    // The MTP module's 14 B parameters are loaded beside the 671 B (DeepSeek-V3's report:
    // 685 B with it), and take their room from the KV cache.
    let weights = |p: &serde_json::Value| p["memory"]["weights_gb"].as_f64().unwrap();
    assert!((weights(&plain) - 671.0).abs() < 0.5, "{}", weights(&plain));
    assert!((weights(&mtp) - 685.0).abs() < 0.5, "{}", weights(&mtp));
    let kv = |p: &serde_json::Value| p["memory"]["kv_tokens"].as_f64().unwrap();
    assert!(kv(&mtp) < kv(&plain));
    // One user: a step yields 1.85 tokens on average, but each step verifies two tokens and
    // drafts one through the module and the LM head, so TPOT falls by less than 1.85× — and
    // it does fall, a batch of one being bound by reading the weights, not by the tokens.
    let tpot = |p: &serde_json::Value| p["curve"][0]["tpot"]["mean"].as_f64().unwrap();
    let ratio = tpot(&mtp) / tpot(&plain);
    assert!(
        ratio > 1.0 / 1.85 && ratio < 1.0,
        "TPOT {:.2} ms with MTP against {:.2} ms",
        tpot(&mtp) * 1e3,
        tpot(&plain) * 1e3
    );
    // Under a TPOT limit, faster decoding holds more users.
    let c_star = |p: &serde_json::Value| p["c_star"].as_u64().unwrap();
    assert!(
        c_star(&mtp) > c_star(&plain),
        "{} vs {}",
        c_star(&mtp),
        c_star(&plain)
    );
    assert_eq!(mtp["workload"]["speculation"]["acceptance"][0], 0.85);
}

#[test]
fn acceptance_decides_what_speculation_buys() {
    // A draft nobody accepts costs its passes and buys nothing: TPOT rises at one user.
    let plain = r1(&[]);
    let useless = r1(&["--speculative", "eagle:3@0"]);
    let tpot = |p: &serde_json::Value| p["curve"][0]["tpot"]["mean"].as_f64().unwrap();
    assert!(tpot(&useless) > tpot(&plain));
    let good = r1(&["--speculative", "eagle:3@0.8"]);
    assert!(tpot(&good) < tpot(&plain));
}

#[test]
fn drafters_that_cannot_run_are_refused_by_name() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--model", "llama-3.1-8b", "--speculative", "mtp"],
            "llama-3.1-8b has no multi-token-prediction module",
        ),
        (
            &["--model", "llama-3.1-70b", "--speculative", "eagle:3"],
            "give the acceptance rate",
        ),
        (
            &[
                "--model",
                "llama-3.1-8b",
                "--speculative",
                "draft:llama-3.1-70b:4@0.6",
            ],
            "not smaller than llama-3.1-8b",
        ),
        (
            &[
                "--model",
                "deepseek-r1",
                "--speculative",
                "draft:llama-3.1-8b:4@0.6",
            ],
            "share the model's tokenizer",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["predict", "--card", "H200", "--ttft", "2s"];
        args.extend(extra);
        let run = capplan(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    // serve refuses before it listens.
    let run = capplan(&[
        "serve",
        "--model",
        "llama-3.1-8b",
        "--card",
        "L4",
        "--speculative",
        "mtp",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("multi-token-prediction"),
        "{}",
        run.stderr
    );
    // solve must know which models the drafter belongs to.
    let run = capplan(&[
        "solve",
        "--users",
        "100",
        "--ttft",
        "2s",
        "--speculative",
        "mtp",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--model"), "{}", run.stderr);
}

/// `solve` for 1 000 DeepSeek-R1 users on 8xH200 nodes at TTFT 2 s and TPOT 50 ms, from the
/// capacity tables in `measurements`, JSON, then `extra`.
fn solve_r1(measurements: &std::path::Path, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "--measurements",
        measurements.to_str().unwrap(),
        "solve",
        "--users",
        "1000",
        "--ttft",
        "2s",
        "--tpot",
        "50ms",
        "--model",
        "deepseek-r1",
        "--cards",
        "8xH200",
        "--format",
        "json",
    ];
    args.extend(extra);
    capplan(&args)
}

/// A point measured without a drafter is no evidence for a plan with one, nor the other way
/// round: each plan takes the point run as it asks, and lists the other as skipped with why.
#[test]
fn plans_take_only_points_run_with_the_speculation_they_ask_for() {
    let dir = common::scratch("speculative-points");
    std::fs::write(
        dir.join("deepseek--capacity.csv"),
        "model,card,cards_per_node,tp,speculative,users_per_instance,ttft_slo_s,tpot_slo_ms,percentile,source\n\
         deepseek-r1,H200,8,8,,111,2,50,p90,imported\n\
         deepseek-r1,H200,8,8,mtp,222,2,50,p90,imported\n",
    )
    .unwrap();
    let solve = |extra: &[&str]| {
        let run = solve_r1(&dir, &[&["--no-predict"][..], extra].concat());
        assert_eq!(run.code, 0, "{}", run.stderr);
        json(&run)
    };
    for (extra, users, skipped_because) in [
        (&[][..], 111.0, "run with speculative decoding"),
        (
            &["--speculative", "mtp"][..],
            222.0,
            "run without speculative decoding",
        ),
    ] {
        let report = solve(extra);
        let plan = &report["plans"][0];
        assert_eq!(plan["users_per_instance"].as_f64(), Some(users), "{report}");
        let skipped = report["skipped"].to_string();
        assert!(skipped.contains(skipped_because), "{skipped}");
    }
}

/// A measured point corrects its card's predictions only against a prediction of the point
/// as it ran: a point measured without a drafter is predicted without one, even under a plan
/// that asks for MTP (which nearly doubles DeepSeek-R1's C* at a 50 ms TPOT).
#[test]
fn a_measured_point_is_predicted_as_it_ran_to_correct_a_plan() {
    let dir = common::scratch("speculative-correction");
    std::fs::write(
        dir.join("deepseek--capacity.csv"),
        "model,card,cards_per_node,tp,users_per_instance,ttft_slo_s,tpot_slo_ms,percentile,source\n\
         deepseek-r1,H200,8,8,111,2,50,p90,imported\n",
    )
    .unwrap();
    let run = solve_r1(&dir, &["--speculative", "mtp"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let predicted = json(&run)["measured_vs_predicted"][0]["predicted"]
        .as_f64()
        .unwrap();
    let c_star = |extra: &[&str]| {
        let mut args = vec!["--tp", "8", "--tpot", "50ms", "--format", "json"];
        args.extend(extra);
        let run = predict_r1(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        json(&run)["c_star"].as_f64().unwrap()
    };
    let (plain, mtp) = (c_star(&[]), c_star(&["--speculative", "mtp"]));
    assert!(mtp > 1.5 * plain, "{plain} vs {mtp}");
    // `solve` bisects C* to 5 % of it, `predict` to 2 %: the same pass/fail boundary, read
    // to different widths.
    assert!(
        (predicted - plain).abs() <= 0.05 * plain + 1.0,
        "predicted as measured: {predicted} against {plain} without MTP, {mtp} with it"
    );
}

//! `capplan predict` from the command line: dataset lengths, open-loop rates, and bad input.

mod common;

use common::{capplan, json, scratch};

const LAYOUT: [&str; 8] = [
    "predict",
    "--model",
    "llama-3.1-8b",
    "--card",
    "L4",
    "--ttft",
    "2s",
    "--format",
];

fn predict(extra: &[&str]) -> common::Run {
    let mut args = LAYOUT.to_vec();
    args.push("json");
    args.extend(extra);
    capplan(&args)
}

#[test]
fn a_dataset_gives_the_lengths_and_its_replies_the_outputs() {
    let dir = scratch("predict-dataset");
    let path = dir.join("chat.jsonl");
    // Prompts of 40 and 80 ASCII characters (10 and 20 estimated tokens); replies of 400 and
    // 800 (100 and 200).
    let line = |prompt: usize, reply: usize| {
        format!(
            "{{\"prompt\": \"{}\", \"completion\": \"{}\"}}\n",
            "a".repeat(prompt),
            "b".repeat(reply)
        )
    };
    std::fs::write(&path, line(40, 400) + &line(80, 800)).unwrap();
    let run = predict(&["--dataset", path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value = json(&run);
    assert_eq!(value["workload"]["input_tokens"]["kind"], "empirical");
    assert_eq!(
        value["workload"]["input_tokens"]["tokens"],
        serde_json::json!([10, 20])
    );
    assert_eq!(
        value["workload"]["output_tokens"]["tokens"],
        serde_json::json!([100, 200])
    );
    assert!(value["c_star"].as_u64().unwrap() > 0);

    // --output-tokens overrides the replies.
    let run = predict(&["--dataset", path.to_str().unwrap(), "--output-tokens", "64"]);
    assert_eq!(json(&run)["workload"]["output_tokens"]["tokens"], 64);
}

#[test]
fn rates_give_r_star_and_a_curve_of_rates() {
    let run = predict(&["--tpot", "100ms", "--rate", "0.5,1,4"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value = json(&run);
    let rates: Vec<f64> = value["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["offered_rate"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [0.5, 1.0, 4.0]);
    // 4 requests/s of 512 in / 256 out is far beyond one L4 at 100 ms per token.
    assert_eq!(value["rate_star"]["rate"], 1.0);
    assert_eq!(value["rate_star"]["first_fail"], 4.0);
}

#[test]
fn bad_datasets_and_rates_name_what_is_wrong() {
    let dir = scratch("predict-bad");
    let path = dir.join("bad.jsonl");
    std::fs::write(&path, "{\"prompt\": \"ok\"}\n{\"oops\": 1}\n").unwrap();
    let run = predict(&["--dataset", path.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bad.jsonl:2"), "{}", run.stderr);

    let run = predict(&["--rate", "fast"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("'fast'"), "{}", run.stderr);

    let run = predict(&["--dataset", "missing.jsonl"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("missing.jsonl"), "{}", run.stderr);
}

#[test]
fn a_cached_prefix_saves_prefill_and_holds_more_users() {
    // Long prompts and short replies: prefill is most of the work, so a prefix cache that
    // already holds 90 % of every prompt lets one instance hold more users at the same TTFT.
    let lengths = ["--input-tokens", "3000", "--output-tokens", "64"];
    let plain = predict(&lengths);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let mut args = lengths.to_vec();
    args.extend(["--prefix-share", "90%"]);
    let cached = predict(&args);
    assert_eq!(cached.code, 0, "{}", cached.stderr);
    let (plain, cached) = (json(&plain), json(&cached));
    assert!(plain["workload"].get("prefix_share").is_none());
    assert_eq!(cached["workload"]["prefix_share"], 0.9);
    let c_star = |value: &serde_json::Value| value["c_star"].as_u64().unwrap();
    assert!(
        c_star(&cached) > c_star(&plain),
        "C* {} with 90 % cached vs {} without",
        c_star(&cached),
        c_star(&plain)
    );
    // The table says what the prediction assumed.
    // The layout without `--format`: the default table.
    let mut table_args = LAYOUT[..LAYOUT.len() - 1].to_vec();
    table_args.extend(lengths);
    table_args.extend(["--prefix-share", "0.9"]);
    let table = capplan(&table_args);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("90 % of each prompt cached"),
        "{}",
        table.stdout
    );
}

#[test]
fn a_prefix_share_outside_zero_to_one_is_refused() {
    for bad in ["1.5", "-0.2", "most"] {
        let run = predict(&["--prefix-share", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stderr.contains(bad), "{}", run.stderr);
        assert!(run.stderr.contains("0 to 1"), "{}", run.stderr);
    }
}

#[test]
fn a_prediction_names_the_node_shape_it_was_timed_on() {
    // Without --node the card's largest node shape times the instance; its topology decides
    // which measured all-reduce four L40S run, so the C* differs with the node named.
    let run_on = |node: Option<&str>| {
        let mut args = vec![
            "predict",
            "--model",
            "llama-2-70b",
            "--card",
            "L40S",
            "--tp",
            "4",
            "--ttft",
            "5s",
            "--tpot",
            "200ms",
            "--max-concurrency",
            "64",
        ];
        if let Some(node) = node {
            args.extend(["--node", node]);
        }
        let table = capplan(&args);
        assert_eq!(table.code, 0, "{}", table.stderr);
        args.extend(["--format", "json"]);
        let run = capplan(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        (table.stdout, json(&run))
    };
    let (table, largest) = run_on(None);
    assert!(
        table.contains("node shape 8xL40S-PCIe (pcie-switch)"),
        "{table}"
    );
    assert_eq!(largest["node"], "8xL40S-PCIe (pcie-switch)");
    let (table, paired) = run_on(Some("4xL40S-PCIe"));
    assert!(table.contains("node shape 4xL40S-PCIe (pcie)"), "{table}");
    let users = |v: &serde_json::Value| v["c_star"].as_u64().unwrap();
    assert!(
        users(&largest) > users(&paired),
        "{} vs {}",
        users(&largest),
        users(&paired)
    );
}

/// `--breakdown` shows where a few iterations' time goes: in JSON each step's parts add up to
/// its total and the table names the parts; a prediction without it carries none. L4 has no
/// measured operator tables, so its parts are the roofline's two bounds.
#[test]
fn the_breakdown_shows_each_steps_parts() {
    let run = predict(&["--tpot", "100ms", "--breakdown"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value = json(&run);
    let steps = value["steps"].as_array().expect("steps");
    assert!(steps.len() >= 3, "{steps:?}");
    assert_eq!(steps[0]["step"], "a prompt alone");
    for step in steps {
        let parts = &step["parts"];
        let bound = |name: &str| parts["roofline"][name].as_f64().unwrap();
        let kernels = bound("compute").max(bound("memory"));
        let sum = kernels
            + parts["communication"].as_f64().unwrap()
            + parts["overhead"].as_f64().unwrap();
        let total = step["total_s"].as_f64().unwrap();
        assert!((sum - total).abs() < 1e-12 && total > 0.0, "{step}");
    }
    // A prompt is compute-bound, one sequence's decode memory-bound.
    let bound = |i: usize, name: &str| steps[i]["parts"]["roofline"][name].as_f64().unwrap();
    assert!(bound(0, "compute") > bound(0, "memory"));
    assert!(bound(1, "memory") > bound(1, "compute"));
    assert!(json(&predict(&["--tpot", "100ms"])).get("steps").is_none());

    let mut args = LAYOUT.to_vec();
    args.extend(["table", "--tpot", "100ms", "--breakdown"]);
    let run = capplan(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("Where an iteration's time goes"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("compute (roofline)"), "{}", run.stdout);
}

#[test]
fn a_prediction_measured_as_a_benchmark_measures_its_waves_of_prompts() {
    // The steady state (what plans assume) against AIPerf's way: every user started together,
    // each level the average of several draws of the client's delays.
    let c_star_and_client = |extra: &[&str]| {
        // The layout without its TTFT limit of 2 s, which the queue of requests would decide.
        let mut args = LAYOUT[..5].to_vec();
        args.extend([
            "--ttft",
            "0.5s",
            "--percentile",
            "mean",
            "--output-tokens",
            "128",
            "--format",
            "json",
        ]);
        args.extend(extra);
        let out = capplan(&args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let report = json(&out);
        (
            report["c_star"].as_u64().unwrap(),
            report["measured_as"]["client"]["kind"].to_string(),
        )
    };
    let (steady, steady_client) = c_star_and_client(&[]);
    let (aiperf, aiperf_client) =
        c_star_and_client(&["--measured-as", "aiperf", "--requests-per-user", "20"]);
    println!("C* {steady} in steady state, {aiperf} as AIPerf measures");
    assert_eq!(steady_client, "\"steady-state\"");
    assert_eq!(aiperf_client, "\"started-together\"");
    // Prompts sent together wait behind each other: at a TTFT limit the benchmark holds
    // fewer users than the same engine under a steady stream.
    assert!(aiperf * 2 < steady, "{aiperf} vs {steady}");

    // The table says how its levels were measured.
    let mut args = LAYOUT.to_vec();
    args.extend(["table", "--measured-as", "aiperf"]);
    let table = capplan(&args);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table
            .stdout
            .contains("Levels measured as a benchmark measures them"),
        "{}",
        table.stdout
    );

    // A table of levels is no benchmark; a count below one request a user is none either.
    for (extra, says) in [
        (vec!["--measured-as", "steps-csv"], "steps-csv"),
        (vec!["--measured-as", "locust"], "locust"),
        (
            vec!["--measured-as", "aiperf", "--requests-per-user", "0.5"],
            "--requests-per-user 0.5",
        ),
        (vec!["--measured-as", "aiperf", "--rate", "2"], "--rate"),
    ] {
        let out = predict(&extra);
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{extra:?}: {}", out.stderr);
    }
}

/// Every C* says how far a 5 % latency error would move it, read off its own curve: below C*
/// when latency is higher, above when lower, and the slope it states is the one joining them.
#[test]
fn a_prediction_says_how_far_a_latency_error_moves_c_star() {
    let run = predict(&["--tpot", "100ms"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let value = json(&run);
    let c_star = value["c_star"].as_f64().unwrap();
    let slope = &value["c_star_slope"];
    // Each crossing is {"at": users} where interpolated, {"between": [low, high]} where the
    // level above it stopped early.
    let at = |crossing: &serde_json::Value| crossing["at"].as_f64();
    // Crossings are in fractional users; C* is the whole users that pass.
    let slower = at(&slope["c_star_if_slower"]).unwrap();
    assert!(slower < c_star + 1.0, "{slope}");
    if let (Some(faster), Some(s)) = (at(&slope["c_star_if_faster"]), slope["slope"].as_f64()) {
        assert!(faster >= c_star && faster > slower, "{slope}");
        let implied = (faster / slower).powf(s);
        assert!((implied - 1.05 / 0.95).abs() < 1e-6, "{slope}");
    }
    let mut args = LAYOUT.to_vec();
    args.extend(["table", "--tpot", "100ms"]);
    let table = capplan(&args);
    assert!(
        table
            .stdout
            .contains("How fragile: were every level's latency 5 % above"),
        "{}",
        table.stdout
    );
}

/// A profile whose decode kernels lack some shapes and multi-block mode (TensorRT-LLM 0.x)
/// says so under the step-time basis, with the share of bandwidth a block streams at; the
/// default profile, whose kernels split histories, prints no such line.
#[test]
fn a_profile_without_multi_block_mode_says_what_its_decode_kernels_do() {
    let text = |extra: &[&str]| {
        let mut args = LAYOUT[..7].to_vec();
        args.extend(["--tpot", "50ms"]);
        args.extend(extra);
        let run = capplan(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let old = text(&["--engine", "trtllm-0.x"]);
    let line = old
        .lines()
        .find(|l| l.starts_with("Decode attention:"))
        .unwrap_or_else(|| panic!("no decode attention line:\n{old}"));
    assert!(line.contains("no multi-block mode"), "{line}");
    assert!(
        line.contains("1.5 % of the card's memory bandwidth"),
        "{line}"
    );
    assert!(line.contains("8 query heads per KV head"), "{line}");
    assert!(!text(&[]).contains("Decode attention:"));
}

/// A profile whose requests spend time before the engine (SGLang's fitted front) says so in
/// its heading, with the figure from `hardware/engines.toml`; a profile without one (the
/// current TensorRT-LLM's) says nothing of it.
#[test]
fn the_heading_names_the_time_a_request_spends_before_the_engine() {
    let heading = |engine: &str| {
        let mut args = LAYOUT[..7].to_vec();
        args.extend(["--tpot", "50ms", "--engine", engine]);
        let run = capplan(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
            .lines()
            .find(|l| l.starts_with("Engine profile"))
            .unwrap_or_else(|| panic!("no engine profile line:\n{}", run.stdout))
            .to_string()
    };
    let catalog = capplan::catalog::Catalog::shipped().unwrap();
    let sglang = catalog.engine("sglang").unwrap().request_overhead_ms;
    assert!(sglang > 0.0);
    let line = heading("sglang");
    assert!(
        line.contains(&format!("; {sglang} ms a request before the engine")),
        "{line}"
    );
    assert_eq!(catalog.engine("trtllm").unwrap().request_overhead_ms, 0.0);
    assert!(!heading("trtllm").contains("before the engine"));
}

/// SGLang's max_prefill_tokens as `--prompt-budget`: the heading, written from the engine the
/// prediction ran, says it (the admission rule itself is tested beside the engine); zero is
/// refused naming the flag.
#[test]
fn a_prompt_budget_reaches_the_engine_and_zero_is_refused() {
    let predict = |extra: &[&str]| {
        let mut args = LAYOUT[..7].to_vec();
        args.extend(["--tpot", "50ms", "--engine", "sglang"]);
        args.extend(extra);
        capplan(&args)
    };
    let run = predict(&["--prompt-budget", "1500"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("new prompts taken while under 1500 prompt tokens"),
        "{}",
        run.stdout
    );
    let plain = predict(&[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        !plain.stdout.contains("new prompts taken"),
        "{}",
        plain.stdout
    );
    let zero = predict(&["--prompt-budget", "0"]);
    assert_eq!(zero.code, 2);
    assert!(zero.stderr.contains("--prompt-budget"), "{}", zero.stderr);
}

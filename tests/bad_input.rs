//! Bad input: exit code 2 and one message that names the value, file or line and what is valid.

mod common;

use common::{capplan, capplan_in, predict_r1, scratch};

fn assert_input_error(run: &common::Run, mentions: &[&str]) {
    assert_eq!(
        run.code, 2,
        "exit code 2 for bad input; stderr: {}",
        run.stderr
    );
    for text in mentions {
        assert!(
            run.stderr.contains(text),
            "stderr mentions {text:?}: {}",
            run.stderr
        );
    }
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

const SLO: [&str; 6] = ["--ttft", "3.15s", "--tpot", "100ms", "--percentile", "mean"];

fn solve(extra: &[&str]) -> common::Run {
    let mut args = vec!["solve"];
    args.extend(SLO);
    args.extend(extra);
    capplan(&args)
}

/// `predict` of llama-3.1-8b on `card` at TTFT ≤ 2 s, with `extra` flags; `global` flags go
/// before the command.
fn predict_8b(global: &[&str], card: &str, extra: &[&str]) -> common::Run {
    let mut args = global.to_vec();
    args.extend([
        "predict",
        "--model",
        "llama-3.1-8b",
        "--card",
        card,
        "--ttft",
        "2s",
    ]);
    args.extend(extra);
    capplan(&args)
}

#[test]
fn unknown_card_suggests_the_nearest() {
    assert_input_error(
        &solve(&["--users", "100", "--cards", "A3O"]),
        &["A3O", "A30"],
    );
    assert_input_error(
        &solve(&["--users", "100", "--cards", "H1OO-SXM"]),
        &["H1OO-SXM", "H100-SXM"],
    );
}

#[test]
fn unknown_model_suggests_the_nearest() {
    assert_input_error(
        &solve(&["--users", "100", "--model", "llama-13"]),
        &["llama-13", "llama-13b"],
    );
    let run = capplan(&["hardware", "show", "qwen2.5-72"]);
    assert_input_error(&run, &["qwen2.5-72", "qwen2.5-72b"]);
}

#[test]
fn zero_or_negative_users() {
    assert_input_error(&solve(&["--users", "0"]), &["'0'", "above 0"]);
    assert_input_error(&solve(&["--users", "-5"]), &["'-5'", "above 0"]);
    assert_input_error(&solve(&["--users", "many"]), &["'many'"]);
}

#[test]
fn unparseable_duration() {
    let run = capplan(&["solve", "--users", "100", "--ttft", "3x"]);
    assert_input_error(&run, &["3x", "ms"]);
    let run = capplan(&["solve", "--users", "100", "--ttft", "3"]);
    assert_input_error(&run, &["no unit", "3s"]);
    let run = capplan(&["solve", "--users", "100", "--ttft", "0s"]);
    assert_input_error(&run, &["above zero"]);
}

#[test]
fn malformed_catalog_toml_names_file_and_line() {
    let dir = scratch("bad-toml");
    std::fs::write(
        dir.join("cards.toml"),
        "[[card]]\nname = \"X1\"\nvendor = \"x\"\nmemory_gib = eighty\n",
    )
    .unwrap();
    let run = capplan(&[
        "--hardware",
        dir.to_str().unwrap(),
        "hardware",
        "list",
        "cards",
    ]);
    assert_input_error(&run, &["cards.toml:4"]);

    std::fs::write(
        dir.join("cards.toml"),
        "[[card]]\nname = \"X1\"\nvendor = \"x\"\nmemory_gib = 80\nhbm_bandwidth_gbs = 1\n\
         fp16_tflops = 1\ninterconnect = \"pcie\"\nlink_bandwidth_gbs = 64\npcie_gen = 4\ntdp_w = 300\n\
         form_factor = \"pcie\"\nrelease_year = 2024\nsource = \"test\"\nmemroy = 1\n",
    )
    .unwrap();
    let run = capplan(&[
        "--hardware",
        dir.to_str().unwrap(),
        "hardware",
        "list",
        "cards",
    ]);
    assert_input_error(&run, &["cards.toml:14", "memroy"]);

    std::fs::write(dir.join("cards.toml"), "").unwrap();
    std::fs::write(
        dir.join("nodes.toml"),
        "[[node]]\nname = \"8xNope\"\ncard = \"A3O\"\ncards_per_node = 8\ninterconnect = \"pcie\"\n\
         topology = \"pcie\"\nhost_power_w = 1000\nrack_units = 4\nsource = \"test\"\n",
    )
    .unwrap();
    let run = capplan(&[
        "--hardware",
        dir.to_str().unwrap(),
        "hardware",
        "list",
        "nodes",
    ]);
    assert_input_error(&run, &["nodes.toml:2", "A3O", "A30"]);
}

#[test]
fn malformed_capacity_csv_names_file_and_line() {
    let dir = scratch("bad-csv");
    std::fs::write(
        dir.join("points.csv"),
        "model,card,tp,users_per_instance,ttft_slo_s,tpot_slo_ms,percentile\n\
         llama-13b,A30,4,45,3.15,100,mean\n\
         llama-13b,A30,4,forty,3.15,100,mean\n",
    )
    .unwrap();
    let mut args = vec![
        "--measurements",
        dir.to_str().unwrap(),
        "solve",
        "--users",
        "100",
    ];
    args.extend(SLO);
    let run = capplan(&args);
    assert_input_error(&run, &["points.csv:3", "users_per_instance", "forty"]);

    std::fs::write(
        dir.join("points.csv"),
        "model,card,tp,users_per_instance,ttft_slo_s\nllama-13b,A30,4,45\n",
    )
    .unwrap();
    let run = capplan(&args);
    assert_input_error(&run, &["points.csv:2"]);
}

#[test]
fn a_layout_that_does_not_fit_shows_the_numbers() {
    // LLaMA-65B in fp16 needs ~130 GB of weights; 4 × A30 have 96 GiB.
    let run = capplan(&[
        "memory",
        "--model",
        "llama-65b",
        "--card",
        "A30",
        "--tp",
        "4",
    ]);
    assert_input_error(&run, &["does not fit", "130", "96 GiB"]);
}

#[test]
fn a_missing_hardware_folder_is_named() {
    let run = capplan_in(
        env!("CARGO_MANIFEST_DIR").into(),
        &["--hardware", "no/such/folder", "hardware", "list"],
    );
    assert_input_error(&run, &["no/such/folder"]);
}

/// Load shapes that cannot work are refused before anything is sent or written.
#[test]
fn probe_load_shapes_that_cannot_work() {
    let out = scratch("bad-load-shapes");
    let template = out.join("image.toml");
    std::fs::write(
        &template,
        "path = \"/predict\"\nbody = '{\"feed\": {{prompts}}}'\noutput = \"/result\"\n",
    )
    .unwrap();
    let probe = |extra: &[&str]| {
        let mut args = vec![
            "probe",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "llama-3.1-8b",
            "--card",
            "L4",
            "--e2e",
            "1s",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        capplan(&args)
    };
    assert_input_error(
        &probe(&["--batch-sizes", "1,2", "--concurrency", "1"]),
        &["--batch-sizes", "--api template", "{{prompts}}"],
    );
    let with_template = [
        "--api",
        "template",
        "--api-template",
        template.to_str().unwrap(),
    ];
    let mut args = with_template.to_vec();
    args.extend(["--batch-sizes", "1,2", "--concurrency", "1,2"]);
    assert_input_error(&probe(&args), &["exactly one --concurrency"]);
    let mut args = with_template.to_vec();
    args.extend(["--instances-per-card", "2", "--tp", "2"]);
    assert_input_error(&probe(&args), &["--instances-per-card 2", "--tp 1"]);
    assert_input_error(
        &probe(&["--requests-per-user", "0"]),
        &["--requests-per-user"],
    );
    assert_input_error(&probe(&["--spawn-rate", "0"]), &["'0'", "users per second"]);
    assert_input_error(&probe(&["--stability", "150%"]), &["150%"]);
    assert_input_error(
        &probe(&["--stability", "10%", "--requests-per-user", "5"]),
        &["--stability", "--requests-per-user"],
    );
    // Nothing was measured, so nothing was written.
    let written: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(written.is_empty(), "{written:?}");
    // A plan needs a latency limit: TTFT, or E2E for a service that does not stream tokens.
    assert_input_error(&capplan(&["solve", "--users", "10"]), &["--ttft", "--e2e"]);
}

#[test]
fn an_unknown_engine_names_the_valid_ones() {
    let run = predict_8b(&[], "H100-SXM", &["--engine", "vlm"]);
    assert_input_error(&run, &["unknown engine 'vlm'", "vllm"]);
    assert_input_error(
        &solve(&["--users", "100", "--engine", "tensorrt"]),
        &["tensorrt"],
    );
}

#[test]
fn a_dtype_the_card_cannot_run_is_refused() {
    // A100 has no FP8 tensor cores; FP4 needs Blackwell.
    for (card, dtype, needs) in [("A100-80G-SXM", "fp8", "FP8"), ("H100-SXM", "fp4", "FP4")] {
        let run = predict_8b(&[], card, &["--dtype", dtype]);
        assert_input_error(&run, &[card, dtype, needs]);
    }
}

#[test]
fn a_malformed_operator_table_names_its_file_and_line() {
    let dir = scratch("bad-operators");
    let system = dir.join("operators").join("h100_sxm");
    std::fs::create_dir_all(&system).unwrap();
    std::fs::write(
        system.join("vllm.csv"),
        "meta,system,h100_sxm\nmeta,engine,vllm\naxis,gemm,m,1 2\ngemm,bf16,512,512,1 x\n",
    )
    .unwrap();
    let hardware = dir.to_str().unwrap();
    let run = predict_8b(&["--hardware", hardware], "H100-SXM", &[]);
    assert_input_error(&run, &["vllm.csv:4", "'x' is not a number"]);
    // An engines.toml with an impossible value is refused the same way.
    std::fs::remove_dir_all(dir.join("operators")).unwrap();
    std::fs::write(
        dir.join("engines.toml"),
        "[[engine]]\nname = \"vllm\"\ndescribes = \"x\"\noperators = \"vllm\"\nmax_running = 0\n\
         token_budget = 2048\nchunked_prefill = true\nstep_mix = \"mixed\"\nadmission = \"continuous\"\n\
         cuda_graph_sizes = []\nmemory_utilization = 0.9\nstep_overhead_ms = 1.0\nseq_overhead_us = 1.0\n\
         overhead_source = \"x\"\nsource = \"x\"\n",
    )
    .unwrap();
    let run = capplan(&["--hardware", hardware, "hardware", "list", "engines"]);
    assert_input_error(&run, &["engines.toml:2", "max_running"]);
    // How far a benchmark's users fall out of step is a share of one request cycle.
    std::fs::write(
        dir.join("engines.toml"),
        "[[engine]]\nname = \"vllm\"\ndescribes = \"x\"\noperators = \"vllm\"\nmax_running = 8\n\
         token_budget = 2048\nchunked_prefill = true\nstep_mix = \"mixed\"\nadmission = \"continuous\"\n\
         cuda_graph_sizes = []\nmemory_utilization = 0.9\nstep_overhead_ms = 1.0\nseq_overhead_us = 1.0\n\
         out_of_step = 1.5\noverhead_source = \"x\"\nsource = \"x\"\n",
    )
    .unwrap();
    let run = capplan(&["--hardware", hardware, "hardware", "list", "engines"]);
    assert_input_error(&run, &["engines.toml:2", "out_of_step", "1.5"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A layout that does not divide the model, or a prefill:decode split with an empty pool:
/// exit 2, naming the axis and the model's size.
#[test]
fn layouts_that_do_not_divide_the_model() {
    assert_input_error(
        &predict_r1(&["--tp", "8", "--ep", "512"]),
        &["ep 512", "256 experts"],
    );
    assert_input_error(
        &predict_r1(&["--tp", "1", "--attention-dp", "8", "--ep", "3"]),
        &["ep 3"],
    );
    assert_input_error(&predict_r1(&["--pp", "62"]), &["pp 62", "61 layers"]);
    assert_input_error(
        &predict_8b(&[], "H100-SXM", &["--tpot", "30ms", "--pd", "0:3"]),
        &["0P:3D"],
    );
    assert_input_error(
        &predict_8b(&[], "H100-SXM", &["--attention-dp", "2"]),
        &["attention dp 2", "dense"],
    );
    // Prefill workers of a layout the model cannot take.
    assert_input_error(
        &predict_8b(&[], "H100-SXM", &["--tpot", "30ms", "--prefill-tp", "3"]),
        &["prefill workers", "tp 3"],
    );
    assert_input_error(
        &predict_8b(
            &[],
            "H100-SXM",
            &["--tpot", "30ms", "--prefill-tp", "1", "--prefill-ep", "2"],
        ),
        &["prefill workers", "dense"],
    );
    // `serve --pd` refuses an empty pool before it listens.
    assert_input_error(
        &capplan(&[
            "serve",
            "--model",
            "llama-3.1-8b",
            "--card",
            "H100-SXM",
            "--pd",
            "2:0",
        ]),
        &["2P:0D"],
    );
    let run = capplan(&[
        "memory",
        "--model",
        "llama-3.1-8b",
        "--card",
        "H100-SXM",
        "--ep",
        "8",
        "--tp",
        "8",
    ]);
    assert_input_error(&run, &["ep 8", "dense"]);
}

/// `hardware list engines` over the shipped engines.toml with `line` in place of the one
/// starting with `key`: exit 2, the message naming every one of `named`.
fn engines_line_is_refused(scratch_name: &str, (key, line): (&str, &str), named: &[&str]) {
    let dir = scratch(scratch_name);
    std::fs::write(
        dir.join("engines.toml"),
        common::shipped_engines_with(key, line),
    )
    .unwrap();
    let run = capplan(&[
        "--hardware",
        dir.to_str().unwrap(),
        "hardware",
        "list",
        "engines",
    ]);
    assert_input_error(&run, named);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A token budget of nothing in a profile's grid: exit 2, naming it.
#[test]
fn a_zero_token_budget_in_the_grid_is_refused() {
    engines_line_is_refused(
        "bad-token-budget-grid",
        ("token_budget_grid", "token_budget_grid = [8192, 0]"),
        &["engines.toml", "trtllm-0.x", "token_budget_grid", "0"],
    );
}

/// A decode block streaming more than the card's whole memory bandwidth: exit 2, naming it.
#[test]
fn a_block_stream_share_above_one_is_refused() {
    engines_line_is_refused(
        "bad-block-stream-share",
        ("block_stream_share", "block_stream_share = 1.5"),
        &["engines.toml", "trtllm-0.x", "block_stream_share", "1.5"],
    );
}

/// A negative count of grouped-query decode re-reads in an engines.toml override: exit 2,
/// naming it.
#[test]
fn a_negative_reread_half_group_is_refused() {
    engines_line_is_refused(
        "bad-reread-half-group",
        ("reread_half_group", "reread_half_group = -1.5"),
        &["engines.toml", "trtllm-0.x", "reread_half_group", "-1.5"],
    );
}

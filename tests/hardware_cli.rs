//! `capplan hardware` and `capplan memory`: the catalog as users see it.

mod common;

use common::{capplan, capplan_in, json, scratch};

const REQUIRED_CARDS: [&str; 25] = [
    "P40",
    "T4",
    "V100-32G-SXM2",
    "A10G",
    "A30",
    "A40",
    "L4",
    "L40S",
    "A100-40G-SXM",
    "A100-80G-SXM",
    "A100-80G-PCIe",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "H20",
    "B200",
    "MI300X",
    "910B4",
    "B300",
    "GB200",
    "GB300",
    "MI325X",
    "MI355X",
    "Gaudi3",
    "RTX-PRO-6000",
];

const REQUIRED_MODELS: [&str; 14] = [
    "llama-13b",
    "llama-65b",
    "llama-2-70b",
    "qwen1.5-7b",
    "qwen1.5-14b",
    "qwen2-7b",
    "qwen2-72b",
    "qwen2.5-72b",
    "deepseek-coder-6.7b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen2.5-7b",
    "qwen2.5-32b",
    "mixtral-8x7b",
];

#[test]
fn the_catalog_lists_every_required_card_and_model_with_a_source() {
    let run = capplan(&["hardware", "list", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listing = json(&run);
    let names = |section: &str| -> Vec<String> {
        listing[section]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    let cards = names("cards");
    for card in REQUIRED_CARDS {
        assert!(cards.contains(&card.to_string()), "card {card} missing");
    }
    let models = names("models");
    for model in REQUIRED_MODELS {
        assert!(models.contains(&model.to_string()), "model {model} missing");
    }
    for section in ["cards", "nodes", "models"] {
        for entry in listing[section].as_array().unwrap() {
            let source = entry["source"].as_str().unwrap_or("");
            assert!(source.len() > 5, "{} has no source", entry["name"]);
        }
    }
    for node in listing["nodes"].as_array().unwrap() {
        if node.get("price_usd").is_some() || node.get("cloud_usd_per_hour").is_some() {
            assert!(
                node.get("estimate_note").is_some(),
                "{} prices need a note",
                node["name"]
            );
        }
    }
}

#[test]
fn the_2025_systems_are_listed_with_their_scale_out_networks() {
    let run = capplan(&["hardware", "list", "nodes", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let nodes = json(&run)["nodes"].as_array().unwrap().clone();
    let node = |name: &str| {
        nodes
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("node {name} missing"))
            .clone()
    };
    for (name, card, cards, scale_out) in [
        ("8xB300", "B300", 8, 100.0),
        ("GB200-NVL72", "GB200", 72, 50.0),
        ("GB300-NVL72", "GB300", 72, 100.0),
        ("8xMI325X", "MI325X", 8, 50.0),
        ("8xMI355X", "MI355X", 8, 50.0),
        ("8xGaudi3", "Gaudi3", 8, 75.0),
        ("8xRTX-PRO-6000", "RTX-PRO-6000", 8, 50.0),
        ("8xH100-SXM", "H100-SXM", 8, 50.0),
        ("8xA100-80G-SXM", "A100-80G-SXM", 8, 25.0),
    ] {
        let n = node(name);
        assert_eq!(n["card"], card, "{name}");
        assert_eq!(n["cards_per_node"], cards, "{name}");
        assert_eq!(n["scale_out_gbs_per_card"], scale_out, "{name}");
        assert!(n["scale_out"].as_str().is_some(), "{name}");
    }
    assert_eq!(node("GB200-NVL72")["topology"], "nvlink-switch-72");
    // The table shows the scale-out column.
    let run = capplan(&["hardware", "list", "nodes"]);
    assert!(run.stdout.contains("scale-out"), "{}", run.stdout);
    // The Blackwell cards name their measured operator tables.
    for (card, system) in [("B300", "b300_sxm"), ("GB200", "gb200"), ("GB300", "gb300")] {
        let shown = json(&capplan(&["hardware", "show", card, "--format", "json"]));
        assert_eq!(shown["operators"], system, "{card}");
    }
}

#[test]
fn show_finds_aliases_and_prints_json() {
    let run = capplan(&["hardware", "show", "V100-32G", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let card = json(&run);
    assert_eq!(card["kind"], "card");
    assert_eq!(card["name"], "V100-32G-SXM2");
    let run = capplan(&["hardware", "show", "g5.2xlarge"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("A10G"));
    let model = json(&capplan(&[
        "hardware",
        "show",
        "Qwen2-7B-Instruct",
        "--format",
        "json",
    ]));
    assert_eq!(model["kind"], "model");
    assert_eq!(model["kv_heads"], 4);
}

#[test]
fn memory_reports_the_fit() {
    let run = capplan(&[
        "memory",
        "--model",
        "llama-2-70b",
        "--card",
        "A100-80G-SXM",
        "--tp",
        "4",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fit = json(&run);
    assert_eq!(fit["fits"], true);
    // 80 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes.
    assert_eq!(fit["kv_bytes_per_token"], 327_680.0);
    assert!(fit["kv_tokens"].as_u64().unwrap() > 100_000);
    // An image classifier: weights only (27.6 M parameters × 4 bytes), no KV cache.
    let run = capplan(&["memory", "--model", "se-resnext50", "--card", "P40"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("fits") && run.stdout.contains("no KV cache"),
        "{}",
        run.stdout
    );
    let run = capplan(&[
        "memory",
        "--model",
        "SE_ResNeXt50_32x4d",
        "--card",
        "P40",
        "--format",
        "json",
    ]);
    let fit = json(&run);
    assert_eq!(fit["kv_tokens"], 0);
    assert!((fit["weights_gb"].as_f64().unwrap() - 0.1104).abs() < 0.001);
    // A 70B model in 16 bits (141 GB) fits on one 288 GB Blackwell Ultra, not on one H200.
    let one_card = |card: &str| {
        capplan(&[
            "memory",
            "--model",
            "llama-3.1-70b",
            "--card",
            card,
            "--tp",
            "1",
            "--format",
            "json",
        ])
    };
    let run = one_card("B300");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(json(&run)["fits"], true);
    let run = one_card("H200");
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("does not fit"), "{}", run.stderr);
}

#[test]
fn a_hardware_folder_overrides_and_extends() {
    let dir = scratch("override");
    std::fs::write(
        dir.join("nodes.toml"),
        "[[node]]\nname = \"8xA30-PCIe\"\ncard = \"A30\"\ncards_per_node = 8\ninterconnect = \"pcie\"\n\
         topology = \"pcie-switch\"\nhost_power_w = 1000\nrack_units = 4\nprice_usd = 1.0\n\
         estimate_note = \"our quote\"\nsource = \"test\"\n\n\
         [[node]]\nname = \"2xA30-PCIe\"\ncard = \"A30\"\ncards_per_node = 2\ninterconnect = \"pcie\"\n\
         topology = \"pcie\"\nhost_power_w = 300\nrack_units = 1\nsource = \"test\"\n",
    )
    .unwrap();
    let run = capplan_in(
        env!("CARGO_MANIFEST_DIR").into(),
        &[
            "--hardware",
            dir.to_str().unwrap(),
            "hardware",
            "list",
            "nodes",
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let nodes = json(&run)["nodes"].as_array().unwrap().clone();
    let a30 = nodes.iter().find(|n| n["name"] == "8xA30-PCIe").unwrap();
    assert_eq!(a30["price_usd"], 1.0, "same name replaces");
    assert!(
        nodes.iter().any(|n| n["name"] == "2xA30-PCIe"),
        "new name adds"
    );
    assert!(
        nodes.iter().any(|n| n["name"] == "8xH100-SXM"),
        "the rest stays"
    );
}

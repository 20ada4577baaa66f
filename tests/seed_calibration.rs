//! The performance model's report card on the seed report (llm-perf-plan--capacity.csv):
//! calibrate the efficiency factors on six of its twelve capacity points, predict the other six.
//!
//! Workload as the report describes it: about 42 prompt and 285 output tokens (drawn uniformly
//! from 30..54 and 200..370), users pausing 1–3 s, TTFT < 3.15 s and mean TPOT < 100 ms (means),
//! fp16. Run with `cargo test --test seed_calibration -- --nocapture` to see the table.

use capplan::catalog::{Catalog, Dtype, MemoryOptions};
use capplan::sim::calibrate::{calibrate, CalibratedFactors, Observation};
use capplan::sim::engine::{Admission, EngineOptions};
use capplan::sim::perf::Efficiency;
use capplan::sim::predict::{predict, Calibration, Layout, PredictRequest};
use capplan::slo::{Percentile, Slo};
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};

/// (model, card, tp, link, instances per node, published users per instance).
type Point = (&'static str, &'static str, u32, &'static str, u32, u32);

/// Every card, both kinds of link and all three models appear in the calibration half, so the
/// other half asks for new model × card × TP combinations, not new hardware.
const CALIBRATE_ON: [Point; 6] = [
    ("llama-13b", "A30", 4, "pcie", 2, 45),
    ("llama-13b", "A40", 2, "pcie", 2, 140),
    ("llama-13b", "V100-32G", 8, "nvlink", 1, 320),
    ("llama-13b", "A100-40G", 4, "nvlink", 2, 450),
    ("llama-65b", "A40", 4, "pcie", 1, 10),
    ("llama-2-70b", "A100-40G", 8, "nvlink", 1, 45),
];

const PREDICT: [Point; 6] = [
    ("llama-13b", "A100-40G", 8, "nvlink", 1, 700),
    ("llama-65b", "A30", 8, "pcie", 1, 10),
    ("llama-65b", "V100-32G", 8, "nvlink", 1, 90),
    ("llama-65b", "A100-40G", 8, "nvlink", 1, 180),
    ("llama-2-70b", "V100-32G", 8, "nvlink", 1, 45),
    ("llama-2-70b", "A40", 4, "pcie", 2, 90),
];

fn workload() -> Workload {
    Workload {
        input_tokens: TokenLengths::Uniform { min: 30, max: 54 },
        output_tokens: TokenLengths::Uniform { min: 200, max: 370 },
        think_time: ThinkTime::Uniform {
            min_s: 1.0,
            max_s: 3.0,
        },
        prefix_share: PrefixShare::NONE,
        speculation: None,
    }
}

fn slo() -> Slo {
    Slo {
        ttft_s: 3.15,
        tpot_s: Some(0.1),
        percentile: Percentile::Mean,
        e2e_s: None,
    }
}

/// Continuous batching with vLLM's defaults. (TGI-style delayed admission, `--admission
/// delayed`, was tried too and fits the report no better: 81 % median error.)
fn engine() -> EngineOptions {
    EngineOptions {
        admission: Admission::Continuous,
        ..EngineOptions::default()
    }
}

fn memory() -> MemoryOptions {
    MemoryOptions {
        dtype: Some(Dtype::Fp16),
        ..MemoryOptions::default()
    }
}

fn layout<'a>(catalog: &'a Catalog, point: &Point) -> Layout<'a> {
    let (model, card) = (
        catalog.model(point.0).unwrap(),
        catalog.card(point.1).unwrap(),
    );
    Layout {
        interconnect: point.3.to_string(),
        memory: memory(),
        ..Layout::on_card(model, card, point.2)
    }
}

fn predicted(
    catalog: &Catalog,
    factors: &CalibratedFactors,
    model: &str,
    card: &str,
    tp: u32,
    link: &str,
) -> u32 {
    let point: Point = (
        Box::leak(model.to_string().into_boxed_str()),
        Box::leak(card.to_string().into_boxed_str()),
        tp,
        Box::leak(link.to_string().into_boxed_str()),
        1,
        0,
    );
    let layout = layout(catalog, &point);
    let mut request = PredictRequest::new(workload(), slo());
    request.resolution = 0.01;
    request.engine = engine();
    let base = Calibration::for_card(layout.card, link);
    predict(
        &layout,
        &factors.calibration("seed half", link, &base),
        &request,
    )
    .map(|p| p.c_star)
    .unwrap_or(0)
}

#[test]
fn calibrated_on_half_the_seed_predicts_the_other_half() {
    let catalog = Catalog::shipped().unwrap();
    let observations: Vec<Observation> = CALIBRATE_ON
        .iter()
        .map(|point| Observation {
            layout: layout(&catalog, point),
            workload: workload(),
            slo: slo(),
            engine: engine(),
            step: Calibration::for_card(catalog.card(point.1).unwrap(), point.3),
            concurrency: point.5,
            label: format!("{} {} TP{}", point.0, point.1, point.2),
        })
        .collect();
    let defaults = Efficiency::for_card(catalog.card("A100-40G").unwrap(), "nvlink");
    let start = CalibratedFactors::from_defaults(&defaults, &["nvlink".into(), "pcie".into()]);
    let started = std::time::Instant::now();
    let fit = calibrate(&observations, &start, 400).expect("calibration runs");
    println!(
        "calibrated in {:.1} s, {} iterations: {:?}",
        started.elapsed().as_secs_f64(),
        fit.evaluations,
        fit.factors
    );

    println!("| model | card | split | published C* | uncalibrated | calibrated | error | half |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut errors = Vec::new();
    let mut default_errors = Vec::new();
    for (half, points) in [("calibration", &CALIBRATE_ON), ("prediction", &PREDICT)] {
        for point in points.iter() {
            let c = predicted(&catalog, &fit.factors, point.0, point.1, point.2, point.3);
            let d = predicted(&catalog, &start, point.0, point.1, point.2, point.3);
            let error = (f64::from(c) - f64::from(point.5)) / f64::from(point.5);
            let default_error = (f64::from(d) - f64::from(point.5)) / f64::from(point.5);
            println!(
                "| {} | {} | {}×TP{} | {} | {d} | {c} | {:+.0} % | {half} |",
                point.0,
                point.1,
                point.4,
                point.2,
                point.5,
                error * 100.0
            );
            if half == "prediction" {
                errors.push(error.abs());
                default_errors.push(default_error.abs());
            }
        }
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        (values[2] + values[3]) / 2.0
    };
    let (median, default_median) = (median(&mut errors), median(&mut default_errors));
    println!(
        "median |error| on the prediction half: {:.0} % calibrated, {:.0} % with the defaults",
        median * 100.0,
        default_median * 100.0
    );

    // Published split preferences: users per node of each split, with the calibrated model.
    let per_node = |model: &str, card: &str, link: &str, instances: u32, tp: u32| {
        instances * predicted(&catalog, &fit.factors, model, card, tp, link)
    };
    let checks = [
        (
            "A30 llama-13b: 2×TP4 beats 1×TP8",
            per_node("llama-13b", "A30", "pcie", 2, 4) > per_node("llama-13b", "A30", "pcie", 1, 8),
        ),
        (
            "A40 llama-13b: 2×TP2 ≥ 1×TP4",
            per_node("llama-13b", "A40", "pcie", 2, 2)
                >= per_node("llama-13b", "A40", "pcie", 1, 4),
        ),
        ("V100 llama-13b: 1×TP8 ≈ 2×TP4 (±15 %)", {
            let (a, b) = (
                per_node("llama-13b", "V100-32G", "nvlink", 1, 8),
                per_node("llama-13b", "V100-32G", "nvlink", 2, 4),
            );
            (f64::from(a) - f64::from(b)).abs() <= 0.15 * f64::from(a.max(b))
        }),
        (
            "A100-40G llama-13b: 2×TP4 beats 1×TP8",
            per_node("llama-13b", "A100-40G", "nvlink", 2, 4)
                > per_node("llama-13b", "A100-40G", "nvlink", 1, 8),
        ),
        (
            "A40 llama-2-70b: 2×TP4 beats 1×TP8",
            per_node("llama-2-70b", "A40", "pcie", 2, 4)
                > per_node("llama-2-70b", "A40", "pcie", 1, 8),
        ),
    ];
    for (claim, holds) in checks {
        println!(
            "split preference {claim}: {}",
            if holds {
                "reproduced"
            } else {
                "NOT reproduced"
            }
        );
    }

    // What the model can claim today (README, "report card"): calibrating on half of the report
    // must predict the other half better than the defaults do. The project's aim, a median
    // error of at most 35 %, is not met yet: the report's engine delays admission (TTFT 2.2 s
    // at 10 users for a 42-token prompt) and its PCIe TP4/TP8 scale unlike TP2, neither of
    // which the model represents.
    assert!(
        median < default_median,
        "calibration must beat the defaults: {:.0} % vs {:.0} %",
        median * 100.0,
        default_median * 100.0
    );
}

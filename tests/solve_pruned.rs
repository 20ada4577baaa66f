//! The planner predicts a layout only as far as it can matter (a loser's search stops once
//! its C* is proved too low to need fewer nodes): the plans must be those predicting every
//! layout in full gives.

use std::sync::Arc;

use capplan::catalog::{Card, Catalog, MemoryOptions, Model, Node, Parallelism, PdSplit};
use capplan::plan::predicted::{CapacityPredictor, NoPrediction, PredictionAssumptions, Wanted};
use capplan::plan::{solve, Demand, SolveReport, SolveRequest};
use capplan::sim::calibration_file::Calibrations;
use capplan::sim::capacity::SimPredictor;
use capplan::slo::{Percentile, Slo};
use capplan::store::CapacityPoint;
use capplan::workload::{PrefixShare, ThinkTime, TokenLengths, Workload};

/// A predictor that asks every layout for its C* in full, whatever the planner needs.
struct InFull(SimPredictor);

impl CapacityPredictor for InFull {
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<CapacityPoint, NoPrediction> {
        self.0.predict(model, card, node, parallel)
    }

    fn predict_disaggregated(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<(CapacityPoint, PdSplit), String> {
        self.0.predict_disaggregated(model, card, node, parallel)
    }

    fn prepare_disaggregated(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
        self.0.prepare_disaggregated(wanted);
    }

    fn prepare(&mut self, wanted: &[Wanted]) {
        let in_full: Vec<Wanted> = wanted
            .iter()
            .map(|w| Wanted { needed: None, ..*w })
            .collect();
        self.0.prepare(&in_full);
    }

    fn predict_like_all(
        &mut self,
        measured: &[(&Model, &Card, &CapacityPoint)],
    ) -> Vec<Result<CapacityPoint, String>> {
        self.0.predict_like_all(measured)
    }

    fn assumptions(&self) -> PredictionAssumptions {
        self.0.assumptions()
    }
}

fn predictor(catalog: &Catalog, slo: Slo) -> SimPredictor {
    let workload = Workload {
        input_tokens: TokenLengths::Fixed { tokens: 512 },
        output_tokens: TokenLengths::Fixed { tokens: 256 },
        think_time: ThinkTime::NONE,
        prefix_share: PrefixShare::NONE,
        speculation: None,
    };
    let engine = catalog.engine("vllm").expect("vLLM profile").clone();
    SimPredictor::new(
        workload,
        slo,
        MemoryOptions::default(),
        Calibrations::default(),
    )
    .with_engine(engine, Arc::clone(&catalog.operators))
    .with_bands(catalog.bands.clone())
}

fn plan(catalog: &Catalog, request: &SolveRequest, in_full: bool) -> SolveReport {
    let mut predictor = predictor(catalog, request.slo);
    if in_full {
        solve(catalog, &[], request, Some(&mut InFull(predictor))).expect("plans")
    } else {
        solve(catalog, &[], request, Some(&mut predictor)).expect("plans")
    }
}

#[test]
fn stopping_losers_early_leaves_every_plan_as_it_was() {
    let catalog = Catalog::shipped().expect("catalog");
    let request = SolveRequest {
        demand: Demand::Users(10_000),
        slo: Slo {
            ttft_s: 2.0,
            tpot_s: Some(0.05),
            percentile: Percentile::P(90.0),
            e2e_s: None,
        },
        think_time: None,
        models: vec!["qwen3-30b-a3b".into(), "llama-3.1-8b".into()],
        cards: vec!["H200".into(), "L40S".into(), "MI300X".into()],
        headroom: 0.1,
        spares: 1,
        memory: MemoryOptions::default(),
        speculation: None,
    };
    let pruned = plan(&catalog, &request, false);
    let full = plan(&catalog, &request, true);
    assert_eq!(pruned.plans.len(), full.plans.len());
    let mut stopped = 0;
    for (p, f) in pruned.plans.iter().zip(&full.plans) {
        let what = format!("{} on {}", p.model, p.node);
        assert_eq!((&p.model, &p.node), (&f.model, &f.node));
        assert_eq!(p.split, f.split, "{what}");
        assert_eq!(p.nodes, f.nodes, "{what}");
        assert_eq!(p.users_per_instance, f.users_per_instance, "{what}");
        assert_eq!(p.evidence, f.evidence, "{what}");
        // A layout stopped short needs more nodes than the best aggregated split, in full
        // (the plan may be another split disaggregated).
        let (chosen_nodes, chosen) = f
            .splits
            .iter()
            .filter(|s| s.status == "planned" && s.split.disaggregated.is_none())
            .filter_map(|s| s.nodes.map(|nodes| (nodes, s.split)))
            .min_by_key(|(nodes, split)| (*nodes, split.instances))
            .expect("an aggregated split planned in full");
        for outcome in p.splits.iter().filter(|s| s.status == "cannot win") {
            stopped += 1;
            let in_full = f
                .splits
                .iter()
                .find(|s| s.split == outcome.split)
                .expect("the same split in full");
            let (nodes, instances) = (in_full.nodes.unwrap_or(u64::MAX), outcome.split.instances);
            assert!(
                (nodes, instances) >= (chosen_nodes, chosen.instances),
                "{what}: {} ({nodes} nodes) against {chosen} ({chosen_nodes})",
                outcome.split
            );
        }
    }
    assert!(stopped > 0, "no layout was stopped short");
}

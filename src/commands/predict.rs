//! `capplan predict`: C* (or R*) of one layout, its band, and the same workers disaggregated
//! into prefill and decode pools beside it.

use capplan::catalog::{Catalog, Parallelism};
use capplan::sim::disagg::predict_disaggregated;
use capplan::sim::predict::{engine_for, predict, predict_rate, Calibration, Layout, Prediction};
use capplan::sim::step_parts::sampled_steps;

use crate::cli::PredictArgs;

/// Predicts `layout` as `args` ask.
pub fn run(
    catalog: &Catalog,
    args: &PredictArgs,
    layout: &Layout,
    calibration: &Calibration,
) -> anyhow::Result<Prediction> {
    let engine = args.engine.profile(catalog)?;
    let mut request = args.request(engine, layout.card)?;
    let speculation = args
        .workload
        .speculative
        .resolve(None, &[layout.model], catalog)?;
    let mut layout = layout.clone();
    if let Some(speculation) = &speculation {
        layout.memory.drafter = speculation.draft_weights();
    }
    request.workload.speculation = speculation;
    let layout = &layout;
    let predicted = match &args.rate {
        Some(rates) => predict_rate(layout, calibration, &request, rates),
        None => predict(layout, calibration, &request),
    };
    let mut prediction = predicted
        .map_err(|rejected| capplan::InputError::value(format!("cannot predict: {rejected}")))?;
    prediction.instances_per_node = args.instances_per_node;
    if args.breakdown {
        // The batch at C* (or, searching rates, the mean in flight at R*).
        let running = match &prediction.rate_star {
            Some(rate) => rate.mean_in_flight.round() as u32,
            None => prediction.c_star,
        };
        let (engine, _) =
            engine_for(layout, calibration, &request.engine, false).map_err(|rejected| {
                capplan::InputError::value(format!("cannot predict: {rejected}"))
            })?;
        prediction.steps = sampled_steps(&engine, &request.workload, running.max(1));
    }
    if prediction.rate_star.is_none() {
        prediction.band = capplan::catalog::band::c_star_range(
            &catalog.bands,
            capplan::catalog::band::model_class(layout.model),
            &prediction.calibration.engine,
            &prediction.basis,
            f64::from(prediction.c_star),
        );
        if request.slo.tpot_s.is_some() {
            let prefill = args.prefill_tp.map(|tp| {
                let parallel = Parallelism {
                    tp,
                    pp: 1,
                    dp: args.prefill_attention_dp.unwrap_or(1),
                    ep: args.prefill_ep.unwrap_or(1),
                };
                Layout {
                    tp,
                    parallel,
                    ..layout.clone()
                }
            });
            if let Some(prefill) = &prefill {
                if let Some(problem) =
                    capplan::catalog::memory::layout_problem(layout.model, &prefill.parallel)
                {
                    return Err(
                        capplan::InputError::value(format!("prefill workers: {problem}")).into(),
                    );
                }
            }
            prediction.disaggregated = Some(
                predict_disaggregated(layout, prefill.as_ref(), calibration, &request, args.pd)
                    .map_err(|rejected| rejected.reason),
            );
        }
    }
    Ok(prediction)
}

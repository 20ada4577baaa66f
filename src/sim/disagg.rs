//! Disaggregated serving: `x` prefill workers compute prompts, hand each request's KV cache
//! over the network to one of `y` decode workers, which generate the rest (NVIDIA Dynamo,
//! llm-d, SGLang PD). Prefill never waits behind a decode batch and decode never stalls for a
//! prompt, so each pool can be sized to its own limit: TTFT for the prefill pool, TPOT for the
//! decode pool.
//!
//! The model couples two predictions of the same worker layout, each the closed-loop search
//! `predict` runs (a stream of back-to-back requests that cannot overload the worker, so its
//! throughput at C* is a rate the worker sustains). A prefill worker sustains `R_p` requests
//! per second within the TTFT limit less the KV transfer (prompt-only requests: one output
//! token); a decode worker sustains `R_d` within the TPOT limit (and admits each request
//! within the TTFT limit), its requests arriving with their prompt's KV already in place (the
//! engine's cache holds the whole prompt and computes its last token only). A deployment of `x` and `y` holds `min(x·R_p, y·R_d)`
//! requests per second, and Little's law turns that rate into users: rate × (TTFT + transfer +
//! (output − 1) × TPOT + think time). The `x:y` chosen is the one with the most users per card
//! among up to eight workers of each kind.
//!
//! What it leaves out: the router (requests spread evenly), the decode side's first step, and
//! KV transfers competing with the experts' all-to-all on the same network.

use serde::Serialize;

use super::predict::{
    estimate_c_star, predict_with, Calibration, Layout, PredictRequest, SearchHints,
    SKIPPED_LEVELS_BELOW,
};
use crate::catalog::memory::LayoutRejected;
use crate::catalog::memory_fit_layout;
pub use crate::catalog::PdSplit;
use crate::slo::Slo;
use crate::workload::{PrefixShare, TokenLengths};

/// Most workers of one kind a deployment is searched over.
const MAX_WORKERS: u32 = 8;

/// A disaggregated deployment of one worker layout, sized for an SLO.
#[derive(Debug, Clone, Serialize)]
pub struct Disaggregated {
    pub split: PdSplit,
    /// Requests per second one prefill worker holds within the TTFT limit less the transfer.
    pub prefill_rate: f64,
    /// Requests per second one decode worker holds within the TPOT limit.
    pub decode_rate: f64,
    /// Moving one prompt's KV cache from a prefill to a decode worker, seconds.
    pub transfer_s: f64,
    /// Mean TTFT (prefill worker's, plus the transfer) and TPOT at those rates, seconds.
    pub ttft_s: f64,
    pub tpot_s: f64,
    /// Requests per second and concurrent users the whole deployment holds.
    pub rate: f64,
    pub users: f64,
    /// Cards of the whole deployment.
    pub cards: u32,
}

impl Disaggregated {
    pub fn users_per_card(&self) -> f64 {
        self.users / f64::from(self.cards.max(1))
    }

    /// Users per worker (what a capacity point per instance holds).
    pub fn users_per_worker(&self) -> f64 {
        self.users / f64::from((self.split.prefill + self.split.decode).max(1))
    }
}

/// The best disaggregated deployment of `layout`'s workers for `request`'s workload and SLO
/// (or the one of `fixed` workers), or why there is none (no TPOT limit to split against, a
/// layout that does not fit, a pool that holds no rate at all).
pub fn predict_disaggregated(
    layout: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    fixed: Option<PdSplit>,
) -> Result<Disaggregated, LayoutRejected> {
    if let Some(problem) = fixed.and_then(|split| split.problem()) {
        return Err(LayoutRejected { reason: problem });
    }
    let slo = request.slo;
    let think_s = request.workload.think_time.mean_s();
    let Some(tpot_limit) = slo.tpot_s else {
        return Err(LayoutRejected {
            reason:
                "disaggregation trades TTFT against TPOT: without a TPOT limit it is not planned"
                    .into(),
        });
    };
    let fit = memory_fit_layout(layout.model, layout.card, &layout.parallel, &layout.memory)?;
    let transfer_s = kv_transfer_s(
        layout,
        fit.kv_bytes_per_token_per_card,
        request.workload.input_tokens.mean(),
    );
    if transfer_s >= slo.ttft_s {
        return Err(LayoutRejected {
            reason: format!(
                "moving a prompt's KV cache takes {:.0} ms, the whole TTFT limit",
                transfer_s * 1e3
            ),
        });
    }

    // The pools see streams of requests: the users' think time only turns rates into users.
    let mut request = request.clone();
    request.workload.think_time = crate::workload::ThinkTime::NONE;
    // Two searches per deployment: a 10 % bracket is still finer than the model's error.
    request.resolution = request.resolution.max(0.1);
    let request = &request;
    // Prefill workers: prompts only, within the TTFT limit less the transfer.
    let mut prefill = request.clone();
    prefill.workload.output_tokens = TokenLengths::Fixed { tokens: 1 };
    prefill.slo = Slo {
        ttft_s: slo.ttft_s - transfer_s,
        tpot_s: None,
        e2e_s: None,
        ..slo
    };
    // Neither pool's curve is shown, only its operating point: the searches skip the small
    // levels (see `SearchHints::start`), which give the same C*.
    let p = predict_with(layout, calibration, &prefill, pool_start(None))?;
    let (prefill_rate, ttft_s) = operating_point(&p, |level| level.ttft.mean);

    // Decode workers: the prompt's KV arrives with the request; within the TPOT limit, and
    // admitted within the TTFT limit (a decode queue that grows without bound holds no rate,
    // whatever the TPOT of the requests it does run).
    let mut decode = request.clone();
    decode.workload.prefix_share = PrefixShare::new(1.0).unwrap_or(PrefixShare::NONE);
    // The KV arrives from the prefill worker: in place whatever the engine's prefix caching.
    decode.engine.prefix_caching = true;
    decode.slo = Slo {
        ttft_s: slo.ttft_s,
        tpot_s: Some(tpot_limit),
        e2e_s: None,
        ..slo
    };
    let d = predict_with(
        layout,
        calibration,
        &decode,
        pool_start(estimate_c_star(layout, calibration, &decode)),
    )?;
    let (decode_rate, tpot_s) =
        operating_point(&d, |level| level.tpot.as_ref().map_or(0.0, |t| t.mean));
    if prefill_rate <= 0.0 || decode_rate <= 0.0 {
        return Err(LayoutRejected {
            reason: format!(
                "a {} worker holds no rate within the SLO ({})",
                if prefill_rate <= 0.0 {
                    "prefill"
                } else {
                    "decode"
                },
                if prefill_rate <= 0.0 {
                    &p.limit
                } else {
                    &d.limit
                }
            ),
        });
    }

    let output = request.workload.output_tokens.mean();
    let cycle_s = ttft_s + transfer_s + (output - 1.0).max(0.0) * tpot_s + think_s;
    let worker_cards = layout.parallel.cards();
    let deployment = |split: PdSplit| {
        let rate =
            (f64::from(split.prefill) * prefill_rate).min(f64::from(split.decode) * decode_rate);
        Disaggregated {
            split,
            prefill_rate,
            decode_rate,
            transfer_s,
            ttft_s: ttft_s + transfer_s,
            tpot_s,
            rate,
            users: rate * cycle_s,
            cards: (split.prefill + split.decode) * worker_cards,
        }
    };
    if let Some(split) = fixed {
        return Ok(deployment(split));
    }
    let best = (1..=MAX_WORKERS)
        .flat_map(|x| {
            (1..=MAX_WORKERS).map(move |y| PdSplit {
                prefill: x,
                decode: y,
            })
        })
        .map(deployment)
        .max_by(|a, b| {
            a.users_per_card()
                .total_cmp(&b.users_per_card())
                // Equal per card: the smaller deployment (finer steps when buying).
                .then(b.cards.cmp(&a.cards))
        })
        .ok_or_else(|| LayoutRejected {
            reason: "no deployment".into(),
        })?;
    Ok(best)
}

/// Where a pool's search starts: at its estimated C* (see [`estimate_c_star`]), at least at
/// [`SKIPPED_LEVELS_BELOW`] users.
fn pool_start(estimate: Option<f64>) -> SearchHints {
    let estimate = estimate.map_or(0, |users| users as u32);
    SearchHints {
        start: Some(estimate.max(SKIPPED_LEVELS_BELOW)),
        ..SearchHints::default()
    }
}

/// The throughput a worker sustains at its C* and a latency statistic of that level.
fn operating_point(
    prediction: &super::predict::Prediction,
    latency: impl Fn(&super::predict::LevelResult) -> f64,
) -> (f64, f64) {
    prediction
        .curve
        .iter()
        .find(|level| level.concurrency == prediction.c_star && prediction.c_star > 0)
        .map_or((0.0, 0.0), |level| (level.requests_per_s, latency(level)))
}

/// Moving the KV cache of a `prompt_tokens`-token prompt from a prefill worker to a decode
/// worker: each card sends its share at the network's rate (workers sit on different nodes),
/// or over the scale-up link where the node shape has no network figure.
pub fn kv_transfer_s(layout: &Layout, kv_bytes_per_token_per_card: f64, prompt_tokens: f64) -> f64 {
    let bytes = prompt_tokens * kv_bytes_per_token_per_card;
    let per_s = match layout.scale_out_gbs {
        Some(gbs) => gbs * 1e9,
        None => layout.card.link_bandwidth_gbs * 1e9 / 2.0,
    };
    // A transfer is one RDMA write per layer block; its fixed cost is small beside the bytes.
    bytes / (0.8 * per_s) + 50e-6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::slo::Percentile;
    use crate::workload::{ThinkTime, Workload};

    fn request(input: u32, output: u32, tpot_s: Option<f64>) -> PredictRequest {
        PredictRequest::new(
            Workload {
                input_tokens: TokenLengths::Fixed { tokens: input },
                output_tokens: TokenLengths::Fixed { tokens: output },
                think_time: ThinkTime::NONE,
                prefix_share: PrefixShare::NONE,
                speculation: None,
            },
            Slo {
                ttft_s: 1.0,
                tpot_s,
                percentile: Percentile::Mean,
                e2e_s: None,
            },
        )
    }

    fn on_h100(req: &PredictRequest) -> Result<Disaggregated, LayoutRejected> {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("H100-SXM").unwrap();
        let layout = Layout::on_card(model, card, 1);
        let calibration = Calibration::for_card(card, &card.interconnect);
        predict_disaggregated(&layout, &calibration, req, None)
    }

    /// Long prompts and short answers need more prefill workers than short prompts and long
    /// answers; the deployment's rate is its narrower pool's, and its users follow from
    /// Little's law.
    #[test]
    fn the_split_follows_the_workload_and_the_narrower_pool_sets_the_rate() {
        let prompts = on_h100(&request(4096, 64, Some(0.05))).unwrap();
        let answers = on_h100(&request(256, 1024, Some(0.05))).unwrap();
        let share = |d: &Disaggregated| {
            f64::from(d.split.prefill) / f64::from(d.split.prefill + d.split.decode)
        };
        assert!(
            share(&prompts) > share(&answers),
            "{} vs {}",
            prompts.split,
            answers.split
        );
        for d in [&prompts, &answers] {
            let pools = (f64::from(d.split.prefill) * d.prefill_rate)
                .min(f64::from(d.split.decode) * d.decode_rate);
            assert!((d.rate - pools).abs() < 1e-9);
            assert!(d.users > 0.0 && d.tpot_s <= 0.05 && d.ttft_s <= 1.0 + 1e-9);
            assert_eq!(d.cards, d.split.prefill + d.split.decode);
        }
    }

    #[test]
    fn without_a_tpot_limit_there_is_nothing_to_split() {
        let why = on_h100(&request(512, 256, None)).unwrap_err().reason;
        assert!(why.contains("TPOT"), "{why}");
        let empty = PdSplit {
            prefill: 0,
            decode: 3,
        };
        assert!(empty.problem().unwrap().contains("0P:3D"));
    }
}

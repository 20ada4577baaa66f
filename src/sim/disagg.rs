//! Disaggregated serving: `x` prefill workers compute prompts, hand each request's KV cache
//! over the network to one of `y` decode workers, which generate the rest (NVIDIA Dynamo,
//! llm-d, SGLang PD). Prefill never waits behind a decode batch and decode never stalls for a
//! prompt, so each pool can be sized to its own limit: TTFT for the prefill pool, TPOT for the
//! decode pool.
//!
//! Each pool has its own worker layout: decode workers are the layout asked for; prefill workers
//! are either given (`--prefill-tp`…) or the best of that layout and its tensor-parallel
//! halvings that hold the model (prefill is compute-bound: narrower workers waste less on
//! all-reduces and take more prompts per card).
//!
//! The client's first token comes from the decode worker once the KV has arrived (Dynamo
//! sends the prompt to a prefill worker as a one-token request and streams from the decode
//! worker; vLLM's decode side recomputes the prompt's last token, TensorRT-LLM's emits it at
//! the request's first scheduling), so TTFT is the prefill worker's, the transfer, and the
//! decode worker's queue and iteration.
//!
//! The model couples two predictions, each the closed-loop search
//! `predict` runs (a stream of back-to-back requests that cannot overload the worker, so its
//! throughput at C* is a rate the worker sustains). A prefill worker sustains `R_p` requests
//! per second within the TTFT limit less the KV transfer and the decode side's first token
//! (prompt-only requests: one output token); a decode worker sustains `R_d` within the TPOT
//! limit (and admits each request within its share of the TTFT limit), its requests arriving
//! with their prompt's KV already in place (the engine's cache holds the whole prompt and
//! computes its last token only). A deployment of `x` and `y` holds `min(x·R_p, y·R_d)`
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
use crate::catalog::Parallelism;
pub use crate::catalog::PdSplit;
use crate::slo::Slo;
use crate::workload::{PrefixShare, TokenLengths};

/// Most workers of one kind a deployment is searched over.
const MAX_WORKERS: u32 = 8;

/// The share of the TTFT limit a decode worker's admission may take (its queue and first
/// iteration); the prefill worker and the transfer have the rest. An even split is a choice,
/// not a fit: a decode pool held to its TPOT limit queues far less than this, and one held by
/// its running cap would otherwise take the whole limit and leave prefill nothing.
const DECODE_TTFT_SHARE: f64 = 0.5;

/// Most prefill layouts tried beside the decode workers' own (tensor-parallel halvings).
const PREFILL_HALVINGS: u32 = 2;

/// A disaggregated deployment, sized for an SLO.
#[derive(Debug, Clone, Serialize)]
pub struct Disaggregated {
    pub split: PdSplit,
    /// One prefill worker's layout, and one decode worker's.
    pub prefill_parallel: Parallelism,
    pub decode_parallel: Parallelism,
    /// Requests per second one prefill worker holds within the TTFT limit less the transfer
    /// and the decode side's first token.
    pub prefill_rate: f64,
    /// Requests per second one decode worker holds within the TPOT limit.
    pub decode_rate: f64,
    /// Moving one prompt's KV cache from a prefill to a decode worker, seconds.
    pub transfer_s: f64,
    /// The decode worker's wait for a request's first token once its KV is in place (its
    /// queue and an iteration), mean, seconds.
    pub decode_first_s: f64,
    /// Mean TTFT (the prefill worker's, the transfer and the decode side's first token) and
    /// TPOT at those rates, seconds.
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

    /// Users per decode worker's worth of cards: what a capacity point of the decode
    /// layout holds (per worker when both pools share the layout), so that a plan prices the
    /// deployment by its users per card.
    pub fn users_per_worker(&self) -> f64 {
        self.users_per_card() * f64::from(self.decode_parallel.cards())
    }
}

/// The best disaggregated deployment with decode workers of `layout` for `request`'s workload
/// and SLO (or the one of `fixed` workers; prefill workers of `prefill`, else the best of
/// [`prefill_layouts`]), or why there is none (no TPOT limit to split against, a layout that
/// does not fit, a pool that holds no rate at all).
pub fn predict_disaggregated(
    layout: &Layout,
    prefill: Option<&Layout>,
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
    // (The decode layout's memory fit is checked by its prediction below.)
    let prefill_layouts = match prefill {
        Some(given) => vec![given.clone()],
        None => prefill_layouts(layout),
    };

    // The pools see streams of requests: the users' think time only turns rates into users.
    let mut request = request.clone();
    request.workload.think_time = crate::workload::ThinkTime::NONE;
    // Two searches per deployment: a 10 % bracket is still finer than the model's error.
    request.resolution = request.resolution.max(0.1);
    let request = &request;
    // Decode workers: the prompt's KV arrives with the request; within the TPOT limit, and
    // admitted within its share of the TTFT limit (a decode queue that grows without bound
    // holds no rate, whatever the TPOT of the requests it does run; and what the decode side
    // waits before the first token, the prefill side cannot spend).
    let mut decode = request.clone();
    decode.workload.prefix_share = PrefixShare::new(1.0).unwrap_or(PrefixShare::NONE);
    // The KV arrives from the prefill worker: in place whatever the engine's prefix caching.
    decode.engine.prefix_caching = true;
    decode.slo = Slo {
        ttft_s: slo.ttft_s * DECODE_TTFT_SHARE,
        tpot_s: Some(tpot_limit),
        e2e_s: None,
        ..slo
    };
    let decode_calibration = calibration.clone().for_decode_worker();
    let d = predict_with(
        layout,
        &decode_calibration,
        &decode,
        pool_start(estimate_c_star(layout, &decode_calibration, &decode)),
    )?;
    let (decode_rate, tpot_s) =
        operating_point(&d, |level| level.tpot.as_ref().map_or(0.0, |t| t.mean));
    // The client's first token comes from the decode worker once the KV is in place: its
    // queue and an iteration come after the prefill and the transfer.
    let (_, decode_first_s) = operating_point(&d, |level| level.ttft.mean);
    if decode_rate <= 0.0 {
        return Err(LayoutRejected {
            reason: format!("a decode worker holds no rate within the SLO ({})", d.limit),
        });
    }

    // Prefill workers: prompts only, within the TTFT limit less the transfer and the decode
    // worker's first token — for each prefill layout tried.
    let mut pools = Vec::new();
    let mut rejected = None;
    for prefill_layout in &prefill_layouts {
        match prefill_pool(prefill_layout, layout, calibration, request, decode_first_s) {
            Ok(pool) => pools.push(pool),
            Err(why) => rejected = Some(why),
        }
    }
    if pools.is_empty() {
        return Err(rejected.unwrap_or(LayoutRejected {
            reason: "no prefill layout".into(),
        }));
    }

    let output = request.workload.output_tokens.mean();
    let decode_cards = layout.parallel.cards();
    let deployment = |pool: &PrefillPool, split: PdSplit| {
        let rate =
            (f64::from(split.prefill) * pool.rate).min(f64::from(split.decode) * decode_rate);
        let ttft_s = pool.ttft_s + pool.transfer_s + decode_first_s;
        let cycle_s = ttft_s + (output - 1.0).max(0.0) * tpot_s + think_s;
        Disaggregated {
            split,
            prefill_parallel: pool.parallel,
            decode_parallel: layout.parallel,
            prefill_rate: pool.rate,
            decode_rate,
            transfer_s: pool.transfer_s,
            decode_first_s,
            ttft_s,
            tpot_s,
            rate,
            users: rate * cycle_s,
            cards: split.prefill * pool.parallel.cards() + split.decode * decode_cards,
        }
    };
    let splits: Vec<PdSplit> = match fixed {
        Some(split) => vec![split],
        None => (1..=MAX_WORKERS)
            .flat_map(|x| {
                (1..=MAX_WORKERS).map(move |y| PdSplit {
                    prefill: x,
                    decode: y,
                })
            })
            .collect(),
    };
    let best = pools
        .iter()
        .flat_map(|pool| splits.iter().map(move |&split| deployment(pool, split)))
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

/// The prefill pool of one layout: what one worker sustains within the TTFT limit less the
/// KV transfer and the decode side's first token.
struct PrefillPool {
    parallel: Parallelism,
    rate: f64,
    /// Mean TTFT at that rate, and the transfer after it, seconds.
    ttft_s: f64,
    transfer_s: f64,
}

/// Predicts prefill workers of `layout`: prompt-only requests within the TTFT limit less the
/// hand-over of their KV to a `decode` worker and the `after_s` the decode worker takes to
/// its first token.
fn prefill_pool(
    layout: &Layout,
    decode: &Layout,
    calibration: &Calibration,
    request: &PredictRequest,
    after_s: f64,
) -> Result<PrefillPool, LayoutRejected> {
    let slo = request.slo;
    // A prefill layout that cannot hold the model is refused as such, before its hand-over.
    memory_fit_layout(layout.model, layout.card, &layout.parallel, &layout.memory)?;
    let transfer_s = KvHandover::between(layout, decode, calibration.efficiency.handoff_ms)?
        .seconds(request.workload.input_tokens.mean());
    if transfer_s + after_s >= slo.ttft_s {
        return Err(LayoutRejected {
            reason: format!(
                "moving a prompt's KV cache ({:.0} ms) and the decode worker's first token \
                 ({:.0} ms) take the whole TTFT limit",
                transfer_s * 1e3,
                after_s * 1e3
            ),
        });
    }
    let mut prefill = request.clone();
    prefill.workload.output_tokens = TokenLengths::Fixed { tokens: 1 };
    prefill.slo = Slo {
        ttft_s: slo.ttft_s - transfer_s - after_s,
        tpot_s: None,
        e2e_s: None,
        ..slo
    };
    // Neither pool's curve is shown, only its operating point: the searches skip the small
    // levels (see `SearchHints::start`), which give the same C*.
    let p = predict_with(layout, calibration, &prefill, pool_start(None))?;
    let (rate, ttft_s) = operating_point(&p, |level| level.ttft.mean);
    if rate <= 0.0 {
        return Err(LayoutRejected {
            reason: format!(
                "a prefill worker holds no rate within the SLO ({})",
                p.limit
            ),
        });
    }
    Ok(PrefillPool {
        parallel: layout.parallel,
        rate,
        ttft_s,
        transfer_s,
    })
}

/// The prefill layouts tried when none is given: the decode workers' own, and for a
/// tensor-parallel-only layout up to [`PREFILL_HALVINGS`] halvings of its width that still
/// hold the model and a prompt.
pub fn prefill_layouts<'a>(layout: &Layout<'a>) -> Vec<Layout<'a>> {
    let mut layouts = vec![layout.clone()];
    if layout.parallel != Parallelism::tensor(layout.tp) {
        return layouts;
    }
    let mut tp = layout.tp;
    for _ in 0..PREFILL_HALVINGS {
        if tp < 2 {
            break;
        }
        tp /= 2;
        let narrower = Layout {
            tp,
            parallel: Parallelism::tensor(tp),
            ..layout.clone()
        };
        if memory_fit_layout(
            narrower.model,
            narrower.card,
            &narrower.parallel,
            &narrower.memory,
        )
        .is_err()
        {
            break;
        }
        layouts.push(narrower);
    }
    layouts
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

/// What handing one prompt's KV cache from a prefill worker to a decode worker moves: the
/// bytes each card of the decode worker's attention replica needs, and how many cards send
/// and receive them. A sequence lives on one attention replica on each side (its `tp × pp`
/// cards). Each receiving card needs its own share of the cache — all of it where the
/// layout replicates the cache over the replica's cards: latent attention (MLA) keeps one
/// compressed cache that every tensor-parallel card holds whole, as grouped-query attention
/// does once the cards outnumber its KV heads — and, for a hybrid model, its share of the
/// sequence's recurrent state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvHandover {
    /// KV bytes per prompt token one receiving card needs.
    pub bytes_per_token_per_card: f64,
    /// Fixed bytes per sequence one receiving card needs (a hybrid model's recurrent state).
    pub state_bytes_per_card: f64,
    /// Cards of the prefill worker's replica holding the prompt, sending.
    pub sending_cards: u32,
    /// Cards of the decode worker's replica receiving.
    pub receiving_cards: u32,
    /// Each card's network rate, bytes per second.
    pub card_bytes_per_s: f64,
    /// The engine's time between the two workers beyond the bytes, seconds
    /// (`EngineProfile::handoff_ms`).
    pub handoff_s: f64,
}

impl KvHandover {
    /// The hand-over from a `prefill` worker to a `decode` worker, or why the decode layout
    /// cannot hold the model. The network is the prefill node shape's (each card its share of
    /// the scale-out network), or half the scale-up link where the node shape has no figure;
    /// `handoff_ms` is the engine's own time between the two workers.
    pub fn between(
        prefill: &Layout,
        decode: &Layout,
        handoff_ms: f64,
    ) -> Result<KvHandover, LayoutRejected> {
        let fit = memory_fit_layout(decode.model, decode.card, &decode.parallel, &decode.memory)?;
        let replica = |parallel: &Parallelism| (parallel.tp * parallel.pp).max(1);
        Ok(KvHandover {
            bytes_per_token_per_card: fit.kv_bytes_per_token_per_card,
            state_bytes_per_card: fit.state_bytes_per_sequence_per_card,
            sending_cards: replica(&prefill.parallel),
            receiving_cards: replica(&decode.parallel),
            card_bytes_per_s: match prefill.scale_out_gbs {
                Some(gbs) => gbs * 1e9,
                None => prefill.card.link_bandwidth_gbs * 1e9 / 2.0,
            },
            handoff_s: handoff_ms.max(0.0) * 1e-3,
        })
    }

    /// Seconds to move a `prompt_tokens`-token prompt's cache. The receiving cards take
    /// their shares side by side, each at its card's rate; the sending cards push the sum of
    /// those shares, together at theirs. A replica that sends from fewer cards than receive
    /// (a prompt computed on one attention replica of one card, decoded over eight cards that
    /// each hold the latent cache whole) sends each byte once per receiving card.
    pub fn seconds(&self, prompt_tokens: f64) -> f64 {
        let per_card = prompt_tokens * self.bytes_per_token_per_card + self.state_bytes_per_card;
        let fan_out =
            (f64::from(self.receiving_cards) / f64::from(self.sending_cards.max(1))).max(1.0);
        // A transfer is one RDMA write per layer block; its fixed cost is small beside the bytes.
        per_card * fan_out / (0.8 * self.card_bytes_per_s) + 50e-6 + self.handoff_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Dtype};
    use crate::slo::Percentile;
    use crate::workload::Workload;

    fn request(input: u32, output: u32, tpot_s: Option<f64>) -> PredictRequest {
        PredictRequest::new(
            Workload::fixed(input, output),
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
        predict_disaggregated(&layout, None, &calibration, req, None)
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
            assert_eq!(
                d.cards,
                d.split.prefill * d.prefill_parallel.cards() + d.split.decode
            );
        }
    }

    /// Prefill is compute-bound: on a dense TP4 layout, TP2 prefill workers take more prompts
    /// per card than TP4 ones (less of each step in all-reduces), so the deployment chosen
    /// uses them and holds more users per card than one of TP4 workers alone.
    /// A hand-over moves what the decode replica's cards hold. DeepSeek-V3's latent cache
    /// (61 layers × 576 FP8 values a token) is whole on each of a TP8 decode worker's cards:
    /// from a prompt computed on one card (DP8 EP8 prefill) every byte leaves that card
    /// eight times, from a TP8 prefill worker each card sends its copy once. Llama-3.1-70B's
    /// grouped-query cache splits over its eight KV heads: a TP4 decode worker's cards each
    /// take a quarter, which two TP2 prefill cards send, half the cache each.
    #[test]
    fn a_hand_over_moves_what_each_decode_card_holds() {
        let catalog = Catalog::shipped().unwrap();
        let on = |model: &str, card: &str, parallel: Parallelism, dtype: Option<Dtype>| {
            let card = catalog.card(card).unwrap();
            let mut layout = Layout::on_card(catalog.model(model).unwrap(), card, parallel.tp)
                .with_parallel(parallel, catalog.largest_node_of(card));
            layout.memory.dtype = dtype;
            layout.memory.kv_dtype = dtype.map(|_| Dtype::Fp8);
            layout
        };
        let deepseek = |parallel| on("deepseek-v3", "B200", parallel, Some(Dtype::Fp8));
        let wide = Parallelism {
            tp: 1,
            pp: 1,
            dp: 8,
            ep: 8,
        };
        let tp8 = Parallelism::tensor(8);
        let from_one = KvHandover::between(&deepseek(wide), &deepseek(tp8), 0.0).unwrap();
        let from_eight = KvHandover::between(&deepseek(tp8), &deepseek(tp8), 0.0).unwrap();
        assert_eq!(from_one.bytes_per_token_per_card, 61.0 * 576.0);
        assert_eq!((from_one.sending_cards, from_one.receiving_cards), (1, 8));
        // 8 192 tokens × 35 136 bytes, eight times over one card's 50 GB/s at 80 %.
        let moved = |handover: &KvHandover| handover.seconds(8192.0) - handover.seconds(0.0);
        let whole = 8192.0 * 61.0 * 576.0 / (0.8 * 50e9);
        assert!((moved(&from_one) - 8.0 * whole).abs() < 1e-9);
        assert!((moved(&from_eight) - whole).abs() < 1e-9);

        let llama = |tp| on("llama-3.1-70b", "H100-SXM", Parallelism::tensor(tp), None);
        let split = KvHandover::between(&llama(2), &llama(4), 0.0).unwrap();
        let same = KvHandover::between(&llama(4), &llama(4), 0.0).unwrap();
        // 80 layers × 8 KV heads × 128 × 2 (keys and values) × 2 bytes, a quarter a card.
        assert_eq!(
            split.bytes_per_token_per_card,
            80.0 * 8.0 * 128.0 * 2.0 * 2.0 / 4.0
        );
        assert!((moved(&split) - 2.0 * moved(&same)).abs() < 1e-12);
        // The engine's own hand-off adds to every prompt's, whatever its length.
        let slow = KvHandover::between(&llama(4), &llama(4), 250.0).unwrap();
        for tokens in [0.0, 1024.0, 8192.0] {
            assert!((slow.seconds(tokens) - same.seconds(tokens) - 0.25).abs() < 1e-12);
        }
    }

    #[test]
    fn narrower_prefill_workers_take_more_prompts_per_card() {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-70b").unwrap();
        let card = catalog.card("H100-SXM").unwrap();
        let layout = Layout::on_card(model, card, 4);
        let calibration = Calibration::for_card(card, &card.interconnect);
        let req = request(2048, 256, Some(0.05));
        let candidates = prefill_layouts(&layout);
        assert_eq!(
            candidates.iter().map(|l| l.tp).collect::<Vec<_>>(),
            [4, 2],
            "TP1 does not hold 70 B on 80 GB"
        );
        let per_card = |l: &Layout| {
            let pool = prefill_pool(l, &layout, &calibration, &req, 0.0).unwrap();
            pool.rate / f64::from(l.parallel.cards())
        };
        assert!(per_card(&candidates[1]) > per_card(&candidates[0]));
        let chosen = predict_disaggregated(&layout, None, &calibration, &req, None).unwrap();
        let same = predict_disaggregated(&layout, Some(&layout), &calibration, &req, None).unwrap();
        assert_eq!(chosen.prefill_parallel, Parallelism::tensor(2));
        assert_eq!(chosen.decode_parallel, Parallelism::tensor(4));
        assert!(chosen.users_per_card() > same.users_per_card());
        assert_eq!(
            chosen.cards,
            chosen.split.prefill * 2 + chosen.split.decode * 4
        );
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

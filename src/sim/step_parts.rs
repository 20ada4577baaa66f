//! Where one iteration's time goes, by kind of work, and the few iterations that tell a
//! layout's story: a prompt alone, one sequence decoding, the batch at C* decoding, and a
//! prompt joining that batch. `predict --breakdown` prints them, so that a buyer can see
//! whether a layout is held back by its weights, its attention, its all-reduces or its
//! engine's fixed costs before paying for it — and which measured tables each figure rests
//! on (the prediction's basis).

use serde::Serialize;

use super::engine::Engine;
use super::perf::{StepTime, StepWork};
use crate::catalog::StepMix;
use crate::workload::Workload;

/// One iteration's time by kind of work, seconds (each card of the instance runs in lockstep,
/// so these are one card's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StepParts {
    /// Weight GEMMs from the measured operator tables: attention projections, the dense FFN or
    /// the experts (shared and routed), the LM head.
    pub weights: f64,
    /// Attention kernels over the KV cache (a prompt's, or each decoding sequence's), or
    /// the whole attention block where its module was measured whole.
    pub attention: f64,
    /// Norms, rotary embedding, activations and residual adds: memory-bound passes.
    pub elementwise: f64,
    /// Without operator tables for the card: the step's FLOPs at the card's compute
    /// efficiency and its bytes at its memory efficiency; the longer of the two counts.
    pub roofline: Option<Roofline>,
    /// All-reduces, expert all-to-alls and pipeline hand-offs.
    pub communication: f64,
    /// The engine profile's fixed costs: per step, per sequence, per eager layer.
    pub overhead: f64,
    /// The CUDA-graph size a decode-only step is padded to, when one is captured.
    pub graph_batch: Option<f64>,
}

/// The roofline's two bounds of a step's kernels, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Roofline {
    pub compute: f64,
    pub memory: f64,
}

impl StepParts {
    /// The kernels' time: the measured parts' sum, or the roofline's longer bound.
    pub fn kernels(&self) -> f64 {
        match self.roofline {
            Some(bounds) => bounds.compute.max(bounds.memory),
            None => self.weights + self.attention + self.elementwise,
        }
    }

    pub fn total(&self) -> f64 {
        self.kernels() + self.communication + self.overhead
    }

    /// The step as the engine's scheduler reads it.
    pub fn time(&self) -> StepTime {
        let (compute, memory) = match self.roofline {
            Some(bounds) => (bounds.compute, bounds.memory),
            None => (self.kernels(), 0.0),
        };
        StepTime {
            compute,
            memory,
            communication: self.communication,
            overhead: self.overhead,
            total: self.total(),
        }
    }
}

/// One iteration shown by `predict --breakdown`: what it runs and where its time goes.
#[derive(Debug, Clone, Serialize)]
pub struct SampledStep {
    /// What the iteration runs, in words.
    pub step: String,
    /// Prompt tokens computed in it, decoding sequences, and their mean context.
    pub prompt_tokens: f64,
    pub decoding: f64,
    pub context: f64,
    pub parts: StepParts,
    pub total_s: f64,
}

/// The iterations that tell `engine`'s story for `workload` with `users` running (the
/// prediction's C*, capped by the running limit): a prompt alone (its first chunk where the
/// engine chunks it), one sequence decoding, `users` decoding, and — where the engine mixes
/// prompts into decode steps — a prompt's chunk joining `users − 1` decoding. Decoding
/// sequences sit at the workload's mean context: the prompt and half the output. Speculative
/// decoding's verify passes are not shown (the steps are those without it).
pub fn sampled_steps(engine: &Engine, workload: &Workload, users: u32) -> Vec<SampledStep> {
    let config = engine.config();
    let perf = engine.perf();
    let input = workload.input_tokens.mean().max(1.0);
    let context = input + workload.output_tokens.mean() / 2.0;
    let budget = config.token_budget as f64;
    let running = f64::from(users).min(config.max_running as f64).max(1.0);
    let chunk = |room: f64| {
        if config.chunked_prefill {
            input.min(room).max(1.0)
        } else {
            input
        }
    };
    let sample = |step: String, prompt: f64, decoding: f64| {
        let mut work = StepWork::default();
        if prompt > 0.0 {
            work.add_prefill_chunk(0.0, prompt);
        }
        if decoding > 0.0 {
            work.add_decode(decoding, decoding * context);
        }
        let parts = perf.step_parts(&work);
        SampledStep {
            step,
            prompt_tokens: prompt,
            decoding,
            context: if decoding > 0.0 { context } else { 0.0 },
            total_s: parts.total(),
            parts,
        }
    };
    let mut steps = vec![
        sample("a prompt alone".into(), chunk(budget), 0.0),
        sample("one sequence decoding".into(), 0.0, 1.0),
    ];
    if running > 1.0 {
        steps.push(sample(
            format!("{running:.0} sequences decoding (C*)"),
            0.0,
            running,
        ));
        if config.step_mix != StepMix::PrefillFirst {
            let others = running - 1.0;
            steps.push(sample(
                format!("a prompt joining {others:.0} decoding"),
                chunk((budget - others).max(1.0)),
                others,
            ));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::sim::engine::EngineOptions;
    use crate::sim::predict::{engine_for, Calibration, Layout};

    fn workload(input: u32, output: u32) -> Workload {
        Workload::fixed(input, output)
    }

    fn engine(model: &str, card: &str, tp: u32, engine: &str) -> Engine {
        let catalog = Catalog::shipped().unwrap();
        let model = catalog.model(model).unwrap();
        let card = catalog.card(card).unwrap();
        let layout = Layout::on_card(model, card, tp);
        let profile = catalog.engine(engine).unwrap();
        let calibration =
            Calibration::for_engine(card, &card.interconnect, profile, &catalog.operators);
        let options = EngineOptions::for_card(profile, card);
        engine_for(&layout, &calibration, &options, false)
            .unwrap()
            .0
    }

    /// The parts add up to the step time the scheduler runs on, whatever the step; a prompt
    /// alone is weight-bound (its GEMMs dwarf its overhead), a lone decode step is not
    /// compute at all but a graph-captured pass whose overhead is a visible share.
    #[test]
    fn the_parts_add_up_to_the_step_the_scheduler_times() {
        let engine = engine("llama-3.1-70b", "H100-SXM", 4, "vllm");
        let steps = sampled_steps(&engine, &workload(2048, 256), 64);
        assert_eq!(steps.len(), 4, "{steps:?}");
        for step in &steps {
            let mut work = StepWork::default();
            if step.prompt_tokens > 0.0 {
                work.add_prefill_chunk(0.0, step.prompt_tokens);
            }
            if step.decoding > 0.0 {
                work.add_decode(step.decoding, step.decoding * step.context);
            }
            let time = engine.perf().step_time(&work);
            assert!((time.total - step.total_s).abs() < 1e-12, "{step:?}");
            assert!(step.parts.roofline.is_none() && step.parts.weights > 0.0);
            assert!(step.parts.communication > 0.0, "TP 4 all-reduces: {step:?}");
        }
        let prompt = &steps[0].parts;
        assert_eq!(steps[0].prompt_tokens, 2048.0);
        assert!(prompt.weights > 10.0 * prompt.overhead, "{prompt:?}");
        // One sequence decoding runs as a captured graph of one; 64 as one of 64.
        assert_eq!(steps[1].parts.graph_batch, Some(1.0));
        assert_eq!(steps[2].parts.graph_batch, Some(64.0));
        // Sixty-four sequences read the same weights once: far less than 64 lone steps.
        assert!(steps[2].total_s < 4.0 * steps[1].total_s, "{steps:?}");
        // The mixed step carries the prompt's chunk and the others' decodes.
        assert_eq!(steps[3].decoding, 63.0);
        assert!(steps[3].total_s > steps[2].total_s);
    }

    /// An engine that runs prompts in steps of their own (SGLang's prefill-first) shows no
    /// mixed step; one that does not chunk shows the whole prompt.
    #[test]
    fn the_steps_shown_follow_the_engines_scheduling() {
        let sglang = engine("llama-3.1-8b", "H100-SXM", 1, "sglang");
        let steps = sampled_steps(&sglang, &workload(1024, 128), 32);
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!(steps
            .iter()
            .all(|s| s.prompt_tokens == 0.0 || s.decoding == 0.0));
        let trtllm = engine("llama-3.1-8b", "H100-SXM", 1, "trtllm");
        let steps = sampled_steps(&trtllm, &workload(20_000, 128), 32);
        assert_eq!(steps[0].prompt_tokens, 20_000.0, "not chunked: {steps:?}");
        assert_eq!(steps[3].prompt_tokens, 20_000.0);
    }

    /// A card without operator tables is timed by the roofline: the breakdown says which
    /// bound held, and shows no measured parts.
    #[test]
    fn a_roofline_step_shows_its_two_bounds() {
        let engine = engine("llama-3.1-8b", "MI300X", 1, "vllm");
        let steps = sampled_steps(&engine, &workload(1024, 128), 16);
        let prompt = steps[0]
            .parts
            .roofline
            .expect("MI300X has no operator tables");
        assert!(
            prompt.compute > prompt.memory,
            "a prompt is compute-bound: {prompt:?}"
        );
        let decode = steps[1].parts.roofline.unwrap();
        assert!(
            decode.memory > decode.compute,
            "a lone decode is memory-bound: {decode:?}"
        );
        assert_eq!(steps[1].parts.weights, 0.0);
    }
}

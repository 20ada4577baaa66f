//! Continuous batching, one iteration at a time, as vLLM, SGLang and TGI schedule.
//!
//! Every iteration first gives each decoding sequence one token, then continues prompts that are
//! part-way through prefill, then admits waiting requests first come, first served — while the
//! running-request cap, the per-iteration token budget (chunked prefill) and KV-cache space
//! allow. A prompt is admitted only when all of it fits in the free KV cache; when decoding
//! runs out of KV space the youngest sequence is preempted and later recomputed.
//!
//! The decoding set is kept as aggregates (count, sum of contexts, a heap of finishing steps),
//! so an iteration costs O(1 + admissions + completions) rather than O(batch): predicting C*
//! simulates millions of tokens per layout. `track_tokens` additionally lists which sequences
//! got a token, for the HTTP front that streams them.

use std::collections::VecDeque;

use serde::Serialize;

use super::decoding::{AdmissionOrder, FinishingSteps};
use super::ids::{id_map, IdMap};
use super::perf::{PerfModel, StepTime, StepWork};

pub use crate::catalog::engine::Admission;
use crate::catalog::{EngineProfile, KvReservation, StepMix};

/// Scheduler settings: an engine profile's defaults, with what the user overrode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EngineOptions {
    /// Most sequences in flight (vLLM `max_num_seqs`). Default 256.
    pub max_running: usize,
    /// Most tokens one iteration processes (vLLM `max_num_batched_tokens`). Default 2048.
    pub token_budget: u64,
    pub admission: Admission,
    /// What KV space a request must find free to be admitted.
    pub kv_reservation: KvReservation,
    /// Whether prompt chunks ride along with decodes or run in iterations of their own.
    pub step_mix: StepMix,
    /// Whether a prompt longer than the budget is split over iterations.
    pub chunked_prefill: bool,
    /// A softer limit on an iteration's prompt tokens beside `token_budget` (SGLang's
    /// `max_prefill_tokens`): prompts are admitted while the iteration's prompt tokens are
    /// below it, so the last one admitted may pass it (up to `token_budget`). `None`: only
    /// the token budget.
    pub prompt_budget: Option<u64>,
    /// Tokens per KV block: prefix-cache hits count whole blocks only.
    pub kv_block_tokens: u64,
    /// Whether blocks of earlier prompts are kept and reused (vLLM's automatic prefix
    /// caching, SGLang's radix cache, TensorRT-LLM's block reuse).
    pub prefix_caching: bool,
    /// Whether the scheduler picks an iteration's batch while the one before it runs (vLLM's
    /// async scheduling, SGLang's and TensorRT-LLM's overlap schedulers).
    pub schedule_ahead: bool,
    /// Recurrent states in a pool of their own, bytes per byte of KV (SGLang), or `None`:
    /// one pool for both (see `EngineProfile::state_memory_ratio`).
    pub state_memory_ratio: Option<f64>,
}

impl Default for EngineOptions {
    /// A generic continuous-batching scheduler (vLLM's pre-V1 defaults); real predictions use
    /// an engine profile ([`EngineOptions::from_profile`]).
    fn default() -> Self {
        EngineOptions {
            max_running: 256,
            token_budget: 2048,
            admission: Admission::Continuous,
            kv_reservation: KvReservation::Prompt,
            step_mix: StepMix::Mixed,
            chunked_prefill: true,
            prompt_budget: None,
            kv_block_tokens: 16,
            prefix_caching: true,
            schedule_ahead: false,
            state_memory_ratio: None,
        }
    }
}

impl EngineOptions {
    /// The scheduler defaults of `profile` on `card` (some engines pick larger limits on
    /// large cards).
    pub fn for_card(profile: &EngineProfile, card: &crate::catalog::Card) -> EngineOptions {
        let (max_running, token_budget) = profile.limits_on(card);
        EngineOptions {
            max_running,
            token_budget,
            ..EngineOptions::from_profile(profile)
        }
    }

    /// The scheduler defaults of `profile` (on a small card).
    pub fn from_profile(profile: &EngineProfile) -> EngineOptions {
        EngineOptions {
            max_running: profile.max_running,
            token_budget: profile.token_budget,
            admission: profile.admission,
            kv_reservation: profile.kv_reservation,
            step_mix: profile.step_mix,
            chunked_prefill: profile.chunked_prefill,
            prompt_budget: None,
            kv_block_tokens: profile.kv_block_tokens,
            prefix_caching: profile.prefix_caching,
            schedule_ahead: profile.schedule_ahead,
            state_memory_ratio: profile.state_memory_ratio,
        }
    }
}

/// Scheduler limits of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EngineConfig {
    pub max_running: usize,
    pub token_budget: u64,
    pub admission: Admission,
    pub kv_reservation: KvReservation,
    pub step_mix: StepMix,
    pub chunked_prefill: bool,
    pub prompt_budget: Option<u64>,
    pub kv_block_tokens: u64,
    pub prefix_caching: bool,
    pub schedule_ahead: bool,
    /// KV-cache positions the instance holds (from the memory fit).
    pub kv_capacity: u64,
    /// Positions of that cache each running sequence takes beside its tokens: a hybrid
    /// model's recurrent state (its linear-attention layers), whatever the sequence's length.
    pub state_tokens: u64,
}

impl EngineConfig {
    pub fn new(kv_capacity: u64) -> EngineConfig {
        EngineConfig::with(kv_capacity, &EngineOptions::default())
    }

    pub fn with(kv_capacity: u64, options: &EngineOptions) -> EngineConfig {
        EngineConfig {
            max_running: options.max_running.max(1),
            token_budget: options.token_budget.max(1),
            admission: options.admission,
            kv_reservation: options.kv_reservation,
            step_mix: options.step_mix,
            chunked_prefill: options.chunked_prefill,
            prompt_budget: options.prompt_budget.map(|budget| budget.max(1)),
            kv_block_tokens: options.kv_block_tokens.max(1),
            prefix_caching: options.prefix_caching,
            schedule_ahead: options.schedule_ahead,
            kv_capacity,
            state_tokens: 0,
        }
    }
}

/// Speculative decoding as the engine runs it. Every decoding sequence advances by the same
/// whole number of tokens in a decode step, on one schedule for all: step `d` of the decode
/// clock has yielded ⌊d × tokens per step⌋ tokens since the clock began, so the steps alternate
/// between ⌊t⌋ and ⌈t⌉ tokens and average `t` (the workload's mean accepted length). Drawing
/// each sequence's acceptance at random would cost the engine its O(1) decode bookkeeping; the
/// mean is what TPOT and throughput rest on, and the spread between a step's ⌊t⌋ and ⌈t⌉
/// stands in for the burstiness of accepted runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeculativeStep {
    /// Tokens a decode step yields per sequence, in thousandths (1 000 = no speculation).
    pub milli_tokens: u64,
    /// Draft tokens proposed and verified per sequence and step.
    pub draft_tokens: u32,
    /// One draft pass's cost in layers of the model: 1 for an MTP module or an EAGLE head,
    /// the draft model's weights over one layer's for a draft model.
    pub draft_layers: f64,
}

impl SpeculativeStep {
    /// `speculation` on the model `perf` times.
    pub fn new(speculation: &crate::workload::Speculation, perf: &PerfModel) -> SpeculativeStep {
        SpeculativeStep {
            milli_tokens: ((speculation.tokens_per_step() * 1000.0).round() as u64).max(1000),
            draft_tokens: speculation.draft_tokens,
            draft_layers: speculation.draft_layers(perf.active_params, perf.layers),
        }
    }
}

/// A request as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineRequest {
    pub id: u64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Leading prompt tokens whose KV the instance's prefix cache already holds (a shared
    /// system prompt, a conversation's earlier turns). Only whole KV blocks are reused and
    /// the prompt's last token is always computed (its logits sample the first token).
    pub cached_tokens: u32,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    /// Positions to prefill (the prompt, or everything so far after a preemption).
    prompt: u64,
    /// Tokens generated before (non-zero after a preemption).
    generated: u64,
    output: u64,
    /// Leading prompt positions served from the prefix cache (whole blocks, never the
    /// whole prompt): admitted with these already computed.
    cached: u64,
}

impl Pending {
    /// KV positions it may hold by its last token: what whole-request reservation sets aside.
    fn final_size(&self) -> u64 {
        self.prompt + (self.output - self.generated)
    }
}

#[derive(Debug, Clone, Copy)]
struct Prefilling {
    pending: Pending,
    done: u64,
}

#[derive(Debug, Clone, Copy)]
struct Decoding {
    /// Decode clock (see `Engine::decode_clock`) when it entered decoding.
    start_step: u64,
    /// KV positions at `start_step`.
    context0: u64,
    generated0: u64,
    output: u64,
    admitted: u64,
    /// KV positions set aside for it (`Pending::final_size` at admission).
    reserved: u64,
}

/// What one iteration did.
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// Seconds the iteration took.
    pub duration: f64,
    pub time: StepTime,
    /// Requests whose first token came out of this iteration.
    pub first_tokens: Vec<u64>,
    /// Requests that finished with this iteration (their last token came out of it).
    pub finished: Vec<u64>,
    /// Requests that got tokens from decoding, and how many (only with `track_tokens`; more
    /// than one a step under speculative decoding).
    pub decoded: Vec<(u64, u32)>,
    /// Requests that got a token at the end of a recomputation after preemption.
    pub resumed: Vec<u64>,
    /// Requests preempted in this iteration.
    pub preempted: Vec<u64>,
    /// Tokens generated by this iteration, all requests together.
    pub tokens_out: u64,
    /// Sequences in the batch.
    pub batch: usize,
}

impl StepOutcome {
    /// Empty, keeping the lists' room.
    fn clear(&mut self) {
        self.duration = 0.0;
        self.time = StepTime::default();
        self.first_tokens.clear();
        self.finished.clear();
        self.decoded.clear();
        self.resumed.clear();
        self.preempted.clear();
        self.tokens_out = 0;
        self.batch = 0;
    }
}

/// Counters for `/metrics` and run summaries.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EngineCounters {
    pub steps: u64,
    /// Requests taken from the waiting queue (re-admissions after preemption included).
    pub admitted: u64,
    /// Prompt positions computed (prefill work done).
    pub prompt_tokens: u64,
    /// Prompt positions taken from the prefix cache instead of computed.
    pub cached_prompt_tokens: u64,
    pub generated_tokens: u64,
    pub preemptions: u64,
    pub finished: u64,
    pub busy_seconds: f64,
}

/// Why the engine refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Prompt plus output can never fit in this instance's KV cache.
    TooLong { needed: u64, capacity: u64 },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooLong { needed, capacity } => write!(
                f,
                "the request needs {needed} KV positions; this instance holds {capacity}"
            ),
        }
    }
}

pub struct Engine {
    config: EngineConfig,
    perf: PerfModel,
    track_tokens: bool,
    waiting: VecDeque<Pending>,
    /// Requests submitted since the last iteration began, under `schedule_ahead`: the next
    /// iteration was scheduled while they arrived, so they join the queue after it.
    arrived: Vec<Pending>,
    prefilling: Vec<Prefilling>,
    decoding: IdMap<Decoding>,
    /// Decoding sequences by admission order, to find the youngest.
    order: AdmissionOrder,
    /// Decoding sequences by the decode step they finish at.
    finishing: FinishingSteps,
    /// Scratch lists of one iteration, kept to spare an allocation each: the sequences
    /// finishing, the prompt chunks run (index in `prefilling`, tokens) and the prompts
    /// completed.
    due: Vec<(u64, u64)>,
    chunks: Vec<(usize, u64)>,
    completed: Vec<usize>,
    context_sum: u64,
    prefill_kv: u64,
    /// KV positions set aside for every admitted request's whole length (kept under either
    /// reservation policy; admission consults it under `KvReservation::WholeRequest`).
    reserved: u64,
    step: u64,
    /// Iterations that decoded. Decoding sequences advance one token per such iteration, so
    /// their context and finishing point are kept in this clock: an iteration that only
    /// prefills (`StepMix::PrefillFirst`) leaves them where they were.
    decode_clock: u64,
    admissions: u64,
    /// Speculative decoding, when the engine runs it.
    speculative: Option<SpeculativeStep>,
    /// Iterations since waiting requests were last admitted (for delayed admission).
    steps_since_admission: u64,
    counters: EngineCounters,
}

impl Engine {
    pub fn new(config: EngineConfig, perf: PerfModel, track_tokens: bool) -> Engine {
        Engine {
            config,
            perf,
            track_tokens,
            waiting: VecDeque::new(),
            arrived: Vec::new(),
            prefilling: Vec::new(),
            decoding: id_map(config.max_running.min(4096)),
            order: AdmissionOrder::default(),
            finishing: FinishingSteps::default(),
            due: Vec::new(),
            chunks: Vec::new(),
            completed: Vec::new(),
            context_sum: 0,
            prefill_kv: 0,
            reserved: 0,
            step: 0,
            decode_clock: 0,
            admissions: 0,
            speculative: None,
            steps_since_admission: 0,
            counters: EngineCounters::default(),
        }
    }

    pub fn perf(&self) -> &PerfModel {
        &self.perf
    }

    /// The step model back, with what it remembered, for the next run of the same instance.
    pub fn into_perf(self) -> PerfModel {
        self.perf
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// Runs speculative decoding from now on (`None`: one token per decode step). Set it on
    /// an idle engine: sequences already decoding keep the finishing step they were given.
    pub fn set_speculation(&mut self, speculative: Option<SpeculativeStep>) {
        self.speculative = speculative.filter(|s| s.milli_tokens > 1000 || s.draft_tokens > 0);
    }

    /// Tokens a decode step yields per sequence, in thousandths.
    fn milli_tokens(&self) -> u64 {
        self.speculative.map_or(1000, |spec| spec.milli_tokens)
    }

    /// Tokens each decoding sequence has gained from the decode clock's start to step `clock`.
    fn tokens_at(&self, clock: u64) -> u64 {
        clock * self.milli_tokens() / 1000
    }

    /// Tokens a sequence that entered decoding at clock `start` has gained since.
    fn advanced(&self, start: u64) -> u64 {
        self.tokens_at(self.decode_clock) - self.tokens_at(start)
    }

    /// The first decode step at which a sequence entering at clock `start` with `remaining`
    /// tokens to go has them all.
    fn finish_step(&self, start: u64, remaining: u64) -> u64 {
        ((self.tokens_at(start) + remaining) * 1000).div_ceil(self.milli_tokens())
    }

    /// Queues a request; refuses one that could never fit.
    pub fn submit(&mut self, request: EngineRequest) -> Result<(), Refusal> {
        let needed = u64::from(request.input_tokens)
            + u64::from(request.output_tokens)
            + self.config.state_tokens;
        if needed > self.config.kv_capacity {
            return Err(Refusal::TooLong {
                needed,
                capacity: self.config.kv_capacity,
            });
        }
        let prompt = u64::from(request.input_tokens.max(1));
        let pending = Pending {
            id: request.id,
            prompt,
            generated: 0,
            output: u64::from(request.output_tokens.max(1)),
            cached: self.cache_hit(u64::from(request.cached_tokens), prompt),
        };
        // An idle engine has nothing scheduled ahead: the request makes the next iteration.
        if self.config.schedule_ahead && !self.is_idle() {
            self.arrived.push(pending);
        } else {
            self.waiting.push_back(pending);
        }
        Ok(())
    }

    /// Prompt positions a prefix-cache hit of `cached` tokens saves for a `prompt`-token
    /// prompt: whole blocks, leaving at least the last token to compute (as vLLM's and
    /// TensorRT-LLM's block reuse do; SGLang's radix cache is a block of one token).
    fn cache_hit(&self, cached: u64, prompt: u64) -> u64 {
        let block = self.config.kv_block_tokens;
        cached.min(prompt.saturating_sub(1)) / block * block
    }

    /// Nothing waiting or running.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.arrived.is_empty()
            && self.prefilling.is_empty()
            && self.decoding.is_empty()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.arrived.len()
    }

    pub fn running(&self) -> usize {
        self.prefilling.len() + self.decoding.len()
    }

    /// Cache positions in use: the running sequences' tokens and their recurrent states.
    pub fn kv_used(&self) -> u64 {
        self.context_sum + self.prefill_kv + self.running() as u64 * self.config.state_tokens
    }

    /// Drops a request wherever it is (a client went away); frees its KV.
    pub fn cancel(&mut self, id: u64) {
        self.waiting.retain(|p| p.id != id);
        self.arrived.retain(|p| p.id != id);
        if let Some(index) = self.prefilling.iter().position(|p| p.pending.id == id) {
            let removed = self.prefilling.remove(index);
            self.prefill_kv -= removed.done;
            self.reserved -= removed.pending.final_size();
        }
        if let Some(seq) = self.decoding.remove(&id) {
            self.context_sum -= seq.context0 + self.advanced(seq.start_step);
            self.reserved -= seq.reserved;
        }
    }

    /// Whether admission number `admitted` of request `id` is still decoding (entries of
    /// the decoding orders are left behind, see `crate::sim::decoding`).
    fn is_decoding(&self, admitted: u64, id: u64) -> bool {
        self.decoding
            .get(&id)
            .is_some_and(|d| d.admitted == admitted)
    }

    /// Runs one iteration. Returns `None` when there is nothing to run.
    pub fn step(&mut self) -> Option<StepOutcome> {
        let mut outcome = StepOutcome::default();
        self.step_into(&mut outcome).then_some(outcome)
    }

    /// [`Engine::step`] into `outcome`, whose lists are cleared and reused (a caller running
    /// millions of iterations spares an allocation for each); `false` when there is nothing
    /// to run.
    pub fn step_into(&mut self, outcome: &mut StepOutcome) -> bool {
        outcome.clear();
        if self.is_idle() {
            return false;
        }
        // Scheduling ahead, this iteration's batch was picked while the last one ran: what
        // arrived meanwhile waits for the next — unless nothing ran to schedule ahead of.
        let late = if self.prefilling.is_empty() && self.decoding.is_empty() {
            self.waiting.extend(self.arrived.drain(..));
            Vec::new()
        } else {
            std::mem::take(&mut self.arrived)
        };

        let may_admit = match self.config.admission {
            Admission::Continuous => true,
            Admission::Delayed {
                max_waiting_steps,
                waiting_served_ratio,
            } => {
                let running = self.running();
                running == 0
                    || self.steps_since_admission >= max_waiting_steps
                    || self.waiting.len() as f64 >= waiting_served_ratio * running as f64
            }
        };
        // Prefill-first engines (SGLang, TGI) give an iteration to prompts whenever one is
        // part-way through or a waiting one can start now; decoding waits for it.
        let prefill_only = self.config.step_mix == StepMix::PrefillFirst
            && (!self.prefilling.is_empty() || (may_admit && self.front_fits()));

        // 1. Every decoding sequence gets a token (its accepted run, speculating), if KV
        //    space allows; otherwise preempt the youngest until it does.
        let step_tokens = self.tokens_at(self.decode_clock + 1) - self.tokens_at(self.decode_clock);
        if !prefill_only {
            while !self.decoding.is_empty()
                && self.kv_used() + self.decoding.len() as u64 * step_tokens
                    > self.config.kv_capacity
            {
                self.preempt_youngest(outcome);
            }
        }
        let decoding = if prefill_only {
            0
        } else {
            self.decoding.len() as u64
        };
        let mut work = StepWork::default();
        let verified = 1 + self.speculative.map_or(0, |s| u64::from(s.draft_tokens));
        let decode_context = self.context_sum;
        if decoding > 0 {
            work.add_verify(decoding as f64, decode_context as f64, verified as f64);
        }
        let mut budget = self.config.token_budget.saturating_sub(decoding * verified);

        // 2. Continue prompts part-way through prefill.
        let mut chunks = std::mem::take(&mut self.chunks);
        chunks.clear();
        for (index, seq) in self.prefilling.iter().enumerate() {
            if budget == 0 {
                break;
            }
            let chunk = (seq.pending.prompt - seq.done).min(budget);
            if chunk == 0 {
                continue;
            }
            work.add_prefill_chunk(seq.done as f64, chunk as f64);
            chunks.push((index, chunk));
            budget -= chunk;
        }

        // 3. Admit waiting requests while the cap, the budget and KV space allow. A prompt is
        //    admitted only when all of it fits beside what is already promised. Without
        //    chunked prefill a prompt must fit the budget whole — unless it is the iteration's
        //    first prompt, which runs whole at its own size (else a long prompt would wait
        //    for a batch with no decodes, which may never come).
        let mut promised: u64 = self
            .prefilling
            .iter()
            .map(|p| p.pending.prompt - p.done)
            .sum();
        let decode_only = self.config.step_mix == StepMix::PrefillFirst && !prefill_only;
        let admitted_before = self.admissions_started();
        let mut prompt_room = self
            .config
            .prompt_budget
            .map(|limit| limit.saturating_sub(decoding * verified))
            .map(|room| room.saturating_sub(chunks.iter().map(|&(_, chunk)| chunk).sum()));
        while may_admit && !decode_only && budget > 0 && self.running() < self.config.max_running {
            if prompt_room == Some(0) {
                break;
            }
            let Some(next) = self.waiting.front().copied() else {
                break;
            };
            if !self.has_room_for(&next, promised, decoding) {
                break;
            }
            // A prefix-cache hit is admitted as already computed: its KV is in place (counted
            // against this request — shared blocks are counted once per sharer, which
            // overstates KV use) and the new tokens attend to it.
            let to_compute = next.prompt - next.cached;
            let chunk = if self.config.chunked_prefill {
                to_compute.min(budget)
            } else if to_compute <= budget || chunks.is_empty() {
                to_compute
            } else {
                break;
            };
            self.waiting.pop_front();
            self.counters.admitted += 1;
            self.counters.cached_prompt_tokens += next.cached;
            self.reserved += next.final_size();
            self.prefill_kv += next.cached;
            work.add_prefill_chunk(next.cached as f64, chunk as f64);
            self.prefilling.push(Prefilling {
                pending: next,
                done: next.cached,
            });
            chunks.push((self.prefilling.len() - 1, chunk));
            promised += to_compute;
            budget = budget.saturating_sub(chunk);
            prompt_room = prompt_room.map(|room| room.saturating_sub(chunk));
        }

        self.waiting.extend(late);

        if self.admissions_started() > admitted_before {
            self.steps_since_admission = 0;
        } else {
            self.steps_since_admission += 1;
        }

        if work.tokens == 0.0 {
            // Everything left is waiting for KV space that nothing will free: cannot happen,
            // since submit() refuses requests larger than the cache and an idle cache is empty.
            self.chunks = chunks;
            return false;
        }
        outcome.time = self.perf.step_time(&work);
        if let Some(spec) = self.speculative.filter(|_| decoding > 0) {
            // The drafter's passes run before the verifying forward pass, one after another.
            let draft = self.perf.draft_time(
                decoding as f64,
                decode_context as f64,
                spec.draft_tokens,
                spec.draft_layers,
            );
            outcome.time.compute += draft;
            outcome.time.total += draft;
        }
        outcome.duration = outcome.time.total;
        outcome.batch = work.sequences as usize;
        self.step += 1;
        self.counters.steps += 1;
        self.counters.busy_seconds += outcome.duration;

        // Decoding sequences each wrote the KV of the tokens they kept and produced them.
        if self.track_tokens && decoding > 0 {
            let gained_before = |seq: &Decoding| seq.generated0 + self.advanced(seq.start_step);
            outcome
                .decoded
                .extend(self.decoding.iter().map(|(&id, seq)| {
                    let left = seq.output.saturating_sub(gained_before(seq));
                    (id, step_tokens.min(left) as u32)
                }));
        }
        if decoding > 0 {
            self.decode_clock += 1;
        }
        self.context_sum += decoding * step_tokens;
        outcome.tokens_out += decoding * step_tokens;
        if decoding > 0 {
            let mut due = std::mem::take(&mut self.due);
            self.finishing.take_due(self.decode_clock, &mut due);
            for (admitted, id) in due.drain(..) {
                if !self.is_decoding(admitted, id) {
                    continue; // preempted (and perhaps re-admitted) since: a stale entry
                }
                if let Some(seq) = self.decoding.remove(&id) {
                    let advanced = self.advanced(seq.start_step);
                    self.context_sum -= seq.context0 + advanced;
                    // The last step's accepted run may run past the reply's end.
                    let overshoot = (seq.generated0 + advanced).saturating_sub(seq.output);
                    outcome.tokens_out -= overshoot.min(outcome.tokens_out);
                    self.reserved -= seq.reserved;
                    self.counters.finished += 1;
                    outcome.finished.push(id);
                }
            }
            self.due = due;
        }

        // Prompt chunks: advance; a completed prompt samples a token and starts decoding.
        let mut completed = std::mem::take(&mut self.completed);
        completed.clear();
        for &(index, chunk) in &chunks {
            let seq = &mut self.prefilling[index];
            seq.done += chunk;
            self.prefill_kv += chunk;
            self.counters.prompt_tokens += chunk;
            if seq.done == seq.pending.prompt {
                completed.push(index);
            }
        }
        self.chunks = chunks;
        completed.sort_unstable_by(|a, b| b.cmp(a));
        for &index in &completed {
            let seq = self.prefilling.remove(index);
            self.prefill_kv -= seq.done;
            let pending = seq.pending;
            let generated = pending.generated + 1;
            outcome.tokens_out += 1;
            if pending.generated == 0 {
                outcome.first_tokens.push(pending.id);
            } else {
                outcome.resumed.push(pending.id);
            }
            if generated >= pending.output {
                self.reserved -= pending.final_size();
                self.counters.finished += 1;
                outcome.finished.push(pending.id);
                continue;
            }
            self.admissions += 1;
            let admitted = self.admissions;
            self.decoding.insert(
                pending.id,
                Decoding {
                    start_step: self.decode_clock,
                    context0: pending.prompt,
                    generated0: generated,
                    output: pending.output,
                    admitted,
                    reserved: pending.final_size(),
                },
            );
            self.order.push(admitted, pending.id);
            self.context_sum += pending.prompt;
            self.finishing.push(
                self.finish_step(self.decode_clock, pending.output - generated),
                admitted,
                pending.id,
            );
        }
        self.completed = completed;
        let decoding = &self.decoding;
        self.order.compact(decoding.len(), |admitted, id| {
            decoding.get(&id).is_some_and(|d| d.admitted == admitted)
        });
        self.counters.generated_tokens += outcome.tokens_out;
        true
    }

    /// Whether the request at the front of the queue could be admitted now (running cap and
    /// KV space).
    fn front_fits(&self) -> bool {
        let Some(next) = self.waiting.front() else {
            return false;
        };
        let promised: u64 = self
            .prefilling
            .iter()
            .map(|p| p.pending.prompt - p.done)
            .sum();
        self.running() < self.config.max_running
            && self.has_room_for(next, promised, self.decoding.len() as u64)
    }

    /// Whether `next` may be admitted beside what is running: its prompt must fit in what
    /// is free after the KV in use, the prompt positions already `promised` to prefilling
    /// requests and one position for each of the `decoding` sequences this iteration —
    /// and, reserving whole requests, its whole length beside every admitted one's.
    fn has_room_for(&self, next: &Pending, promised: u64, decoding: u64) -> bool {
        let capacity = self.config.kv_capacity;
        let state = self.config.state_tokens;
        let free = capacity.saturating_sub(self.kv_used() + promised + decoding);
        next.prompt + state <= free
            && match self.config.kv_reservation {
                KvReservation::Prompt => true,
                KvReservation::WholeRequest => {
                    self.reserved + (self.running() as u64 + 1) * state + next.final_size()
                        <= capacity
                }
            }
    }

    /// Requests that have left the waiting queue so far (for counting admissions in a step).
    fn admissions_started(&self) -> u64 {
        self.counters.admitted
    }

    fn preempt_youngest(&mut self, outcome: &mut StepOutcome) {
        let decoding = &self.decoding;
        let newest = self
            .order
            .pop_newest(|admitted, id| decoding.get(&id).is_some_and(|d| d.admitted == admitted));
        let Some((_, id)) = newest else {
            return;
        };
        if let Some(seq) = self.decoding.remove(&id) {
            let elapsed = self.advanced(seq.start_step);
            let context = seq.context0 + elapsed;
            self.context_sum -= context;
            self.reserved -= seq.reserved;
            self.waiting.push_front(Pending {
                id,
                // Everything so far, including the last sampled token, is recomputed.
                prompt: context + 1,
                generated: seq.generated0 + elapsed,
                output: seq.output,
                // Preemption means the cache is full: the free blocks that held its prefix
                // are the first the allocator reuses, so nothing is counted as a hit.
                cached: 0,
            });
            self.counters.preemptions += 1;
            outcome.preempted.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::perf::Efficiency;
    use std::collections::HashMap;

    /// A perf model whose every step costs exactly 10 ms, to test the scheduler alone.
    fn flat_perf() -> PerfModel {
        PerfModel {
            tp: 1,
            parallel: crate::catalog::Parallelism::tensor(1),
            fabric: crate::sim::fabric::Fabric::single_domain(1, 1.0, 1.0),
            layers: 1.0,
            moe_layers: 0.0,
            attention_layers: 1.0,
            state_bytes_per_sequence_per_card: 0.0,
            all_reduces_per_layer: 2.0,
            qk_norm_all_reduce_bytes: 0.0,
            hidden: 1.0,
            vocab: 0.0,
            attention_width: 0.0,
            shared_params: 0.0,
            expert_params: 0.0,
            experts: 1.0,
            experts_per_token: 1.0,
            active_params: 0.0,
            weight_bytes_per_param: 0.0,
            kv_bytes_per_position_per_card: 0.0,
            decode_kv_reads: 1.0,
            decode_block_stream: None,
            peak_flops: 1.0,
            hbm_bytes_per_s: 1.0,
            link_bytes_per_s: 1.0,
            interconnect: "none".into(),
            efficiency: Efficiency {
                compute: 1.0,
                memory: 1.0,
                link: 1.0,
                link_latency_us: 0.0,
                step_overhead_ms: 10.0,
                seq_overhead_ms: 0.0,
                operator_scale: 1.0,
                eager_layer_overhead_us: 0.0,
                request_overhead_ms: 0.0,
                moe_layer_overhead_us: 0.0,
                handoff_ms: 0.0,
            },
            operators: None,
            operator_gap: None,
            graph_sizes: Vec::new(),
            experts_touched: Default::default(),
        }
    }

    fn request(id: u64, input: u32, output: u32) -> EngineRequest {
        EngineRequest {
            id,
            input_tokens: input,
            output_tokens: output,
            cached_tokens: 0,
        }
    }

    /// Runs to completion; returns (step of first token, step of finish) per id.
    fn run(engine: &mut Engine) -> HashMap<u64, (u64, u64)> {
        let mut seen: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut step = 0;
        while let Some(outcome) = engine.step() {
            step += 1;
            for id in outcome.first_tokens {
                seen.entry(id).or_insert((step, 0)).0 = step;
            }
            for id in outcome.finished {
                seen.entry(id).or_insert((0, 0)).1 = step;
            }
            assert!(step < 100_000, "runaway");
        }
        seen
    }

    #[test]
    fn one_request_takes_prefill_then_one_step_per_token() {
        let mut engine = Engine::new(EngineConfig::new(10_000), flat_perf(), true);
        engine.submit(request(1, 100, 5)).unwrap();
        let seen = run(&mut engine);
        // Step 1 prefills and samples token 1; steps 2..5 decode tokens 2..5.
        assert_eq!(seen[&1], (1, 5));
        assert_eq!(engine.counters().generated_tokens, 5);
        assert_eq!(engine.kv_used(), 0, "KV freed at the end");
    }

    /// A hybrid model's sequences each hold a recurrent state beside their tokens: with room
    /// for 10 000 positions and a state worth 2 000, six requests of 100 + 100 tokens run at
    /// most four at a time (4 × 2 200 fits, 5 × 2 100 does not), all finish, and the cache
    /// is empty after; a request longer than the cache less one state is refused.
    #[test]
    fn recurrent_states_take_room_from_the_cache() {
        let mut config = EngineConfig::new(10_000);
        config.state_tokens = 2_000;
        let mut engine = Engine::new(config, flat_perf(), false);
        for id in 0..6 {
            engine.submit(request(id, 100, 100)).unwrap();
        }
        let mut most = 0;
        while engine.step().is_some() {
            most = most.max(engine.running());
            assert!(engine.kv_used() <= 10_000, "{}", engine.kv_used());
            if engine.is_idle() {
                break;
            }
        }
        assert_eq!(most, 4);
        assert_eq!(engine.counters().finished, 6);
        assert_eq!(engine.kv_used(), 0);
        assert!(engine.submit(request(9, 7_000, 1_001)).is_err());
        assert!(engine.submit(request(9, 7_000, 1_000)).is_ok());
    }

    /// 2.5 tokens a decode step: the shared schedule yields 2, 3, 2, 3, … tokens.
    fn speculating(engine: &mut Engine) {
        engine.set_speculation(Some(SpeculativeStep {
            milli_tokens: 2500,
            draft_tokens: 3,
            draft_layers: 1.0,
        }));
    }

    #[test]
    fn speculative_steps_yield_the_accepted_run_and_stop_at_the_reply_end() {
        let mut engine = Engine::new(EngineConfig::new(10_000), flat_perf(), true);
        speculating(&mut engine);
        engine.submit(request(1, 100, 11)).unwrap();
        let mut streamed = Vec::new();
        let mut steps = 0;
        while let Some(outcome) = engine.step() {
            steps += 1;
            streamed.extend(outcome.decoded.iter().map(|&(_, n)| n));
            if steps == 1 {
                assert_eq!(outcome.first_tokens, vec![1]);
            }
        }
        // Prefill samples the first token; 10 more come 2, 3, 2 and the last 3 (of which
        // one is past the end, and not streamed): finished at step 5, not 11.
        assert_eq!(steps, 5);
        assert_eq!(streamed, vec![2, 3, 2, 3]);
        assert_eq!(engine.counters().generated_tokens, 11);
        assert_eq!(engine.kv_used(), 0, "KV freed at the end");
    }

    #[test]
    fn speculating_sequences_of_any_start_finish_with_their_tokens_and_free_their_kv() {
        // Requests of different lengths arriving a step apart each enter the shared schedule
        // where it stands; every one must end with exactly its output, none early.
        let mut engine = Engine::new(EngineConfig::new(100_000), flat_perf(), true);
        speculating(&mut engine);
        let outputs: Vec<u32> = (1..=40).map(|i| 1 + (i * 7) % 23).collect();
        let mut got: HashMap<u64, u64> = HashMap::new();
        let mut next = 0;
        loop {
            if next < outputs.len() {
                engine
                    .submit(request(next as u64, 20, outputs[next]))
                    .unwrap();
                next += 1;
            }
            let Some(outcome) = engine.step() else {
                if next >= outputs.len() {
                    break;
                }
                continue;
            };
            for &id in &outcome.first_tokens {
                *got.entry(id).or_default() += 1;
            }
            for &(id, n) in &outcome.decoded {
                *got.entry(id).or_default() += u64::from(n);
            }
            for &id in &outcome.finished {
                assert_eq!(got[&id], u64::from(outputs[id as usize]), "request {id}");
            }
        }
        assert_eq!(engine.counters().finished, outputs.len() as u64);
        let total: u64 = outputs.iter().map(|&o| u64::from(o)).sum();
        assert_eq!(engine.counters().generated_tokens, total);
        assert_eq!(engine.kv_used(), 0);
    }

    #[test]
    fn speculation_preempts_and_recomputes_like_plain_decoding() {
        let mut engine = Engine::new(EngineConfig::new(100), flat_perf(), false);
        speculating(&mut engine);
        engine.submit(request(1, 40, 30)).unwrap();
        engine.submit(request(2, 40, 30)).unwrap();
        let seen = run(&mut engine);
        assert!(engine.counters().preemptions > 0);
        assert_eq!(engine.counters().finished, 2);
        assert!(seen[&1].1 > 0 && seen[&2].1 > 0);
        assert_eq!(engine.kv_used(), 0);
    }

    #[test]
    fn chunked_prefill_splits_long_prompts_by_the_budget() {
        let mut config = EngineConfig::new(100_000);
        config.token_budget = 512;
        let mut engine = Engine::new(config, flat_perf(), false);
        engine.submit(request(1, 2000, 3)).unwrap();
        let seen = run(&mut engine);
        // ⌈2000 / 512⌉ = 4 prefill steps, then 2 decode steps.
        assert_eq!(seen[&1], (4, 6));
    }

    #[test]
    fn decodes_share_a_step_with_a_new_prefill() {
        let mut engine = Engine::new(EngineConfig::new(10_000), flat_perf(), true);
        engine.submit(request(1, 10, 10)).unwrap();
        let first = engine.step().unwrap();
        assert_eq!(first.first_tokens, vec![1]);
        engine.submit(request(2, 10, 10)).unwrap();
        let second = engine.step().unwrap();
        // Request 1 decodes while request 2 prefills in the same iteration.
        assert_eq!(second.decoded, vec![(1, 1)]);
        assert_eq!(second.first_tokens, vec![2]);
        assert_eq!(second.batch, 2);
    }

    #[test]
    fn the_running_cap_queues_the_rest() {
        let mut config = EngineConfig::new(100_000);
        config.max_running = 2;
        let mut engine = Engine::new(config, flat_perf(), false);
        for id in 1..=3 {
            engine.submit(request(id, 10, 4)).unwrap();
        }
        let seen = run(&mut engine);
        assert_eq!(seen[&1], (1, 4));
        assert_eq!(seen[&2], (1, 4));
        // Request 3 waits until 1 and 2 finish at step 4, then prefills at step 5.
        assert_eq!(seen[&3], (5, 8));
    }

    #[test]
    fn kv_admission_waits_for_space_and_preemption_recomputes() {
        // 100 positions: two 40-token prompts fit; decoding 30 tokens each does not.
        let mut engine = Engine::new(EngineConfig::new(100), flat_perf(), false);
        engine.submit(request(1, 40, 30)).unwrap();
        engine.submit(request(2, 40, 30)).unwrap();
        let seen = run(&mut engine);
        let counters = engine.counters();
        assert!(
            counters.preemptions > 0,
            "the younger sequence is preempted"
        );
        assert_eq!(counters.finished, 2);
        // Both finish with all their tokens (preempted tokens are not lost).
        assert!(seen[&1].1 > 0 && seen[&2].1 > 0);
        assert_eq!(engine.kv_used(), 0);
        assert!(
            engine.submit(request(3, 90, 20)).is_err(),
            "needs 110 > 100 positions"
        );
    }

    #[test]
    fn whole_request_reservation_waits_instead_of_preempting() {
        // The same two requests as above, reserving prompt and output up front: 70 + 70 >
        // 100, so the second waits for the first to finish and nothing is preempted.
        let mut config = EngineConfig::new(100);
        config.kv_reservation = KvReservation::WholeRequest;
        let mut engine = Engine::new(config, flat_perf(), false);
        engine.submit(request(1, 40, 30)).unwrap();
        engine.submit(request(2, 40, 30)).unwrap();
        let seen = run(&mut engine);
        assert_eq!(engine.counters().preemptions, 0);
        assert_eq!(seen[&1], (1, 30));
        // Request 2 is admitted the step after request 1's last token.
        assert_eq!(seen[&2], (31, 60));
        assert_eq!(engine.kv_used(), 0);
        assert_eq!(engine.reserved, 0, "every reservation is returned");
        // Reservations count whole lengths, not what is in use: three 20 + 10 requests fit
        // 100 positions, a fourth does not until one finishes.
        let mut config = EngineConfig::new(100);
        config.kv_reservation = KvReservation::WholeRequest;
        let mut engine = Engine::new(config, flat_perf(), false);
        for id in 1..=4 {
            engine.submit(request(id, 20, 10)).unwrap();
        }
        let mut first = engine.step().unwrap().first_tokens;
        first.sort_unstable();
        assert_eq!(first, vec![1, 2, 3]);
    }

    #[test]
    fn delayed_admission_waits_for_enough_steps_or_requests() {
        let mut config = EngineConfig::new(100_000);
        config.admission = Admission::Delayed {
            max_waiting_steps: 5,
            waiting_served_ratio: 2.0,
        };
        let mut engine = Engine::new(config, flat_perf(), false);
        engine.submit(request(1, 10, 50)).unwrap();
        engine.step().unwrap(); // 1 is admitted at once: nothing was running
        engine.submit(request(2, 10, 50)).unwrap();
        let mut first_token_of_2 = None;
        for step in 2..20 {
            let outcome = engine.step().unwrap();
            if outcome.first_tokens.contains(&2) {
                first_token_of_2 = Some(step);
                break;
            }
        }
        // One waiting request is fewer than 2 × 1 running: it waits 5 steps since the last
        // admission (steps 2..=6), joins at step 7.
        assert_eq!(first_token_of_2, Some(7));
        assert!("delayed:20,1.2".parse::<Admission>().is_ok());
        assert!("sometimes".parse::<Admission>().is_err());
    }

    #[test]
    fn a_prompt_budget_admits_prompts_until_it_is_passed() {
        // SGLang's max_prefill_tokens: prompts are admitted while the iteration's prompt
        // tokens are below it, so the one that crosses it still runs whole.
        let first_step = |prompt_budget: Option<u64>| {
            let mut config = EngineConfig::new(100_000);
            config.token_budget = 10_000;
            config.prompt_budget = prompt_budget;
            let mut engine = Engine::new(config, flat_perf(), false);
            for id in 1..=4 {
                engine.submit(request(id, 100, 5)).unwrap();
            }
            let mut first = engine.step().unwrap().first_tokens;
            first.sort_unstable();
            first
        };
        assert_eq!(first_step(None), vec![1, 2, 3, 4]);
        assert_eq!(first_step(Some(250)), vec![1, 2, 3]);
        assert_eq!(first_step(Some(200)), vec![1, 2]);
        assert_eq!(first_step(Some(1)), vec![1]);
    }

    #[test]
    fn prefill_first_pauses_decoding_for_a_new_prompt() {
        // SGLang's scheduler: a waiting request that can start gets an iteration of its own;
        // the decoding one waits for it and then goes on where it was.
        let mut config = EngineConfig::new(10_000);
        config.step_mix = StepMix::PrefillFirst;
        let mut engine = Engine::new(config, flat_perf(), true);
        engine.submit(request(1, 10, 4)).unwrap();
        let first = engine.step().unwrap();
        assert_eq!(first.first_tokens, vec![1]);
        engine.step().unwrap(); // token 2 of request 1
        engine.submit(request(2, 10, 3)).unwrap();
        let prefill = engine.step().unwrap();
        assert_eq!(prefill.first_tokens, vec![2]);
        assert!(
            prefill.decoded.is_empty(),
            "request 1 does not decode meanwhile"
        );
        assert_eq!(prefill.batch, 1);
        let seen = run(&mut engine);
        // Request 1 needs two more tokens after the pause (steps 4, 5 from here: 1, 2);
        // request 2 two more as well, decoded in the same iterations.
        assert_eq!(seen[&1].1, 2);
        assert_eq!(seen[&2].1, 2);
        assert_eq!(engine.kv_used(), 0);
        assert_eq!(engine.counters().generated_tokens, 7);
    }

    #[test]
    fn mixed_steps_keep_decoding_while_prompts_arrive() {
        // The same arrivals under vLLM-style mixing: request 1 never pauses.
        let mut engine = Engine::new(EngineConfig::new(10_000), flat_perf(), true);
        engine.submit(request(1, 10, 4)).unwrap();
        engine.step().unwrap();
        engine.step().unwrap();
        engine.submit(request(2, 10, 3)).unwrap();
        let mixed = engine.step().unwrap();
        assert_eq!(mixed.first_tokens, vec![2]);
        assert_eq!(mixed.decoded, vec![(1, 1)]);
    }

    #[test]
    fn without_chunking_a_prompt_runs_whole() {
        // A 2000-token prompt with a 512-token budget and no chunked prefill: one iteration of
        // 2000 tokens, alone.
        let mut config = EngineConfig::new(100_000);
        config.token_budget = 512;
        config.chunked_prefill = false;
        let mut engine = Engine::new(config, flat_perf(), false);
        engine.submit(request(1, 2000, 3)).unwrap();
        engine.submit(request(2, 100, 3)).unwrap();
        let first = engine.step().unwrap();
        assert_eq!(first.first_tokens, vec![1], "the long prompt went whole");
        assert_eq!(
            first.batch, 1,
            "the next one did not fit the budget beside it"
        );
        let seen = run(&mut engine);
        assert_eq!(seen[&1].1, 2, "two decode steps after the prefill");
        assert!(seen.contains_key(&2));
    }

    #[test]
    fn decoding_is_cheaper_per_token_in_a_batch() {
        // With the real model, 64 sequences per step take far less than 64 × one sequence.
        let catalog = crate::catalog::Catalog::shipped().unwrap();
        let model = catalog.model("llama-3.1-8b").unwrap();
        let card = catalog.card("H100-SXM").unwrap();
        let perf = PerfModel::new(
            model,
            card,
            "nvlink",
            1,
            crate::catalog::Dtype::Bf16,
            crate::catalog::Dtype::Fp16,
            Efficiency::for_card(card, "nvlink"),
        );
        let mut one = StepWork::default();
        one.add_decode(1.0, 500.0);
        let mut batch = StepWork::default();
        batch.add_decode(64.0, 64.0 * 500.0);
        let t1 = perf.step_time(&one).total;
        let t64 = perf.step_time(&batch).total;
        assert!(t64 < 3.0 * t1, "{t1} vs {t64}");
    }
    #[test]
    fn prefix_cache_hits_skip_whole_blocks_but_never_the_last_token() {
        // 100 tokens, all in the cache: blocks of 16 leave 96 cached and 4 to compute, which
        // one 8-token step prefills (uncached it would take ⌈100 / 8⌉ = 13).
        let mut config = EngineConfig::new(10_000);
        config.token_budget = 8;
        let mut engine = Engine::new(config, flat_perf(), false);
        engine
            .submit(EngineRequest {
                cached_tokens: 100,
                ..request(1, 100, 3)
            })
            .unwrap();
        let first = engine.step().unwrap();
        assert_eq!(first.first_tokens, vec![1]);
        let counters = engine.counters();
        assert_eq!(
            (counters.prompt_tokens, counters.cached_prompt_tokens),
            (4, 96)
        );
        assert_eq!(
            engine.kv_used(),
            100,
            "the cached prefix is held like computed KV"
        );
        run(&mut engine);
        assert_eq!(engine.kv_used(), 0);
        // A hit shorter than a block reuses nothing.
        let mut engine = Engine::new(EngineConfig::new(10_000), flat_perf(), false);
        engine
            .submit(EngineRequest {
                cached_tokens: 15,
                ..request(2, 100, 1)
            })
            .unwrap();
        run(&mut engine);
        assert_eq!(engine.counters().prompt_tokens, 100);
    }

    #[test]
    fn scheduling_ahead_a_request_arriving_mid_step_joins_the_step_after_next() {
        let first_token_step = |ahead: bool| {
            let mut config = EngineConfig::new(10_000);
            config.schedule_ahead = ahead;
            let mut engine = Engine::new(config, flat_perf(), false);
            // Submitted to an idle engine: nothing is scheduled ahead, so step 1 takes it.
            engine.submit(request(1, 10, 20)).unwrap();
            assert_eq!(engine.step().unwrap().first_tokens, vec![1]);
            // Submitted while step 1 ran (between the calls): step 2 was already chosen.
            engine.submit(request(2, 10, 5)).unwrap();
            engine.submit(request(3, 10, 5)).unwrap();
            engine.cancel(3);
            assert_eq!(engine.waiting(), 1);
            let mut step = 1;
            loop {
                step += 1;
                let outcome = engine.step().unwrap();
                assert!(
                    !outcome.first_tokens.contains(&3),
                    "a cancelled request ran"
                );
                if outcome.first_tokens.contains(&2) {
                    return step;
                }
            }
        };
        assert_eq!(first_token_step(false), 2);
        assert_eq!(first_token_step(true), 3);
    }
}

//! One simulated user's requests, as a level or a soak sends them: a prompt tagged with its
//! step and number, a sampled output length, the request timed, filed and written to the run's
//! log at once — and, while it is in flight, kept where the level can record it if it has to
//! cut it off.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::StdRng;

use super::client::{send_tracked, Progress};
use super::record::{Phase, RequestRecord};
use super::step::ProbeContext;

/// A request in flight: what is written for it if its level ends first.
struct InFlight {
    index: u64,
    start: Instant,
    /// Tokens the prompt was built to have.
    input_tokens: u32,
    progress: Arc<Progress>,
}

/// One user's request in flight, if any (a poisoned lock still holds a usable value).
#[derive(Clone, Default)]
pub struct InFlightSlot(Arc<Mutex<Option<InFlight>>>);

impl InFlightSlot {
    fn put(&self, value: Option<InFlight>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = value;
    }

    fn take(&self) -> Option<InFlight> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The users' tasks. Dropping them (a Ctrl-C drops the level) aborts them, so nothing keeps
/// sending and the request log can close; [`Users::stop`] also waits until each is gone.
#[derive(Default)]
pub struct Users(Vec<tokio::task::JoinHandle<()>>);

impl Users {
    pub fn spawn<F>(&mut self, user: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.0.push(tokio::spawn(user));
    }

    /// Aborts every user and waits until none runs: after it, no user can still file a
    /// record or touch its in-flight slot, so what the slots hold was cut off.
    pub async fn stop(mut self) {
        for user in std::mem::take(&mut self.0) {
            user.abort();
            let _ = user.await;
        }
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for user in &self.0 {
            user.abort();
        }
    }
}

/// Sends request `index` of `step` for a user holding `slot`, files it under `phase` and
/// writes it to the run's log; returns the record.
pub async fn send_request(
    ctx: &ProbeContext,
    slot: &InFlightSlot,
    rng: &mut StdRng,
    (step, concurrency): (u32, u32),
    index: u64,
    phase: Phase,
) -> RequestRecord {
    let prompt = ctx.prompts.prompt(&ctx.run_tag, step, index, ctx.seed);
    let max_tokens = ctx.output_tokens.sample(rng);
    let progress = Arc::new(Progress::default());
    slot.put(Some(InFlight {
        index,
        start: Instant::now(),
        input_tokens: prompt.tokens,
        progress: progress.clone(),
    }));
    let measured = send_tracked(&ctx.endpoint, &prompt, max_tokens, Some(&progress)).await;
    slot.put(None);
    let mut record = measured.record;
    record.scale_times(ctx.time_scale);
    record.step = step;
    record.index = index;
    record.concurrency = concurrency;
    record.phase = phase;
    record.start_s = measured.start.duration_since(ctx.run_start).as_secs_f64();
    let _ = ctx.sink.send(record.clone());
    record
}

/// After the users were stopped ([`Users::stop`]): writes a `cancelled` record for every request they
/// still had in flight (with what it had received) and returns how many.
pub fn record_cut_off(
    ctx: &ProbeContext,
    slots: &[InFlightSlot],
    step: u32,
    concurrency: u32,
) -> usize {
    let now = Instant::now();
    let mut cut_off = 0;
    for slot in slots {
        let Some(cut) = slot.take() else {
            continue;
        };
        let mut record = cut.progress.cancelled(cut.start, now, cut.input_tokens);
        record.scale_times(ctx.time_scale);
        record.step = step;
        record.index = cut.index;
        record.concurrency = concurrency;
        record.start_s = cut.start.duration_since(ctx.run_start).as_secs_f64();
        record.streamed = ctx.endpoint.stream;
        let _ = ctx.sink.send(record);
        cut_off += 1;
    }
    cut_off
}

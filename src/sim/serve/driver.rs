//! The engine in scaled real time: one task owns the engine, steps it, sleeps until each step's
//! end on an absolute clock (no drift), and hands tokens to the requests' streams.
//!
//! Requests that arrive while a step runs are admitted at the next step, as in a real engine.
//! When the engine is idle its virtual clock catches up with the wall clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

use crate::sim::engine::{Engine, EngineCounters, EngineRequest};

/// What a request's stream receives from the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenEvent {
    /// `count` new tokens; `virtual_s` is the engine time they came out at.
    Tokens { count: u32, virtual_s: f64 },
    /// The last token has been sent.
    Finished { output_tokens: u32, virtual_s: f64 },
    /// The engine cannot take the request.
    Refused(String),
}

pub enum Command {
    Submit {
        request: EngineRequest,
        events: mpsc::UnboundedSender<TokenEvent>,
    },
    Cancel(u64),
}

/// What `/metrics` reports.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EngineGauges {
    pub running: usize,
    pub waiting: usize,
    pub kv_used: u64,
    pub kv_capacity: u64,
    pub counters: EngineCounters,
    /// How late steps ended against their schedule: worst and total, seconds of wall time.
    pub max_lateness_s: f64,
    pub total_lateness_s: f64,
    pub late_steps: u64,
}

/// The handle request handlers use.
#[derive(Clone)]
pub struct EngineHandle {
    commands: mpsc::UnboundedSender<Command>,
    gauges: Arc<Mutex<EngineGauges>>,
    origin: Instant,
    time_scale: f64,
}

impl EngineHandle {
    pub fn submit(&self, request: EngineRequest) -> Option<mpsc::UnboundedReceiver<TokenEvent>> {
        let (events, receiver) = mpsc::unbounded_channel();
        self.commands
            .send(Command::Submit { request, events })
            .ok()?;
        Some(receiver)
    }

    pub fn cancel(&self, id: u64) {
        let _ = self.commands.send(Command::Cancel(id));
    }

    pub fn gauges(&self) -> EngineGauges {
        match self.gauges.lock() {
            Ok(gauges) => *gauges,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Engine (virtual) seconds since the server started, as of now.
    pub fn virtual_now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * self.time_scale
    }

    pub fn origin(&self) -> Instant {
        self.origin
    }

    pub fn time_scale(&self) -> f64 {
        self.time_scale
    }
}

/// Starts the engine task, `time_scale` F× faster than real time, on a clock that started at
/// `origin` (the engines of one deployment share it, so their engine times compare).
pub fn spawn_at(engine: Engine, time_scale: f64, origin: Instant) -> EngineHandle {
    let (commands, receiver) = mpsc::unbounded_channel();
    let gauges = Arc::new(Mutex::new(EngineGauges {
        kv_capacity: engine.config().kv_capacity,
        ..EngineGauges::default()
    }));
    let handle = EngineHandle {
        commands,
        gauges: gauges.clone(),
        origin,
        time_scale,
    };
    tokio::spawn(run(engine, receiver, gauges, origin, time_scale));
    handle
}

async fn run(
    mut engine: Engine,
    mut commands: mpsc::UnboundedReceiver<Command>,
    gauges: Arc<Mutex<EngineGauges>>,
    origin: Instant,
    time_scale: f64,
) {
    let mut streams: HashMap<u64, mpsc::UnboundedSender<TokenEvent>> = HashMap::new();
    let mut virtual_now = 0.0_f64;
    let mut lateness = (0.0_f64, 0.0_f64, 0u64);
    loop {
        while let Ok(command) = commands.try_recv() {
            apply(command, &mut engine, &mut streams);
        }
        if engine.is_idle() {
            publish(&engine, &gauges, lateness);
            match commands.recv().await {
                Some(command) => apply(command, &mut engine, &mut streams),
                None => return,
            }
            virtual_now = virtual_now.max(origin.elapsed().as_secs_f64() * time_scale);
            continue;
        }
        let Some(outcome) = engine.step() else {
            // Nothing can run (cannot happen with refusals at submit); wait for news.
            match commands.recv().await {
                Some(command) => apply(command, &mut engine, &mut streams),
                None => return,
            }
            continue;
        };
        virtual_now += outcome.duration;
        let deadline = origin + Duration::from_secs_f64(virtual_now / time_scale);
        tokio::time::sleep_until(deadline.into()).await;
        let late = Instant::now()
            .saturating_duration_since(deadline)
            .as_secs_f64();
        // Timer wake-ups are up to ~1 ms late by design; count only lateness beyond that.
        if late > 0.002 {
            lateness.0 = lateness.0.max(late);
            lateness.1 += late;
            lateness.2 += 1;
        }

        let mut deliver = |id: u64, event: TokenEvent| {
            if let Some(stream) = streams.get(&id) {
                if stream.send(event).is_err() {
                    streams.remove(&id);
                    engine.cancel(id);
                }
            }
        };
        let sampled = outcome.first_tokens.iter().chain(&outcome.resumed);
        for (id, count) in sampled
            .map(|&id| (id, 1))
            .chain(outcome.decoded.iter().copied())
        {
            deliver(
                id,
                TokenEvent::Tokens {
                    count,
                    virtual_s: virtual_now,
                },
            );
        }
        for &id in &outcome.finished {
            if let Some(stream) = streams.remove(&id) {
                let _ = stream.send(TokenEvent::Finished {
                    output_tokens: 0,
                    virtual_s: virtual_now,
                });
            }
        }
        publish(&engine, &gauges, lateness);
    }
}

fn apply(
    command: Command,
    engine: &mut Engine,
    streams: &mut HashMap<u64, mpsc::UnboundedSender<TokenEvent>>,
) {
    match command {
        Command::Submit { request, events } => match engine.submit(request) {
            Ok(()) => {
                streams.insert(request.id, events);
            }
            Err(refusal) => {
                let _ = events.send(TokenEvent::Refused(refusal.to_string()));
            }
        },
        Command::Cancel(id) => {
            streams.remove(&id);
            engine.cancel(id);
        }
    }
}

fn publish(engine: &Engine, gauges: &Mutex<EngineGauges>, lateness: (f64, f64, u64)) {
    let snapshot = EngineGauges {
        running: engine.running(),
        waiting: engine.waiting(),
        kv_used: engine.kv_used(),
        kv_capacity: engine.config().kv_capacity,
        counters: engine.counters(),
        max_lateness_s: lateness.0,
        total_lateness_s: lateness.1,
        late_steps: lateness.2,
    };
    if let Ok(mut gauges) = gauges.lock() {
        *gauges = snapshot;
    }
}

//! What serves a request: one engine (aggregated serving), or a disaggregated deployment —
//! prefill workers that compute each prompt, then hand its KV cache over the network to
//! decode workers that generate the reply (NVIDIA Dynamo, llm-d, SGLang PD).
//!
//! A disaggregated request is relayed as Dynamo routes one: submitted to the prefill worker
//! with the fewest requests in hand as a one-token request (whose token the client does not
//! see, unless that one token is the whole reply); then, after the KV transfer's time, to the
//! least busy decode worker with the whole prompt already in its cache (the engine recomputes
//! only the prompt's last partial block), which streams every token of the reply, the first
//! included — so TTFT holds the prefill, the transfer and the decode worker's first iteration. Each worker is an engine of its own on one clock, so a
//! prompt never waits behind a decode batch and a decode batch never stalls for a prompt —
//! what a probe of `capplan serve --pd` measures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::driver::{self, EngineGauges, EngineHandle, TokenEvent};
use crate::sim::engine::{Engine, EngineConfig, EngineRequest};

/// The engines a server runs.
pub enum Engines {
    /// One engine does everything.
    Aggregated(Box<Engine>),
    /// Prefill and decode workers apart, a prompt's KV moving from one to the other.
    Disaggregated {
        prefill: Vec<Engine>,
        decode: Vec<Engine>,
        transfer: KvTransfer,
    },
}

/// How long a prompt's KV cache takes to move from a prefill to a decode worker, engine
/// seconds: a fixed cost and a time per prompt token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvTransfer {
    pub fixed_s: f64,
    pub per_token_s: f64,
}

impl KvTransfer {
    pub fn seconds(&self, prompt_tokens: u32) -> f64 {
        (self.fixed_s + self.per_token_s * f64::from(prompt_tokens)).max(0.0)
    }
}

impl Engines {
    /// The settings of the engine that takes prompts first (its KV capacity sizes the
    /// server's prefix cache).
    pub fn first_config(&self) -> Option<EngineConfig> {
        match self {
            Engines::Aggregated(engine) => Some(*engine.config()),
            Engines::Disaggregated { prefill, .. } => prefill.first().map(|e| *e.config()),
        }
    }
}

impl From<Engine> for Engines {
    fn from(engine: Engine) -> Engines {
        Engines::Aggregated(Box::new(engine))
    }
}

/// The running engines, as request handlers use them.
#[derive(Clone)]
pub enum Backend {
    One(EngineHandle),
    Disaggregated(Arc<Pools>),
}

/// A disaggregated deployment's running workers.
pub struct Pools {
    prefill: Vec<Worker>,
    decode: Vec<Worker>,
    transfer: KvTransfer,
    time_scale: f64,
    origin: Instant,
    /// Which worker holds each request now, to cancel it there.
    holders: Mutex<HashMap<u64, (Pool, usize)>>,
    /// Requests handed from a prefill to a decode worker: each finished twice in the engines'
    /// counts, once for the client.
    handed_over: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Prefill,
    Decode,
}

/// One worker and how many requests it has in hand (the router's measure of load).
struct Worker {
    handle: EngineHandle,
    in_hand: AtomicUsize,
}

impl Backend {
    /// Starts every engine on one clock: `time_scale` F runs them F× faster than real time.
    pub fn start(engines: Engines, time_scale: f64) -> Backend {
        let origin = Instant::now();
        match engines {
            Engines::Aggregated(engine) => {
                Backend::One(driver::spawn_at(*engine, time_scale, origin))
            }
            Engines::Disaggregated {
                prefill,
                decode,
                transfer,
            } => {
                let workers = |engines: Vec<Engine>| -> Vec<Worker> {
                    engines
                        .into_iter()
                        .map(|engine| Worker {
                            handle: driver::spawn_at(engine, time_scale, origin),
                            in_hand: AtomicUsize::new(0),
                        })
                        .collect()
                };
                Backend::Disaggregated(Arc::new(Pools {
                    prefill: workers(prefill),
                    decode: workers(decode),
                    transfer,
                    time_scale,
                    origin,
                    holders: Mutex::new(HashMap::new()),
                    handed_over: AtomicU64::new(0),
                }))
            }
        }
    }

    /// Sends `request` in; its tokens come on the receiver. `None` once the engines stopped.
    pub fn submit(&self, request: EngineRequest) -> Option<mpsc::UnboundedReceiver<TokenEvent>> {
        match self {
            Backend::One(handle) => handle.submit(request),
            Backend::Disaggregated(pools) => Pools::submit(pools, request),
        }
    }

    pub fn cancel(&self, id: u64) {
        match self {
            Backend::One(handle) => handle.cancel(id),
            Backend::Disaggregated(pools) => pools.cancel(id),
        }
    }

    /// Every engine's gauges together: running, waiting, KV, iterations and tokens summed,
    /// the worst lateness. A disaggregated deployment counts its prompts (and prefix-cache
    /// hits) where they are computed, on the prefill workers — a decode worker's prompt
    /// arrives with its KV — and each request finished once.
    pub fn gauges(&self) -> EngineGauges {
        match self {
            Backend::One(handle) => handle.gauges(),
            Backend::Disaggregated(pools) => {
                let sum = |workers: &[Worker]| {
                    workers
                        .iter()
                        .map(|w| w.handle.gauges())
                        .fold(EngineGauges::default(), sum_gauges)
                };
                let (prefill, decode) = (sum(&pools.prefill), sum(&pools.decode));
                let mut total = sum_gauges(prefill, decode);
                total.counters.prompt_tokens = prefill.counters.prompt_tokens;
                total.counters.cached_prompt_tokens = prefill.counters.cached_prompt_tokens;
                total.counters.admitted = prefill.counters.admitted;
                // A handed-over request finished once, on its decode worker, and the token
                // its prefill worker sampled was not sent (the decode worker sends them all).
                let handed_over = pools.handed_over.load(Ordering::Relaxed);
                total.counters.finished = total.counters.finished.saturating_sub(handed_over);
                total.counters.generated_tokens =
                    total.counters.generated_tokens.saturating_sub(handed_over);
                total
            }
        }
    }

    /// Engine (virtual) seconds since the server started, as of now.
    pub fn virtual_now(&self) -> f64 {
        match self {
            Backend::One(handle) => handle.virtual_now(),
            Backend::Disaggregated(pools) => {
                pools.origin.elapsed().as_secs_f64() * pools.time_scale
            }
        }
    }

    pub fn origin(&self) -> Instant {
        match self {
            Backend::One(handle) => handle.origin(),
            Backend::Disaggregated(pools) => pools.origin,
        }
    }
}

impl Pools {
    /// The worker of `pool` with the fewest requests in hand (the first of equals).
    fn least_busy(workers: &[Worker]) -> Option<usize> {
        (0..workers.len()).min_by_key(|&i| workers[i].in_hand.load(Ordering::Relaxed))
    }

    fn hold(&self, id: u64, pool: Pool, worker: usize) {
        if let Ok(mut holders) = self.holders.lock() {
            holders.insert(id, (pool, worker));
        }
    }

    fn release(&self, id: u64) {
        if let Ok(mut holders) = self.holders.lock() {
            holders.remove(&id);
        }
    }

    fn workers(&self, pool: Pool) -> &[Worker] {
        match pool {
            Pool::Prefill => &self.prefill,
            Pool::Decode => &self.decode,
        }
    }

    fn cancel(&self, id: u64) {
        let holder = self.holders.lock().ok().and_then(|h| h.get(&id).copied());
        if let Some((pool, worker)) = holder {
            if let Some(worker) = self.workers(pool).get(worker) {
                worker.handle.cancel(id);
            }
        }
    }

    /// Relays `request` through a prefill worker, the KV transfer and a decode worker.
    fn submit(
        pools: &Arc<Pools>,
        request: EngineRequest,
    ) -> Option<mpsc::UnboundedReceiver<TokenEvent>> {
        let prefill_at = Self::least_busy(&pools.prefill)?;
        let prefill = &pools.prefill[prefill_at];
        let mut first = prefill.handle.submit(EngineRequest {
            output_tokens: 1,
            ..request
        })?;
        prefill.in_hand.fetch_add(1, Ordering::Relaxed);
        pools.hold(request.id, Pool::Prefill, prefill_at);
        let (client, receiver) = mpsc::unbounded_channel();
        let pools = Arc::clone(pools);
        tokio::spawn(async move {
            let alone = request.output_tokens <= 1;
            let prefilled = relay(&mut first, &client, alone).await;
            pools.prefill[prefill_at]
                .in_hand
                .fetch_sub(1, Ordering::Relaxed);
            let Some(virtual_s) = prefilled else {
                pools.release(request.id);
                return;
            };
            if alone {
                let _ = client.send(TokenEvent::Finished {
                    output_tokens: 1,
                    virtual_s,
                });
                pools.release(request.id);
                return;
            }
            let transfer_s = pools.transfer.seconds(request.input_tokens);
            tokio::time::sleep(Duration::from_secs_f64(transfer_s / pools.time_scale)).await;
            // The client may have gone while the KV moved.
            let decode_at = match Self::least_busy(&pools.decode) {
                Some(at) if !client.is_closed() => at,
                _ => {
                    pools.release(request.id);
                    return;
                }
            };
            let decode = &pools.decode[decode_at];
            pools.hold(request.id, Pool::Decode, decode_at);
            let Some(mut rest) = decode.handle.submit(EngineRequest {
                cached_tokens: request.input_tokens,
                ..request
            }) else {
                pools.release(request.id);
                return;
            };
            decode.in_hand.fetch_add(1, Ordering::Relaxed);
            pools.handed_over.fetch_add(1, Ordering::Relaxed);
            if let Some(virtual_s) = relay(&mut rest, &client, true).await {
                let _ = client.send(TokenEvent::Finished {
                    output_tokens: 0,
                    virtual_s,
                });
            }
            decode.in_hand.fetch_sub(1, Ordering::Relaxed);
            pools.release(request.id);
        });
        Some(receiver)
    }
}

/// Forwards one worker's tokens to the client (with `forward`; else only waits for them)
/// until that worker finishes (returning the engine time it finished at) or refuses, or the
/// client goes (`None` for both).
async fn relay(
    from: &mut mpsc::UnboundedReceiver<TokenEvent>,
    client: &mpsc::UnboundedSender<TokenEvent>,
    forward: bool,
) -> Option<f64> {
    loop {
        match from.recv().await? {
            TokenEvent::Tokens { count, virtual_s } => {
                if forward {
                    client.send(TokenEvent::Tokens { count, virtual_s }).ok()?;
                } else if client.is_closed() {
                    return None;
                }
            }
            TokenEvent::Finished { virtual_s, .. } => return Some(virtual_s),
            refused @ TokenEvent::Refused(_) => {
                let _ = client.send(refused);
                return None;
            }
        }
    }
}

fn sum_gauges(total: EngineGauges, g: EngineGauges) -> EngineGauges {
    let (a, b) = (total.counters, g.counters);
    EngineGauges {
        running: total.running + g.running,
        waiting: total.waiting + g.waiting,
        kv_used: total.kv_used + g.kv_used,
        kv_capacity: total.kv_capacity + g.kv_capacity,
        counters: crate::sim::engine::EngineCounters {
            steps: a.steps + b.steps,
            admitted: a.admitted + b.admitted,
            prompt_tokens: a.prompt_tokens + b.prompt_tokens,
            cached_prompt_tokens: a.cached_prompt_tokens + b.cached_prompt_tokens,
            generated_tokens: a.generated_tokens + b.generated_tokens,
            preemptions: a.preemptions + b.preemptions,
            finished: a.finished + b.finished,
            busy_seconds: a.busy_seconds + b.busy_seconds,
        },
        max_lateness_s: total.max_lateness_s.max(g.max_lateness_s),
        total_lateness_s: total.total_lateness_s + g.total_lateness_s,
        late_steps: total.late_steps + g.late_steps,
    }
}

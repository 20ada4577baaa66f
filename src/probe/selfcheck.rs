//! Watching the load generator itself: if the client is the bottleneck, its latency is not the
//! server's, and the step says so.
//!
//! A ticker asks to wake every 10 ms and records how late it woke (event-loop lag); the
//! process's CPU time is read from `/proc/self/stat` at both ends of the step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The client's health during one step.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ClientCheck {
    /// Event-loop lag: 99th percentile and worst, ms.
    pub loop_lag_p99_ms: f64,
    pub loop_lag_max_ms: f64,
    /// Client CPU seconds per wall second (1.0 = one core busy).
    pub cpu_cores: f64,
    /// Cores the client could use (the machine's, capped by its threads).
    pub cores: usize,
    /// Whether the client may have distorted this step's latencies.
    pub bottleneck: bool,
}

/// Lag above which a step is flagged: a 5 ms late wake-up is as large as a fast server's
/// token gap.
const LAG_FLAG_MS: f64 = 5.0;

pub struct Watch {
    stop: Arc<AtomicBool>,
    lags: Arc<Mutex<Vec<f64>>>,
    started: Instant,
    cpu_at_start: Option<f64>,
}

impl Watch {
    pub fn start() -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let lags = Arc::new(Mutex::new(Vec::new()));
        let (ticker_stop, ticker_lags) = (stop.clone(), lags.clone());
        tokio::spawn(async move {
            let period = Duration::from_millis(10);
            let mut next = Instant::now() + period;
            while !ticker_stop.load(Ordering::Relaxed) {
                tokio::time::sleep_until(next.into()).await;
                let lag = Instant::now().saturating_duration_since(next).as_secs_f64() * 1e3;
                if let Ok(mut lags) = ticker_lags.lock() {
                    lags.push(lag);
                }
                next = Instant::now() + period;
            }
        });
        Watch {
            stop,
            lags,
            started: Instant::now(),
            cpu_at_start: process_cpu_seconds(),
        }
    }

    pub fn finish(self) -> ClientCheck {
        self.stop.store(true, Ordering::Relaxed);
        let wall = self.started.elapsed().as_secs_f64().max(1e-9);
        let cpu = match (self.cpu_at_start, process_cpu_seconds()) {
            (Some(a), Some(b)) => (b - a) / wall,
            _ => 0.0,
        };
        let mut lags = self.lags.lock().map(|l| l.clone()).unwrap_or_default();
        lags.sort_by(f64::total_cmp);
        let p99 = if lags.is_empty() {
            0.0
        } else {
            crate::stats::quantile_sorted(&lags, 0.99)
        };
        // The cores the client can use: the machine's, or fewer when it reads on fewer
        // threads (`--client-threads`; the request log's writer thread is not counted).
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cores = tokio::runtime::Handle::try_current()
            .map_or(machine, |h| h.metrics().num_workers().clamp(1, machine));
        ClientCheck {
            loop_lag_p99_ms: p99,
            loop_lag_max_ms: lags.last().copied().unwrap_or(0.0),
            cpu_cores: cpu,
            cores,
            bottleneck: p99 > LAG_FLAG_MS || cpu > 0.9 * cores as f64,
        }
    }
}

/// User + system CPU seconds of this process (Linux); `None` elsewhere.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Clock ticks per second: 100 on Linux for every mainstream architecture.
    Some((utime + stime) / 100.0)
}

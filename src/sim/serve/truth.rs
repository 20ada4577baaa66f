//! The server's own record of every request (`serve --log FILE`): what really happened, so tests
//! can check what a client measured against it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

/// One request as the server saw it. Wall times are seconds since the server started; engine
/// times are the simulated engine's (wall × time scale).
#[derive(Debug, Clone, Serialize, Default)]
pub struct TruthRecord {
    pub request: u64,
    pub endpoint: String,
    /// The prompt's first word (probes put a unique tag there), at most 64 characters.
    pub prompt_head: String,
    pub stream: bool,
    /// `ok`, `fault`, `refused`, `cancelled` (client went away) or `bad-request`.
    pub status: String,
    pub fault: Option<String>,
    pub input_tokens: u32,
    /// Tokens the engine generated for it.
    pub output_tokens: u32,
    /// Tokens written to the client.
    pub sent_tokens: u32,
    pub chunks: u32,
    pub arrival_s: f64,
    pub first_token_s: Option<f64>,
    pub finish_s: Option<f64>,
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub engine_ttft_s: Option<f64>,
    pub engine_tpot_s: Option<f64>,
}

/// Appends records as JSON lines, flushed one by one.
pub struct TruthLog {
    writer: Mutex<BufWriter<File>>,
}

impl TruthLog {
    pub fn create(path: &Path) -> std::io::Result<TruthLog> {
        Ok(TruthLog {
            writer: Mutex::new(BufWriter::new(File::create(path)?)),
        })
    }

    pub fn write(&self, record: &TruthRecord) {
        let Ok(line) = serde_json::to_string(record) else {
            return;
        };
        if let Ok(mut writer) = self.writer.lock() {
            let _ = writeln!(writer, "{line}");
            let _ = writer.flush();
        }
    }
}

//! Measuring a real endpoint: requests, streams, load, search for C*, and the run on disk.

pub mod api;
pub mod client;
pub mod metrics;
pub mod parquet;
pub mod prompts;
pub mod record;
pub mod redact;
pub mod run;
pub mod run_dir;
pub mod search;
pub mod selfcheck;
pub mod soak;
pub mod sse;
pub mod step;
pub mod transport;
pub mod user;
pub mod verdict;

//! The simulated engine: a performance model of one serving instance and a continuous-batching
//! scheduler on top of it, run in virtual time (`predict`) or scaled real time (`serve`).

pub mod c_star_slope;
pub mod calibrate;
pub mod calibrate_curves;
pub mod calibrate_runs;
pub mod calibration_file;
pub mod capacity;
mod decoding;
pub mod disagg;
pub mod engine;
pub mod fabric;
pub mod ids;
pub mod measuring_client;
pub mod operator_step;
pub mod perf;
pub mod predict;
pub mod prefix_cache;
pub mod serve;
pub mod step_parts;
pub mod virtual_run;

pub use perf::{Efficiency, PerfModel, StepTime, StepWork};
pub use step_parts::{Roofline, StepParts};

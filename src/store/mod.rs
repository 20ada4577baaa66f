//! What has been measured or imported, on disk under `measurements/`.

pub mod capacity;
pub mod curve;
pub mod import;
pub mod run_folder;
pub mod steps;

pub use capacity::{load_capacity_dir, parse_capacity_csv, CapacityPoint, PointSource};

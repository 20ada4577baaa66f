//! Curves between the measured points: throughput (Universal Scalability Law) and latency
//! (monotone hinge) against load, the levels that do not fit flagged, and C* for any SLO the
//! data can speak to.

pub mod capacity;
pub mod curve;
pub mod fitted;
pub mod knee;
pub mod latency;
pub mod simplex;
pub mod usl;

pub use capacity::{capacity_at, CapacityEstimate, CapacityGap, Limits};
pub use curve::{fit_curve, CurveFit, FitOptions, Flag};
pub use fitted::{fit_measured, FitSettings, FittedCurve};

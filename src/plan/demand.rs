//! What the fleet must carry, and how many nodes that takes.

use std::fmt;

use serde::Serialize;

/// The load to plan for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Demand {
    /// Users as capacity points count them: concurrent sessions at the point's think time.
    Users(u64),
    /// Requests per second.
    Rps(f64),
}

impl fmt::Display for Demand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Demand::Users(users) => write!(f, "{users} users"),
            Demand::Rps(rps) => write!(f, "{rps} requests/s"),
        }
    }
}

/// Nodes needed to carry `users` with `headroom` (0.2 = 20 % extra) at `users_per_node`, plus
/// `spares`. Always the ceiling: rounding down leaves users without a seat.
pub fn nodes_needed(users: f64, headroom: f64, users_per_node: f64, spares: u32) -> u64 {
    let exact = users * (1.0 + headroom) / users_per_node;
    // Guard against 10000 × 1.1 / 110 = 100.00000000000001 becoming 101.
    let rounded = exact.round();
    let whole = if (exact - rounded).abs() <= 1e-9 * exact.max(1.0) {
        rounded
    } else {
        exact.ceil()
    };
    whole as u64 + u64::from(spares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_ceiling() {
        assert_eq!(nodes_needed(10000.0, 0.0, 90.0, 0), 112);
        assert_eq!(nodes_needed(10000.0, 0.0, 900.0, 0), 12);
        assert_eq!(nodes_needed(10000.0, 0.0, 320.0, 0), 32);
        assert_eq!(nodes_needed(10000.0, 0.0, 200.0, 0), 50);
        assert_eq!(nodes_needed(10000.0, 0.1, 110.0, 0), 100);
        assert_eq!(nodes_needed(10000.0, 0.2, 90.0, 2), 136);
    }
}

//! Finding C*: grow concurrency geometrically until the SLO fails, then bisect between the last
//! pass and the first fail down to the resolution. Where both ends of the bracket measured how
//! close they came to the SLO (their *load*: the binding percentile over its limit), the next
//! level is interpolated where the load would cross 1 instead of taken at the midpoint: past
//! saturation latency grows about linearly in concurrency (Little's law), so the guess usually
//! lands next to C* and the bracket closes in two or three steps instead of five. The guess is
//! kept an eighth of the bracket away from either end, so a latency curve that is flat and
//! then steep (regula falsi's slow case) still shrinks the bracket by at least that much. A step still inconclusive after its largest
//! sample counts as a fail (capacity is never claimed on a coin flip). Steps already recorded
//! (`--resume`) are replayed from their verdicts instead of being measured again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::verdict::Verdict;

/// Which concurrencies to try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ramp {
    /// Doubling from `start`, at most `max`, then bisection to `resolution` (0.05 = 5 %).
    Auto {
        start: u32,
        max: u32,
        resolution: f64,
    },
    /// These levels, in order; C* is the highest level below the first failure.
    Fixed(Vec<u32>),
}

/// What a search found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bracket {
    pub c_star: u32,
    pub last_pass: u32,
    /// `None` when no tried level failed.
    pub first_fail: Option<u32>,
}

/// The next level to measure given the verdicts so far, or `None` when the search is over.
pub fn next_level(ramp: &Ramp, verdicts: &BTreeMap<u32, Verdict>) -> Option<u32> {
    next_level_guided(ramp, verdicts, &BTreeMap::new())
}

/// [`next_level`], interpolating between the bracket's ends where `loads` (a level's binding
/// percentile over its limit; above 1 fails) knows both.
pub fn next_level_guided(
    ramp: &Ramp,
    verdicts: &BTreeMap<u32, Verdict>,
    loads: &BTreeMap<u32, f64>,
) -> Option<u32> {
    let passes = |c: &u32| verdicts.get(c) == Some(&Verdict::Pass);
    match ramp {
        Ramp::Fixed(levels) => {
            for &level in levels {
                match verdicts.get(&level) {
                    None => return Some(level),
                    Some(Verdict::Pass) => continue,
                    Some(_) => return None,
                }
            }
            None
        }
        Ramp::Auto {
            start,
            max,
            resolution,
        } => {
            let (start, max) = ((*start).max(1), (*max).max(1));
            // Growth phase: the doubling sequence until a level does not pass.
            let mut c = start.min(max);
            loop {
                match verdicts.get(&c) {
                    None => return Some(c),
                    Some(Verdict::Pass) if c >= max => return None,
                    Some(Verdict::Pass) => c = (c * 2).min(max),
                    Some(_) => break,
                }
            }
            // Bisection between the highest pass below the lowest fail and that fail.
            let fail = *verdicts.iter().find(|(_, v)| **v != Verdict::Pass)?.0;
            let low = verdicts
                .keys()
                .copied()
                .filter(|k| *k < fail && passes(k))
                .max()
                .unwrap_or(0);
            let width = ((resolution * f64::from(low)).floor() as u32).max(1);
            if fail - low <= width {
                return None;
            }
            let span = f64::from(fail - low);
            let mid = match (loads.get(&low), loads.get(&fail)) {
                (Some(&at_low), Some(&at_fail))
                    if at_low.is_finite() && at_fail.is_finite() && at_fail > at_low =>
                {
                    let guess = f64::from(low) + (1.0 - at_low) / (at_fail - at_low) * span;
                    let margin = (span / 8.0).max(1.0);
                    guess
                        .clamp(f64::from(low) + margin, f64::from(fail) - margin)
                        .round() as u32
                }
                _ => low + (fail - low) / 2,
            };
            Some(mid.clamp(low + 1, fail - 1).max(1))
        }
    }
}

/// C* and its bracket from the verdicts.
pub fn bracket(verdicts: &BTreeMap<u32, Verdict>) -> Bracket {
    let first_fail = verdicts
        .iter()
        .find(|(_, v)| **v != Verdict::Pass)
        .map(|(c, _)| *c);
    let last_pass = verdicts
        .iter()
        .filter(|(c, v)| **v == Verdict::Pass && first_fail.is_none_or(|f| **c < f))
        .map(|(c, _)| *c)
        .max()
        .unwrap_or(0);
    Bracket {
        c_star: last_pass,
        last_pass,
        first_fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a server whose true C* is `truth`.
    fn simulate(ramp: &Ramp, truth: u32) -> (Bracket, Vec<u32>) {
        let mut verdicts = BTreeMap::new();
        let mut tried = Vec::new();
        while let Some(c) = next_level(ramp, &verdicts) {
            assert!(!verdicts.contains_key(&c), "level {c} measured twice");
            tried.push(c);
            verdicts.insert(
                c,
                if c <= truth {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
            );
            assert!(tried.len() < 40, "search does not end");
        }
        (bracket(&verdicts), tried)
    }

    #[test]
    fn doubles_then_bisects_to_the_resolution() {
        let ramp = Ramp::Auto {
            start: 1,
            max: 4096,
            resolution: 0.05,
        };
        for truth in [1, 7, 45, 140, 450, 700, 1000] {
            let (found, tried) = simulate(&ramp, truth);
            assert!(found.c_star <= truth, "never above the truth");
            let fail = found.first_fail.unwrap();
            assert!(fail > truth);
            assert!(f64::from(fail - found.c_star) <= (0.05 * f64::from(found.c_star)).max(1.0));
            // log2(truth) doubling steps + log2(1/resolution) bisection steps, roughly.
            assert!(
                tried.len() <= 2 * (f64::from(truth).log2() as usize) + 8,
                "{truth}: {tried:?}"
            );
        }
        let (none, _) = simulate(&ramp, 0);
        assert_eq!(none.c_star, 0);
        let (capped, _) = simulate(
            &Ramp::Auto {
                start: 1,
                max: 64,
                resolution: 0.05,
            },
            1000,
        );
        assert_eq!(capped.c_star, 64);
        assert_eq!(capped.first_fail, None);
    }

    /// A server whose binding latency is flat until `knee`, then linear: load(c) = 0.5 below
    /// the knee, rising to 1 at `truth`.
    fn simulate_guided(ramp: &Ramp, knee: f64, truth: u32) -> (Bracket, Vec<u32>) {
        let load = |c: u32| {
            let c = f64::from(c);
            if c <= knee {
                0.5
            } else {
                0.5 + 0.5 * (c - knee) / (f64::from(truth) + 0.5 - knee)
            }
        };
        let (mut verdicts, mut loads, mut tried) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
        while let Some(c) = next_level_guided(ramp, &verdicts, &loads) {
            assert!(!verdicts.contains_key(&c), "level {c} measured twice");
            tried.push(c);
            let verdict = if load(c) <= 1.0 {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            verdicts.insert(c, verdict);
            loads.insert(c, load(c));
            assert!(tried.len() < 40, "search does not end");
        }
        (bracket(&verdicts), tried)
    }

    #[test]
    fn interpolation_finds_the_same_bracket_in_fewer_steps() {
        let ramp = Ramp::Auto {
            start: 8,
            max: 4096,
            resolution: 0.05,
        };
        let (mut guided_steps, mut plain_steps) = (0, 0);
        for (knee, truth) in [
            (20.0, 45),
            (100.0, 140),
            (200.0, 280),
            (10.0, 700),
            (300.0, 310),
        ] {
            let (found, tried) = simulate_guided(&ramp, knee, truth);
            assert!(found.c_star <= truth, "never above the truth");
            let fail = found.first_fail.unwrap();
            assert!(fail > truth);
            assert!(f64::from(fail - found.c_star) <= (0.05 * f64::from(found.c_star)).max(1.0));
            guided_steps += tried.len();
            plain_steps += simulate(&ramp, truth).1.len();
        }
        assert!(
            guided_steps < plain_steps,
            "guided {guided_steps} steps, plain {plain_steps}"
        );
    }

    #[test]
    fn fixed_levels_stop_at_the_first_failure() {
        let ramp = Ramp::Fixed(vec![8, 16, 32, 64]);
        let (found, tried) = simulate(&ramp, 20);
        assert_eq!(tried, vec![8, 16, 32]);
        assert_eq!((found.c_star, found.first_fail), (16, Some(32)));
    }
}

//! The C* error bands predictions carry, built from the held-out sweeps, and how often they
//! hold for a deployment they were not built on.
//!
//! A band is the split-conformal interval of the held-out C* errors of one model class, engine
//! profile and step-time basis: with the n errors sorted, the ⌊0.1 (n + 1)⌋-th and the
//! ⌈0.9 (n + 1)⌉-th. If a new sweep's error is exchangeable with those n, it falls between the
//! two with odds of at least 80 % whatever their distribution. The 10th and 90th percentiles of
//! the same errors, which the bands were before, are too narrow for that: built on a few dozen
//! sweeps they held for 71 % of deployments left out of them (see [`coverage`]). A group of
//! fewer than [`MIN_BAND_SWEEPS`] sweeps cannot bound 80 % this way and gets no band of its own;
//! its predictions take a related band and say so (`catalog::band::band_for`).
//!
//! Sweeps are not quite exchangeable: one deployment measured at several prompt lengths, and
//! scored at two SLOs, errs alike. [`coverage`] therefore checks the bands by leaving one
//! deployment out at a time — what a buyer's prediction of a deployment nobody measured is.

use std::collections::BTreeMap;

use serde::Serialize;

use super::cstar::SweepCStar;
use super::score::ErrorStats;
use super::{silicon, SourceScore};
use crate::catalog::band::ErrorBand;

/// The odds a band is built for.
pub const BAND_COVERAGE: f64 = 0.8;

pub use crate::catalog::band::MIN_BAND_SWEEPS;

/// The 1-based ranks of the band's ends among `n` sorted errors, if `n` can carry a band.
fn conformal_ranks(n: usize) -> Option<(usize, usize)> {
    let tail = (1.0 - BAND_COVERAGE) / 2.0;
    let low = (tail * (n as f64 + 1.0) + 1e-9).floor() as usize;
    let high = ((1.0 - tail) * (n as f64 + 1.0) - 1e-9).ceil() as usize;
    (low >= 1 && high <= n).then_some((low, high))
}

/// The split-conformal interval of `errors` (any order) at [`BAND_COVERAGE`]; `None` for fewer
/// than [`MIN_BAND_SWEEPS`].
pub fn conformal_interval(errors: &[f64]) -> Option<(f64, f64)> {
    let (low, high) = conformal_ranks(errors.len())?;
    let mut sorted = errors.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some((sorted[low - 1], sorted[high - 1]))
}

/// The 10th and 90th percentile of `errors`: the rule the bands followed before, kept to show
/// what it covers.
fn percentile_interval(errors: &[f64]) -> Option<(f64, f64)> {
    ErrorStats::of(errors).map(|stats| (stats.p10, stats.p90))
}

/// The lowest a band's lower end goes: an error of −100 % (predicted nothing) bounds nothing.
const LOWEST_ERROR: f64 = -0.95;

/// The deployment a sweep measured: its name without the prompt and output lengths (every
/// source names a sweep's lengths as one `INxOUT` field).
pub fn deployment_of(sweep: &str) -> String {
    sweep
        .split('|')
        .filter(|field| {
            !field
                .split_once('x')
                .is_some_and(|(a, b)| is_count(a) && is_count(b))
        })
        .collect::<Vec<_>>()
        .join("|")
}

fn is_count(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The held-out sweeps a band rests on, grouped by (model class, engine, basis): every SLO and
/// every bracket, disaggregated deployments left out (their C* is not an instance's).
fn held_out_groups<'a>(scores: &[&'a SourceScore]) -> BTreeMap<Group, Vec<&'a SweepCStar>> {
    let mut groups: BTreeMap<Group, Vec<&SweepCStar>> = BTreeMap::new();
    for score in scores
        .iter()
        .filter(|s| s.model_class != silicon::DISAGGREGATED_CLASS)
    {
        for sweep in &score.c_star_sweeps {
            if sweep.subset == silicon::HELD_OUT {
                groups
                    .entry((
                        score.model_class.clone(),
                        sweep.engine.clone(),
                        sweep.basis_class.clone(),
                    ))
                    .or_default()
                    .push(sweep);
            }
        }
    }
    groups
}

/// The C* error bands of the held-out sweeps in `scores`, per model class, engine and basis
/// class, pooled over the SLOs; `source` says what they were measured on.
pub fn bands(scores: &[&SourceScore], source: &str) -> Vec<ErrorBand> {
    held_out_groups(scores)
        .into_iter()
        .filter_map(|((models, engine, basis), sweeps)| {
            let errors: Vec<f64> = sweeps.iter().map(|s| s.error).collect();
            let (low, high) = conformal_interval(&errors)?;
            let stats = ErrorStats::of(&errors)?;
            Some(ErrorBand {
                models,
                engine,
                basis,
                n: stats.n,
                low: low.max(LOWEST_ERROR),
                high,
                median_abs: stats.median_abs,
                source: source.to_string(),
            })
        })
        .collect()
}

/// How often one group's band holds for deployments it was not built on.
#[derive(Debug, Clone, Serialize)]
pub struct BandCoverage {
    pub models: String,
    pub engine: String,
    pub basis: String,
    /// Held-out sweeps × SLOs scored, and the deployments they come from.
    pub sweeps: usize,
    pub deployments: usize,
    /// Share of those sweeps whose C* error fell inside the band built, as the shipped ones
    /// are, from the group's other deployments.
    pub covered: f64,
    /// The same share taken per deployment and averaged over the deployments, so that one
    /// measured at many lengths counts once.
    pub covered_per_deployment: f64,
    /// The same with bands of the 10th and 90th percentile, per sweep and per deployment.
    pub covered_by_percentiles: f64,
    pub covered_by_percentiles_per_deployment: f64,
}

/// A band's group: model class, engine profile, basis class.
type Group = (String, String, String);

/// One held-out sweep tested against the bands built without its deployment.
struct Tested<'a> {
    deployment: String,
    group: &'a Group,
    conformal: bool,
    percentiles: bool,
}

/// Leave one deployment out: each held-out sweep's C* error against the band built from its
/// group's other deployments (both rules), per group and, last, over every group (`models`
/// and `engine` "all"). Groups with too few other sweeps for a band are not scored.
pub fn coverage(scores: &[&SourceScore]) -> Vec<BandCoverage> {
    let groups = held_out_groups(scores);
    let mut tested: Vec<Tested> = Vec::new();
    for (group, sweeps) in &groups {
        let deployments: Vec<String> = sweeps.iter().map(|s| deployment_of(&s.sweep)).collect();
        for (sweep, deployment) in sweeps.iter().zip(&deployments) {
            let others: Vec<f64> = sweeps
                .iter()
                .zip(&deployments)
                .filter(|(_, d)| *d != deployment)
                .map(|(s, _)| s.error)
                .collect();
            let (Some(band), Some(percentiles)) =
                (conformal_interval(&others), percentile_interval(&others))
            else {
                continue;
            };
            let inside = |(low, high): (f64, f64)| {
                low.max(LOWEST_ERROR) <= sweep.error && sweep.error <= high
            };
            tested.push(Tested {
                deployment: deployment.clone(),
                group,
                conformal: inside(band),
                percentiles: inside(percentiles),
            });
        }
    }
    let mut out: Vec<BandCoverage> = groups
        .keys()
        .filter_map(|group| {
            let mine: Vec<&Tested> = tested.iter().filter(|t| t.group == group).collect();
            let (models, engine, basis) = group.clone();
            summarise(&mine, models, engine, basis)
        })
        .collect();
    let every: Vec<&Tested> = tested.iter().collect();
    out.extend(summarise(&every, "all".into(), "all".into(), "all".into()));
    out
}

/// The coverage of `tested` per sweep and per deployment; `None` when nothing was tested.
fn summarise(
    tested: &[&Tested],
    models: String,
    engine: String,
    basis: String,
) -> Option<BandCoverage> {
    if tested.is_empty() {
        return None;
    }
    let share = |pick: fn(&Tested) -> bool, of: &[&Tested]| {
        of.iter().filter(|t| pick(t)).count() as f64 / of.len() as f64
    };
    // A deployment is named within its group: two groups' sweeps of one deployment (the same
    // run timed on measured operators and on the roofline) are two deployments here.
    let mut by_deployment: BTreeMap<(&Group, &str), Vec<&Tested>> = BTreeMap::new();
    for t in tested {
        by_deployment
            .entry((t.group, t.deployment.as_str()))
            .or_default()
            .push(t);
    }
    let per_deployment = |pick: fn(&Tested) -> bool| {
        by_deployment.values().map(|d| share(pick, d)).sum::<f64>() / by_deployment.len() as f64
    };
    Some(BandCoverage {
        models,
        engine,
        basis,
        sweeps: tested.len(),
        deployments: by_deployment.len(),
        covered: share(|t| t.conformal, tested),
        covered_per_deployment: per_deployment(|t| t.conformal),
        covered_by_percentiles: share(|t| t.percentiles, tested),
        covered_by_percentiles_per_deployment: per_deployment(|t| t.percentiles),
    })
}

/// `hardware/bands.toml` text for `bands`.
pub fn bands_toml(bands: &[ErrorBand]) -> String {
    let mut text = format!(
        "# How wrong predicted C* may be, per model class, engine profile and step-time basis: the\n\
         # split-conformal 80 % interval of (predicted − measured) / measured C* over held-out sweeps\n\
         # of public measurements (of n sorted errors, the floor(0.1 (n + 1))-th and the\n\
         # ceil(0.9 (n + 1))-th; groups of fewer than {MIN_BAND_SWEEPS} get none). Written by `capplan validate\n\
         # --write-bands hardware/bands.toml`; predictions show the range the measured C* is\n\
         # expected in with 80 % odds, and `capplan validate` prints how often these bands held for\n\
         # deployments left out of them.\n",
    );
    for band in bands {
        text.push_str(&format!(
            "\n[[band]]\nmodels = \"{}\"\nengine = \"{}\"\nbasis = \"{}\"\nn = {}\nlow = {:.4}\nhigh = {:.4}\nmedian_abs = {:.4}\nsource = \"{}\"\n",
            band.models, band.engine, band.basis, band.n, band.low, band.high, band.median_abs, band.source
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformal_ranks_widen_small_samples_and_refuse_too_few() {
        // The catalog's minimum is the first n whose upper rank ⌈0.9 (n + 1)⌉ is at most n.
        assert_eq!(
            (1..100).find(|&n| conformal_ranks(n).is_some()),
            Some(MIN_BAND_SWEEPS)
        );
        // Nine errors: ranks ⌊1.0⌋ = 1 and ⌈9.0⌉ = 9, the extremes.
        assert_eq!(conformal_ranks(9), Some((1, 9)));
        assert_eq!(conformal_ranks(8), None);
        // 19: ranks 2 and 18 — the 10th and 90th percentile would sit at 2.8 and 17.2.
        assert_eq!(conformal_ranks(19), Some((2, 18)));
        assert_eq!(conformal_ranks(100), Some((10, 91)));
        let errors: Vec<f64> = (1..=19).map(f64::from).rev().collect();
        assert_eq!(conformal_interval(&errors), Some((2.0, 18.0)));
        assert_eq!(conformal_interval(&errors[..8]), None);
    }

    #[test]
    fn conformal_intervals_cover_their_odds_on_exchangeable_errors() {
        // Errors drawn i.i.d.: the band of the first n holds for the next one with odds of at
        // least 80 % (and under 80 % + 2/(n + 1)).
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [9usize, 20, 50] {
            let trials = 4000;
            let mut hits = 0;
            for _ in 0..trials {
                let draws: Vec<f64> = (0..=n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let (low, high) = conformal_interval(&draws[..n]).expect("n ≥ 9");
                hits += usize::from(low <= draws[n] && draws[n] <= high);
            }
            let share = hits as f64 / trials as f64;
            // Binomial standard error at 4000 trials is under 0.7 %; three of them.
            let exact = (conformal_ranks(n).map_or(0, |(l, h)| h - l) as f64) / (n as f64 + 1.0);
            assert!(
                (share - exact).abs() < 0.021,
                "n {n}: {share} against {exact}"
            );
            assert!(exact >= BAND_COVERAGE);
        }
    }

    #[test]
    fn coverage_per_deployment_counts_each_deployment_once() {
        // Deployment a: three sweeps, all inside the conformal band; b: one, outside both.
        let group: Group = ("dense".into(), "vllm".into(), "measured operators".into());
        let tested = |deployment: &str, conformal: bool, percentiles: bool| Tested {
            deployment: deployment.into(),
            group: &group,
            conformal,
            percentiles,
        };
        let all = [
            tested("a", true, true),
            tested("a", true, false),
            tested("a", true, true),
            tested("b", false, false),
        ];
        let refs: Vec<&Tested> = all.iter().collect();
        let c = summarise(&refs, "m".into(), "e".into(), "b".into()).expect("tested");
        assert_eq!((c.sweeps, c.deployments), (4, 2));
        assert!((c.covered - 0.75).abs() < 1e-12);
        assert!((c.covered_per_deployment - 0.5).abs() < 1e-12);
        assert!((c.covered_by_percentiles - 0.5).abs() < 1e-12);
        // a: 2 of 3, b: 0 of 1.
        assert!((c.covered_by_percentiles_per_deployment - 1.0 / 3.0).abs() < 1e-12);
        assert!(summarise(&[], "m".into(), "e".into(), "b".into()).is_none());
    }

    #[test]
    fn a_deployment_is_its_sweep_without_the_lengths() {
        assert_eq!(
            deployment_of("vllm||meta-llama/Llama-3.1-70B|h200_sxm|fp8|tp8dp1ep1|8192x1024|agg"),
            "vllm||meta-llama/Llama-3.1-70B|h200_sxm|fp8|tp8dp1ep1|agg"
        );
        assert_eq!(
            deployment_of("llama-3-70b|H100-SXM|4|fp16|2000x200"),
            "llama-3-70b|H100-SXM|4|fp16"
        );
        // A field that only looks like lengths in part stays.
        assert_eq!(deployment_of("a|8x7b|1x"), "a|8x7b|1x");
    }
}

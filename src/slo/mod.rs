//! Service-level objectives: latency limits at a percentile, and whether one SLO proves another.

pub mod duration;
pub mod percentile;

use serde::{Deserialize, Serialize};

pub use duration::{format_seconds, parse_positive_seconds, parse_seconds};
pub use percentile::Percentile;

/// Latency limits a serving instance must meet: TTFT (infinite when only E2E is limited, as
/// for an image service), TPOT when given, both at one statistic (`percentile`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// `null` in JSON when there is no TTFT limit.
    #[serde(with = "no_limit_is_null")]
    pub ttft_s: f64,
    pub tpot_s: Option<f64>,
    /// End-to-end latency limit per request, when the SLO has one (a non-LLM service, a
    /// non-streaming API: p99 ≤ 200 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_s: Option<f64>,
    pub percentile: Percentile,
}

impl Slo {
    /// Why a capacity measured under `self` does not prove capacity under `asked`, or `None`
    /// when it does. Capacity measured under a stricter SLO is a lower bound under a looser
    /// one; the reverse is not: a point measured at TTFT < 3.15 s does not prove < 3 s.
    pub fn why_not_proof_of(&self, asked: &Slo) -> Option<String> {
        const EPS: f64 = 1e-9;
        if !self.percentile.proves(asked.percentile) {
            return Some(format!(
                "limits are on the {} and do not prove limits on the {}",
                self.percentile, asked.percentile
            ));
        }
        if self.ttft_s > asked.ttft_s + EPS {
            return Some(format!(
                "measured at TTFT ≤ {}, which does not prove TTFT ≤ {}",
                format_seconds(self.ttft_s),
                format_seconds(asked.ttft_s)
            ));
        }
        if let Some(want) = asked.e2e_s {
            match self.e2e_s {
                Some(have) if have <= want + EPS => {}
                Some(have) => {
                    return Some(format!(
                        "measured at E2E ≤ {}, which does not prove E2E ≤ {}",
                        format_seconds(have),
                        format_seconds(want)
                    ))
                }
                None => {
                    return Some(format!(
                        "measured without an E2E limit, which does not prove E2E ≤ {}",
                        format_seconds(want)
                    ))
                }
            }
        }
        if let Some(want) = asked.tpot_s {
            match self.tpot_s {
                None => {
                    return Some(format!(
                        "measured without a TPOT limit, which does not prove TPOT ≤ {}",
                        format_seconds(want)
                    ))
                }
                Some(have) if have > want + EPS => {
                    return Some(format!(
                        "measured at TPOT ≤ {}, which does not prove TPOT ≤ {}",
                        format_seconds(have),
                        format_seconds(want)
                    ))
                }
                Some(_) => {}
            }
        }
        None
    }

    /// `TTFT ≤ 3.15 s, TPOT ≤ 100 ms (mean)`.
    pub fn describe(&self) -> String {
        let mut limits = Vec::new();
        if self.ttft_s.is_finite() {
            limits.push(format!("TTFT ≤ {}", format_seconds(self.ttft_s)));
        }
        if let Some(tpot) = self.tpot_s {
            limits.push(format!("TPOT ≤ {}", format_seconds(tpot)));
        }
        if let Some(e2e) = self.e2e_s {
            limits.push(format!("E2E ≤ {}", format_seconds(e2e)));
        }
        if limits.is_empty() {
            limits.push("no TTFT, TPOT or E2E limit".into());
        }
        format!("{} ({})", limits.join(", "), self.percentile)
    }
}

/// An infinite limit (none) as JSON `null` and back: JSON has no infinity.
mod no_limit_is_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f64(*value)
        } else {
            serializer.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_ttft_limit_round_trips_through_json() {
        let latency_only = Slo {
            ttft_s: f64::INFINITY,
            tpot_s: None,
            percentile: Percentile::P(99.0),
            e2e_s: None,
        };
        let json = serde_json::to_string(&latency_only).unwrap();
        assert!(json.contains("\"ttft_s\":null"), "{json}");
        let back: Slo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, latency_only);
        assert_eq!(latency_only.describe(), "no TTFT, TPOT or E2E limit (p99)");
        let image_service = Slo {
            e2e_s: Some(0.1),
            ..latency_only
        };
        let json = serde_json::to_string(&image_service).unwrap();
        assert_eq!(serde_json::from_str::<Slo>(&json).unwrap(), image_service);
        assert_eq!(image_service.describe(), "E2E ≤ 100 ms (p99)");
        // An E2E limit proves only a looser one; a point without one proves none.
        assert!(image_service
            .why_not_proof_of(&Slo {
                e2e_s: Some(0.2),
                ..image_service
            })
            .is_none());
        assert!(image_service
            .why_not_proof_of(&Slo {
                e2e_s: Some(0.05),
                ..image_service
            })
            .is_some());
        assert!(latency_only.why_not_proof_of(&image_service).is_some());
        let both: Slo =
            serde_json::from_str(r#"{"ttft_s":3.0,"tpot_s":0.1,"percentile":"mean"}"#).unwrap();
        assert_eq!(both.describe(), "TTFT ≤ 3 s, TPOT ≤ 100 ms (mean)");
    }

    fn slo(ttft: f64, tpot: Option<f64>, percentile: Percentile) -> Slo {
        Slo {
            ttft_s: ttft,
            tpot_s: tpot,
            percentile,
            e2e_s: None,
        }
    }

    #[test]
    fn stricter_proves_looser_only() {
        let measured = slo(3.15, Some(0.1), Percentile::Mean);
        assert!(measured
            .why_not_proof_of(&slo(3.15, Some(0.1), Percentile::Mean))
            .is_none());
        assert!(measured
            .why_not_proof_of(&slo(5.0, None, Percentile::Mean))
            .is_none());
        let why = measured
            .why_not_proof_of(&slo(3.0, Some(0.1), Percentile::Mean))
            .unwrap();
        assert!(why.contains("3.15 s") && why.contains("3 s"), "{why}");
        let why = measured
            .why_not_proof_of(&slo(3.15, Some(0.05), Percentile::Mean))
            .unwrap();
        assert!(why.contains("TPOT"), "{why}");
        assert!(measured
            .why_not_proof_of(&slo(3.15, Some(0.1), Percentile::P(90.0)))
            .is_some());
        let without_tpot = slo(3.0, None, Percentile::Mean);
        assert!(without_tpot
            .why_not_proof_of(&slo(3.0, Some(0.1), Percentile::Mean))
            .is_some());
    }
}

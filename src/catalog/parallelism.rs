//! How one serving instance spreads a model over its cards: tensor parallelism (each layer's
//! matrices split over `tp` cards), pipeline parallelism (the layers cut into `pp` stages),
//! attention data parallelism (`dp` replicas of the attention, each with its own batch and
//! KV cache, sharing the experts) and expert parallelism (the routed experts spread over `ep`
//! ranks).
//!
//! The convention is the one the engines and NVIDIA AIConfigurator's measured deployments use:
//! the experts run on the same `tp × dp` cards the attention runs on, split `ep` ways by expert
//! and `moe_tp = tp × dp / ep` ways inside each expert; the instance has `tp × dp × pp` cards.
//! So `TP8` is eight cards with every expert split eight ways, `TP8 EP8` eight cards with
//! whole experts on each, and `DP8 EP8` eight attention replicas with whole experts on each
//! card (DeepSeek's wide-EP decode).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Model;

/// The parallel layout of one instance. `Parallelism::tensor(tp)` is what capplan planned
/// before multi-dimensional layouts, and what every layout without the other axes still is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Parallelism {
    pub tp: u32,
    pub pp: u32,
    /// Attention data-parallel replicas.
    pub dp: u32,
    /// Expert-parallel ranks (1: every card holds a slice of every expert).
    pub ep: u32,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism::tensor(1)
    }
}

impl Parallelism {
    /// `tp` cards with every layer split over them.
    pub const fn tensor(tp: u32) -> Parallelism {
        Parallelism {
            tp,
            pp: 1,
            dp: 1,
            ep: 1,
        }
    }

    /// Cards one instance occupies.
    pub fn cards(&self) -> u32 {
        self.tp * self.dp * self.pp
    }

    /// Cards one pipeline stage occupies (the experts' group).
    pub fn stage_cards(&self) -> u32 {
        self.tp * self.dp
    }

    /// Ways each expert's matrices are split.
    pub fn moe_tp(&self) -> u32 {
        (self.stage_cards() / self.ep.max(1)).max(1)
    }

    /// `8 × H200` for plain tensor parallelism, `16 × H200 (DP16 EP16)` otherwise.
    pub fn on(&self, card: &str) -> String {
        if self.is_tensor_only() {
            format!("{} × {card}", self.tp)
        } else {
            format!("{} × {card} ({self})", self.cards())
        }
    }

    /// Whether this is plain tensor parallelism.
    pub fn is_tensor_only(&self) -> bool {
        self.pp == 1 && self.dp == 1 && self.ep == 1
    }

    /// Why this layout cannot split `model`, if it cannot: a size of zero, more stages than
    /// layers, more expert ranks than experts or experts that do not divide evenly, attention
    /// replicas or expert ranks for a dense model, or an expert group that does not divide
    /// the stage's cards.
    pub fn problem(&self, model: &Model) -> Option<String> {
        for (name, value) in [
            ("tp", self.tp),
            ("pp", self.pp),
            ("attention dp", self.dp),
            ("ep", self.ep),
        ] {
            if value == 0 {
                return Some(format!("{name} must be at least 1"));
            }
        }
        if self.pp > 1 && self.pp > model.layers {
            return Some(format!(
                "pp {} is more pipeline stages than {}'s {} layers",
                self.pp, model.name, model.layers
            ));
        }
        let experts = model.experts.filter(|&e| e > 1);
        match experts {
            None if self.ep > 1 => {
                return Some(format!(
                    "ep {}: {} is a dense model, it has no experts to spread",
                    self.ep, model.name
                ))
            }
            None if self.dp > 1 => {
                return Some(format!(
                    "attention dp {}: {} is a dense model; replicate it as {} instances instead",
                    self.dp, model.name, self.dp
                ))
            }
            Some(experts) if self.ep > experts => {
                return Some(format!(
                    "ep {} is more expert ranks than {}'s {experts} experts",
                    self.ep, model.name
                ))
            }
            Some(experts) if !experts.is_multiple_of(self.ep) => {
                return Some(format!(
                    "ep {} does not divide {}'s {experts} experts",
                    self.ep, model.name
                ))
            }
            _ => {}
        }
        if !self.stage_cards().is_multiple_of(self.ep) {
            return Some(format!(
                "ep {} does not divide the {} cards of a stage (tp {} × attention dp {})",
                self.ep,
                self.stage_cards(),
                self.tp,
                self.dp
            ));
        }
        None
    }

    /// Every layout of `cards` cards worth planning for `model`: tensor parallelism alone,
    /// and for a mixture of experts whole experts per card (EP over all the cards, with the
    /// attention split over them or replicated per card), and — when one stage would not
    /// fit a node — pipeline stages of a node each. Sizes that do not divide the model are
    /// left out.
    pub fn candidates(model: &Model, cards: u32, cards_per_node: u32) -> Vec<Parallelism> {
        let mut out = vec![Parallelism::tensor(cards)];
        if model.experts.is_some_and(|e| e > 1) && cards > 1 {
            out.push(Parallelism {
                ep: cards,
                ..Parallelism::tensor(cards)
            });
            out.push(Parallelism {
                tp: 1,
                pp: 1,
                dp: cards,
                ep: cards,
            });
        }
        if cards > cards_per_node && cards_per_node > 0 && cards.is_multiple_of(cards_per_node) {
            out.push(Parallelism {
                tp: cards_per_node,
                pp: cards / cards_per_node,
                dp: 1,
                ep: 1,
            });
        }
        out.retain(|p| p.problem(model).is_none());
        out.dedup();
        out
    }
}

/// Workers of each kind in one disaggregated deployment: `prefill` workers compute prompts
/// and hand their KV caches to `decode` workers, each worker one instance of a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdSplit {
    pub prefill: u32,
    pub decode: u32,
}

impl PdSplit {
    /// Why this split cannot run, if it cannot (a pool without workers).
    pub fn problem(&self) -> Option<String> {
        (self.prefill == 0 || self.decode == 0).then(|| {
            format!(
                "a disaggregated split needs at least one worker of each kind, not {}P:{}D",
                self.prefill, self.decode
            )
        })
    }
}

impl std::str::FromStr for PdSplit {
    type Err = crate::error::InputError;

    /// `1:3` or `1P:3D`: prefill workers, then decode workers.
    fn from_str(text: &str) -> Result<PdSplit, Self::Err> {
        let bad = || {
            crate::error::InputError::value(format!(
                "'{text}' is not a prefill:decode split: use two whole numbers above 0, e.g. 1:3"
            ))
        };
        let (prefill, decode) = text.trim().split_once(':').ok_or_else(bad)?;
        let count = |part: &str, suffix: char| -> Result<u32, Self::Err> {
            let part = part.trim();
            let part = part
                .strip_suffix(suffix)
                .or_else(|| part.strip_suffix(suffix.to_ascii_lowercase()))
                .unwrap_or(part);
            part.parse().map_err(|_| bad())
        };
        let split = PdSplit {
            prefill: count(prefill, 'P')?,
            decode: count(decode, 'D')?,
        };
        match split.problem() {
            Some(problem) => Err(crate::error::InputError::value(problem)),
            None => Ok(split),
        }
    }
}

impl fmt::Display for PdSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}P:{}D", self.prefill, self.decode)
    }
}

impl fmt::Display for Parallelism {
    /// `TP8`, `TP8 EP8`, `DP8 EP8`, `TP8 PP2`: the axes beyond one, tensor parallelism always.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dp > 1 && self.tp == 1 {
            write!(f, "DP{}", self.dp)?;
        } else {
            write!(f, "TP{}", self.tp)?;
            if self.dp > 1 {
                write!(f, " DP{}", self.dp)?;
            }
        }
        if self.ep > 1 {
            write!(f, " EP{}", self.ep)?;
        }
        if self.pp > 1 {
            write!(f, " PP{}", self.pp)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn labels_and_card_counts() {
        let wide = Parallelism {
            tp: 1,
            pp: 1,
            dp: 8,
            ep: 8,
        };
        assert_eq!(wide.to_string(), "DP8 EP8");
        assert_eq!(wide.cards(), 8);
        assert_eq!(wide.moe_tp(), 1);
        let piped = Parallelism {
            tp: 8,
            pp: 2,
            dp: 1,
            ep: 1,
        };
        assert_eq!(piped.to_string(), "TP8 PP2");
        assert_eq!(piped.cards(), 16);
        assert_eq!(Parallelism::tensor(4).to_string(), "TP4");
        assert_eq!(Parallelism::tensor(4).moe_tp(), 4);
    }

    #[test]
    fn layouts_that_do_not_divide_the_model_are_named() {
        let catalog = Catalog::shipped().unwrap();
        let r1 = catalog.model("deepseek-r1").unwrap();
        let too_many = Parallelism {
            ep: 512,
            dp: 512,
            tp: 1,
            pp: 1,
        };
        let why = too_many.problem(r1).unwrap();
        assert!(
            why.contains("ep 512") && why.contains("256 experts"),
            "{why}"
        );
        let stages = Parallelism {
            pp: 62,
            ..Parallelism::tensor(1)
        };
        assert!(stages.problem(r1).unwrap().contains("61 layers"));
        let dense = catalog.model("llama-3.1-70b").unwrap();
        let ep = Parallelism {
            ep: 8,
            ..Parallelism::tensor(8)
        };
        assert!(ep.problem(dense).unwrap().contains("dense"));
        let uneven = Parallelism {
            ep: 3,
            ..Parallelism::tensor(8)
        };
        assert!(uneven.problem(r1).unwrap().contains("ep 3"));
        assert!(Parallelism::tensor(0).problem(r1).is_some());
    }

    #[test]
    fn prefill_decode_splits_read_and_refuse_an_empty_pool() {
        let split: PdSplit = "1P:3D".parse().unwrap();
        assert_eq!((split.prefill, split.decode), (1, 3));
        assert_eq!("2:5".parse::<PdSplit>().unwrap().to_string(), "2P:5D");
        let zero = "0:4".parse::<PdSplit>().unwrap_err().to_string();
        assert!(zero.contains("0P:4D"), "{zero}");
        assert!("3"
            .parse::<PdSplit>()
            .unwrap_err()
            .to_string()
            .contains("'3'"));
    }

    #[test]
    fn candidates_for_a_mixture_and_a_dense_model() {
        let catalog = Catalog::shipped().unwrap();
        let r1 = catalog.model("deepseek-r1").unwrap();
        let labels: Vec<String> = Parallelism::candidates(r1, 16, 8)
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(labels, ["TP16", "TP16 EP16", "DP16 EP16", "TP8 PP2"]);
        let dense = catalog.model("llama-3.1-70b").unwrap();
        assert_eq!(Parallelism::candidates(dense, 4, 8).len(), 1);
    }
}

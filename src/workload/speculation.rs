//! Speculative decoding: a cheap drafter proposes a few tokens, the model checks them all in
//! one step and keeps the ones it agrees with.
//!
//! How much it buys depends on the workload (how predictable the replies are) as much as on
//! the drafter, so the acceptance rate travels with the workload. Written
//! `METHOD[:K][@A[,A2,…]]`:
//!
//! - `mtp` — the model's own multi-token-prediction module (DeepSeek-V3/R1, MiniMax-M2.5);
//!   one draft token unless `:K` says more. Without `@A` its acceptance is the 0.85 the
//!   DeepSeek-V3 technical report gives for the second token (§5.4.3: "between 85 % and
//!   90 %"; the lower end), and only for one draft token: further positions were not trained
//!   for and need a stated rate.
//! - `eagle:K@A` — an EAGLE-style draft head (one decoder layer beside the model).
//! - `draft:MODEL:K@A` — a smaller model of the catalog drafting (e.g. `draft:llama-3.1-8b:4@0.7`).
//!
//! `A` is the chance that a draft token is accepted given the ones before it were; one rate
//! stands for every position, a list gives each position its own (the last repeats). A step
//! then yields 1 + a₁ + a₁a₂ + … + a₁⋯a_K tokens per sequence on average — the chained
//! reading AIConfigurator uses for its `nextn_accept_rates`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::catalog::memory::DraftWeights;
use crate::error::InputError;

/// Most draft tokens a step may propose (engines cap it at a handful; 8 is generous).
pub const MAX_DRAFT_TOKENS: u32 = 8;

/// The DeepSeek-V3 technical report's acceptance of the MTP module's one draft token (§5.4.3,
/// "between 85 % and 90 %": the lower end). Also AIConfigurator's default first-position rate.
pub const MTP_PAPER_ACCEPTANCE: f64 = 0.85;

/// Who drafts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "model")]
pub enum Drafter {
    /// The model's multi-token-prediction layers.
    Mtp,
    /// A one-layer draft head (EAGLE, EAGLE-3, Medusa-like).
    Eagle,
    /// Another model of the catalog.
    Draft(String),
}

/// A speculative-decoding set-up and the workload's acceptance of its drafts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speculation {
    pub drafter: Drafter,
    /// Tokens drafted per step (K).
    pub draft_tokens: u32,
    /// Acceptance of each draft position given the ones before it; the last repeats.
    pub acceptance: Vec<f64>,
    /// A draft model's parameters, billions, once looked up in the catalog
    /// ([`Speculation::resolve`]): its weights take memory beside the model's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub draft_params_b: Option<f64>,
}

impl Speculation {
    /// The acceptance of draft position `i` (0-based).
    fn rate(&self, i: usize) -> f64 {
        self.acceptance
            .get(i)
            .or(self.acceptance.last())
            .copied()
            .unwrap_or(0.0)
    }

    /// Tokens a decode step yields per sequence on average: the verified token plus the
    /// draft tokens accepted in a row, 1 + a₁ + a₁a₂ + … + a₁⋯a_K.
    pub fn tokens_per_step(&self) -> f64 {
        let mut total = 1.0;
        let mut chain = 1.0;
        for i in 0..self.draft_tokens as usize {
            chain *= self.rate(i);
            total += chain;
        }
        total
    }
}

impl Speculation {
    /// Checks the drafter against `model` and the catalog: MTP needs a model with MTP
    /// modules, a draft model must be in the catalog and smaller than the model. Fills in what
    /// a draft model weighs.
    pub fn resolve(
        mut self,
        model: &crate::catalog::Model,
        catalog: &crate::catalog::Catalog,
    ) -> Result<Speculation, InputError> {
        match &self.drafter {
            Drafter::Mtp => {
                if model.mtp_modules.unwrap_or(0) == 0 {
                    return Err(InputError::value(format!(
                        "{} has no multi-token-prediction module (its config.json has no \
                         num_nextn_predict_layers); use eagle:K@A or draft:MODEL:K@A",
                        model.name
                    )));
                }
            }
            Drafter::Eagle => {}
            Drafter::Draft(name) => {
                let draft = catalog.model(name)?;
                if draft.family != model.family {
                    return Err(InputError::value(format!(
                        "draft model {} is of the {} family and {} of the {} family: a draft \
                         model must share the model's tokenizer (pick one of its family)",
                        draft.name, draft.family, model.name, model.family
                    )));
                }
                if draft.active_params() >= model.active_params() {
                    return Err(InputError::value(format!(
                        "draft model {} ({:.1} B active) is not smaller than {} ({:.1} B): a \
                         drafter must be cheaper than the model it drafts for",
                        draft.name,
                        draft.active_params() / 1e9,
                        model.name,
                        model.active_params() / 1e9
                    )));
                }
                self.draft_params_b = Some(draft.params() / 1e9);
            }
        }
        Ok(self)
    }

    /// What the drafter adds to the weights in memory.
    pub fn draft_weights(&self) -> DraftWeights {
        match (&self.drafter, self.draft_params_b) {
            (Drafter::Mtp, _) => DraftWeights::Mtp,
            (Drafter::Eagle, _) => DraftWeights::Head,
            (Drafter::Draft(_), Some(billions)) => DraftWeights::Model(billions),
            (Drafter::Draft(_), None) => DraftWeights::None,
        }
    }

    /// What `speculation` adds to the weights in memory: nothing without a drafter.
    pub fn draft_weights_of(speculation: Option<&Speculation>) -> DraftWeights {
        speculation.map_or(DraftWeights::None, Speculation::draft_weights)
    }

    /// One draft pass's cost in layers of `model`'s decode work: an MTP module or an EAGLE
    /// head is one layer; a draft model its active weights over one layer's.
    pub fn draft_layers(&self, model_active_params: f64, layers: f64) -> f64 {
        match (&self.drafter, self.draft_params_b) {
            (Drafter::Draft(_), Some(params_b)) => {
                params_b * 1e9 / (model_active_params / layers.max(1.0)).max(1.0)
            }
            _ => 1.0,
        }
    }
}

impl fmt::Display for Speculation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let drafter = match &self.drafter {
            Drafter::Mtp => "MTP".to_string(),
            Drafter::Eagle => "EAGLE head".to_string(),
            Drafter::Draft(model) => format!("draft model {model}"),
        };
        let rates: Vec<String> = self.acceptance.iter().map(|a| format!("{a}")).collect();
        write!(
            f,
            "speculative decoding: {drafter}, {} draft token{} accepted at {} → {:.2} tokens per step",
            self.draft_tokens,
            if self.draft_tokens == 1 { "" } else { "s" },
            rates.join(","),
            self.tokens_per_step()
        )
    }
}

impl FromStr for Speculation {
    type Err = InputError;

    /// Reads `mtp`, `mtp:2@0.85,0.3`, `eagle:3@0.7`, `draft:llama-3.1-8b:4@0.6`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let valid = "speculative decoding is METHOD[:K][@A] with METHOD mtp, eagle or \
                     draft:MODEL, K draft tokens (1 to 8) and A the acceptance of a draft token, \
                     0 to 1 (a list gives each position its own): mtp, mtp:2@0.85,0.3, \
                     eagle:3@0.7, draft:llama-3.1-8b:4@0.6";
        let bad = |why: &str| InputError::value(format!("'{text}': {why}; {valid}"));
        let (head, rates) = match text.trim().split_once('@') {
            Some((head, rates)) => (head, Some(rates)),
            None => (text.trim(), None),
        };
        let mut parts = head.split(':');
        let method = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let drafter = match method.as_str() {
            "mtp" => Drafter::Mtp,
            "eagle" | "eagle3" => Drafter::Eagle,
            "draft" => match parts.next().map(str::trim) {
                Some(model) if !model.is_empty() => Drafter::Draft(model.to_string()),
                _ => return Err(bad("a draft model needs its name (draft:MODEL)")),
            },
            _ => return Err(bad("unknown method")),
        };
        let draft_tokens = match parts.next() {
            Some(k) => k
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|k| (1..=MAX_DRAFT_TOKENS).contains(k))
                .ok_or_else(|| bad("the draft tokens must be a whole number from 1 to 8"))?,
            None if drafter == Drafter::Mtp => 1,
            None => return Err(bad("say how many tokens the drafter proposes")),
        };
        if parts.next().is_some() {
            return Err(bad("too many ':' parts"));
        }
        let acceptance =
            match rates {
                Some(rates) => rates
                    .split(',')
                    .map(|r| {
                        crate::workload::prefix::read_share(r)
                            .filter(|a| a.is_finite() && (0.0..=1.0).contains(a))
                            .ok_or_else(|| bad("an acceptance rate must be from 0 to 1"))
                    })
                    .collect::<Result<Vec<f64>, _>>()?,
                None if drafter == Drafter::Mtp && draft_tokens == 1 => vec![MTP_PAPER_ACCEPTANCE],
                None => return Err(bad(
                    "give the acceptance rate (@A): it depends on the workload and the drafter, \
                     and only one MTP token has a published default",
                )),
            };
        if acceptance.len() > draft_tokens as usize {
            return Err(bad("more acceptance rates than draft tokens"));
        }
        Ok(Speculation {
            drafter,
            draft_tokens,
            acceptance,
            draft_params_b: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_per_step_chain_the_acceptance_of_each_position() {
        let one: Speculation = "mtp".parse().unwrap();
        assert_eq!(one.draft_tokens, 1);
        assert!((one.tokens_per_step() - 1.85).abs() < 1e-12);
        // AIConfigurator's fold of [0.85, 0.3]: 1 + 0.85 + 0.85 × 0.3.
        let two: Speculation = "mtp:2@0.85,0.3".parse().unwrap();
        assert!((two.tokens_per_step() - 2.105).abs() < 1e-12);
        // One rate for three positions: 1 + 0.5 + 0.25 + 0.125.
        let eagle: Speculation = "eagle:3@50%".parse().unwrap();
        assert!((eagle.tokens_per_step() - 1.875).abs() < 1e-12);
        let draft: Speculation = "draft:llama-3.1-8b:4@0".parse().unwrap();
        assert_eq!(draft.drafter, Drafter::Draft("llama-3.1-8b".into()));
        assert!((draft.tokens_per_step() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_rate_the_workload_must_give_is_not_guessed() {
        for text in [
            "eagle:3",
            "mtp:3",
            "draft:x:2",
            "mtp:0@0.5",
            "mtp:9@0.5",
            "mtp@1.5",
            "mtp:1@0.5,0.5",
            "medusa:2@0.5",
            "draft@0.5",
        ] {
            let err = text.parse::<Speculation>().unwrap_err().to_string();
            assert!(err.contains(text) && err.contains("METHOD"), "{err}");
        }
    }
}

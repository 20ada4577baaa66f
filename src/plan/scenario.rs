//! Scenario files (`plans/*.toml`): a planning question written down — demand, SLO, candidates,
//! workload for predictions, and cost assumptions — so `capplan solve plans/X.toml` and
//! `capplan compare plans/X.toml` answer it again, the same way, whenever the measurements or
//! prices change.
//!
//! ```toml
//! name = "seed-10000-users"
//! description = "The published report's question, answered with ceilings"
//! [demand]
//! users = 10000            # or: rps = 50
//! think_time = "1s..3s"    # optional
//! [slo]
//! ttft = "3.15s"
//! tpot = "100ms"           # optional
//! percentile = "mean"      # default p90
//! [candidates]
//! models = ["llama-13b"]   # default: every model with capacity points
//! cards = ["A30", "A100-40G"]
//! headroom = 0.2
//! spares = 1
//! predict = false          # default true
//! [workload]               # what predicted rows assume
//! input_tokens = "512"
//! output_tokens = "100..400"
//! prefix_share = 0.3       # share of each prompt already in the prefix cache
//! speculative = "mtp"      # speculative decoding and its acceptance (mtp:2@0.85,0.3, eagle:3@0.7)
//! engine = "vllm"          # engine profile of predictions: vllm, sglang, trtllm, tgi
//! [costs]
//! years = 3
//! power_price = 0.12       # US$ per kWh
//! pue = 1.3
//! card_power = 1.0         # share of TDP drawn
//! cloud = false
//! mix = true
//! inventory = ["8xA100-40G-SXM:10"]
//! ```

use std::path::Path;

use serde::Deserialize;

use super::cost::CostAssumptions;
use crate::error::InputError;
use crate::slo::{parse_positive_seconds, Percentile};
use crate::workload::{PrefixShare, Speculation, ThinkTime, TokenLengths};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    demand: DemandSection,
    #[serde(default)]
    slo: SloSection,
    #[serde(default)]
    candidates: CandidatesSection,
    #[serde(default)]
    workload: WorkloadSection,
    #[serde(default)]
    costs: CostsSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DemandSection {
    users: Option<u64>,
    rps: Option<f64>,
    think_time: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SloSection {
    ttft: Option<String>,
    tpot: Option<String>,
    e2e: Option<String>,
    percentile: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CandidatesSection {
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    cards: Vec<String>,
    headroom: Option<f64>,
    spares: Option<u32>,
    predict: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadSection {
    input_tokens: Option<String>,
    output_tokens: Option<String>,
    prefix_share: Option<f64>,
    speculative: Option<String>,
    engine: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CostsSection {
    years: Option<f64>,
    power_price: Option<f64>,
    pue: Option<f64>,
    card_power: Option<f64>,
    cloud: Option<bool>,
    mix: Option<bool>,
    #[serde(default)]
    inventory: Vec<String>,
}

/// A scenario as read: every field optional where the command line could give it instead.
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    pub users: Option<u64>,
    pub rps: Option<f64>,
    pub think_time: Option<ThinkTime>,
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub percentile: Option<Percentile>,
    pub models: Vec<String>,
    pub cards: Vec<String>,
    pub headroom: Option<f64>,
    pub spares: Option<u32>,
    pub predict: Option<bool>,
    pub input_tokens: Option<TokenLengths>,
    pub output_tokens: Option<TokenLengths>,
    pub prefix_share: Option<PrefixShare>,
    /// Speculative decoding and its acceptance (`mtp`, `eagle:3@0.7`).
    pub speculation: Option<Speculation>,
    /// Engine profile for predicted rows (checked against the catalog when used).
    pub engine: Option<String>,
    pub costs: CostAssumptions,
    pub mix: bool,
    /// `NODE:COUNT` entries, checked against the catalog when used.
    pub inventory: Vec<String>,
}

/// Reads a scenario file; errors name the file (and line) and what is valid.
pub fn read_scenario(path: &Path) -> Result<Scenario, InputError> {
    let location = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
    let file: File = toml::from_str(&text).map_err(|err| {
        let line = err
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        let message = err.message().to_string();
        match line {
            Some(line) => InputError::file(format!("{location}:{line}"), message),
            None => InputError::file(&location, message),
        }
    })?;
    let field = |name: &str, err: InputError| InputError::file(&location, format!("{name}: {err}"));
    let seconds = |name: &str, text: &Option<String>| -> Result<Option<f64>, InputError> {
        text.as_deref()
            .map(|t| parse_positive_seconds(t).map_err(|e| field(name, e)))
            .transpose()
    };
    let parsed = |name: &str, text: &Option<String>| -> Result<Option<TokenLengths>, InputError> {
        text.as_deref()
            .map(|t| t.parse::<TokenLengths>().map_err(|e| field(name, e)))
            .transpose()
    };
    if file.demand.users.is_some() && file.demand.rps.is_some() {
        return Err(InputError::file(
            &location,
            "[demand] gives both users and rps; give one",
        ));
    }
    let defaults = CostAssumptions::default();
    let costs = CostAssumptions {
        years: file.costs.years.unwrap_or(defaults.years),
        power_price_usd_per_kwh: file
            .costs
            .power_price
            .unwrap_or(defaults.power_price_usd_per_kwh),
        pue: file.costs.pue.unwrap_or(defaults.pue),
        card_power_fraction: file
            .costs
            .card_power
            .unwrap_or(defaults.card_power_fraction),
        cloud: file.costs.cloud.unwrap_or(defaults.cloud),
    };
    costs.check().map_err(|e| field("[costs]", e))?;
    Ok(Scenario {
        name: file.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into())
        }),
        description: file.description,
        users: file.demand.users,
        rps: file.demand.rps,
        think_time: file
            .demand
            .think_time
            .as_deref()
            .map(|t| {
                t.parse::<ThinkTime>()
                    .map_err(|e| field("demand.think_time", e))
            })
            .transpose()?,
        ttft_s: seconds("slo.ttft", &file.slo.ttft)?,
        tpot_s: seconds("slo.tpot", &file.slo.tpot)?,
        e2e_s: seconds("slo.e2e", &file.slo.e2e)?,
        percentile: file
            .slo
            .percentile
            .as_deref()
            .map(|p| {
                p.parse::<Percentile>()
                    .map_err(|e| field("slo.percentile", e))
            })
            .transpose()?,
        models: file.candidates.models,
        cards: file.candidates.cards,
        headroom: file.candidates.headroom,
        spares: file.candidates.spares,
        predict: file.candidates.predict,
        input_tokens: parsed("workload.input_tokens", &file.workload.input_tokens)?,
        output_tokens: parsed("workload.output_tokens", &file.workload.output_tokens)?,
        prefix_share: file
            .workload
            .prefix_share
            .map(|share| {
                PrefixShare::checked(Some(share), &share.to_string())
                    .map_err(|e| field("workload.prefix_share", e))
            })
            .transpose()?,
        speculation: file
            .workload
            .speculative
            .as_deref()
            .map(|t| {
                t.parse::<Speculation>()
                    .map_err(|e| field("workload.speculative", e))
            })
            .transpose()?,
        engine: file.workload.engine,
        costs,
        mix: file.costs.mix.unwrap_or(false),
        inventory: file.costs.inventory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> crate::scratch::ScratchFile {
        crate::scratch::ScratchFile::new(name, text)
    }

    #[test]
    fn reads_every_section() {
        let path = write(
            "s.toml",
            r#"
description = "test"
[demand]
users = 10000
think_time = "1s..3s"
[slo]
ttft = "3.15s"
tpot = "100ms"
percentile = "mean"
[candidates]
models = ["llama-13b"]
cards = ["A30"]
headroom = 0.2
predict = false
[workload]
output_tokens = "100..400"
speculative = "eagle:3@0.7"
[costs]
years = 5
cloud = true
mix = true
inventory = ["8xA30-PCIe:3"]
"#,
        );
        let s = read_scenario(&path).unwrap();
        assert_eq!(s.name, "s");
        assert_eq!(
            (s.users, s.ttft_s, s.tpot_s),
            (Some(10000), Some(3.15), Some(0.1))
        );
        assert_eq!(s.percentile, Some(Percentile::Mean));
        assert_eq!(s.think_time.unwrap().mean_s(), 2.0);
        assert_eq!(s.predict, Some(false));
        assert_eq!(s.costs.years, 5.0);
        assert!(s.costs.cloud && s.mix);
        assert_eq!(s.inventory, ["8xA30-PCIe:3"]);
        assert_eq!(
            s.output_tokens,
            Some(TokenLengths::Uniform { min: 100, max: 400 })
        );
        assert_eq!(s.speculation.unwrap().draft_tokens, 3);
    }

    #[test]
    fn mistakes_name_the_file_line_and_field() {
        let path = write("bad.toml", "[demand]\nusers = 10\n[slo]\nttft = \"3x\"\n");
        let err = read_scenario(&path).unwrap_err().to_string();
        assert!(
            err.contains("bad.toml") && err.contains("slo.ttft"),
            "{err}"
        );
        let path = write("typo.toml", "[demand]\nuser = 10\n");
        let err = read_scenario(&path).unwrap_err().to_string();
        assert!(err.contains("typo.toml:2") && err.contains("user"), "{err}");
        let path = write("both.toml", "[demand]\nusers = 10\nrps = 2.0\n");
        assert!(read_scenario(&path)
            .unwrap_err()
            .to_string()
            .contains("one"));
        let path = write("spec.toml", "[workload]\nspeculative = \"eagle:3\"\n");
        let err = read_scenario(&path).unwrap_err().to_string();
        assert!(
            err.contains("spec.toml") && err.contains("workload.speculative"),
            "{err}"
        );
        let path = write("pue.toml", "[costs]\npue = 0.5\n");
        assert!(read_scenario(&path)
            .unwrap_err()
            .to_string()
            .contains("pue"));
    }
}

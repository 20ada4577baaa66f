//! Capacity tables: CSV files directly under `measurements/`, one capacity point a row.
//!
//! A capacity point says: this model on `tp` cards of this card (linked by `interconnect`) held
//! `users_per_instance` users per serving instance within this SLO. Run folders (probe output)
//! live in sub-folders; only the CSV files at the top level are capacity tables. The columns are
//! documented in `measurements/README.md`.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::catalog::band::CStarRange;
use crate::catalog::names::{find, suggestion};
use crate::catalog::{Catalog, Parallelism, PdSplit};
use crate::error::InputError;
use crate::slo::{Percentile, Slo};
use crate::store::import::ImportFormat;
use crate::workload::{Speculation, ThinkTime};

/// Where a capacity number comes from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PointSource {
    Measured,
    Imported,
    Predicted,
}

impl fmt::Display for PointSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PointSource::Measured => "measured",
            PointSource::Imported => "imported",
            PointSource::Predicted => "predicted",
        })
    }
}

/// One row of a capacity table, checked against the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityPoint {
    /// Catalog names (aliases in the file are resolved).
    pub model: String,
    pub card: String,
    pub interconnect: String,
    pub cards_per_node: Option<u32>,
    pub instances_per_node: Option<u32>,
    /// Instances sharing one card (two server processes on one GPU); 1 normally. Each then
    /// has 1/K of the card's memory, and `users_per_instance` is per instance (how they share
    /// its compute is what the measurement shows).
    #[serde(skip_serializing_if = "is_one")]
    pub instances_per_card: u32,
    pub tp: u32,
    /// The whole layout (table columns `pp`, `ep`, `attention_dp`; `tp` is its width).
    #[serde(skip_serializing_if = "Parallelism::is_tensor_only")]
    pub parallel: Parallelism,
    /// C*: the most concurrent users one instance held within the SLO.
    pub users_per_instance: f64,
    pub slo: Slo,
    pub think_time: ThinkTime,
    pub source: PointSource,
    pub note: String,
    /// `file:line` of the row.
    pub origin: String,
    /// Mean end-to-end latency at C*, seconds, when known (fitted runs, predictions, or the
    /// table's `e2e_mean_s` column): what converts users at another think time, or a request
    /// rate, into this point's users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_mean_s: Option<f64>,
    /// Mean output tokens per request of the workload measured (table column
    /// `output_tokens_mean`): what turns requests into tokens for a cost per token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<f64>,
    /// The serving engine measured (table column `engine`), or the engine profile a
    /// prediction modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// For a prediction: the range C* is expected in, from the model's measured error on
    /// held-out public measurements of this engine and card class (`capplan validate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<CStarRange>,
    /// A disaggregated deployment (table column `pd`, `P:D`): P prefill and D decode workers,
    /// each of `parallel`. `users_per_instance` is then per worker — the deployment's users
    /// over its P + D workers — so that a plan prices it by the worker like any instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pd: Option<PdSplit>,
    /// Speculative decoding the deployment ran (table column `speculative`, as
    /// `--speculative` writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<Speculation>,
    /// The benchmark a run imported from measured it with (`aiperf`, `vllm-bench`, …, as
    /// `import --from` names it); `None` for a probe's run and a table. How it started its
    /// users decides the C* it measured at a TTFT limit, so a prediction set beside the point
    /// is measured the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_by: Option<String>,
    /// Requests that benchmark counted per user at the level nearest C*.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_user: Option<f64>,
}

fn is_one(value: &u32) -> bool {
    *value == 1
}

const REQUIRED: [&str; 4] = ["model", "card", "tp", "users_per_instance"];
const OPTIONAL: [&str; 21] = [
    "pp",
    "pd",
    "speculative",
    "ep",
    "attention_dp",
    "ttft_slo_s",
    "instances_per_card",
    "card_memory_gib",
    "interconnect",
    "cards_per_node",
    "instances_per_node",
    "tpot_slo_ms",
    "percentile",
    "think_time_s",
    "source",
    "note",
    "e2e_slo_s",
    "e2e_mean_s",
    "output_tokens_mean",
    "engine",
    "measured_by",
];

/// Reads every `*.csv` directly in `dir` (sorted by name). A missing folder has no points. (Run
/// folders below it are measured curves, [`super::curve`], fitted at the SLO a plan asks for.)
pub fn load_capacity_dir(dir: &Path, catalog: &Catalog) -> Result<Vec<CapacityPoint>, InputError> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir).map_err(|err| {
        InputError::file(dir.display().to_string(), format!("cannot list: {err}"))
    })?;
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "csv"))
        .collect();
    files.sort();
    let mut points = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|err| {
            InputError::file(path.display().to_string(), format!("cannot read: {err}"))
        })?;
        points.extend(parse_capacity_csv(
            &text,
            &path.display().to_string(),
            catalog,
        )?);
    }
    Ok(points)
}

/// Parses one capacity table; `location` names the file in errors and in each point's origin.
pub fn parse_capacity_csv(
    text: &str,
    location: &str,
    catalog: &Catalog,
) -> Result<Vec<CapacityPoint>, InputError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|err| InputError::file(format!("{location}:1"), err.to_string()))?
        .clone();
    for header in headers.iter() {
        if !REQUIRED.contains(&header) && !OPTIONAL.contains(&header) {
            return Err(InputError::file(
                format!("{location}:1"),
                format!(
                    "unknown column '{header}'; capacity tables have {} (required) and {}",
                    REQUIRED.join(", "),
                    OPTIONAL.join(", ")
                ),
            ));
        }
    }
    for required in REQUIRED {
        if !headers.iter().any(|h| h == required) {
            return Err(InputError::file(
                format!("{location}:1"),
                format!(
                    "missing column '{required}' (required: {})",
                    REQUIRED.join(", ")
                ),
            ));
        }
    }
    let column = |name: &str| headers.iter().position(|h| h == name);

    let mut points = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|err| {
            let line = err.position().map_or(0, |p| p.line());
            InputError::file(format!("{location}:{line}"), err.to_string())
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let here = format!("{location}:{line}");
        let cell = |name: &str| -> &str { column(name).and_then(|i| record.get(i)).unwrap_or("") };
        let bad = |message: String| InputError::file(here.clone(), message);

        let model_name = cell("model");
        let model = find(&catalog.models, model_name).ok_or_else(|| {
            bad(format!(
                "unknown model '{model_name}'{}",
                suggestion(&catalog.models, model_name, "model")
            ))
        })?;
        let card_name = cell("card");
        let card = find(&catalog.cards, card_name).ok_or_else(|| {
            bad(format!(
                "unknown card '{card_name}'{}",
                suggestion(&catalog.cards, card_name, "card")
            ))
        })?;

        let number = |name: &str| -> Result<Option<f64>, InputError> {
            let text = cell(name);
            if text.is_empty() {
                return Ok(None);
            }
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .map(Some)
                .ok_or_else(|| bad(format!("{name} '{text}' must be a number above 0")))
        };
        let count = |name: &str| -> Result<Option<u32>, InputError> {
            let text = cell(name);
            if text.is_empty() {
                return Ok(None);
            }
            text.parse::<u32>()
                .ok()
                .filter(|v| *v > 0)
                .map(Some)
                .ok_or_else(|| bad(format!("{name} '{text}' must be a whole number above 0")))
        };
        let required_number = |name: &str| -> Result<f64, InputError> {
            number(name)?.ok_or_else(|| bad(format!("{name} is empty; it is required")))
        };

        let tp = count("tp")?.ok_or_else(|| bad("tp is empty; it is required".into()))?;
        let users_per_instance = required_number("users_per_instance")?;
        let e2e_slo_s = number("e2e_slo_s")?;
        let ttft_s = match (number("ttft_slo_s")?, e2e_slo_s) {
            (Some(ttft), _) => ttft,
            (None, Some(_)) => f64::INFINITY,
            (None, None) => {
                return Err(bad(
                    "ttft_slo_s is empty; it is required unless e2e_slo_s gives the limit".into(),
                ))
            }
        };
        let instances_per_card = count("instances_per_card")?.unwrap_or(1);
        if instances_per_card > 1 && tp != 1 {
            return Err(bad(format!(
                "instances_per_card {instances_per_card} shares one card between instances; tp must be 1, not {tp}"
            )));
        }
        let parallel = Parallelism {
            tp,
            pp: count("pp")?.unwrap_or(1),
            dp: count("attention_dp")?.unwrap_or(1),
            ep: count("ep")?.unwrap_or(1),
        };
        if let Some(problem) = parallel.problem(model) {
            return Err(bad(format!("{problem} (columns tp, pp, attention_dp, ep)")));
        }
        let pd = match cell("pd") {
            "" => None,
            text => {
                let split: PdSplit = text
                    .parse()
                    .map_err(|err: InputError| bad(format!("pd: {err}")))?;
                if let Some(problem) = split.problem() {
                    return Err(bad(format!("pd: {problem}")));
                }
                Some(split)
            }
        };
        // The benchmark whose levels gave this C*: a prediction set beside the point is
        // measured as it measured them.
        let measured_by = match cell("measured_by") {
            "" => None,
            text => Some(
                text.parse::<ImportFormat>()
                    .map_err(|err| bad(format!("measured_by: {err}")))?,
            )
            .filter(|tool| tool.is_benchmark())
            .map(|tool| tool.name().to_string()),
        };
        let speculation = match cell("speculative") {
            "" => None,
            text => Some(
                text.parse::<Speculation>()
                    .map_err(|err| bad(format!("speculative: {err}")))?,
            ),
        };
        // A disaggregated row's users are the deployment's: kept per worker.
        let workers = pd.map_or(1, |split| split.prefill + split.decode);
        let users_per_instance = users_per_instance / f64::from(workers);
        let tpot_s = number("tpot_slo_ms")?.map(|ms| ms / 1e3);
        let e2e_mean_s = number("e2e_mean_s")?;
        let output_tokens = number("output_tokens_mean")?;
        let cards_per_node = count("cards_per_node")?;
        let instances_per_node = count("instances_per_node")?;
        if let Some(cards) = cards_per_node {
            let instances = instances_per_node.unwrap_or(1);
            if parallel.cards() <= cards && instances * parallel.cards() > cards {
                return Err(bad(format!(
                    "{instances} instances of {parallel} need {} cards, more than cards_per_node {cards}",
                    instances * parallel.cards()
                )));
            }
        }
        if let Some(memory) = number("card_memory_gib")? {
            if (memory - card.memory_gib).abs() > 0.5 {
                return Err(bad(format!(
                    "card_memory_gib {memory} disagrees with {} in the catalog ({} GiB); \
                     name the card variant that was measured",
                    card.name, card.memory_gib
                )));
            }
        }
        let percentile = match cell("percentile") {
            "" => Percentile::Mean,
            text => text
                .parse()
                .map_err(|err: InputError| bad(err.to_string()))?,
        };
        let think_time = ThinkTime::parse_table_seconds(cell("think_time_s")).map_err(bad)?;
        let source = match cell("source").to_ascii_lowercase().as_str() {
            "" | "measured" => PointSource::Measured,
            "imported" => PointSource::Imported,
            "predicted" => PointSource::Predicted,
            other => {
                return Err(bad(format!(
                    "source '{other}' must be measured, imported or predicted"
                )))
            }
        };
        let interconnect = match cell("interconnect") {
            "" => card.interconnect.clone(),
            text => text.to_ascii_lowercase(),
        };

        points.push(CapacityPoint {
            model: model.name.clone(),
            card: card.name.clone(),
            interconnect,
            cards_per_node,
            instances_per_node,
            instances_per_card,
            tp,
            parallel,
            users_per_instance,
            slo: Slo {
                ttft_s,
                tpot_s,
                e2e_s: e2e_slo_s,
                percentile,
            },
            think_time,
            source,
            note: cell("note").to_string(),
            e2e_mean_s,
            output_tokens,
            engine: match cell("engine") {
                "" => None,
                text => Some(text.to_string()),
            },
            band: None,
            pd,
            speculation,
            measured_by,
            requests_per_user: None,
            origin: here,
        });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog::shipped().unwrap()
    }

    const HEADER: &str =
        "model,card,tp,users_per_instance,ttft_slo_s,tpot_slo_ms,percentile,think_time_s,source\n";

    #[test]
    fn reads_rows_and_resolves_aliases() {
        let text = format!("{HEADER}LLaMA-13B,A100-40G,4,450,3.15,100,mean,1-3,imported\n");
        let points = parse_capacity_csv(&text, "t.csv", &catalog()).unwrap();
        assert_eq!(points.len(), 1);
        let point = &points[0];
        assert_eq!(point.model, "llama-13b");
        assert_eq!(point.card, "A100-40G-SXM");
        assert_eq!(point.tpot_s_or_zero(), 0.1);
        assert_eq!(point.think_time.mean_s(), 2.0);
        assert_eq!(point.source, PointSource::Imported);
        assert_eq!(point.origin, "t.csv:2");
    }

    #[test]
    fn errors_name_file_line_and_value() {
        let cases = [
            (
                "llama-13b,A3O,4,45,3.15,100,mean,0,measured\n",
                "t.csv:2",
                "A30",
            ),
            (
                "llama-13b,A30,4,-45,3.15,100,mean,0,measured\n",
                "t.csv:2",
                "-45",
            ),
            (
                "llama-13b,A30,4,45,3.15,100,p1000,0,measured\n",
                "t.csv:2",
                "p1000",
            ),
            (
                "llama-13b,A30,4,45,3.15,100,mean,0,guessed\n",
                "t.csv:2",
                "guessed",
            ),
            ("llama-13b,A30,4,45\n", "t.csv:2", "fields"),
        ];
        for (row, location, mentions) in cases {
            let text = format!("{HEADER}{row}");
            let err = parse_capacity_csv(&text, "t.csv", &catalog())
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(location), "{err}");
            assert!(err.contains(mentions), "{err}");
        }
        let err = parse_capacity_csv("model,card,tp,usres\n", "t.csv", &catalog())
            .unwrap_err()
            .to_string();
        assert!(err.contains("t.csv:1") && err.contains("usres"), "{err}");
    }

    #[test]
    fn a_disaggregated_row_is_kept_per_worker_with_its_speculation() {
        let text = "model,card,tp,ep,attention_dp,pd,speculative,users_per_instance,ttft_slo_s\n\
                    deepseek-r1,H200,1,8,8,2:6,mtp,640,2\n";
        let point = &parse_capacity_csv(text, "t.csv", &catalog()).unwrap()[0];
        assert_eq!(
            point.pd,
            Some(PdSplit {
                prefill: 2,
                decode: 6
            })
        );
        // 640 users over 8 workers.
        assert_eq!(point.users_per_instance, 80.0);
        assert_eq!(point.parallel.cards(), 8);
        let speculation = point.speculation.as_ref().unwrap();
        assert!((speculation.tokens_per_step() - 1.85).abs() < 1e-9);
        for (row, says) in [
            ("deepseek-r1,H200,1,8,8,2:0,,640,2", "pd"),
            ("deepseek-r1,H200,1,8,8,,eagle:3,640,2", "speculative"),
        ] {
            let text = format!(
                "model,card,tp,ep,attention_dp,pd,speculative,users_per_instance,ttft_slo_s\n{row}\n"
            );
            let err = parse_capacity_csv(&text, "t.csv", &catalog())
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("t.csv:2") && err.contains(says), "{err}");
        }
    }

    #[test]
    fn a_row_names_the_benchmark_that_measured_it() {
        let header = "model,card,tp,users_per_instance,ttft_slo_s,measured_by\n";
        let read = |tool: &str| {
            parse_capacity_csv(
                &format!("{header}llama-3.1-8b,L4,1,30,1,{tool}\n"),
                "t.csv",
                &catalog(),
            )
        };
        assert_eq!(
            read("AIPerf").unwrap()[0].measured_by.as_deref(),
            Some("aiperf")
        );
        assert_eq!(
            read("vllm_bench").unwrap()[0].measured_by.as_deref(),
            Some("vllm-bench")
        );
        // A table of levels says nothing of how they were measured.
        assert_eq!(read("steps-csv").unwrap()[0].measured_by, None);
        assert_eq!(read("").unwrap()[0].measured_by, None);
        let err = read("locust").unwrap_err().to_string();
        assert!(
            err.starts_with("t.csv:2") && err.contains("measured_by") && err.contains("aiperf"),
            "{err}"
        );
    }

    impl CapacityPoint {
        fn tpot_s_or_zero(&self) -> f64 {
            self.slo.tpot_s.unwrap_or(0.0)
        }
    }
}

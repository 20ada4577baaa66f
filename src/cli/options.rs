//! From parsed arguments to the library's validated options: each argument group's
//! resolution against the catalog, with one clear message for a value that cannot be used.

use std::path::{Path, PathBuf};

use capplan::catalog::{EngineProfile, DEFAULT_ENGINE};
use capplan::catalog::{MemoryOptions, Parallelism, PdSplit};
use capplan::plan::compare::{parse_inventory, CompareOptions};
use capplan::plan::cost::CostAssumptions;
use capplan::plan::scenario::{read_scenario, Scenario};
use capplan::plan::{Demand, SolveRequest};
use capplan::probe::redact::{redact_command, redact_url};
use capplan::probe::run::{Input, LayoutInfo, LoadShape, ProbeConfig, Target};
use capplan::probe::search::Ramp;
use capplan::probe::soak::Soak;
use capplan::report::hardware::Section;
use capplan::sim::calibration_file::Calibrations;
use capplan::sim::capacity::SimPredictor;
use capplan::sim::engine::EngineOptions;
use capplan::sim::measuring_client::{MeasuredAs, MeasuringClient};
use capplan::sim::predict::PredictRequest;
use capplan::slo::{Percentile, Slo};
use capplan::store::import::ImportFormat;
use capplan::workload::dataset::{read_dataset, DatasetLengths};
use capplan::workload::tokens::LocalTokenizer;
use capplan::workload::{Speculation, ThinkTime, TokenLengths, Workload};

use super::{
    CompareArgs, DeploymentFlags, EngineFlags, FitArgs, ImportArgs, ListWhat, MemoryFlags,
    ParallelFlags, PredictArgs, ProbeArgs, SloArgs, SolveArgs, SpeculativeArgs, WorkloadArgs,
};

impl ImportArgs {
    /// What the files do not say, checked against the catalog: the model, the card, the
    /// layout and the deployment behind the measured server.
    pub fn context(
        &self,
        catalog: &capplan::catalog::Catalog,
    ) -> Result<capplan::store::import::run::ImportContext, capplan::InputError> {
        let model = catalog.model(&self.model)?;
        let card = catalog.card(&self.card)?;
        let interconnect = match &self.node {
            Some(name) => catalog.node(name)?.interconnect.clone(),
            None => card.interconnect.clone(),
        };
        let parallel = self.parallel.with_tp(self.tp);
        if let Some(problem) = parallel.problem(model) {
            return Err(capplan::InputError::value(problem));
        }
        let (pd, speculation) = self.deployment.resolve(model, catalog)?;
        Ok(capplan::store::import::run::ImportContext {
            model: model.name.clone(),
            card: card.name.clone(),
            parallel,
            pd,
            speculation,
            interconnect,
            instances_per_node: self.instances_per_node,
            cards_per_node: self.cards_per_node,
            input_tokens: self.input_tokens.clone(),
            output_tokens: self.output_tokens.clone(),
            think_time: self.think_time,
            command: capplan::probe::redact::redact_command(std::env::args()),
        })
    }
}

impl FitArgs {
    pub fn settings(&self) -> capplan::fit::FitSettings {
        capplan::fit::FitSettings {
            ttft_s: self.ttft,
            tpot_s: self.tpot,
            e2e_s: self.e2e,
            percentile: self.percentile,
            max_error_rate: self.max_error_rate,
            think_time: self.think_time,
        }
    }
}

impl DeploymentFlags {
    /// The split and the speculation, each checked (the speculation against `model`).
    pub fn resolve(
        &self,
        model: &capplan::catalog::Model,
        catalog: &capplan::catalog::Catalog,
    ) -> Result<(Option<PdSplit>, Option<Speculation>), capplan::InputError> {
        if let Some(problem) = self.pd.and_then(|pd| pd.problem()) {
            return Err(capplan::InputError::value(problem));
        }
        Ok((self.pd, self.speculative.resolve(None, &[model], catalog)?))
    }
}

impl ParallelFlags {
    /// The layout with tensor-parallel width `tp`.
    pub fn with_tp(&self, tp: u32) -> Parallelism {
        Parallelism {
            tp,
            pp: self.pp,
            dp: self.attention_dp,
            ep: self.ep,
        }
    }
}

impl SpeculativeArgs {
    /// The speculation checked against `models` (every one must be able to run it) and the
    /// catalog.
    pub fn resolve(
        &self,
        given: Option<&Speculation>,
        models: &[&capplan::catalog::Model],
        catalog: &capplan::catalog::Catalog,
    ) -> Result<Option<Speculation>, capplan::InputError> {
        let Some(speculation) = self.speculative.as_ref().or(given) else {
            return Ok(None);
        };
        if models.is_empty() {
            return Err(capplan::InputError::value(
                "speculative decoding: say which models run it (--model or [candidates] \
                 models); a drafter belongs to its model",
            ));
        }
        // Checked against every model; what it resolves to (a draft model's size) is the
        // same for each.
        let mut resolved = None;
        for model in models {
            resolved = Some(speculation.clone().resolve(model, catalog)?);
        }
        Ok(resolved)
    }
}

impl WorkloadArgs {
    /// Input and output lengths from the flags or the dataset.
    pub fn lengths(&self) -> Result<(TokenLengths, TokenLengths), capplan::InputError> {
        self.lengths_or(None, None)
    }

    /// Input and output lengths from the flags or the dataset, else `input`/`output` (a
    /// scenario's), else 512 in and 256 out.
    pub fn lengths_or(
        &self,
        input: Option<TokenLengths>,
        output: Option<TokenLengths>,
    ) -> Result<(TokenLengths, TokenLengths), capplan::InputError> {
        let default_output = output.unwrap_or(TokenLengths::Fixed { tokens: 256 });
        let Some(path) = &self.dataset else {
            return Ok((
                self.input_tokens
                    .clone()
                    .or(input)
                    .unwrap_or(TokenLengths::Fixed { tokens: 512 }),
                self.output_tokens.clone().unwrap_or(default_output),
            ));
        };
        let entries = read_dataset(path)?;
        let tokenizer = match &self.tokenizer {
            Some(file) => Some(LocalTokenizer::load(file)?),
            None => None,
        };
        let lengths = DatasetLengths::of(&entries, tokenizer.as_ref());
        let output = self
            .output_tokens
            .clone()
            .or(lengths.output)
            .unwrap_or(default_output);
        Ok((lengths.input, output))
    }

    /// The workload with this think time.
    pub fn workload(&self, think_time: ThinkTime) -> Result<Workload, capplan::InputError> {
        let (input_tokens, output_tokens) = self.lengths()?;
        Ok(Workload {
            input_tokens,
            output_tokens,
            think_time,
            prefix_share: self.prefix_share.unwrap_or_default(),
            speculation: None,
        })
    }
}

impl EngineFlags {
    /// The engine profile named (default vLLM).
    pub fn profile<'a>(
        &self,
        catalog: &'a capplan::catalog::Catalog,
    ) -> Result<&'a EngineProfile, capplan::InputError> {
        catalog.engine(self.engine.as_deref().unwrap_or(DEFAULT_ENGINE))
    }

    /// `profile`'s scheduler on `card`, with the flags' overrides.
    pub fn options(&self, profile: &EngineProfile, card: &capplan::catalog::Card) -> EngineOptions {
        let mut options = EngineOptions::for_card(profile, card);
        if let Some(max_running) = self.max_running {
            options.max_running = max_running;
        }
        if let Some(budget) = self.token_budget {
            options.token_budget = budget;
        }
        if self.prompt_budget.is_some() {
            options.prompt_budget = self.prompt_budget;
        }
        if let Some(admission) = self.admission {
            options.admission = admission;
        }
        options
    }
}

/// A solve request with everything it needs, from a scenario and flags.
#[derive(Clone)]
pub struct ResolvedSolve {
    pub request: SolveRequest,
    pub predict: bool,
    pub workload: Workload,
    /// The engine profile predicted rows model.
    pub engine: EngineProfile,
    pub scenario: Option<Scenario>,
}

impl ListWhat {
    pub fn section(self) -> Section {
        match self {
            ListWhat::Cards => Section::Cards,
            ListWhat::Nodes => Section::Nodes,
            ListWhat::Models => Section::Models,
            ListWhat::Engines => Section::Engines,
            ListWhat::All => Section::All,
        }
    }
}

impl MemoryFlags {
    /// The memory options, with vLLM's share of memory unless `--mem-util` was given.
    pub fn options(&self) -> MemoryOptions {
        self.options_with(MemoryOptions::default().memory_utilization)
    }

    /// The memory options, with `engine`'s share of memory unless `--mem-util` was given.
    pub fn options_for(&self, engine: &EngineProfile) -> MemoryOptions {
        self.options_with(engine.memory_utilization)
    }

    fn options_with(&self, default_utilization: f64) -> MemoryOptions {
        MemoryOptions {
            dtype: self.dtype,
            kv_dtype: self.kv_dtype,
            memory_utilization: self.mem_util.unwrap_or(default_utilization),
            reserve_gib: self.reserve_gib,
            context_tokens: self.context,
            ..MemoryOptions::default()
        }
    }
}

/// Without a TPOT limit a simulated instance packs users until its running cap, however slowly
/// tokens then stream; predictions for `solve` therefore hold TPOT ≤ 100 ms (10 tokens/s, about
/// reading speed) unless `--tpot` says otherwise. Measured rows keep the SLO they proved.
pub const DEFAULT_PREDICTED_TPOT_S: f64 = 0.1;

impl ProbeArgs {
    /// The run's configuration from the flags, checked against the catalog.
    pub fn config(&self, catalog: &capplan::catalog::Catalog) -> anyhow::Result<ProbeConfig> {
        let model = catalog.model(self.model.as_deref().unwrap_or_default())?;
        let card = catalog.card(self.card.as_deref().unwrap_or_default())?;
        let interconnect = match &self.node {
            Some(name) => catalog.node(name)?.interconnect.clone(),
            None => card.interconnect.clone(),
        };
        if let Some(problem) = self.parallel.with_tp(self.tp).problem(model) {
            return Err(capplan::InputError::value(problem).into());
        }
        let (pd, speculation) = self.deployment.resolve(model, catalog)?;
        let target = match (&self.url, self.sim) {
            (Some(url), _) => Target::Url {
                url: redact_url(url),
                time_scale: self.time_scale,
            },
            (None, _) => Target::Sim {
                time_scale: self.sim_time_scale,
                faults: self
                    .sim_fault
                    .iter()
                    .map(|r| format!("{}:{}", r.kind, r.fraction))
                    .collect(),
            },
        };
        let ramp = if self.concurrency.is_empty() {
            Ramp::Auto {
                start: self.start.max(1),
                max: self.max_concurrency.max(1),
                resolution: self.resolution,
            }
        } else {
            Ramp::Fixed(self.concurrency.clone())
        };
        let input = match (&self.dataset, &self.input_tokens) {
            (Some(path), _) => Input::Dataset { path: path.clone() },
            (None, Some(tokens)) => Input::Synthetic {
                tokens: tokens.clone(),
                prefix_share: self.prefix_share.unwrap_or_default(),
            },
            (None, None) => Input::Synthetic {
                tokens: TokenLengths::Fixed { tokens: 512 },
                prefix_share: self.prefix_share.unwrap_or_default(),
            },
        };
        Ok(ProbeConfig {
            target,
            api: self.api.clone(),
            metrics_url: self.metrics_url.clone(),
            api_template: match (&self.api_template, self.api.as_str()) {
                (Some(path), _) => Some(capplan::probe::api::template::ApiTemplate::load(path)?),
                (None, "template") => {
                    return Err(capplan::InputError::value(
                        "--api template needs --api-template FILE.toml",
                    )
                    .into())
                }
                (None, _) => None,
            },
            served_model: self
                .served_model
                .clone()
                .unwrap_or_else(|| model.name.clone()),
            stream: !self.no_stream,
            layout: LayoutInfo {
                model: model.name.clone(),
                card: card.name.clone(),
                tp: self.tp,
                cards_per_node: self.cards_per_node,
                instances_per_node: self.instances_per_node,
                instances_per_card: self.instances_per_card,
                interconnect,
                pp: self.parallel.pp,
                ep: self.parallel.ep,
                attention_dp: self.parallel.attention_dp,
                pd,
                speculation,
            },
            slo: Slo {
                ttft_s: self.ttft.unwrap_or(f64::INFINITY),
                tpot_s: self.tpot,
                percentile: self.percentile,
                e2e_s: None,
            },
            e2e_limit_s: self.e2e,
            max_error_rate: self.max_error_rate,
            input,
            output_tokens: self.output_tokens.clone(),
            think_time: self.think_time,
            ramp,
            warmup: self.warmup,
            window: self.window,
            timeout_s: self.timeout,
            idle_timeout_s: self.idle_timeout,
            api_key_env: self.api_key_env.clone(),
            tokenizer: self.tokenizer.clone(),
            seed: self.seed,
            load: LoadShape {
                requests_per_user: self.requests_per_user,
                spawn_rate: self.spawn_rate,
                stability: self.stability,
                batch: self.batch_size,
                batch_sizes: self.batch_sizes.clone(),
                knee_jump: (!self.batch_sizes.is_empty()).then_some(self.knee_jump),
                soak: self.duration.map(|duration_s| Soak {
                    duration_s,
                    interval_s: self.interval,
                }),
            },
            client_threads: usize::from(self.client_threads),
            command: redact_command(std::env::args()),
        })
    }
}

impl SloArgs {
    pub fn slo(&self) -> Slo {
        Slo {
            ttft_s: self.ttft,
            tpot_s: self.tpot,
            percentile: self.percentile,
            e2e_s: None,
        }
    }
}

impl PredictArgs {
    pub fn request(
        &self,
        engine: &EngineProfile,
        card: &capplan::catalog::Card,
    ) -> Result<PredictRequest, capplan::InputError> {
        let mut request =
            PredictRequest::new(self.workload.workload(self.think_time)?, self.slo.slo());
        request.max_concurrency = self.max_concurrency;
        request.seed = self.seed;
        request.engine = self.engine.options(engine, card);
        if let Some(tool) = self.measured_as {
            if !tool.is_benchmark() {
                let benchmarks: Vec<&str> = ImportFormat::ALL
                    .into_iter()
                    .filter(|format| format.is_benchmark())
                    .map(ImportFormat::name)
                    .collect();
                return Err(capplan::InputError::value(format!(
                    "--measured-as {tool}: a table of levels says nothing of how they were \
                     measured; name the benchmark ({})",
                    benchmarks.join(", ")
                )));
            }
            if let Some(n) = self
                .requests_per_user
                .filter(|n| !(n.is_finite() && *n >= 1.0))
            {
                return Err(capplan::InputError::value(format!(
                    "--requests-per-user {n}: a benchmark counts at least one request per user"
                )));
            }
            request.measured_as = MeasuredAs {
                client: MeasuringClient::of_tool(Some(tool.name())),
                requests_per_user: self.requests_per_user,
                out_of_step: engine.out_of_step,
            };
        }
        Ok(request)
    }
}

impl SolveArgs {
    /// The request: flags where given, else the scenario's, else defaults.
    pub fn resolve(
        &self,
        catalog: &capplan::catalog::Catalog,
    ) -> Result<ResolvedSolve, capplan::InputError> {
        let scenario = self.scenario.as_deref().map(read_scenario).transpose()?;
        let from = scenario.clone().unwrap_or_default();
        let engine = catalog
            .engine(
                self.engine
                    .as_deref()
                    .or(from.engine.as_deref())
                    .unwrap_or(DEFAULT_ENGINE),
            )?
            .clone();
        let demand = match (self.users, self.rps, from.users, from.rps) {
            (Some(users), _, _, _) => Demand::Users(users),
            (None, Some(rps), _, _) => Demand::Rps(rps),
            (None, None, Some(0), _) => {
                return Err(capplan::InputError::value("[demand] users must be above 0"))
            }
            (None, None, Some(users), _) => Demand::Users(users),
            (None, None, None, Some(rps)) => Demand::Rps(rps),
            (None, None, None, None) => {
                return Err(capplan::InputError::value(
                    "no demand: give --users N or --rps R (or a scenario file with [demand])",
                ))
            }
        };
        let e2e_s = self.e2e.or(from.e2e_s);
        let ttft_s =
            match (self.ttft.or(from.ttft_s), e2e_s) {
                (Some(ttft), _) => ttft,
                // A latency-only SLO (an image service): no TTFT limit.
                (None, Some(_)) => f64::INFINITY,
                (None, None) => return Err(capplan::InputError::value(
                    "no latency limit: give --ttft, e.g. --ttft 3s, or --e2e for a service that \
                     does not stream tokens (or [slo] ttft / e2e in a scenario)",
                )),
            };
        let slo = Slo {
            ttft_s,
            tpot_s: self.tpot.or(from.tpot_s),
            percentile: self
                .percentile
                .or(from.percentile)
                .unwrap_or(Percentile::P(90.0)),
            e2e_s,
        };
        let think_time = self.think_time.or(from.think_time);
        let pick = |flag: &Vec<String>, file: &Vec<String>| {
            if flag.is_empty() {
                file.clone()
            } else {
                flag.clone()
            }
        };
        let (input, output) = self
            .workload
            .lengths_or(from.input_tokens, from.output_tokens)?;
        let models = pick(&self.model, &from.models);
        let speculation = {
            let named = models
                .iter()
                .map(|name| catalog.model(name))
                .collect::<Result<Vec<_>, _>>()?;
            self.workload
                .speculative
                .resolve(from.speculation.as_ref(), &named, catalog)?
        };
        let mut memory = self.memory.options_for(&engine);
        if let Some(speculation) = &speculation {
            memory.drafter = speculation.draft_weights();
        }
        Ok(ResolvedSolve {
            request: SolveRequest {
                demand,
                slo,
                think_time,
                models,
                cards: pick(&self.cards, &from.cards),
                headroom: self.headroom.or(from.headroom).unwrap_or(0.0),
                spares: self.spares.or(from.spares).unwrap_or(0),
                memory,
                speculation: speculation.clone(),
            },
            predict: !self.no_predict && from.predict.unwrap_or(true),
            workload: Workload {
                input_tokens: input,
                output_tokens: output,
                think_time: think_time.unwrap_or(ThinkTime::NONE),
                prefix_share: self
                    .workload
                    .prefix_share
                    .or(from.prefix_share)
                    .unwrap_or_default(),
                speculation,
            },
            engine,
            scenario,
        })
    }
}

impl ResolvedSolve {
    /// The predictor for rows nobody measured, unless predictions are off.
    pub fn predictor(
        &self,
        calibrations: Calibrations,
        catalog: &capplan::catalog::Catalog,
    ) -> Option<SimPredictor> {
        if !self.predict {
            return None;
        }
        let predictor = SimPredictor::new(
            self.workload.clone(),
            prediction_slo(&self.request.slo),
            self.request.memory,
            calibrations,
        )
        .with_engine(
            self.engine.clone(),
            std::sync::Arc::clone(&catalog.operators),
        )
        .with_bands(catalog.bands.clone());
        Some(match self.request.demand {
            Demand::Rps(_) => predictor.open_loop(),
            Demand::Users(_) => predictor,
        })
    }
}

/// The SLO predicted rows are held to: the one asked, with TPOT ≤ 100 ms added when no TPOT
/// limit was asked (see [`DEFAULT_PREDICTED_TPOT_S`]).
pub fn prediction_slo(slo: &Slo) -> Slo {
    let mut slo = *slo;
    slo.tpot_s = slo.tpot_s.or(Some(DEFAULT_PREDICTED_TPOT_S));
    slo
}

impl CompareArgs {
    /// Cost assumptions and comparison options: flags over the scenario over defaults.
    pub fn options(
        &self,
        scenario: Option<&Scenario>,
        catalog: &capplan::catalog::Catalog,
    ) -> Result<CompareOptions, capplan::InputError> {
        compare_options(Some(self), scenario, catalog)
    }
}

/// Cost assumptions and comparison options: the flags of `args` over the scenario's over the
/// defaults (`solve SCENARIO.toml` has no cost flags: `args` is `None`).
pub fn compare_options(
    args: Option<&CompareArgs>,
    scenario: Option<&Scenario>,
    catalog: &capplan::catalog::Catalog,
) -> Result<CompareOptions, capplan::InputError> {
    let from = scenario.map(|s| s.costs).unwrap_or_default();
    let flag = |pick: fn(&CompareArgs) -> Option<f64>| args.and_then(pick);
    let costs = CostAssumptions {
        years: flag(|a| a.years).unwrap_or(from.years),
        power_price_usd_per_kwh: flag(|a| a.power_price).unwrap_or(from.power_price_usd_per_kwh),
        pue: flag(|a| a.pue).unwrap_or(from.pue),
        card_power_fraction: flag(|a| a.card_power).unwrap_or(from.card_power_fraction),
        cloud: args.is_some_and(|a| a.cloud) || from.cloud,
    };
    costs.check()?;
    let mut entries = args.map(|a| a.inventory.clone()).unwrap_or_default();
    if entries.is_empty() {
        entries = scenario.map(|s| s.inventory.clone()).unwrap_or_default();
    }
    let inventory = entries
        .iter()
        .map(|e| parse_inventory(e, catalog))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CompareOptions {
        costs,
        inventory,
        mix: args.is_some_and(|a| a.mix) || scenario.is_some_and(|s| s.mix),
    })
}

/// The folder given, or `default` under the working directory when it exists.
pub fn folder_or_default(given: &Option<PathBuf>, default: &str) -> Option<PathBuf> {
    match given {
        Some(path) => Some(path.clone()),
        None => {
            let path = Path::new(default);
            path.is_dir().then(|| path.to_path_buf())
        }
    }
}

/// Where new run folders go: `--out`, else the global `--measurements` folder (where `solve`,
/// `fit` and `calibrate` will look for them), else `./measurements`.
pub fn runs_folder(out: &Option<PathBuf>, measurements: &Option<PathBuf>) -> PathBuf {
    out.clone()
        .or_else(|| measurements.clone())
        .unwrap_or_else(|| PathBuf::from("measurements"))
}

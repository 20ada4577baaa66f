//! The simulated engine as the planner's predictor of capacity.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::engine::EngineOptions;
use crate::catalog::band::{c_star_range, ErrorBand};
use crate::catalog::operators::OperatorLibrary;
use crate::catalog::{Card, EngineProfile, MemoryOptions, Model, Node, Parallelism, PdSplit};
use crate::plan::predicted::{CapacityPredictor, NoPrediction, PredictionAssumptions, Wanted};
use crate::slo::Slo;
use crate::store::{CapacityPoint, PointSource};
use crate::workload::{Speculation, ThinkTime, Workload};

use super::calibration_file::Calibrations;
use super::measuring_client::{MeasuredAs, MeasuringClient};
use super::predict::{
    estimate_c_star, predict_rate, predict_with, Calibration, Layout, PredictRequest, RateSearch,
    SearchHints, SKIPPED_LEVELS_BELOW,
};

/// How far above a layout's estimated C* (see [`estimate_c_star`]) the level is that asks
/// whether the layout can matter, when that is below the users it needs: over the catalog's
/// mixtures of experts on every node shape, 95 % of C* were within 1.16 times their
/// estimate, so the level nearly always fails, and settles the layout alone.
const PROBE_MARGIN: f64 = 1.2;

/// Predicts C* with [`predict`] and remembers each layout's answer (node shapes of one card
/// and link share instance layouts).
pub struct SimPredictor {
    request: PredictRequest,
    memory: MemoryOptions,
    cache: HashMap<Key, Result<CapacityPoint, NoPrediction>>,
    /// Estimated C* of each layout asked about (see [`estimate_c_star`]).
    estimates: HashMap<Key, Option<f64>>,
    /// Disaggregated deployments of the same layouts.
    disaggregated: HashMap<Key, Result<(CapacityPoint, PdSplit), String>>,
    calibrations: Vec<String>,
    /// What each card's step times rested on (card, basis), in the order first used.
    bases: Vec<(String, String)>,
    /// Calibrations from measurements/calibrations, by card.
    stored: Calibrations,
    /// Requests arrive as a Poisson process (a demand in requests/s), not from closed-loop
    /// users: predict the highest rate, R*.
    open_loop: bool,
    /// The engine profile modelled and the operator timings available (none: the generic
    /// scheduler on the roofline).
    engine: Option<(EngineProfile, Arc<OperatorLibrary>)>,
    /// Error bands measured by `capplan validate`, for each prediction's range.
    bands: Vec<ErrorBand>,
    /// Think time per model where the plan counts users as that model's measured points did.
    think_by_model: Vec<(String, ThinkTime)>,
}

impl SimPredictor {
    pub fn new(
        workload: Workload,
        slo: Slo,
        memory: MemoryOptions,
        calibrations: Calibrations,
    ) -> SimPredictor {
        let mut request = PredictRequest::new(workload, slo);
        // A planning sweep predicts hundreds of layouts: 5 % is finer than the model's error.
        request.resolution = 0.05;
        SimPredictor {
            request,
            memory,
            cache: HashMap::new(),
            estimates: HashMap::new(),
            disaggregated: HashMap::new(),
            calibrations: Vec::new(),
            bases: Vec::new(),
            stored: calibrations,
            open_loop: false,
            engine: None,
            bands: Vec::new(),
            think_by_model: Vec::new(),
        }
    }

    /// Models `engine`'s scheduler and overheads, timing kernels from `operators` where the
    /// card has them.
    pub fn with_engine(
        mut self,
        engine: EngineProfile,
        operators: Arc<OperatorLibrary>,
    ) -> SimPredictor {
        self.request.engine = EngineOptions::from_profile(&engine);
        self.engine = Some((engine, operators));
        self
    }

    /// Gives every predicted C* the range `bands` put the measured one in.
    pub fn with_bands(mut self, bands: Vec<ErrorBand>) -> SimPredictor {
        self.bands = bands;
        self
    }

    /// For a demand in requests per second: each instance's capacity is the highest Poisson
    /// arrival rate it holds within the SLO (bursts make that lower than closed-loop users at
    /// C* would send). The point carries the requests in flight and the E2E latency at R*, so
    /// Little's law gives R* back exactly.
    pub fn open_loop(mut self) -> SimPredictor {
        self.open_loop = true;
        self
    }
}

impl CapacityPredictor for SimPredictor {
    fn predict(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<CapacityPoint, NoPrediction> {
        let mut job = self.job(model, card, node, parallel);
        if let Some(known) = self.cache.get(&job.key()) {
            return known.clone();
        }
        self.note_basis(&job);
        job.hints = self.hints_for(&job, None);
        let answer = self.compute(&job);
        self.cache.insert(job.key(), answer.clone());
        answer
    }

    fn estimate(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Option<f64> {
        let job = self.job(model, card, node, parallel);
        self.estimate_of(&job)
    }

    fn estimate_all(&mut self, wanted: &[Wanted]) -> Vec<Option<f64>> {
        // Keys built once per layout asked: each is a few strings (formatted, for a layout
        // across domains), and a plan asks for thousands.
        let mut jobs: Vec<Job> = Vec::new();
        let mut keys: Vec<Key> = Vec::new();
        let mut seen: HashSet<Key> = HashSet::new();
        for want in wanted {
            let job = self.job(want.model, want.card, want.node, want.parallel);
            let key = job.key();
            if !self.estimates.contains_key(&key) && seen.insert(key.clone()) {
                keys.push(key);
                jobs.push(job);
            }
        }
        let estimates = on_all_cores(&jobs, |job| self.estimate_job(job));
        self.estimates.extend(keys.into_iter().zip(estimates));
        wanted
            .iter()
            .map(|w| self.estimate(w.model, w.card, w.node, w.parallel))
            .collect()
    }

    fn predict_disaggregated(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<(CapacityPoint, PdSplit), String> {
        let job = self.job(model, card, node, parallel);
        let key = job.disaggregated_key();
        if let Some(known) = self.disaggregated.get(&key) {
            return known.clone();
        }
        let answer = self.compute_disaggregated(&job);
        self.disaggregated.insert(key, answer.clone());
        answer
    }

    fn assume_think_time(&mut self, model: &Model, think: ThinkTime) {
        self.think_by_model.retain(|(name, _)| name != &model.name);
        self.cache.retain(|key, _| key.0 != model.name);
        self.estimates.retain(|key, _| key.0 != model.name);
        self.disaggregated.retain(|key, _| key.0 != model.name);
        self.think_by_model.push((model.name.clone(), think));
    }

    fn prepare(&mut self, wanted: &[Wanted]) {
        let mut jobs: Vec<(Key, Job)> = Vec::new();
        let mut seen: HashMap<Key, usize> = HashMap::new();
        for want in wanted {
            let mut job = self.job(want.model, want.card, want.node, want.parallel);
            let key = job.key();
            let answered = match self.cache.get(&key) {
                Some(Ok(_)) => true,
                Some(Err(why)) => why.answers(want.needed),
                None => false,
            };
            if answered {
                continue;
            }
            // Asked twice: the search must answer both (the fewer users needed, or C* itself).
            if let Some(&same) = seen.get(&key) {
                let hints = &mut jobs[same].1.hints;
                hints.needed = hints.needed.zip(want.needed).map(|(a, b)| a.min(b));
                continue;
            }
            self.note_basis(&job);
            job.hints = hints_with(want.estimate, want.needed);
            seen.insert(key.clone(), jobs.len());
            jobs.push((key, job));
        }
        // The costliest first, so that no core is left with a long one at the end.
        jobs.sort_by(|a, b| expected_cost(&b.1).total_cmp(&expected_cost(&a.1)));
        let (keys, jobs): (Vec<Key>, Vec<Job>) = jobs.into_iter().unzip();
        let answers = self.compute_all(&jobs);
        self.cache.extend(keys.into_iter().zip(answers));
    }

    fn prepare_disaggregated(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
        let mut jobs: Vec<Job> = Vec::new();
        let mut keys: Vec<Key> = Vec::new();
        for &(model, card, node, parallel) in wanted {
            let job = self.job(model, card, node, parallel);
            let key = job.disaggregated_key();
            if !self.disaggregated.contains_key(&key) && !keys.contains(&key) {
                keys.push(key);
                jobs.push(job);
            }
        }
        let answers = on_all_cores(&jobs, |job| self.compute_disaggregated(job));
        self.disaggregated.extend(keys.into_iter().zip(answers));
    }

    fn predict_like_all(
        &mut self,
        measured: &[(&Model, &Card, &CapacityPoint)],
    ) -> Vec<Result<CapacityPoint, String>> {
        let mut jobs = Vec::new();
        for &(model, card, point) in measured {
            let mut job = self.job_on_link(model, card, &point.interconnect, point.parallel);
            job.request = self.request_like(point);
            job.open_loop = false;
            self.note_basis(&job);
            job.hints = self.hints_for(&job, None);
            jobs.push(job);
        }
        self.compute_all(&jobs)
            .into_iter()
            .map(|answer| answer.map_err(|why| why.to_string()))
            .collect()
    }

    fn assumptions(&self) -> PredictionAssumptions {
        let engine = match &self.engine {
            Some((engine, _)) => format!("engine profile {}", engine.summary()),
            None => "a generic scheduler".to_string(),
        };
        let per_model: Vec<String> = self
            .think_by_model
            .iter()
            .map(|(model, think)| format!("{model} {think}"))
            .collect();
        let summary = format!(
            "predicted rows: simulated continuous batching, {engine}, {}, workload {}{}, {}, efficiency {}",
            if self.open_loop {
                "Poisson arrivals (R*)"
            } else {
                "closed-loop users (C*)"
            },
            self.request.workload,
            if per_model.is_empty() {
                String::new()
            } else {
                format!(
                    " (think time as each model's measured points: {})",
                    per_model.join(", ")
                )
            },
            self.request.slo.describe(),
            if self.calibrations.is_empty() {
                "defaults (uncalibrated)".to_string()
            } else {
                self.calibrations.join(", ")
            },
        );
        PredictionAssumptions::new(summary, &self.bases)
    }
}

/// What a prediction is remembered by: model, card, interconnect, layout, and the scale-up
/// domain and network (as text) when the layout spans domains.
type Key = (String, String, String, Parallelism, u32, String);

/// One prediction to make: a layout and what it is asked under.
struct Job<'a> {
    model: &'a Model,
    card: &'a Card,
    interconnect: String,
    parallel: Parallelism,
    domain_cards: u32,
    scale_out_gbs: Option<f64>,
    switched: Option<bool>,
    request: PredictRequest,
    open_loop: bool,
    /// Where the search starts and when it may stop.
    hints: SearchHints,
}

impl Job<'_> {
    /// An instance inside one scale-up domain runs the same whatever the domain's size and
    /// the network beyond it (see `crate::sim::fabric`): the same card in an 8-card and a
    /// 4-card node predicts once — unless its all-reduce spans more than a pair of cards and
    /// one node has them all behind a switch and the other not.
    fn key(&self) -> Key {
        let one_domain = self.parallel.pp <= 1 && self.parallel.cards() <= self.domain_cards;
        if one_domain {
            let links = if self.parallel.tp > 2 && self.switched == Some(true) {
                "switched"
            } else {
                ""
            };
            (
                self.model.name.clone(),
                self.card.name.clone(),
                self.interconnect.clone(),
                self.parallel,
                0,
                links.to_string(),
            )
        } else {
            self.disaggregated_key()
        }
    }

    /// Disaggregated workers move KV caches over the network between nodes: its rate
    /// matters even for an instance inside one node.
    fn disaggregated_key(&self) -> Key {
        (
            self.model.name.clone(),
            self.card.name.clone(),
            self.interconnect.clone(),
            self.parallel,
            self.domain_cards,
            format!("{:?} {:?}", self.scale_out_gbs, self.switched),
        )
    }

    /// The job's layout with `memory`, the drafter's weights being those of the job's own
    /// speculative decoding (a measured point is predicted as it ran: with its drafter, or
    /// none, whatever the plan asks for).
    fn layout(&self, memory: MemoryOptions) -> Layout<'_> {
        let drafter = Speculation::draft_weights_of(self.request.workload.speculation.as_ref());
        Layout {
            model: self.model,
            card: self.card,
            interconnect: self.interconnect.clone(),
            tp: self.parallel.tp,
            memory: MemoryOptions { drafter, ..memory },
            parallel: self.parallel,
            domain_cards: self.domain_cards,
            scale_out_gbs: self.scale_out_gbs,
            switched: self.switched,
            // Solve's rows name their node shape themselves.
            node: None,
        }
    }
}

impl SimPredictor {
    /// The request a measured point was measured under: its SLO, think time and (when the
    /// point knows it) output length; the prompt length is the predictor's.
    fn request_like(&self, measured: &CapacityPoint) -> PredictRequest {
        let mut request = self.request.clone();
        request.slo = measured.slo;
        request.workload.think_time = measured.think_time;
        // As it ran: with its own drafter, or none.
        request.workload.speculation = measured.speculation.clone();
        if let Some(tokens) = measured.output_tokens.filter(|t| *t >= 1.0) {
            request.workload.output_tokens = crate::workload::TokenLengths::Fixed {
                tokens: tokens.round() as u32,
            };
        }
        // As its client measured it: a benchmark's users started together, and on an engine
        // whose benchmark users fall out of step, by the profile's share of a cycle.
        request.measured_as = MeasuredAs {
            client: MeasuringClient::of_tool(measured.measured_by.as_deref()),
            requests_per_user: measured.requests_per_user,
            out_of_step: self
                .engine
                .as_ref()
                .map_or(0.0, |(engine, _)| engine.out_of_step),
        };
        request
    }

    /// The job of predicting `model` laid out as `parallel` on cards of `node`, asked as the
    /// predictor was set up.
    fn job<'a>(
        &self,
        model: &'a Model,
        card: &'a Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Job<'a> {
        Job {
            domain_cards: node.cards_per_node,
            scale_out_gbs: node.scale_out_gbs_per_card,
            switched: node.switched(),
            ..self.job_on_link(model, card, &node.interconnect, parallel)
        }
    }

    /// The same for cards linked by `interconnect` in one domain (a measured point's layout).
    fn job_on_link<'a>(
        &self,
        model: &'a Model,
        card: &'a Card,
        interconnect: &str,
        parallel: Parallelism,
    ) -> Job<'a> {
        let mut request = self.request.clone();
        if let Some((_, think)) = self.think_by_model.iter().find(|(m, _)| m == &model.name) {
            request.workload.think_time = *think;
        }
        Job {
            model,
            card,
            interconnect: interconnect.to_string(),
            parallel,
            domain_cards: parallel.cards().max(super::predict::DEFAULT_DOMAIN_CARDS),
            scale_out_gbs: None,
            switched: None,
            request,
            open_loop: self.open_loop,
            hints: SearchHints::default(),
        }
    }

    /// Every job's answer, in order; independent and CPU-bound, so spread over the cores.
    fn compute_all(&self, jobs: &[Job]) -> Vec<Result<CapacityPoint, NoPrediction>> {
        on_all_cores(jobs, |job| self.compute(job))
    }

    /// The job's estimated C* (remembered).
    fn estimate_of(&mut self, job: &Job) -> Option<f64> {
        let key = job.key();
        if let Some(known) = self.estimates.get(&key) {
            return *known;
        }
        let estimate = self.estimate_job(job);
        self.estimates.insert(key, estimate);
        estimate
    }

    /// The job's estimated C* (see [`estimate_c_star`]).
    fn estimate_job(&self, job: &Job) -> Option<f64> {
        let (options, calibration) = self.setup(job.card, &job.interconnect);
        let mut request = job.request.clone();
        request.engine = options;
        estimate_c_star(&job.layout(self.memory), &calibration, &request)
    }

    /// Where the job's search starts and what it tries first (see [`SearchHints`]).
    fn hints_for(&mut self, job: &Job, needed: Option<u32>) -> SearchHints {
        let estimate = self.estimate_of(job);
        hints_with(estimate, needed)
    }

    /// Remembers what the job's card's step times rest on and which calibration applies
    /// (once each).
    fn note_basis(&mut self, job: &Job) {
        let (options, calibration) = self.setup(job.card, &job.interconnect);
        if !self.bases.iter().any(|(name, _)| *name == job.card.name) {
            if let Ok((engine, _)) =
                super::predict::engine_for(&job.layout(self.memory), &calibration, &options, false)
            {
                let basis = super::predict::step_basis(&engine, &calibration);
                self.bases.push((job.card.name.clone(), basis));
            }
        }
        if !self.calibrations.contains(&calibration.name) {
            self.calibrations.push(calibration.name.clone());
        }
    }

    /// The scheduler options and calibration a prediction on `card` uses.
    fn setup(&self, card: &Card, interconnect: &str) -> (EngineOptions, Calibration) {
        let options = match &self.engine {
            Some((engine, _)) => EngineOptions::for_card(engine, card),
            None => self.request.engine,
        };
        let calibration = match &self.engine {
            Some((engine, operators)) => {
                self.stored
                    .for_engine(card, interconnect, engine, operators)
            }
            None => self.stored.for_card(card, interconnect),
        };
        (options, calibration)
    }

    /// A disaggregated deployment of the job's layout as a capacity point per worker.
    fn compute_disaggregated(&self, job: &Job) -> Result<(CapacityPoint, PdSplit), String> {
        if job.open_loop {
            return Err(
                "disaggregated deployments are planned for users, not request rates".into(),
            );
        }
        let layout = job.layout(self.memory);
        let (options, calibration) = self.setup(job.card, &job.interconnect);
        let mut request = job.request.clone();
        request.engine = options;
        let pd = super::disagg::predict_disaggregated(&layout, None, &calibration, &request, None)
            .map_err(|rejected| rejected.reason)?;
        let engine_name = self.engine.as_ref().map(|(engine, _)| engine.name.clone());
        let basis = {
            let (engine, _) = super::predict::engine_for(&layout, &calibration, &options, false)
                .map_err(|rejected| rejected.reason)?;
            super::predict::step_basis(&engine, &calibration)
        };
        let per_worker = pd.users_per_worker();
        let point = CapacityPoint {
            pd: Some(pd.split),
            band: c_star_range(
                &self.bands,
                crate::catalog::band::model_class(job.model),
                engine_name.as_deref().unwrap_or("generic"),
                &basis,
                per_worker,
            ),
            note: format!(
                "disaggregated {} (prefill workers {}, decode {}; users per {} cards): prefill worker {:.2} req/s, decode worker {:.2} req/s, KV transfer {:.0} ms",
                pd.split,
                pd.prefill_parallel,
                pd.decode_parallel,
                pd.decode_parallel.cards(),
                pd.prefill_rate,
                pd.decode_rate,
                pd.transfer_s * 1e3
            ),
            e2e_mean_s: Some(
                pd.ttft_s + (request.workload.output_tokens.mean() - 1.0).max(0.0) * pd.tpot_s,
            ),
            origin: format!(
                "predicted, disaggregated {} with {} prefill workers ({:.1} users per {} decode worker), {}",
                pd.split, pd.prefill_parallel, per_worker, pd.decode_parallel, calibration.name
            ),
            ..self.predicted_point(job, &request, per_worker)
        };
        Ok((point, pd.split))
    }

    /// The prediction itself: no bookkeeping, so several run at once (see `prepare`).
    fn compute(&self, job: &Job) -> Result<CapacityPoint, NoPrediction> {
        let layout = job.layout(self.memory);
        let (options, calibration) = self.setup(job.card, &job.interconnect);
        let mut request = job.request.clone();
        request.engine = options;
        if job.open_loop {
            return self
                .compute_rate(job, &layout, &calibration, &request)
                .map_err(NoPrediction::Failed);
        }
        self.compute_users(job, &layout, &calibration, &request)
    }

    /// A point holding C* closed-loop users, or why there is none.
    fn compute_users(
        &self,
        job: &Job,
        layout: &Layout,
        calibration: &Calibration,
        request: &PredictRequest,
    ) -> Result<CapacityPoint, NoPrediction> {
        let prediction = predict_with(layout, calibration, request, job.hints)
            .map_err(|rejected| NoPrediction::Failed(rejected.reason))?;
        if let Some(needed) = prediction.below {
            return Err(NoPrediction::Below {
                needed,
                why: prediction.limit,
            });
        }
        if prediction.c_star == 0 {
            return Err(NoPrediction::Failed(format!(
                "predicted C* is 0 ({})",
                prediction.limit
            )));
        }
        let engine_name = self.engine.as_ref().map(|(engine, _)| engine.name.clone());
        Ok(CapacityPoint {
            band: c_star_range(
                &self.bands,
                crate::catalog::band::model_class(job.model),
                engine_name.as_deref().unwrap_or("generic"),
                &prediction.basis,
                f64::from(prediction.c_star),
            ),
            note: prediction.limit.clone(),
            e2e_mean_s: prediction
                .curve
                .iter()
                .find(|level| level.concurrency == prediction.c_star)
                .map(|level| level.e2e.mean),
            origin: format!(
                "predicted [{}, {}], {}",
                prediction.last_pass,
                prediction
                    .first_fail
                    .map_or_else(|| "no fail".to_string(), |f| f.to_string()),
                calibration.name
            ),
            ..self.predicted_point(job, request, f64::from(prediction.c_star))
        })
    }

    /// A point holding R*, the highest Poisson arrival rate within the SLO, as the requests
    /// in flight at it; or why there is none.
    fn compute_rate(
        &self,
        job: &Job,
        layout: &Layout,
        calibration: &Calibration,
        request: &PredictRequest,
    ) -> Result<CapacityPoint, String> {
        let prediction = predict_rate(layout, calibration, request, &RateSearch::Auto)
            .map_err(|rejected| rejected.reason)?;
        let rate = match prediction.rate_star {
            Some(rate) if rate.rate > 0.0 => rate,
            _ => return Err(format!("predicted R* is 0 ({})", prediction.limit)),
        };
        let e2e = prediction
            .curve
            .iter()
            .find(|level| level.offered_rate == Some(rate.rate))
            .map(|level| level.e2e.mean);
        Ok(CapacityPoint {
            think_time: crate::workload::ThinkTime::NONE,
            note: format!(
                "Poisson arrivals: R* {:.3} requests/s; {}",
                rate.rate, prediction.limit
            ),
            e2e_mean_s: e2e,
            origin: format!(
                "predicted R* [{:.3}, {}], {}",
                rate.last_pass,
                rate.first_fail
                    .map_or_else(|| "no fail".to_string(), |f| format!("{f:.3}")),
                calibration.name
            ),
            ..self.predicted_point(job, request, rate.mean_in_flight)
        })
    }

    /// A predicted point of `job` holding `users` per instance under `request`, before the
    /// note, origin, band and E2E latency each kind of prediction gives it.
    fn predicted_point(&self, job: &Job, request: &PredictRequest, users: f64) -> CapacityPoint {
        CapacityPoint {
            model: job.model.name.clone(),
            card: job.card.name.clone(),
            interconnect: job.interconnect.clone(),
            cards_per_node: None,
            instances_per_node: None,
            instances_per_card: 1,
            tp: job.parallel.tp,
            parallel: job.parallel,
            users_per_instance: users,
            slo: request.slo,
            think_time: request.workload.think_time,
            source: PointSource::Predicted,
            note: String::new(),
            origin: String::new(),
            e2e_mean_s: None,
            output_tokens: Some(request.workload.output_tokens.mean()),
            engine: self.engine.as_ref().map(|(engine, _)| engine.name.clone()),
            band: None,
            pd: None,
            speculation: request.workload.speculation.clone(),
            measured_by: None,
            requests_per_user: None,
        }
    }
}

/// The search of a layout whose C* is estimated at `estimate` users, which matters only if it
/// holds `needed`: it starts at the estimate (no estimate: skipping the smallest levels) and,
/// with users needed, first tries a level just above the estimate.
fn hints_with(estimate: Option<f64>, needed: Option<u32>) -> SearchHints {
    let start = estimate.map_or(SKIPPED_LEVELS_BELOW, |users| users.max(1.0) as u32);
    SearchHints {
        start: Some(start),
        needed,
        probe: estimate.map(|users| (users * PROBE_MARGIN).ceil().max(1.0) as u32),
    }
}

/// Roughly what a job's search costs: its levels cost in proportion to the users simulated,
/// and a search in full runs about five where one asked only whether it holds the users it
/// needs runs one or two.
fn expected_cost(job: &Job) -> f64 {
    let users = f64::from(job.hints.start.unwrap_or(SKIPPED_LEVELS_BELOW));
    match job.hints.needed {
        Some(needed) => f64::from(needed).min(users * PROBE_MARGIN),
        None => 5.0 * users,
    }
}

/// `work` of every job, in order; independent and CPU-bound, so spread over the cores. Each
/// core takes the next job not yet taken (predictions differ a hundredfold in cost, so a
/// fixed share each left one core idle while the other finished); which core ran a job
/// never changes its answer.
fn on_all_cores<T: Send>(jobs: &[Job], work: impl Fn(&Job) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(jobs.len());
    if threads < 2 {
        return jobs.iter().map(&work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (work, take) = (&work, &take);
    let mut answers: Vec<Option<T>> = std::iter::repeat_with(|| None).take(jobs.len()).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = take();
                        let Some(job) = jobs.get(i) else { break };
                        done.push((i, work(job)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            if let Ok(done) = worker.join() {
                for (i, answer) in done {
                    answers[i] = Some(answer);
                }
            }
        }
    });
    answers
        .into_iter()
        .zip(jobs)
        .map(|(answer, job)| answer.unwrap_or_else(|| work(job)))
        .collect()
}

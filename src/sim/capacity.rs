//! The simulated engine as the planner's predictor of capacity.

use std::collections::HashMap;
use std::sync::Arc;

use super::engine::EngineOptions;
use crate::catalog::band::{c_star_range, ErrorBand};
use crate::catalog::operators::OperatorLibrary;
use crate::catalog::{Card, EngineProfile, MemoryOptions, Model, Node, Parallelism, PdSplit};
use crate::plan::predicted::CapacityPredictor;
use crate::slo::Slo;
use crate::store::{CapacityPoint, PointSource};
use crate::workload::{ThinkTime, Workload};

use super::calibration_file::Calibrations;
use super::predict::{predict, predict_rate, Calibration, Layout, PredictRequest, RateSearch};

/// Predicts C* with [`predict`] and remembers each layout's answer (node shapes of one card
/// and link share instance layouts).
pub struct SimPredictor {
    request: PredictRequest,
    memory: MemoryOptions,
    cache: HashMap<Key, Result<CapacityPoint, String>>,
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
    ) -> Result<CapacityPoint, String> {
        let job = self.job(model, card, node, parallel);
        if let Some(known) = self.cache.get(&job.key()) {
            return known.clone();
        }
        self.note_basis(&job);
        let answer = self.compute(&job);
        self.cache.insert(job.key(), answer.clone());
        answer
    }

    fn predict_disaggregated(
        &mut self,
        model: &Model,
        card: &Card,
        node: &Node,
        parallel: Parallelism,
    ) -> Result<(CapacityPoint, PdSplit), String> {
        let job = self.job(model, card, node, parallel);
        if let Some(known) = self.disaggregated.get(&job.key()) {
            return known.clone();
        }
        let answer = self.compute_disaggregated(&job);
        self.disaggregated.insert(job.key(), answer.clone());
        answer
    }

    fn assume_think_time(&mut self, model: &Model, think: ThinkTime) {
        self.think_by_model.retain(|(name, _)| name != &model.name);
        self.cache.retain(|key, _| key.0 != model.name);
        self.disaggregated.retain(|key, _| key.0 != model.name);
        self.think_by_model.push((model.name.clone(), think));
    }

    fn prepare(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
        let mut jobs: Vec<Job> = Vec::new();
        for &(model, card, node, parallel) in wanted {
            let job = self.job(model, card, node, parallel);
            let key = job.key();
            if !self.cache.contains_key(&key) && !jobs.iter().any(|j| j.key() == key) {
                self.note_basis(&job);
                jobs.push(job);
            }
        }
        let keys: Vec<Key> = jobs.iter().map(Job::key).collect();
        let answers = self.compute_all(&jobs);
        self.cache.extend(keys.into_iter().zip(answers));
    }

    fn prepare_disaggregated(&mut self, wanted: &[(&Model, &Card, &Node, Parallelism)]) {
        let mut jobs: Vec<Job> = Vec::new();
        for &(model, card, node, parallel) in wanted {
            let job = self.job(model, card, node, parallel);
            let key = job.key();
            if !self.disaggregated.contains_key(&key) && !jobs.iter().any(|j| j.key() == key) {
                jobs.push(job);
            }
        }
        let keys: Vec<Key> = jobs.iter().map(Job::key).collect();
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
            jobs.push(job);
        }
        self.compute_all(&jobs)
    }

    fn assumptions(&self) -> String {
        let engine = match &self.engine {
            Some((engine, _)) => format!("engine profile {}", engine.summary()),
            None => "a generic scheduler".to_string(),
        };
        let mut bases: Vec<String> = Vec::new();
        for (card, basis) in &self.bases {
            bases.push(format!("{card}: {basis}"));
        }
        let per_model: Vec<String> = self
            .think_by_model
            .iter()
            .map(|(model, think)| format!("{model} {think}"))
            .collect();
        format!(
            "predicted rows: simulated continuous batching, {engine}, {}, workload {}{}, {}, efficiency {}; step times — {}",
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
            if bases.is_empty() {
                "none predicted".to_string()
            } else {
                bases.join("; ")
            }
        )
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
    request: PredictRequest,
    open_loop: bool,
}

impl Job<'_> {
    fn key(&self) -> Key {
        (
            self.model.name.clone(),
            self.card.name.clone(),
            self.interconnect.clone(),
            self.parallel,
            self.domain_cards,
            format!("{:?}", self.scale_out_gbs),
        )
    }

    fn layout(&self, memory: MemoryOptions) -> Layout<'_> {
        Layout {
            model: self.model,
            card: self.card,
            interconnect: self.interconnect.clone(),
            tp: self.parallel.tp,
            memory,
            parallel: self.parallel,
            domain_cards: self.domain_cards,
            scale_out_gbs: self.scale_out_gbs,
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
        if let Some(tokens) = measured.output_tokens.filter(|t| *t >= 1.0) {
            request.workload.output_tokens = crate::workload::TokenLengths::Fixed {
                tokens: tokens.round() as u32,
            };
        }
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
            domain_cards: parallel.cards().max(8),
            scale_out_gbs: None,
            request,
            open_loop: self.open_loop,
        }
    }

    /// Every job's answer, in order; independent and CPU-bound, so spread over the cores.
    fn compute_all(&self, jobs: &[Job]) -> Vec<Result<CapacityPoint, String>> {
        on_all_cores(jobs, |job| self.compute(job))
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
        let pd = super::disagg::predict_disaggregated(&layout, &calibration, &request, None)
            .map_err(|rejected| rejected.reason)?;
        let engine_name = self.engine.as_ref().map(|(engine, _)| engine.name.clone());
        let basis = {
            let (engine, _) = super::predict::engine_for(&layout, &calibration, &options, false)
                .map_err(|rejected| rejected.reason)?;
            super::predict::step_basis(&engine, &calibration)
        };
        let per_worker = pd.users_per_worker();
        let point = CapacityPoint {
            band: c_star_range(
                &self.bands,
                crate::catalog::band::model_class(job.model),
                engine_name.as_deref().unwrap_or("generic"),
                &basis,
                per_worker,
            ),
            model: job.model.name.clone(),
            card: job.card.name.clone(),
            interconnect: job.interconnect.clone(),
            cards_per_node: None,
            instances_per_node: None,
            instances_per_card: 1,
            tp: job.parallel.tp,
            parallel: job.parallel,
            users_per_instance: per_worker,
            slo: request.slo,
            think_time: request.workload.think_time,
            source: PointSource::Predicted,
            note: format!(
                "disaggregated {}: prefill worker {:.2} req/s, decode worker {:.2} req/s, KV transfer {:.0} ms",
                pd.split,
                pd.prefill_rate,
                pd.decode_rate,
                pd.transfer_s * 1e3
            ),
            e2e_mean_s: Some(
                pd.ttft_s + (request.workload.output_tokens.mean() - 1.0).max(0.0) * pd.tpot_s,
            ),
            output_tokens: Some(request.workload.output_tokens.mean()),
            engine: engine_name,
            origin: format!(
                "predicted, disaggregated {} ({:.1} users per worker), {}",
                pd.split, per_worker, calibration.name
            ),
        };
        Ok((point, pd.split))
    }

    /// The prediction itself: no bookkeeping, so several run at once (see `prepare`).
    fn compute(&self, job: &Job) -> Result<CapacityPoint, String> {
        let (model, card, interconnect, parallel) =
            (job.model, job.card, job.interconnect.as_str(), job.parallel);
        let tp = parallel.tp;
        let layout = job.layout(self.memory);
        let (options, calibration) = self.setup(card, interconnect);
        let mut request = job.request.clone();
        request.engine = options;
        let engine_name = self.engine.as_ref().map(|(engine, _)| engine.name.clone());
        if job.open_loop {
            let answer = match predict_rate(&layout, &calibration, &request, &RateSearch::Auto) {
                Err(rejected) => Err(rejected.reason),
                Ok(prediction) => match prediction.rate_star {
                    Some(rate) if rate.rate > 0.0 => {
                        let e2e = prediction
                            .curve
                            .iter()
                            .find(|level| level.offered_rate == Some(rate.rate))
                            .map(|level| level.e2e.mean);
                        Ok(CapacityPoint {
                            model: model.name.clone(),
                            card: card.name.clone(),
                            interconnect: interconnect.to_string(),
                            cards_per_node: None,
                            instances_per_node: None,
                            instances_per_card: 1,
                            tp,
                            parallel,
                            users_per_instance: rate.mean_in_flight,
                            slo: request.slo,
                            think_time: crate::workload::ThinkTime::NONE,
                            source: PointSource::Predicted,
                            note: format!(
                                "Poisson arrivals: R* {:.3} requests/s; {}",
                                rate.rate, prediction.limit
                            ),
                            e2e_mean_s: e2e,
                            output_tokens: Some(request.workload.output_tokens.mean()),
                            engine: engine_name.clone(),
                            band: None,
                            origin: format!(
                                "predicted R* [{:.3}, {}], {}",
                                rate.last_pass,
                                rate.first_fail
                                    .map_or_else(|| "no fail".to_string(), |f| format!("{f:.3}")),
                                calibration.name
                            ),
                        })
                    }
                    _ => Err(format!("predicted R* is 0 ({})", prediction.limit)),
                },
            };
            return answer;
        }
        let answer = match predict(&layout, &calibration, &request) {
            Err(rejected) => Err(rejected.reason),
            Ok(prediction) if prediction.c_star == 0 => {
                Err(format!("predicted C* is 0 ({})", prediction.limit))
            }
            Ok(prediction) => Ok(CapacityPoint {
                band: c_star_range(
                    &self.bands,
                    crate::catalog::band::model_class(model),
                    engine_name.as_deref().unwrap_or("generic"),
                    &prediction.basis,
                    f64::from(prediction.c_star),
                ),
                model: model.name.clone(),
                card: card.name.clone(),
                interconnect: interconnect.to_string(),
                cards_per_node: None,
                instances_per_node: None,
                instances_per_card: 1,
                tp,
                parallel,
                users_per_instance: f64::from(prediction.c_star),
                slo: request.slo,
                think_time: request.workload.think_time,
                source: PointSource::Predicted,
                note: prediction.limit.clone(),
                e2e_mean_s: prediction
                    .curve
                    .iter()
                    .find(|level| level.concurrency == prediction.c_star)
                    .map(|level| level.e2e.mean),
                output_tokens: Some(request.workload.output_tokens.mean()),
                engine: engine_name.clone(),

                origin: format!(
                    "predicted [{}, {}], {}",
                    prediction.last_pass,
                    prediction
                        .first_fail
                        .map_or_else(|| "no fail".to_string(), |f| f.to_string()),
                    calibration.name
                ),
            }),
        };
        answer
    }
}

/// `work` of every job, in order; independent and CPU-bound, so spread over the cores.
fn on_all_cores<T: Clone + Send>(jobs: &[Job], work: impl Fn(&Job) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(jobs.len());
    if threads < 2 {
        return jobs.iter().map(&work).collect();
    }
    let mut answers: Vec<Option<T>> = vec![None; jobs.len()];
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                scope.spawn(move || {
                    (worker..jobs.len())
                        .step_by(threads)
                        .map(|i| (i, work(&jobs[i])))
                        .collect::<Vec<_>>()
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

//! Calibrations on disk: `measurements/calibrations/<card>.json`, written by `capplan
//! calibrate`, read by `predict`, `serve` and `solve`, which then say which one they used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::calibrate::CalibratedFactors;
use super::predict::Calibration;
use crate::catalog::operators::OperatorLibrary;
use crate::catalog::{Card, EngineProfile};
use crate::error::InputError;

/// The folder under `measurements/`.
pub const CALIBRATIONS_DIR: &str = "calibrations";

/// One card's calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredCalibration {
    pub card: String,
    pub factors: CalibratedFactors,
    /// The runs it was fitted on.
    pub fitted_on: Vec<String>,
    pub levels: usize,
    pub median_error_before: f64,
    pub median_error_after: f64,
    pub created_utc: String,
}

/// Writes `record` as `<measurements>/calibrations/<card>.json`; returns the path.
pub fn write_calibration(
    measurements: &Path,
    record: &StoredCalibration,
) -> std::io::Result<PathBuf> {
    let dir = measurements.join(CALIBRATIONS_DIR);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.json", record.card));
    let text = serde_json::to_string_pretty(record).map_err(std::io::Error::other)? + "\n";
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Every stored calibration, by card name.
#[derive(Debug, Clone, Default)]
pub struct Calibrations {
    by_card: BTreeMap<String, (PathBuf, StoredCalibration)>,
}

impl Calibrations {
    /// Reads `<measurements>/calibrations/*.json`; none when the folder does not exist.
    pub fn load(measurements: &Path) -> Result<Calibrations, InputError> {
        let dir = measurements.join(CALIBRATIONS_DIR);
        let mut by_card = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Calibrations { by_card });
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let location = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|err| InputError::file(&location, format!("cannot read: {err}")))?;
            let record: StoredCalibration = serde_json::from_str(&text).map_err(|err| {
                InputError::file(
                    &location,
                    format!("not a calibration ({err}); `capplan calibrate` writes these"),
                )
            })?;
            by_card.insert(record.card.clone(), (path, record));
        }
        Ok(Calibrations { by_card })
    }

    /// The calibration for `card` over `interconnect`: the stored one, else the defaults with
    /// the catalog's overrides (roofline, no engine profile).
    pub fn for_card(&self, card: &Card, interconnect: &str) -> Calibration {
        self.apply(
            card,
            interconnect,
            Calibration::for_card(card, interconnect),
        )
    }

    /// The step model of `card` under `engine` (see [`Calibration::for_engine`]), with this
    /// card's stored calibration applied when there is one.
    pub fn for_engine(
        &self,
        card: &Card,
        interconnect: &str,
        engine: &EngineProfile,
        operators: &OperatorLibrary,
    ) -> Calibration {
        self.apply(
            card,
            interconnect,
            Calibration::for_engine(card, interconnect, engine, operators),
        )
    }

    fn apply(&self, card: &Card, interconnect: &str, base: Calibration) -> Calibration {
        match self.by_card.get(&card.name) {
            Some((path, record)) => Calibration {
                name: format!(
                    "calibrated on {} run(s), median error {:.0} % → {:.0} % ({})",
                    record.fitted_on.len(),
                    record.median_error_before * 100.0,
                    record.median_error_after * 100.0,
                    path.display()
                ),
                efficiency: record.factors.efficiency_for(interconnect),
                ..base
            },
            None => base,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_card.is_empty()
    }
}

//! Run folders: `<out>/<model>/<card>-tp<T>/<UTC timestamp>/`, one per probe run or import,
//! never reused.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// `20261123T013512Z`.
pub fn utc_stamp(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    )
}

/// A new run folder under `out` (fails rather than reuse an existing one).
pub fn create(out: &Path, model: &str, card: &str, tp: u32) -> std::io::Result<PathBuf> {
    let base = out.join(model).join(format!("{card}-tp{tp}"));
    std::fs::create_dir_all(&base)?;
    let stamp = utc_stamp(SystemTime::now());
    for attempt in 0..100 {
        let name = if attempt == 0 {
            stamp.clone()
        } else {
            format!("{stamp}-{attempt}")
        };
        let dir = base.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other(
        "could not find a free run folder name",
    ))
}

/// Writes `run.json` atomically (temporary file, then rename).
pub fn write_run_json(dir: &Path, value: &serde_json::Value) -> std::io::Result<()> {
    let tmp = dir.join(".run.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(value).map_err(std::io::Error::other)? + "\n",
    )?;
    std::fs::rename(tmp, dir.join(super::curve::RUN_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_utc() {
        // 2026-11-23 01:35:12 UTC = 1795397712 s.
        let at = UNIX_EPOCH + std::time::Duration::from_secs(1_795_397_712);
        assert_eq!(utc_stamp(at), "20261123T013512Z");
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101T000000Z");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_stamp(leap), "20000229T000000Z");
    }
}

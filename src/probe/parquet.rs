//! `requests.parquet`: the run's request log as a columnar file for notebooks and dataframes,
//! made with polars from `requests.ndjson` when a run ends (the NDJSON stays the source of
//! truth: it is what a crash leaves).

use std::fs::File;
use std::path::Path;

use polars::prelude::{Column, DataFrame, NamedFrom, ParquetWriter, PlSmallStr, Series};

use super::record::RequestRecord;
use super::run_dir::{read_requests, PARQUET_FILE};

/// The name serde gives an enum value (`measured`, `usage`, …).
fn label<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn column<T, P>(name: &str, values: T) -> Column
where
    Series: NamedFrom<T, P>,
    P: ?Sized,
{
    Column::new(PlSmallStr::from(name), values)
}

/// Writes `requests.parquet` beside `requests.ndjson`; returns the rows written.
pub fn write_parquet(dir: &Path) -> anyhow::Result<usize> {
    let records = read_requests(dir)?;
    let text = |f: fn(&RequestRecord) -> String| records.iter().map(f).collect::<Vec<String>>();
    let columns = vec![
        column("step", records.iter().map(|r| r.step).collect::<Vec<u32>>()),
        column(
            "index",
            records.iter().map(|r| r.index).collect::<Vec<u64>>(),
        ),
        column(
            "concurrency",
            records.iter().map(|r| r.concurrency).collect::<Vec<u32>>(),
        ),
        column("phase", text(|r| label(r.phase))),
        column(
            "start_s",
            records.iter().map(|r| r.start_s).collect::<Vec<f64>>(),
        ),
        column("ok", records.iter().map(|r| r.ok).collect::<Vec<bool>>()),
        column(
            "error_kind",
            records
                .iter()
                .map(|r| r.error_kind.map(|k| k.name().to_string()))
                .collect::<Vec<Option<String>>>(),
        ),
        column(
            "http_status",
            records
                .iter()
                .map(|r| r.http_status.map(u32::from))
                .collect::<Vec<Option<u32>>>(),
        ),
        column(
            "ttft_s",
            records
                .iter()
                .map(|r| r.ttft_s)
                .collect::<Vec<Option<f64>>>(),
        ),
        column(
            "ttft_visible_s",
            records
                .iter()
                .map(|r| r.ttft_visible_s)
                .collect::<Vec<Option<f64>>>(),
        ),
        column(
            "tpot_s",
            records
                .iter()
                .map(|r| r.tpot_s)
                .collect::<Vec<Option<f64>>>(),
        ),
        column(
            "e2e_s",
            records.iter().map(|r| r.e2e_s).collect::<Vec<f64>>(),
        ),
        column(
            "input_tokens",
            records.iter().map(|r| r.input_tokens).collect::<Vec<u32>>(),
        ),
        column("input_tokens_from", text(|r| label(r.input_tokens_from))),
        column(
            "output_tokens",
            records
                .iter()
                .map(|r| r.output_tokens)
                .collect::<Vec<u32>>(),
        ),
        column("output_tokens_from", text(|r| label(r.output_tokens_from))),
        column(
            "chunks",
            records.iter().map(|r| r.chunks).collect::<Vec<u32>>(),
        ),
        column(
            "itl_mean_s",
            records
                .iter()
                .map(|r| r.itl_mean_s)
                .collect::<Vec<Option<f64>>>(),
        ),
        column(
            "itl_max_s",
            records
                .iter()
                .map(|r| r.itl_max_s)
                .collect::<Vec<Option<f64>>>(),
        ),
        column(
            "streamed",
            records.iter().map(|r| r.streamed).collect::<Vec<bool>>(),
        ),
    ];
    let mut frame = DataFrame::new(records.len(), columns)?;
    let file = File::create(dir.join(PARQUET_FILE))?;
    ParquetWriter::new(file).finish(&mut frame)?;
    Ok(records.len())
}

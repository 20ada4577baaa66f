//! Turning results into what people and programs read.
//!
//! Every command's result is a serde-serializable report (JSON carries all of it) that can also
//! lay itself out as a [`Document`]: lines of context, tables and notes. One exporter per format
//! renders documents, so every command gets every format.

pub mod bar_chart;
pub mod calibrate;
pub mod chart;
pub mod compare;
pub mod csv;
pub mod fit;
pub mod hardware;
pub mod html;
pub mod import;
pub mod markdown;
pub mod memory;
pub mod predict;
pub mod probe;
pub mod solve;
pub mod step_times;
pub mod terminal;
pub mod validate;

use std::str::FromStr;

use serde::Serialize;

use crate::error::InputError;

/// A table: a caption, column headers and rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: Option<String>,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// What a report shows: context lines first, then tables, then notes, then charts.
#[derive(Debug, Clone, Default)]
pub struct Document {
    pub heading: Vec<String>,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    pub charts: Vec<ChartFile>,
}

/// A chart written beside a report: the SVG inline (HTML shows it as it is), the PNG's file
/// name (Markdown links it).
#[derive(Debug, Clone, Default)]
pub struct ChartFile {
    pub title: String,
    pub svg: String,
    pub png_name: String,
}

/// A command's result.
pub trait Report: Serialize {
    fn document(&self) -> Document;
}

/// Renders a document in one format.
pub trait Exporter {
    fn render(&self, document: &Document) -> String;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
    Html,
}

impl FromStr for Format {
    type Err = InputError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "table" | "text" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "markdown" | "md" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            _ => Err(InputError::value(format!(
                "unknown format '{text}': use table, json, csv, markdown or html"
            ))),
        }
    }
}

/// Renders `report` in `format`. CSV carries the first table only (one table per file is what
/// spreadsheet tools read); JSON carries everything.
pub fn render<R: Report>(report: &R, format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(report)?;
            text.push('\n');
            text
        }
        Format::Table => terminal::TerminalExporter.render(&report.document()),
        Format::Csv => csv::CsvExporter.render(&report.document()),
        Format::Markdown => markdown::MarkdownExporter.render(&report.document()),
        Format::Html => html::HtmlExporter.render(&report.document()),
    })
}

/// `12345.6` → `$12,346`.
pub fn dollars(value: f64) -> String {
    let whole = value.round() as i64;
    let digits = whole.abs().to_string();
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{}${grouped}", if whole < 0 { "-" } else { "" })
}

/// A count that may be fractional, without needless decimals.
pub fn count(value: f64) -> String {
    crate::slo::duration::trim_number(value)
}

/// Users an instance or a node holds: whole from 100 up, to a tenth from 10, to a hundredth
/// below. A disaggregated deployment's users per decode worker come out of a rate search as
/// 318.0008, which a table should show as 318, while 2.5 users per instance stays 2.5.
pub fn users(value: f64) -> String {
    let decimals = match value.abs() {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        _ => 2,
    };
    let scale = 10f64.powi(decimals);
    count((value * scale).round() / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_money_and_counts() {
        assert_eq!(dollars(1234567.4), "$1,234,567");
        assert_eq!(dollars(999.0), "$999");
        assert_eq!(count(450.0), "450");
        assert_eq!(count(12.5), "12.5");
        assert_eq!(users(318.0008), "318");
        assert_eq!(users(1234.6), "1235");
        assert_eq!(users(29.04), "29");
        assert_eq!(users(12.46), "12.5");
        assert_eq!(users(2.5), "2.5");
        assert_eq!(users(0.333), "0.33");
    }
}

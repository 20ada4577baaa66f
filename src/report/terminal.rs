//! Tables for a terminal (comfy-table).

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table as ComfyTable};

use super::{Document, Exporter};

pub struct TerminalExporter;

impl Exporter for TerminalExporter {
    fn render(&self, document: &Document) -> String {
        let mut out = String::new();
        for line in &document.heading {
            out.push_str(line);
            out.push('\n');
        }
        for table in &document.tables {
            out.push('\n');
            if let Some(caption) = &table.caption {
                out.push_str(caption);
                out.push('\n');
            }
            let mut comfy = ComfyTable::new();
            comfy
                .load_style(UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Disabled)
                .set_header(&table.headers);
            for row in &table.rows {
                comfy.add_row(row);
            }
            out.push_str(&comfy.to_string());
            out.push('\n');
        }
        if !document.notes.is_empty() {
            out.push('\n');
        }
        for note in &document.notes {
            out.push_str(note);
            out.push('\n');
        }
        for chart in &document.charts {
            out.push_str(&format!(
                "Chart: {} ({}, and .svg)\n",
                chart.title, chart.png_name
            ));
        }
        out
    }
}

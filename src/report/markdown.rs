//! Markdown: context as paragraphs, tables as pipe tables, notes as a list.

use super::{Document, Exporter};

pub struct MarkdownExporter;

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

impl Exporter for MarkdownExporter {
    fn render(&self, document: &Document) -> String {
        let mut out = String::new();
        for line in &document.heading {
            out.push_str(&cell(line));
            out.push_str("  \n");
        }
        for table in &document.tables {
            out.push('\n');
            if let Some(caption) = &table.caption {
                out.push_str(&format!("**{}**\n\n", cell(caption)));
            }
            let headers: Vec<String> = table.headers.iter().map(|h| cell(h)).collect();
            out.push_str(&format!("| {} |\n", headers.join(" | ")));
            out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
            for row in &table.rows {
                let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
        }
        if !document.notes.is_empty() {
            out.push('\n');
            for note in &document.notes {
                out.push_str(&format!("- {}\n", cell(note)));
            }
        }
        for chart in &document.charts {
            out.push_str(&format!(
                "\n![{}]({})\n",
                cell(&chart.title),
                chart.png_name
            ));
        }
        out
    }
}

//! CSV: the first table, header row first, quoted where needed.

use super::{Document, Exporter};

pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, document: &Document) -> String {
        let Some(table) = document.tables.first() else {
            return String::new();
        };
        let mut writer = csv::Writer::from_writer(Vec::new());
        // Writing to memory cannot fail; a failed row would only drop that row.
        let _ = writer.write_record(&table.headers);
        for row in &table.rows {
            let _ = writer.write_record(row);
        }
        let bytes = writer.into_inner().unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

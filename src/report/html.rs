//! A self-contained HTML page: context, tables, notes and the charts inline (SVG), so the file
//! can be mailed or opened from disk with nothing beside it.
//!
//! A few lines of script count, once the page has laid out, the tables with rows and the
//! charts that drew with a size, into `data-rendered` on `<body>`: what a headless browser test
//! reads to know the page really renders, not merely that the file contains the markup.

use super::{Document, Exporter};

pub struct HtmlExporter;

/// Escapes text for HTML content and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// An SVG file's markup without its XML declaration, to sit inside HTML.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(start) => &svg[start..],
        None => svg,
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:2em;color:#222;max-width:1400px}\
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}\
th,td{border:1px solid #ccc;padding:0.3em 0.6em;text-align:left;vertical-align:top}\
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}\
caption{text-align:left;font-weight:bold;padding:0.3em 0}\
.heading p{margin:0.2em 0}.notes li{margin:0.2em 0}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}";

const SCRIPT: &str = "window.addEventListener('load',function(){\
var t=0;document.querySelectorAll('table').forEach(function(x){if(x.rows.length>1)t++;});\
var c=0;document.querySelectorAll('figure svg').forEach(function(s){var b=s.getBoundingClientRect();if(b.width>100&&b.height>100&&s.querySelectorAll('text,path,rect,line,polyline,circle').length>10)c++;});\
document.body.setAttribute('data-rendered','tables:'+t+' charts:'+c);});";

impl Exporter for HtmlExporter {
    fn render(&self, document: &Document) -> String {
        let title = document
            .heading
            .first()
            .map(String::as_str)
            .unwrap_or("capplan report");
        let mut out = format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n<script>{SCRIPT}</script>\n</head>\n<body>\n",
            escape(title)
        );
        out.push_str("<div class=\"heading\">\n");
        for (index, line) in document.heading.iter().enumerate() {
            if index == 0 {
                out.push_str(&format!("<h1>{}</h1>\n", escape(line)));
            } else {
                out.push_str(&format!("<p>{}</p>\n", escape(line)));
            }
        }
        out.push_str("</div>\n");
        for table in &document.tables {
            out.push_str("<table>\n");
            if let Some(caption) = &table.caption {
                out.push_str(&format!("<caption>{}</caption>\n", escape(caption)));
            }
            out.push_str("<thead><tr>");
            for header in &table.headers {
                out.push_str(&format!("<th>{}</th>", escape(header)));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in &table.rows {
                out.push_str("<tr>");
                for cell in row {
                    out.push_str(&format!("<td>{}</td>", escape(cell)));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table>\n");
        }
        if !document.notes.is_empty() {
            out.push_str("<ul class=\"notes\">\n");
            for note in &document.notes {
                out.push_str(&format!("<li>{}</li>\n", escape(note)));
            }
            out.push_str("</ul>\n");
        }
        for chart in &document.charts {
            out.push_str(&format!(
                "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
                inline_svg(&chart.svg),
                escape(&chart.title)
            ));
        }
        out.push_str("</body>\n</html>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ChartFile, Table};

    #[test]
    fn escapes_text_and_inlines_charts() {
        let document = Document {
            heading: vec!["Plan <A&B>".into(), "second".into()],
            tables: vec![Table {
                caption: Some("t".into()),
                headers: vec!["a".into()],
                rows: vec![vec!["<script>x</script>".into()]],
            }],
            notes: vec!["n".into()],
            charts: vec![ChartFile {
                title: "cost".into(),
                svg: "<?xml version=\"1.0\"?>\n<svg width=\"10\"><rect/></svg>".into(),
                png_name: "c.png".into(),
            }],
        };
        let html = HtmlExporter.render(&document);
        assert!(html.contains("<h1>Plan &lt;A&amp;B&gt;</h1>"));
        assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(html.contains("<figure>\n<svg width=\"10\">"));
        assert!(!html.contains("<?xml"));
    }
}

//! Horizontal bar charts of plan options, one panel per group (a model), bars coloured by
//! where their figure comes from (measured, imported, predicted).
//!
//! Why panels: a fleet for a 70B model costs a hundred times one for an 8B model; on one axis
//! the small model's bars are slivers. Each panel has its own scale, and the colour says how
//! far each bar can be trusted.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{register_font, with_extension};

/// One bar: its label, value and the kind of evidence behind it.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// `measured`, `imported`, `predicted`, …: picks the colour.
    pub kind: String,
}

/// Bars drawn on one scale under one heading.
#[derive(Debug, Clone)]
pub struct BarGroup {
    pub name: String,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub groups: Vec<BarGroup>,
    /// How a value is printed at the end of its bar.
    pub unit: BarUnit,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum BarUnit {
    #[default]
    Count,
    Dollars,
}

impl BarChart {
    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|g| g.bars.is_empty())
    }

    /// The kinds present, in the order of [`KINDS`] then first appearance.
    fn kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = Vec::new();
        let present = |kind: &str| {
            self.groups
                .iter()
                .any(|g| g.bars.iter().any(|b| b.kind == kind))
        };
        for (kind, _) in KINDS {
            if present(kind) {
                kinds.push(kind);
            }
        }
        for group in &self.groups {
            for bar in &group.bars {
                if !kinds.contains(&bar.kind.as_str()) {
                    kinds.push(&bar.kind);
                }
            }
        }
        kinds
    }
}

/// The colour of each kind of evidence: measured is what a buyer can trust most.
const KINDS: [(&str, RGBColor); 3] = [
    ("measured", RGBColor(44, 160, 44)),
    ("imported", RGBColor(31, 119, 180)),
    ("predicted", RGBColor(255, 127, 14)),
];
const OTHER: RGBColor = RGBColor(140, 140, 140);

fn colour(kind: &str) -> RGBColor {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(OTHER, |(_, c)| *c)
}

const WIDTH: u32 = 900;
const HEADER: u32 = 70;
const PANEL_FIXED: u32 = 70;
const PER_BAR: u32 = 40;

fn panel_height(group: &BarGroup) -> u32 {
    PANEL_FIXED + PER_BAR * group.bars.len().max(1) as u32
}

fn short(unit: BarUnit, v: f64) -> String {
    let (value, suffix) = if v.abs() >= 1e9 {
        (v / 1e9, "G")
    } else if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let number = crate::report::count((value * 10.0).round() / 10.0);
    match unit {
        BarUnit::Dollars => format!("${number}{suffix}"),
        BarUnit::Count => format!("{number}{suffix}"),
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &BarChart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (header, mut rest) = root.split_vertically(HEADER);
    header.draw(&Text::new(
        chart.title.clone(),
        (12, 10),
        ("sans-serif", 20).into_font().color(&BLACK),
    ))?;
    // The legend: one swatch per kind of evidence present.
    let mut x = 12;
    for kind in chart.kinds() {
        header.draw(&Rectangle::new(
            [(x, 44), (x + 14, 58)],
            colour(kind).filled(),
        ))?;
        header.draw(&Text::new(
            kind.to_string(),
            (x + 20, 44),
            ("sans-serif", 14).into_font().color(&BLACK),
        ))?;
        x += 30 + 9 * kind.chars().count() as i32;
    }
    for group in chart.groups.iter().filter(|g| !g.bars.is_empty()) {
        let (panel, below) = rest.split_vertically(panel_height(group));
        rest = below;
        draw_group(&panel, chart, group)?;
    }
    root.present()?;
    Ok(())
}

fn draw_group<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &BarChart,
    group: &BarGroup,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let n = group.bars.len().max(1);
    let high = group
        .bars
        .iter()
        .map(|b| b.value)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.3;
    let unit = chart.unit;
    let format = move |v: &f64| short(unit, *v);
    let mut plot = ChartBuilder::on(area)
        .caption(&group.name, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(8)
        .build_cartesian_2d(0.0..high, 0.0..n as f64)?;
    plot.configure_mesh()
        .light_line_style(WHITE)
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(6)
        .x_label_formatter(&format)
        .x_desc(chart.x_label.as_str())
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    for (index, bar) in group.bars.iter().enumerate() {
        let y = (n - index - 1) as f64;
        // The label sits above its bar, so long labels never crowd an axis.
        plot.draw_series(std::iter::once(Text::new(
            bar.label.clone(),
            (high * 0.005, y + 0.93),
            ("sans-serif", 12).into_font().color(&BLACK),
        )))?;
        plot.draw_series(std::iter::once(Rectangle::new(
            [(0.0, y + 0.1), (bar.value, y + 0.55)],
            colour(&bar.kind).filled(),
        )))?;
        let text = match chart.unit {
            BarUnit::Count => crate::report::count(bar.value),
            BarUnit::Dollars => crate::report::dollars(bar.value),
        };
        plot.draw_series(std::iter::once(Text::new(
            text,
            (bar.value + high * 0.01, y + 0.45),
            ("sans-serif", 12).into_font().color(&BLACK),
        )))?;
    }
    Ok(())
}

/// Writes `chart` to `<stem>.svg` and `<stem>.png`; returns the two paths.
pub fn write_bar_chart(chart: &BarChart, stem: &Path) -> anyhow::Result<Vec<PathBuf>> {
    register_font();
    let (svg, png) = (with_extension(stem, ".svg"), with_extension(stem, ".png"));
    let panels: u32 = chart
        .groups
        .iter()
        .filter(|g| !g.bars.is_empty())
        .map(panel_height)
        .sum();
    let height = (HEADER + panels).clamp(240, 8000);
    {
        let root = SVGBackend::new(&svg, (WIDTH, height)).into_drawing_area();
        draw(&root, chart).map_err(|err| anyhow::anyhow!("drawing {}: {err}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (WIDTH, height)).into_drawing_area();
        draw(&root, chart).map_err(|err| anyhow::anyhow!("drawing {}: {err}", png.display()))?;
    }
    Ok(vec![svg, png])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: f64, kind: &str) -> Bar {
        Bar {
            label: label.into(),
            value,
            kind: kind.into(),
        }
    }

    #[test]
    fn each_group_gets_its_own_scale_and_each_kind_its_colour() {
        let scratch = crate::scratch::scratch_dir();
        let chart = BarChart {
            title: "Total cost".into(),
            x_label: "US$".into(),
            groups: vec![
                BarGroup {
                    name: "llama-2-70b".into(),
                    bars: vec![bar("8xA30 1×TP8", 3.0e7, "imported")],
                },
                BarGroup {
                    name: "llama-3.1-8b".into(),
                    bars: vec![
                        bar("8xL4 8×TP1", 9.0e4, "predicted"),
                        bar("8xA100 8×TP1", 1.2e5, "measured"),
                    ],
                },
            ],
            unit: BarUnit::Dollars,
        };
        let written = write_bar_chart(&chart, &scratch.join("bars")).unwrap();
        let file = crate::report::chart::chart_file("cost", &written).unwrap();
        let svg = &file.svg;
        for text in [
            "llama-2-70b",
            "llama-3.1-8b",
            "$90,000",
            "8xA100 8×TP1",
            "predicted",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        // Bars and swatches in the three evidence colours.
        for (_, c) in KINDS {
            let hex = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
            assert!(svg.to_uppercase().contains(&hex), "{hex}");
        }
        // The 8B model's larger bar is drawn at its own panel's scale: far wider than 1/250
        // of the 70B bar, which is what one shared axis would give it.
        let widths = rect_widths(svg);
        let widest = widths.iter().copied().fold(0.0, f64::max);
        assert!(
            widths.iter().filter(|w| **w > widest * 0.5).count() >= 2,
            "{widths:?}"
        );
        assert_eq!(file.png_name, "bars.png");
        let png = std::fs::read(&written[1]).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
    }

    /// Widths of the filled rectangles in an SVG.
    fn rect_widths(svg: &str) -> Vec<f64> {
        svg.split("<rect")
            .skip(1)
            .filter_map(|rect| {
                let width = rect.split("width=\"").nth(1)?.split('"').next()?;
                width.parse().ok()
            })
            .collect()
    }
}

//! Line-and-point charts written as SVG and PNG (bar charts: `bar_chart`).
//!
//! Drawn with plotters; the font (DejaVu Sans, free licence, in `fonts/`) is compiled in, so a
//! chart looks the same on a server with no fonts installed. One description, [`Chart`], draws
//! on both backends.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    Line,
    Points,
    /// Hollow points: data shown but not used (flagged levels).
    Hollow,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    /// Index into the palette: series of one quantity share a colour.
    pub colour: usize,
}

/// A reference line: a limit (horizontal) or a load such as C* (vertical).
#[derive(Debug, Clone)]
pub struct Rule {
    pub label: String,
    pub at: f64,
    pub vertical: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
const RULE: RGBColor = RGBColor(90, 90, 90);

pub(super) fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("fonts/DejaVuSans.ttf");
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
    });
}

fn bounds(chart: &Chart) -> ((f64, f64), (f64, f64)) {
    let xs = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(chart.rules.iter().filter(|r| r.vertical).map(|r| r.at));
    let ys = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.rules.iter().filter(|r| !r.vertical).map(|r| r.at));
    let span = |values: Vec<f64>| {
        let finite: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        let low = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let high = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if low.is_finite() && high > low {
            (low, high)
        } else if low.is_finite() {
            (low - 1.0, low + 1.0)
        } else {
            (0.0, 1.0)
        }
    };
    let (x0, x1) = span(xs.collect());
    let (y0, y1) = span(ys.collect());
    ((x0.min(0.0), x1 * 1.05), (y0.min(0.0), y1 * 1.1))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let ((x0, x1), (y0, y1)) = bounds(chart);
    let mut plot = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    plot.configure_mesh()
        .light_line_style(WHITE)
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    for series in &chart.series {
        let colour = PALETTE[series.colour % PALETTE.len()];
        let label = series.label.clone();
        match series.mark {
            Mark::Line => {
                plot.draw_series(LineSeries::new(
                    series.points.iter().copied(),
                    colour.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
            }
            Mark::Points | Mark::Hollow => {
                let filled = series.mark == Mark::Points;
                plot.draw_series(series.points.iter().map(|&(x, y)| {
                    Circle::new(
                        (x, y),
                        4,
                        if filled {
                            colour.filled()
                        } else {
                            colour.stroke_width(1)
                        },
                    )
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Circle::new(
                        (x + 9, y),
                        4,
                        if filled {
                            colour.filled()
                        } else {
                            colour.stroke_width(1)
                        },
                    )
                });
            }
        }
    }
    for rule in &chart.rules {
        let line = if rule.vertical {
            vec![(rule.at, y0), (rule.at, y1)]
        } else {
            vec![(x0, rule.at), (x1, rule.at)]
        };
        plot.draw_series(std::iter::once(PathElement::new(
            line,
            RULE.stroke_width(1),
        )))?;
        let anchor = if rule.vertical {
            (rule.at, y1 * 0.97)
        } else {
            (x0 + (x1 - x0) * 0.01, rule.at)
        };
        plot.draw_series(std::iter::once(Text::new(
            rule.label.clone(),
            anchor,
            ("sans-serif", 13).into_font().color(&RULE),
        )))?;
    }
    if chart.series.iter().any(|s| !s.label.is_empty()) {
        plot.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Writes `chart` to `<stem>.svg` and `<stem>.png` (900 × 560); returns the two paths.
pub fn write_chart(chart: &Chart, stem: &Path) -> anyhow::Result<Vec<PathBuf>> {
    register_font();
    let (svg, png) = (with_extension(stem, ".svg"), with_extension(stem, ".png"));
    {
        let root = SVGBackend::new(&svg, (900, 560)).into_drawing_area();
        draw(&root, chart).map_err(|err| anyhow::anyhow!("drawing {}: {err}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (900, 560)).into_drawing_area();
        draw(&root, chart).map_err(|err| anyhow::anyhow!("drawing {}: {err}", png.display()))?;
    }
    Ok(vec![svg, png])
}

/// `stem` + `extension`, appended (`mindie.throughput` must not become `mindie.svg`).
pub(super) fn with_extension(stem: &Path, extension: &str) -> PathBuf {
    let mut path = stem.as_os_str().to_owned();
    path.push(extension);
    PathBuf::from(path)
}

/// A written chart as a report shows it: the SVG read back, the PNG by file name.
pub fn chart_file(title: &str, written: &[PathBuf]) -> Option<crate::report::ChartFile> {
    let svg = written
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "svg"))?;
    let png = written
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"))?;
    Some(crate::report::ChartFile {
        title: title.to_string(),
        svg: std::fs::read_to_string(svg).ok()?,
        png_name: png.file_name()?.to_string_lossy().into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_its_text_and_a_png() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let chart = Chart {
            title: "Throughput".into(),
            x_label: "users".into(),
            y_label: "tokens/s".into(),
            series: vec![
                Series {
                    label: "measured".into(),
                    points: vec![(1.0, 10.0), (8.0, 70.0), (16.0, 120.0)],
                    mark: Mark::Points,
                    colour: 0,
                },
                Series {
                    label: "USL fit".into(),
                    points: vec![(1.0, 11.0), (16.0, 118.0)],
                    mark: Mark::Line,
                    colour: 0,
                },
            ],
            rules: vec![Rule {
                label: "C* = 12".into(),
                at: 12.0,
                vertical: true,
            }],
        };
        let written = write_chart(&chart, &dir.join("t")).unwrap();
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.contains("Throughput") && svg.contains("C* = 12") && svg.contains("USL fit"));
        let png = std::fs::read(&written[1]).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        assert!(png.len() > 5_000, "with pixels drawn: {} bytes", png.len());
    }
}

//! `bfperf plot` and `diff --plot`: charts drawn with plotters, as SVG or PNG (by the
//! file's extension). PNG text needs a TrueType font from the system.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::measure::series::{self, Chart};
use crate::ops::diff::Diff;

const WIDTH: u32 = 1100;
const CHART_HEIGHT: u32 = 340;
/// Series a legend inside the chart holds; more go in a column beside it, busiest
/// first.
const INSIDE_LEGEND: usize = 8;
/// Most series a chart draws: beyond, the busiest by mean, said in its title.
const MOST_LINES: usize = 32;
const LEGEND_WIDTH: u32 = 260;
const LEGEND_ROW: u32 = 16;

/// Fonts tried for PNG text, in order (Debian's fonts-dejavu-core first).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// What a file shows.
enum Job<'a> {
    /// Runs' time series, a chart each.
    Runs { title: &'a str, charts: &'a [Chart] },
    /// A diff's rates as bars.
    Bars {
        interval_s: f64,
        bars: &'a [(String, f64)],
    },
}

/// What `bfperf plot` was asked for.
#[derive(Debug, Clone)]
pub(super) struct PlotOptions {
    /// `bfperf stat -I MS --json` outputs (NDJSON); several are drawn on the same charts
    pub runs: Vec<std::path::PathBuf>,
    /// The chart file: .svg or .png
    pub output: std::path::PathBuf,
    /// One line per block (runs made with -A) instead of the kind's total
    pub per_block: bool,
}

/// Draws the runs' charts into the output file.
pub(super) fn run(a: PlotOptions) -> Result<()> {
    extension(&a.output)?;
    let files: Vec<&Path> = a.runs.iter().map(|p| p.as_path()).collect();
    let (title, charts) = series::charts(&files, a.per_block)?;
    let height = charts.iter().map(chart_height).sum::<u32>() + 40;
    draw(
        &a.output,
        (WIDTH, height),
        &Job::Runs {
            title: &title,
            charts: &charts,
        },
    )
}

/// Draws a bar per value of a diff: its rate per second.
pub(super) fn diff_bars(diff: &Diff, out: &Path) -> Result<()> {
    extension(out)?;
    let bars: Vec<(String, f64)> = diff
        .values
        .iter()
        .filter_map(|v| {
            let name = v
                .event_name
                .clone()
                .or_else(|| v.register.clone())
                .or_else(|| v.counter.map(|c| format!("counter{c}")))?;
            Some((format!("{} {name}", v.block), v.rate_per_s?))
        })
        .filter(|(_, r)| *r > 0.0)
        .collect();
    if bars.is_empty() {
        return Err(Error::SnapshotMismatch {
            problem: "nothing counted between the two snapshots: no bars to draw".into(),
        });
    }
    let height = 80 + 22 * bars.len() as u32;
    draw(
        out,
        (WIDTH, height),
        &Job::Bars {
            interval_s: diff.interval_s,
            bars: &bars,
        },
    )
}

fn render<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, job: &Job) -> Result<()> {
    root.fill(&WHITE).map_err(plot_err)?;
    match job {
        Job::Runs { title, charts } => {
            let mut rest = root.titled(title, ("sans-serif", 22)).map_err(plot_err)?;
            for chart in charts.iter() {
                let (area, below) = rest.split_vertically(chart_height(chart) as i32);
                line_chart(&area, chart)?;
                rest = below;
            }
        }
        Job::Bars { interval_s, bars } => bar_chart(root, *interval_s, bars)?,
    }
    root.present().map_err(plot_err)
}

fn bar_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    interval_s: f64,
    bars: &[(String, f64)],
) -> Result<()> {
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("Rates between the snapshots ({interval_s:.1} s)"),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..max, (0..bars.len()).into_segmented())
        .map_err(plot_err)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(bars.len())
        .y_label_formatter(&|y| match y {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc("per second")
        .x_label_formatter(&|x| si(*x))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, r))| {
            Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*r, SegmentValue::Exact(i + 1)),
                ],
                Palette99::pick(i).filled(),
            )
        }))
        .map_err(plot_err)?;
    Ok(())
}

/// A chart's height: room for its legend's column when it has one.
fn chart_height(c: &Chart) -> u32 {
    match c.lines.len().min(MOST_LINES) {
        n if n > INSIDE_LEGEND => CHART_HEIGHT.max(80 + LEGEND_ROW * n as u32),
        _ => CHART_HEIGHT,
    }
}

/// The lines a chart draws, in legend order: all of them as they come, or, beyond
/// the inside legend, the busiest first by mean (the [`MOST_LINES`] busiest at most).
fn drawn(c: &Chart) -> Vec<&series::Line> {
    let mut lines: Vec<&series::Line> = c.lines.iter().collect();
    if lines.len() > INSIDE_LEGEND {
        let mean = |l: &series::Line| {
            l.points.iter().map(|p| p.1).sum::<f64>() / l.points.len().max(1) as f64
        };
        lines.sort_by(|a, b| mean(b).total_cmp(&mean(a)));
        lines.truncate(MOST_LINES);
    }
    lines
}

fn line_chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> Result<()> {
    let lines = drawn(c);
    let xmax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(1e-3);
    let ymax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    // Headroom, within what f64 holds (the values are finite: series dropped others).
    let ymax = if ymax > 0.0 {
        (ymax * 1.1).min(f64::MAX)
    } else {
        1.0
    };
    let mut title = c.title.clone();
    if lines.len() < c.lines.len() {
        title += &format!(
            " (the {} busiest of {} by mean)",
            lines.len(),
            c.lines.len()
        );
    }
    if c.not_finite > 0 {
        title += &format!(" ({} values not finite, not drawn)", c.not_finite);
    }
    let beside = lines.len() > INSIDE_LEGEND;
    let (plot, legend) = match beside {
        true => {
            let (w, _) = area.dim_in_pixel();
            let (plot, legend) = area.split_horizontally(w.saturating_sub(LEGEND_WIDTH) as i32);
            (plot, Some(legend))
        }
        false => (area.clone(), None),
    };
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, ("sans-serif", 18))
        .margin(12)
        // Room for the last x label, centred on the right edge.
        .margin_right(36)
        .x_label_area_size(34)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(&c.unit)
        .y_label_formatter(&|y| si(*y))
        .draw()
        .map_err(plot_err)?;
    for (i, l) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let drawn = chart
            .draw_series(LineSeries::new(
                l.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?;
        if !beside {
            drawn
                .label(l.label.clone())
                .legend(move |(x, y)| swatch(x, y, color));
        }
    }
    match legend {
        Some(legend) => legend_column(&legend, &lines),
        None => chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err),
    }
}

/// A line's sample in a legend: 18 pixels of its colour, as wide as its line.
fn swatch(x: i32, y: i32, color: RGBAColor) -> PathElement<(i32, i32)> {
    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
}

/// The legend as a column beside the chart: a swatch and a label per line.
fn legend_column<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[&series::Line],
) -> Result<()> {
    area.draw(&Text::new("busiest first", (8, 40), ("sans-serif", 13)))
        .map_err(plot_err)?;
    for (i, l) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let y = 64 + (i as u32 * LEGEND_ROW) as i32;
        area.draw(&swatch(8, y, color)).map_err(plot_err)?;
        area.draw(&Text::new(l.label.clone(), (32, y - 7), ("sans-serif", 13)))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// 1234567 → `1.23M`.
fn si(x: f64) -> String {
    let a = x.abs();
    match a {
        a if a >= 1e12 => format!("{:.2}T", x / 1e12),
        a if a >= 1e9 => format!("{:.2}G", x / 1e9),
        a if a >= 1e6 => format!("{:.2}M", x / 1e6),
        a if a >= 1e3 => format!("{:.2}K", x / 1e3),
        _ => format!("{x:.2}"),
    }
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error::Io {
        message: format!("drawing the chart: {e}"),
        source: std::io::Error::other(e.to_string()),
    }
}

/// The output's format by its extension, checked before anything is read.
fn extension(out: &Path) -> Result<String> {
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "svg" | "png" => Ok(ext),
        _ => Err(Error::OutputTarget {
            path: out.to_path_buf(),
            problem: "name it .svg or .png".into(),
        }),
    }
}

/// Draws into `out` (SVG or PNG by its extension), written atomically.
fn draw(out: &Path, size: (u32, u32), job: &Job) -> Result<()> {
    register_font()?;
    let bytes = match extension(out)?.as_str() {
        "svg" => {
            let mut svg = String::new();
            render(
                &SVGBackend::with_string(&mut svg, size).into_drawing_area(),
                job,
            )?;
            svg.into_bytes()
        }
        "png" => {
            // plotters encodes PNG into a file: a private temporary one, then copied.
            let tmp = tempfile::Builder::new()
                .suffix(".png")
                .tempfile()
                .map_err(|e| Error::File {
                    what: "cannot create a temporary file for",
                    path: out.to_path_buf(),
                    source: e,
                })?;
            render(
                &BitMapBackend::new(tmp.path(), size).into_drawing_area(),
                job,
            )?;
            std::fs::read(tmp.path()).map_err(|e| Error::File {
                what: "cannot read back the chart for",
                path: out.to_path_buf(),
                source: e,
            })?
        }
        _ => unreachable!("extension() admits svg and png only"),
    };
    crate::outfile::replace(out, &mut |w| w.write_all(&bytes))
}

/// Registers the first system TrueType font found as `sans-serif`.
fn register_font() -> Result<()> {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        FONTS.iter().any(|p| {
            std::fs::read(p).is_ok_and(|bytes| {
                let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok()
            })
        })
    });
    match ok {
        true => Ok(()),
        false => Err(Error::NoFont {
            looked: FONTS.join(", "),
        }),
    }
}

//! `rfx bench --plot FILE.svg`: time per element against size, log-log, for rfx and the
//! interpreter baseline measured in the same run, with a plain Rust loop as the reference line;
//! the machine, thread count and date in the title, the legend beside the chart.

use plotters::prelude::*;

use crate::bench::{BenchReport, KernelResult};

/// The kernels drawn (when measured): rfxJIT's benchmark kernels and a gradient.
const DRAWN: [&str; 5] = [
    "add",
    "fused_chain",
    "chain10",
    "pid_clip",
    "value_and_grad_sum_sq",
];

/// The picture's size, and the width of the chart left of the legend.
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 640;
pub(crate) const CHART_WIDTH: u32 = 790;

/// How a line is stroked: rfx solid, the interpreter dashed, the Rust loop dotted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

impl Stroke {
    /// Dash and gap lengths in pixels (`None`: solid).
    fn pattern(self) -> Option<(u32, u32)> {
        match self {
            Stroke::Solid => None,
            Stroke::Dashed => Some((8, 5)),
            Stroke::Dotted => Some((2, 4)),
        }
    }

    /// The drawn segments of a `width`-pixel legend sample, as `(start, end)` offsets.
    pub(crate) fn segments(self, width: i32) -> Vec<(i32, i32)> {
        let Some((dash, gap)) = self.pattern() else {
            return vec![(0, width)];
        };
        let (dash, gap) = (dash as i32, gap as i32);
        (0..width)
            .step_by((dash + gap) as usize)
            .map(|x| (x, (x + dash).min(width)))
            .collect()
    }
}

/// One line: its label, its colour, its stroke and `(size, ns per element)` points.
struct Line {
    label: String,
    colour: RGBColor,
    stroke: Stroke,
    points: Vec<(f64, f64)>,
}

fn per_element(seconds: f64, n: usize) -> f64 {
    seconds * 1e9 / n.max(1) as f64
}

fn lines(results: &[KernelResult]) -> Vec<Line> {
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
    ];
    let mut out = Vec::new();
    for (name, colour) in DRAWN.iter().zip(colours) {
        let mut rows: Vec<&KernelResult> = results.iter().filter(|r| r.kernel == *name).collect();
        rows.sort_by_key(|r| r.size);
        if rows.is_empty() {
            continue;
        }
        let backend = &rows[0].backend;
        out.push(Line {
            label: format!("{name} ({backend})"),
            colour,
            stroke: Stroke::Solid,
            points: rows
                .iter()
                .map(|r| (r.size as f64, per_element(r.batch_p50_s, r.size)))
                .collect(),
        });
        let interp: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| r.interp_p50_s.map(|t| (r.size as f64, per_element(t, r.size))))
            .collect();
        if !interp.is_empty() {
            out.push(Line {
                label: format!("{name} (interpreter)"),
                colour,
                stroke: Stroke::Dashed,
                points: interp,
            });
        }
    }
    // The Rust loop is timed beside every kernel: one point per size (the first row's).
    let mut sizes: Vec<&KernelResult> = results.iter().collect();
    sizes.sort_by_key(|r| r.size);
    sizes.dedup_by_key(|r| r.size);
    if !out.is_empty() && !sizes.is_empty() {
        out.push(Line {
            label: "Rust loop out[i] = x[i] + y[i]".to_string(),
            colour: RGBColor(60, 60, 60),
            stroke: Stroke::Dotted,
            points: sizes
                .iter()
                .map(|r| (r.size as f64, per_element(r.rust_loop_p50_s, r.size)))
                .collect(),
        });
    }
    out
}

/// A tick label of a power of ten: `1`, `10`, `1,000`, `0.01`.
pub(crate) fn tick_label(value: f64) -> String {
    let exponent = value.log10().round() as i32;
    if exponent < 0 {
        return format!("{:.*}", exponent.unsigned_abs() as usize, value);
    }
    let digits = format!("{:.0}", value);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A log axis from the decade at or below `lo` to the decade at or above `hi` (at least one
/// decade): its range, its ticks (the decades) and its light grid lines (2…9 times each).
fn decades(lo: f64, hi: f64) -> (f64, f64, Vec<f64>, Vec<f64>) {
    let low = lo.log10().floor() as i32;
    let high = (hi.log10().ceil() as i32).max(low + 1);
    let ticks: Vec<f64> = (low..=high).map(|e| 10f64.powi(e)).collect();
    let light = (low..high)
        .flat_map(|e| (2..10).map(move |m| f64::from(m) * 10f64.powi(e)))
        .collect();
    (10f64.powi(low), 10f64.powi(high), ticks, light)
}

/// The title's second line: machine, threads, date and revision.
fn subtitle(report: &BenchReport) -> String {
    let threads = match report.threads {
        Some(1) => "1 thread".to_string(),
        Some(t) => format!("at most {t} threads"),
        None => format!("every core ({} threads)", report.machine.cores),
    };
    let revision = report
        .git_revision
        .as_deref()
        .map_or(String::new(), |r| format!(", git {r}"));
    format!(
        "{}, {}, {} UTC{}{}",
        report.machine.cpu,
        threads,
        report.date_utc,
        revision,
        if report.fast_math { ", fast math" } else { "" }
    )
}

/// Draws the SVG and returns its text (the caller writes it, with every other output of the
/// run); the sizes need not be a sweep, but one size gives single points.
pub fn draw(report: &BenchReport) -> anyhow::Result<String> {
    let lines = lines(&report.results);
    anyhow::ensure!(
        !lines.is_empty(),
        "none of the plotted kernels ({}) was measured",
        DRAWN.join(", ")
    );
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in lines.iter().flat_map(|l| l.points.iter().copied()) {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    let (x_lo, x_hi, x_ticks, x_light) = decades(x_lo.max(1.0), x_hi.max(1.0));
    let (y_lo, y_hi, y_ticks, y_light) = decades(y_lo.max(1e-4), y_hi.max(1e-4));
    let drawing_error = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("drawing the plot: {e}");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let (head, body) = root.split_vertically(70);
        head.draw_text(
            "rfx bench: time per element (rfx and Rust: median of batched calls; interpreter: \
             median call)",
            &("sans-serif", 22).into_text_style(&head),
            (20, 12),
        )
        .map_err(drawing_error)?;
        head.draw_text(
            &subtitle(report),
            &("sans-serif", 15).into_text_style(&head),
            (20, 44),
        )
        .map_err(drawing_error)?;
        let (plot_area, legend_area) = body.split_horizontally(CHART_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (x_lo..x_hi)
                    .log_scale()
                    .with_key_points(x_ticks)
                    .with_light_points(x_light),
                (y_lo..y_hi)
                    .log_scale()
                    .with_key_points(y_ticks)
                    .with_light_points(y_light),
            )
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .x_desc("elements per input")
            .y_desc("ns per element")
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(drawing_error)?;
        for line in &lines {
            let style = ShapeStyle::from(&line.colour).stroke_width(2);
            let points = line.points.clone();
            match line.stroke.pattern() {
                None => chart.draw_series(LineSeries::new(points, style)),
                Some((dash, gap)) => chart.draw_series(DashedLineSeries::new(points, dash, gap, style)),
            }
            .map_err(drawing_error)?;
            chart
                .draw_series(
                    line.points
                        .iter()
                        .map(|&p| Circle::new(p, 3, line.colour.filled())),
                )
                .map_err(drawing_error)?;
        }
        legend(&legend_area, &lines).map_err(drawing_error)?;
        root.present().map_err(drawing_error)?;
    }
    Ok(svg)
}

/// The legend, in its own area right of the chart: a sample of each line's stroke and its label.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    lines: &[Line],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let text = ("sans-serif", 14).into_text_style(area);
    for (i, line) in lines.iter().enumerate() {
        let y = 24 + 24 * i as i32;
        for (start, end) in line.stroke.segments(32) {
            area.draw(&PathElement::new(
                vec![(8 + start, y), (8 + end, y)],
                line.colour.stroke_width(2),
            ))?;
        }
        area.draw_text(&line.label, &text, (48, y - 8))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_as_numbers() {
        let labels: Vec<String> = [1.0, 10.0, 100.0, 1e3, 1e6, 0.1, 0.01, 0.001]
            .into_iter()
            .map(tick_label)
            .collect();
        assert_eq!(
            labels,
            ["1", "10", "100", "1,000", "1,000,000", "0.1", "0.01", "0.001"]
        );
        let (lo, hi, ticks, light) = decades(3.0, 700.0);
        assert_eq!((lo, hi), (1.0, 1000.0));
        assert_eq!(ticks, [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(light.len(), 3 * 8);
        // One size still spans a decade.
        let (lo, hi, _, _) = decades(65536.0, 65536.0);
        assert_eq!((lo, hi), (1e4, 1e5));
    }

    #[test]
    fn legend_samples_are_stroked_as_their_lines() {
        assert_eq!(Stroke::Solid.segments(32), [(0, 32)]);
        let dashed = Stroke::Dashed.segments(32);
        assert_eq!(dashed, [(0, 8), (13, 21), (26, 32)]);
        let dotted = Stroke::Dotted.segments(32);
        assert_eq!(dotted.len(), 6);
        assert!(dotted.iter().all(|(a, b)| b - a == 2));
    }
}

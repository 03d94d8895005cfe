//! `rfx bench --plot FILE.svg`: time per element against size, log-log, for rfx and the
//! baselines (interpreter, unfused op-by-op) measured in the same run.

use plotters::prelude::*;

use crate::bench::KernelResult;

/// The kernels drawn (when measured): rfxJIT's benchmark kernels and a gradient.
const DRAWN: [&str; 5] = [
    "add",
    "fused_chain",
    "chain10",
    "pid_clip",
    "value_and_grad_sum_sq",
];

/// One line: its label, its colour, dashed or not, and `(size, ns per element)` points.
struct Line {
    label: String,
    colour: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
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
        let per_element = |seconds: f64, n: usize| seconds * 1e9 / n.max(1) as f64;
        let backend = &rows[0].backend;
        out.push(Line {
            label: format!("{name} ({backend})"),
            colour,
            dashed: false,
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
                dashed: true,
                points: interp,
            });
        }
    }
    out
}

/// Draws the SVG and returns its text (the caller writes it, with every other output of the
/// run); the sizes need not be a sweep, but one size gives single points.
pub fn draw(results: &[KernelResult]) -> anyhow::Result<String> {
    let lines = lines(results);
    anyhow::ensure!(
        !lines.is_empty(),
        "none of the plotted kernels ({}) was measured",
        DRAWN.join(", ")
    );
    let all = lines.iter().flat_map(|l| l.points.iter().copied());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in all {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    let pad = |lo: f64, hi: f64| (lo / 2.0, (hi * 2.0).max(lo * 4.0));
    let ((x_lo, x_hi), (y_lo, y_hi)) = (pad(x_lo.max(1.0), x_hi), pad(y_lo.max(1e-6), y_hi));
    let drawing_error = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("drawing the plot: {e}");
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("rfx bench: time per element", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("elements per input")
        .y_desc("ns per element (median)")
        .draw()
        .map_err(drawing_error)?;
    for line in &lines {
        let style = ShapeStyle::from(&line.colour).stroke_width(2);
        let series = if line.dashed {
            chart.draw_series(DashedLineSeries::new(line.points.clone(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(line.points.clone(), style))
        }
        .map_err(drawing_error)?;
        let colour = line.colour;
        series
            .label(line.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2)));
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, line.colour.filled())),
            )
            .map_err(drawing_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(drawing_error)?;
    root.present().map_err(drawing_error)?;
    drop(chart);
    drop(root);
    Ok(svg)
}

//! `fastsoftmax plot`: precision-versus-speedup curves (the L2S paper's Figures 2–7) from the
//! JSON rows `bench --json` prints, as PNG and SVG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use plotters::coord::Shift;
use plotters::prelude::*;

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// JSON rows from `bench --json` (one object per line; several files may be given).
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Field on the x axis (log scale).
    #[arg(long, default_value = "speedup_b1")]
    x: String,
    /// Fields on the y axis: one figure per field, written as OUT-FIELD.{png,svg}.
    #[arg(long, value_delimiter = ',', default_value = "p_at_1,p_at_5")]
    y: Vec<String>,
    /// Output path without extension.
    #[arg(long)]
    out: PathBuf,
    /// Figure title.
    #[arg(long, default_value = "")]
    title: String,
    /// Field naming each row's curve. `head` (bench rows) drops a trailing knob setting
    /// (`-b50`), so one head's settings form one curve; any other field is taken as it is
    /// (e.g. `model` for `experiments/nmt_distill.sh`'s rows: BLEU against words/s).
    #[arg(long, default_value = "head")]
    series: String,
}

/// One curve: points sorted by x.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// Groups `(curve, x, y)` points into curves (by name), each sorted by x.
    pub fn group(points: impl IntoIterator<Item = (String, f64, f64)>) -> Vec<Series> {
        let mut curves: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (name, x, y) in points {
            curves.entry(name).or_default().push((x, y));
        }
        curves
            .into_iter()
            .map(|(name, mut points)| {
                points.sort_by(|p, q| p.0.total_cmp(&q.0));
                Series { name, points }
            })
            .collect()
    }
}

/// The curve a head belongs to: its name without a trailing knob setting `-b<number>` (so
/// `l2s-r100-b50` and `l2s-r100-b200` form the curve `l2s-r100`).
pub fn series_of(head: &str) -> &str {
    match head.rfind("-b") {
        Some(i) if head[i + 2..].parse::<f64>().is_ok() => &head[..i],
        _ => head,
    }
}

pub fn run(a: PlotArgs) -> anyhow::Result<()> {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for path in &a.input {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            rows.push(serde_json::from_str(line).with_context(|| {
                format!(
                    "{}:{}: not a JSON row from `bench --json`",
                    path.display(),
                    i + 1
                )
            })?);
        }
    }
    if rows.is_empty() {
        anyhow::bail!(
            "no rows in {:?}; run `bench --json` into them first",
            a.input
        );
    }
    for y in &a.y {
        let mut points = Vec::new();
        for r in &rows {
            let name = r[&a.series].as_str().unwrap_or("?");
            let (Some(xv), Some(yv)) = (r[&a.x].as_f64(), r[y].as_f64()) else {
                anyhow::bail!("row of {name} lacks numeric fields {:?} and {y:?}", a.x);
            };
            let curve = if a.series == "head" {
                series_of(name)
            } else {
                name
            };
            points.push((curve.to_string(), xv, yv));
        }
        let series = Series::group(points);
        let mut stem = a.out.clone().into_os_string();
        stem.push(format!("-{y}"));
        let label = match y.as_str() {
            "p_at_1" => "precision@1".to_string(),
            "p_at_5" => "precision@5".to_string(),
            other => other.to_string(),
        };
        let xlabel = format!("{} (log scale)", a.x.replace('_', " "));
        // A speedup's ticks read `10×`; any other quantity's plain numbers.
        let style = if a.x.starts_with("speedup") {
            &Style::SPEEDUP
        } else {
            &Style::PLAIN
        };
        line_plot_with(Path::new(&stem), &a.title, &xlabel, &label, &series, style)?;
        eprintln!("wrote {}.png and .svg", Path::new(&stem).display());
    }
    Ok(())
}

const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const SIZE: (u32, u32) = (900, 600);

/// Makes the bundled font plotters' "sans-serif" (once).
pub fn register_font() {
    static FONT_ONCE: std::sync::Once = std::sync::Once::new();
    FONT_ONCE.call_once(|| {
        // The bundled font is valid; if registration ever failed, text would just be missing.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// How the curves and the x axis look.
pub struct Style {
    /// Written after each x tick label (`×` for speedups).
    pub x_suffix: &'static str,
    /// A dot on every point (off for dense curves such as distributions).
    pub markers: bool,
}

impl Style {
    pub const SPEEDUP: Style = Style {
        x_suffix: "×",
        markers: true,
    };
    pub const PLAIN: Style = Style {
        x_suffix: "",
        markers: true,
    };
}

/// Okabe and Ito's colours, which stay apart for colour-blind readers and on white (their
/// yellow, faint on white, is left out).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// The corner of the plot that the curves cross least, for the legend: each curve is sampled
/// along its segments on the axes' scales (log x), and a corner is the outer 40 % × 30 %.
fn free_corner(series: &[Series], (x0, x1, y0, y1): (f64, f64, f64, f64)) -> SeriesLabelPosition {
    let at = |(x, y): (f64, f64)| {
        let xn = (x.max(1e-300).ln() - x0.ln()) / (x1.ln() - x0.ln());
        (xn, (y - y0) / (y1 - y0))
    };
    let corners = [
        (SeriesLabelPosition::LowerLeft, false, false),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
    ];
    let mut crossings = [0usize; 4];
    for s in series {
        let points: Vec<(f64, f64)> = s.points.iter().map(|&p| at(p)).collect();
        let samples = points.windows(2).flat_map(|w| {
            (0..=20).map(move |i| {
                let t = i as f64 / 20.0;
                (
                    w[0].0 + t * (w[1].0 - w[0].0),
                    w[0].1 + t * (w[1].1 - w[0].1),
                )
            })
        });
        for (x, y) in samples.chain(points.iter().copied()) {
            for (n, &(_, right, upper)) in corners.iter().enumerate() {
                let in_x = if right { x > 0.6 } else { x < 0.4 };
                let in_y = if upper { y > 0.7 } else { y < 0.3 };
                crossings[n] += (in_x && in_y) as usize;
            }
        }
    }
    let best = (0..4).min_by_key(|&n| crossings[n]).unwrap_or(0);
    corners[best].0.clone()
}

/// Draws `series` (log-scale x) into `STEM.png` and `STEM.svg`, each written atomically.
pub fn line_plot(
    stem: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    line_plot_with(stem, title, x_desc, y_desc, series, &Style::SPEEDUP)
}

/// [`line_plot`] in another [`Style`].
pub fn line_plot_with(
    stem: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    style: &Style,
) -> anyhow::Result<()> {
    register_font();
    let points = || series.iter().flat_map(|s| s.points.iter().copied());
    if points().next().is_none() {
        anyhow::bail!("nothing to plot");
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points() {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    // Whole decades, so the log axis always has labelled ticks.
    let (x0, x1) = (
        10f64.powf((x0.max(1e-3) * 0.9).log10().floor()),
        10f64.powf((x1 * 1.1).log10().ceil()),
    );
    let pad = ((y1 - y0) * 0.08).max(1e-3);
    let (y0, y1) = (y0 - pad, y1 + pad);
    let ranges = (x0, x1, y0, y1);

    let mut svg = String::new();
    draw(
        SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
        title,
        x_desc,
        y_desc,
        series,
        ranges,
        style,
    )?;
    fastsoftmax_infer::files::write_atomic(&stem.with_extension("svg"), svg.as_bytes())?;
    write_png(&stem.with_extension("png"), SIZE, |area| {
        draw(area, title, x_desc, y_desc, series, ranges, style)
    })
}

/// Paints a `size` bitmap in memory with `paint` and writes it to `path` as a PNG with
/// [`write_atomic`](fastsoftmax_infer::files::write_atomic): an interrupted plot never leaves a
/// half-written file, and a device or link at `path` stays what it is.
pub fn write_png(
    path: &Path,
    size: (u32, u32),
    paint: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (w, h) = size;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    paint(BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area())?;
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut image| image.write_image_data(&rgb))
        .with_context(|| format!("encoding {}", path.display()))?;
    fastsoftmax_infer::files::write_atomic(path, &bytes)?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    (x0, x1, y0, y1): (f64, f64, f64, f64),
    style: &Style,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plotting: {e:?}");
    // Decimals that tell the y ticks apart, and no more (precision 0.950, speedups 150).
    let y_digits = match y1 - y0 {
        span if span >= 20.0 => 0,
        span if span >= 2.0 => 1,
        _ => 3,
    };
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(20)
        .margin_right(50) // room for the last x label, centred on the right edge
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| {
            let digits = if *x < 1.0 { 2 } else { 0 };
            format!("{x:.digits$}{}", style.x_suffix)
        })
        .y_label_formatter(&|y| format!("{y:.y_digits$}"))
        .label_style(("sans-serif", 16))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()].to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        if style.markers {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .position(free_corner(series, (x0, x1, y0, y1)))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_png_holds_what_was_painted_and_leaves_no_scratch_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fig.png");
        write_png(&path, (7, 3), |area| {
            area.fill(&WHITE).unwrap();
            area.draw_pixel((6, 2), &RED).unwrap();
            area.present().unwrap();
            Ok(())
        })
        .unwrap();
        let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!((info.width, info.height), (7, 3));
        assert_eq!(&rgb[..3], &[255, 255, 255]);
        assert_eq!(&rgb[(2 * 7 + 6) * 3..], &[255, 0, 0]);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a scratch file was left beside the plot");
        // A failed paint writes nothing.
        let failed = write_png(&dir.path().join("bad.png"), (2, 2), |_| anyhow::bail!("no"));
        assert!(failed.is_err() && !dir.path().join("bad.png").exists());
    }

    #[test]
    fn the_legend_goes_to_the_corner_the_curves_leave_free() {
        let line = |points: Vec<(f64, f64)>| Series {
            name: "a".into(),
            points,
        };
        let ranges = (1.0, 1000.0, 0.0, 1.0);
        // Rising from the lower left to the upper right: both other corners are free, and
        // the lower right is tried first.
        let rising = [line(vec![(1.0, 0.0), (1000.0, 1.0)])];
        assert!(matches!(
            free_corner(&rising, ranges),
            SeriesLabelPosition::LowerRight
        ));
        // Falling, plus a flat curve along the top: only the lower left is free.
        let falling = [
            line(vec![(1.0, 1.0), (1000.0, 0.0)]),
            line(vec![(1.0, 0.95), (1000.0, 0.95)]),
        ];
        assert!(matches!(
            free_corner(&falling, ranges),
            SeriesLabelPosition::LowerLeft
        ));
    }

    #[test]
    fn knob_settings_are_stripped_from_series_names() {
        assert_eq!(series_of("l2s-r100-b50"), "l2s-r100");
        assert_eq!(series_of("l2s-r100-b37.5"), "l2s-r100");
        assert_eq!(series_of("l2s"), "l2s");
        assert_eq!(series_of("km-bx"), "km-bx");
        assert_eq!(series_of("full"), "full");
    }
}

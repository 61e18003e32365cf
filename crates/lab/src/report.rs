//! HTML reports with inline SVG plots (plotters' SVG backend), shared by every lab.
//!
//! [`Report`] collects headings, paragraphs, tables and figures and renders one self-contained
//! HTML page. The plot helpers return SVG text:
//! - [`grouped_bars`]: one group per category (e.g. per variant), one bar per series (e.g.
//!   min/max/mean/median/range): the form of seed 001 Fig. 3-5;
//! - [`dots`]: one row per item (e.g. per URL), one marker per series: Fig. 2;
//! - [`lines`]: y against a numeric x (e.g. browsers), one line per series: Fig. 6-7.

use std::fmt::Write as _;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An HTML report under construction.
pub struct Report {
    title: String,
    body: String,
}

impl Report {
    /// An empty report titled `title`.
    pub fn new(title: &str) -> Report {
        Report {
            title: title.to_owned(),
            body: String::new(),
        }
    }

    /// A section heading.
    pub fn h2(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<h2>{}</h2>", esc(text));
        self
    }

    /// A sub-heading.
    pub fn h3(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<h3>{}</h3>", esc(text));
        self
    }

    /// A paragraph of plain text.
    pub fn p(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<p>{}</p>", esc(text));
        self
    }

    /// A highlighted verdict (`ok` = goal met).
    pub fn verdict(&mut self, ok: bool, text: &str) -> &mut Self {
        let _ = writeln!(
            self.body,
            "<p class=\"{}\">{}</p>",
            if ok { "ok" } else { "miss" },
            esc(text)
        );
        self
    }

    /// Preformatted text (commands).
    pub fn pre(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.body, "<pre>{}</pre>", esc(text));
        self
    }

    /// A table of text cells.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) -> &mut Self {
        self.body.push_str("<table>\n<tr>");
        for h in header {
            let _ = write!(self.body, "<th>{}</th>", esc(h));
        }
        self.body.push_str("</tr>\n");
        for r in rows {
            self.body.push_str("<tr>");
            for c in r {
                let _ = write!(self.body, "<td>{}</td>", esc(c));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table>\n");
        self
    }

    /// A figure: inline SVG with a caption.
    pub fn figure(&mut self, svg: &str, caption: &str) -> &mut Self {
        let _ = writeln!(
            self.body,
            "<figure>{svg}<figcaption>{}</figcaption></figure>",
            esc(caption)
        );
        self
    }

    /// The complete page.
    pub fn to_html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\n\
             body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\n\
             table{{border-collapse:collapse;margin:1em 0;font-size:90%}}\n\
             td,th{{border:1px solid #bbb;padding:3px 8px;text-align:right}}\n\
             th{{background:#eee}} td:first-child{{text-align:left}}\n\
             figure{{margin:1.5em 0}} figcaption{{font-size:90%;color:#555}}\n\
             pre{{background:#f5f5f5;padding:.5em;overflow-x:auto}}\n\
             .ok{{background:#e3f5e1;padding:.5em}} .miss{{background:#fbe3e3;padding:.5em}}\n\
             </style></head><body>\n<h1>{t}</h1>\n{b}</body></html>\n",
            t = esc(&self.title),
            b = self.body
        )
    }
}

/// The palette of every lab's charts (matplotlib's tab10), by series index.
pub(crate) fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

fn max_of<'a>(it: impl Iterator<Item = &'a f64>) -> f64 {
    let m = it.copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m > 0.0 {
        m * 1.1
    } else {
        1.0
    }
}

/// One series of a plot: a name and one value per category/point (`NaN` = missing).
pub type Series = (String, Vec<f64>);

/// Grouped bar chart: `groups` along x, one bar per series within each group.
pub fn grouped_bars(title: &str, y_label: &str, groups: &[String], series: &[Series]) -> String {
    let mut svg = String::new();
    let k = series.len().max(1);
    let per = k + 1; // bars plus a gap
    let segs = groups.len() * per;
    let width = (160 + segs * 18).clamp(640, 1100) as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (width, 420)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let ymax = max_of(series.iter().flat_map(|s| s.1.iter()));
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..segs.max(1)).into_segmented(), 0.0..ymax);
        let Ok(mut chart) = chart else {
            return svg_error(title);
        };
        let names: Vec<String> = groups.to_vec();
        let fmt = move |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(j) if j % per == (k - 1) / 2 && j / per < names.len() => {
                names[j / per].clone()
            }
            _ => String::new(),
        };
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(segs + 1)
            .x_label_formatter(&fmt)
            .y_desc(y_label)
            .draw();
        for (si, (name, vals)) in series.iter().enumerate() {
            let c = color(si);
            let bars =
                vals.iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(move |(gi, &v)| {
                        let j = gi * per + si;
                        Rectangle::new(
                            [
                                (SegmentValue::Exact(j), 0.0),
                                (SegmentValue::Exact(j + 1), v),
                            ],
                            c.filled(),
                        )
                    });
            if let Ok(a) = chart.draw_series(bars) {
                a.label(name.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled())
                });
            }
        }
        let _ = chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

/// Dot plot: one row per item (`items` along y, first at the top), the value of each series
/// as a marker along x (seed 001 Fig. 2: per-URL t1).
pub fn dots(title: &str, x_label: &str, items: &[String], series: &[Series]) -> String {
    let mut svg = String::new();
    let n = items.len().max(1);
    let height = (120 + n * 22).clamp(300, 900) as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let xmax = max_of(series.iter().flat_map(|s| s.1.iter()));
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, (0..n).into_segmented());
        let Ok(mut chart) = chart else {
            return svg_error(title);
        };
        let names: Vec<String> = items.to_vec();
        let fmt = move |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(j) if *j < names.len() => names[*j].clone(),
            _ => String::new(),
        };
        let _ = chart
            .configure_mesh()
            .y_labels(n + 1)
            .y_label_formatter(&fmt)
            .x_desc(x_label)
            .draw();
        for (si, (name, vals)) in series.iter().enumerate() {
            let c = color(si);
            let pts: Vec<(f64, SegmentValue<usize>)> = vals
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(i, &v)| (v, SegmentValue::CenterOf(i)))
                .collect();
            if let Ok(a) = chart.draw_series(
                pts.iter()
                    .map(move |p| Circle::new(p.clone(), 4, c.filled())),
            ) {
                a.label(name.clone())
                    .legend(move |(x, y)| Circle::new((x + 5, y), 4, c.filled()));
            }
        }
        let _ = chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

/// Line chart: y of each series against numeric `xs` (seed 001 Fig. 6-7).
pub fn lines(title: &str, x_label: &str, y_label: &str, xs: &[f64], series: &[Series]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 420)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let ymax = max_of(series.iter().flat_map(|s| s.1.iter()));
        let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let xmax = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (xmin, xmax) = if xmin.is_finite() && xmax > xmin {
            (xmin, xmax)
        } else {
            (0.0, 1.0)
        };
        let pad = (xmax - xmin) * 0.05;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xmin - pad)..(xmax + pad), 0.0..ymax);
        let Ok(mut chart) = chart else {
            return svg_error(title);
        };
        let _ = chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw();
        for (si, (name, vals)) in series.iter().enumerate() {
            let c = color(si);
            let pts: Vec<(f64, f64)> = xs
                .iter()
                .zip(vals)
                .filter(|(_, v)| v.is_finite())
                .map(|(&x, &v)| (x, v))
                .collect();
            if let Ok(a) = chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))) {
                a.label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
            }
            let _ = chart.draw_series(pts.into_iter().map(move |p| Circle::new(p, 3, c.filled())));
        }
        let _ = chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

fn svg_error(title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"5\" y=\"20\">{}: no data to plot</text></svg>",
        esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_is_html_with_escaped_text_and_inline_svg() {
        let mut r = Report::new("t <1>");
        r.h2("a & b")
            .p("x < y")
            .table(&["k", "v"], &[vec!["fifo".into(), "1.0".into()]]);
        let svg = grouped_bars(
            "t1",
            "ms",
            &["fifo".into(), "pos".into()],
            &[
                ("mean".into(), vec![10.0, 5.0]),
                ("max".into(), vec![20.0, f64::NAN]),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.contains("<rect"), "{svg}");
        assert!(svg.contains("fifo") && svg.contains("mean"));
        r.figure(&svg, "Fig. 3");
        let html = r.to_html();
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(html.contains("a &amp; b") && html.contains("x &lt; y"));
        assert!(html.contains("<svg") && html.contains("<td>fifo</td>"));
        assert!(html.trim_end().ends_with("</html>"));
    }

    #[test]
    fn dots_and_lines_render_points() {
        let d = dots(
            "per URL",
            "t1 (ms)",
            &["1".into(), "2".into()],
            &[("fifo".into(), vec![1.0, 2.0])],
        );
        assert!(d.contains("<circle"), "{d}");
        let l = lines(
            "mean t1",
            "browsers",
            "ms",
            &[3.0, 6.0, 9.0],
            &[("fifo".into(), vec![1.0, 2.0, 4.0])],
        );
        assert!(l.contains("<polyline") || l.contains("<path"), "{l}");
        // Empty data still yields an SVG, never a panic.
        assert!(lines("x", "x", "y", &[], &[]).contains("<svg"));
        assert!(grouped_bars("x", "y", &[], &[]).contains("<svg"));
    }
}

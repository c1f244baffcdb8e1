//! Small SVG charts for the reports: lines over time and grouped bars. Hand-written
//! because the reports need two kinds of chart and a plotting crate would bring a font
//! stack and dozens of dependencies with it.

use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 360.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 45.0;
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn frame(title: &str, x_label: &str, y_label: &str, y_max: f64) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
        (W - RIGHT + LEFT) / 2.0,
        esc(title)
    );
    let (x0, y0, x1, y1) = (LEFT, H - BOTTOM, W - RIGHT, TOP);
    let _ = write!(
        s,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/>\n<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"black\"/>\n"
    );
    for i in 0..=4 {
        let v = y_max * i as f64 / 4.0;
        let y = y0 - (y0 - y1) * i as f64 / 4.0;
        let _ = writeln!(
            s,
            "<line x1=\"{x0}\" y1=\"{y}\" x2=\"{x1}\" y2=\"{y}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            x0 - 5.0,
            y + 4.0,
            fmt_num(v)
        );
    }
    let _ =
        writeln!(s, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", (x0 + x1) / 2.0, H - 8.0, esc(x_label));
    let _ = writeln!(
        s,
        "<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        esc(y_label)
    );
    s
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn legend(s: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 18.0;
        let x = W - RIGHT + 12.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            y - 10.0,
            COLOURS[i % COLOURS.len()],
            x + 18.0,
            y,
            esc(n)
        );
    }
}

/// Lines of (x, y) points, one per series, with an optional horizontal guide (e.g. 95%).
pub fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    guide: Option<f64>,
) -> String {
    let x_max = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).fold(1.0, f64::max);
    let y_max = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).chain(guide).fold(1e-9, f64::max) * 1.1;
    let mut s = frame(title, x_label, y_label, y_max);
    let sx = |x: f64| LEFT + (W - RIGHT - LEFT) * x / x_max;
    let sy = |y: f64| H - BOTTOM - (H - BOTTOM - TOP) * y / y_max;
    for i in 0..=4 {
        let x = x_max * i as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            sx(x),
            H - BOTTOM + 16.0,
            fmt_num(x)
        );
    }
    if let Some(g) = guide {
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"4 4\"/>",
            sx(0.0),
            sy(g),
            sx(x_max),
            sy(g)
        );
    }
    for (i, (_, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
            COLOURS[i % COLOURS.len()],
            path.join(" ")
        );
    }
    legend(&mut s, &series.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    s.push_str("</svg>\n");
    s
}

/// Grouped bars: one group per category, one bar per series; `whiskers` (per series,
/// per category: low, high), when given, draws each bar's range.
pub fn bars(
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(&str, Vec<f64>)],
    whiskers: &[Vec<(f64, f64)>],
    guide: Option<f64>,
) -> String {
    let y_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .chain(whiskers.iter().flatten().map(|w| w.1))
        .chain(guide)
        .fold(1e-9, f64::max)
        * 1.15;
    let mut s = frame(title, "", y_label, y_max);
    let sy = |y: f64| H - BOTTOM - (H - BOTTOM - TOP) * y / y_max;
    let group_w = (W - RIGHT - LEFT) / categories.len().max(1) as f64;
    let bar_w = group_w * 0.8 / series.len().max(1) as f64;
    for (c, cat) in categories.iter().enumerate() {
        let gx = LEFT + group_w * c as f64 + group_w * 0.1;
        for (i, (_, vals)) in series.iter().enumerate() {
            let v = vals.get(c).copied().unwrap_or(0.0);
            let x = gx + bar_w * i as f64;
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                sy(v),
                bar_w * 0.9,
                (H - BOTTOM - sy(v)).max(0.0),
                COLOURS[i % COLOURS.len()],
                fmt_num(v)
            );
            if let Some(&(lo, hi)) = whiskers.get(i).and_then(|w| w.get(c))
                && hi > lo
            {
                let mid = x + bar_w * 0.45;
                let _ = writeln!(
                    s,
                    "<path d=\"M{mid:.1},{:.1}V{:.1}M{:.1},{:.1}h{:.1}M{:.1},{:.1}h{:.1}\" stroke=\"black\"/>",
                    sy(lo),
                    sy(hi),
                    mid - 4.0,
                    sy(lo),
                    8.0,
                    mid - 4.0,
                    sy(hi),
                    8.0
                );
            }
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            gx + group_w * 0.4,
            H - BOTTOM + 16.0,
            esc(cat)
        );
    }
    if let Some(g) = guide {
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"4 4\"/>",
            sy(g),
            W - RIGHT,
            sy(g)
        );
    }
    legend(&mut s, &series.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_svg_with_every_series() {
        let l = lines("t", "s", "%", &[("a", vec![(0.0, 1.0), (1.0, 2.0)]), ("b<", vec![(0.0, 0.5)])], Some(0.95));
        assert!(l.starts_with("<svg") && l.ends_with("</svg>\n"));
        assert_eq!(l.matches("<polyline").count(), 2);
        assert!(l.contains("b&lt;"), "labels are escaped");
        let b =
            bars("t", "x", &["one".into(), "two".into()], &[("m1", vec![1.0, 2.0]), ("m2", vec![3.0, 4.0])], &[], None);
        assert_eq!(b.matches("<rect x=").count(), 4 + 2, "four bars and two legend keys");
        let w = bars(
            "t",
            "x",
            &["one".into()],
            &[("m1", vec![1.0]), ("m2", vec![2.0])],
            &[vec![(0.9, 1.1)], vec![(2.0, 2.0)]],
            None,
        );
        assert_eq!(w.matches("<path").count(), 1, "a whisker where the range is not empty");
    }
}

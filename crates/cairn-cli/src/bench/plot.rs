//! The sustained scenario's plot: an SVG of panels stacked over one time axis (completions and enqueues per
//! second; claim latency percentiles on a log scale; what the database holds). Written by hand: a few lines and
//! polylines need no plotting library, and the file opens in any browser.

use std::fmt::Write as _;

use super::series::Sample;

/// A line on a panel.
struct Line {
    label: &'static str,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// One chart: its lines share the y axis.
struct Panel {
    title: String,
    log: bool,
    lines: Vec<Line>,
}

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 220.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const GAP: f64 = 60.0;

/// The plot of `samples`, titled `title`.
pub fn svg(title: &str, samples: &[Sample]) -> String {
    let panels = panels(samples);
    let height = TOP + panels.len() as f64 * (PANEL_HEIGHT + GAP);
    let end = samples.last().map_or(1.0, |s| s.at_s).max(1.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="15">{}</text>"#,
        escape(title)
    );
    for (i, panel) in panels.iter().enumerate() {
        let top = TOP + i as f64 * (PANEL_HEIGHT + GAP);
        draw(&mut out, panel, top, end);
    }
    out.push_str("</svg>\n");
    out
}

fn panels(samples: &[Sample]) -> Vec<Panel> {
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|y| (s.at_s, y)))
            .collect()
    };
    // A sample in which no job started has no latency: a gap, not a zero (which a log scale cannot show).
    let claim = |f: fn(&Sample) -> f64| series(&move |s: &Sample| (s.claims > 0).then(|| f(s)));
    let mut panels = vec![
        Panel {
            title: "jobs per second".to_owned(),
            log: false,
            lines: vec![
                Line {
                    label: "completed",
                    color: "#1f77b4",
                    dashed: false,
                    points: series(&|s| Some(s.completions_per_s)),
                },
                Line {
                    label: "enqueued",
                    color: "#ff7f0e",
                    dashed: true,
                    points: series(&|s| Some(s.enqueues_per_s)),
                },
            ],
        },
        Panel {
            title: "claim latency, enqueue to handler start (ms, log scale)".to_owned(),
            log: true,
            lines: vec![
                Line {
                    label: "p50",
                    color: "#2ca02c",
                    dashed: false,
                    points: claim(|s| s.claim_p50_ms),
                },
                Line {
                    label: "p95",
                    color: "#ff7f0e",
                    dashed: false,
                    points: claim(|s| s.claim_p95_ms),
                },
                Line {
                    label: "p99",
                    color: "#d62728",
                    dashed: false,
                    points: claim(|s| s.claim_p99_ms),
                },
            ],
        },
    ];
    let dead = series(&|s| s.storage.as_ref()?.dead.map(|d| d as f64));
    let mib = |s: &Sample| Some(s.storage.as_ref()?.bytes as f64 / (1024.0 * 1024.0));
    if !dead.is_empty() {
        panels.push(Panel {
            title: "rows (thousands): dead in Cairn's tables, live and dead in jobs".to_owned(),
            log: false,
            lines: vec![
                Line {
                    label: "dead, all tables",
                    color: "#d62728",
                    dashed: false,
                    points: dead.into_iter().map(|(x, y)| (x, y / 1000.0)).collect(),
                },
                Line {
                    label: "dead, jobs",
                    color: "#9467bd",
                    dashed: true,
                    points: series(&|s| Some(s.storage.as_ref()?.jobs_dead? as f64 / 1000.0)),
                },
                Line {
                    label: "live, jobs",
                    color: "#1f77b4",
                    dashed: false,
                    points: series(&|s| Some(s.storage.as_ref()?.jobs_live? as f64 / 1000.0)),
                },
            ],
        });
    }
    let size = series(&mib);
    if !size.is_empty() {
        panels.push(Panel {
            title: "database size (MiB)".to_owned(),
            log: false,
            lines: vec![Line {
                label: "size",
                color: "#8c564b",
                dashed: false,
                points: size,
            }],
        });
    }
    panels
}

/// Draws `panel` with its top edge at `top`, over the time axis from 0 to `end` seconds.
fn draw(out: &mut String, panel: &Panel, top: f64, end: f64) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let x = |t: f64| LEFT + t / end * plot_width;
    let values = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1));
    let (lo, hi) = if panel.log {
        let positive: Vec<f64> = values.filter(|v| *v > 0.0).collect();
        let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = positive.iter().copied().fold(0.0, f64::max);
        if positive.is_empty() {
            (0.0, 1.0)
        } else {
            (
                lo.log10().floor(),
                hi.log10().ceil().max(lo.log10().floor() + 1.0),
            )
        }
    } else {
        (0.0, nice_ceiling(values.fold(0.0, f64::max)))
    };
    let y = |v: f64| {
        let v = if panel.log { v.max(1e-9).log10() } else { v };
        top + PANEL_HEIGHT - (v - lo) / (hi - lo) * PANEL_HEIGHT
    };
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="13">{}</text>"#,
        top - 8.0,
        escape(&panel.title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>"##
    );
    // Horizontal grid: decades on a log scale, fifths otherwise.
    let ticks: Vec<f64> = if panel.log {
        (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| hi * f64::from(i) / 5.0).collect()
    };
    for v in ticks {
        let ty = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{ty:.1}" y2="{ty:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            ty + 4.0,
            label(v)
        );
    }
    // Time ticks, in minutes when the run is long.
    let step = time_step(end);
    let mut t = 0.0;
    while t <= end + 1e-9 {
        let tx = x(t);
        let text = if end >= 600.0 {
            format!("{}m", (t / 60.0).round())
        } else {
            format!("{t:.0}s")
        };
        let _ = writeln!(
            out,
            r##"<line x1="{tx:.1}" x2="{tx:.1}" y1="{top}" y2="{}" stroke="#eee"/><text x="{tx:.1}" y="{}" text-anchor="middle">{text}</text>"##,
            top + PANEL_HEIGHT,
            top + PANEL_HEIGHT + 16.0
        );
        t += step;
    }
    for (i, line) in panel.lines.iter().enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let dash = if line.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5"{dash} points="{}"/>"#,
            line.color,
            points.join(" ")
        );
        let lx = LEFT + plot_width - 150.0;
        let ly = top + 16.0 + i as f64 * 16.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            line.color,
            lx + 26.0,
            ly + 4.0,
            line.label
        );
    }
}

/// The smallest of 1, 2 or 5 times a power of ten at or above `v`, so that the grid reads in round numbers.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * magnitude)
}

/// Seconds between time ticks: about ten ticks over the run, at a round step.
fn time_step(end: f64) -> f64 {
    [
        1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ]
    .into_iter()
    .find(|s| end / s <= 12.0)
    .unwrap_or(7200.0)
}

fn label(v: f64) -> String {
    if v >= 1000.0 {
        super::report::thousands(v)
    } else if v >= 1.0 || v == 0.0 {
        format!("{}", (v * 10.0).round() / 10.0)
    } else {
        format!("{v}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::super::series::{Counts, Storage};
    use super::*;

    fn sample(at_s: f64, rate: f64, p99_ms: f64, dead: Option<u64>) -> Sample {
        let mut s = Sample::new(at_s, 5.0, &Counts::default());
        s.completions_per_s = rate;
        s.claims = 100;
        s.claim_p50_ms = p99_ms / 4.0;
        s.claim_p95_ms = p99_ms / 2.0;
        s.claim_p99_ms = p99_ms;
        s.storage = Some(Storage {
            bytes: 64 * 1024 * 1024,
            dead,
            ..Storage::default()
        });
        s
    }

    #[test]
    fn the_plot_has_a_panel_per_measure_and_a_line_per_series() {
        let samples = [
            sample(5.0, 9_000.0, 4.0, Some(10_000)),
            sample(10.0, 9_500.0, 40.0, Some(20_000)),
        ];
        let svg = svg("postgres <32 slots>", &samples);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.ends_with("</svg>\n"));
        assert!(svg.contains("postgres &lt;32 slots&gt;"));
        for title in [
            "jobs per second",
            "claim latency",
            "dead in Cairn",
            "database size",
        ] {
            assert!(svg.contains(title), "no panel {title:?}");
        }
        // completed, enqueued, p50, p95, p99, three row lines, size.
        assert_eq!(svg.matches("<polyline").count(), 9);
        // The claim panel spans the decades from 1 ms to 100 ms.
        assert!(svg.contains(">100</text>"), "{svg}");
    }

    #[test]
    fn without_postgres_rows_only_the_size_is_drawn() {
        let svg = svg("sqlite", &[sample(5.0, 9_000.0, 4.0, None)]);
        assert!(!svg.contains("dead in Cairn"));
        assert!(svg.contains("database size"));
    }

    #[test]
    fn grids_read_in_round_numbers() {
        assert_eq!(nice_ceiling(9_500.0), 10_000.0);
        assert_eq!(nice_ceiling(1_200.0), 2_000.0);
        assert_eq!(nice_ceiling(3.0), 5.0);
        assert_eq!(time_step(600.0), 60.0);
        assert_eq!(time_step(60.0), 5.0);
    }
}

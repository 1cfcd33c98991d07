//! The drill chart an SRE expects: x is AWS-equivalent seconds since the fault; the fault
//! window is shaded; detection, the DNS flip, the heal and the failback are marked; the top
//! panel is the share of users restored in the secondary over time (one curve per run, p50
//! and p99 marked), the bottom panel the connections per Region as steps.

use crate::runs::report::{Comparison, ReferenceComparison, Report};
use crate::world::timeline::Kind;
use plotters::prelude::*;
use std::path::Path;

/// One run on the chart: its report, the legend's name for it, its colour.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub report: &'a Report,
    pub name: &'a str,
    pub colour: RGBColor,
}

pub const DNS_ONLY: RGBColor = RGBColor(31, 95, 191);
pub const CLIENT_ASSISTED: RGBColor = RGBColor(179, 84, 30);
pub const REFERENCE: RGBColor = RGBColor(120, 120, 120);
const REGION_COLOURS: [RGBColor; 2] = [RGBColor(31, 95, 191), RGBColor(179, 84, 30)];

/// Times of one run, AWS seconds since its (first) fault.
struct Marks {
    windows: Vec<(f64, f64)>,
    detection: Option<f64>,
    dns_flip: Option<f64>,
    heal: Option<f64>,
    failback: Option<f64>,
    end: f64,
}

fn marks(report: &Report) -> Marks {
    let aws = |ms: f64| report.aws_secs(ms);
    let fault_ms = report
        .timeline
        .iter()
        .find(|e| e.kind == Kind::Fault)
        .map_or(0.0, |e| e.at_ms);
    let since = |ms: f64| aws(ms - fault_ms);
    // Each fault until the heal after it (a flapping primary has several).
    let mut windows = Vec::new();
    let mut open: Option<f64> = None;
    for e in &report.timeline {
        match e.kind {
            Kind::Fault if open.is_none() => open = Some(e.at_ms),
            Kind::Heal => {
                if let Some(start) = open.take() {
                    windows.push((since(start), since(e.at_ms)));
                }
            }
            _ => {}
        }
    }
    let end_ms = report.timeline.last().map_or(fault_ms, |e| e.at_ms);
    if let Some(start) = open {
        windows.push((since(start), since(end_ms)));
    }
    let heal = windows.last().map(|w| w.1);
    Marks {
        windows,
        detection: report.detection_ms.map(aws),
        dns_flip: report.dns_flip_ms.map(aws),
        heal,
        failback: heal.zip(report.failback_ms.map(aws)).map(|(h, f)| h + f),
        end: since(end_ms),
    }
}

/// The share of users restored in the secondary, as (AWS s since the fault, %) steps.
fn restored_curve(report: &Report) -> Vec<(f64, f64)> {
    let n = report.clients.max(1) as f64;
    let mut points = vec![(0.0, 0.0)];
    for (i, t) in report.restores_aws_s.iter().enumerate() {
        points.push((*t, i as f64 / n * 100.0));
        points.push((*t, (i + 1) as f64 / n * 100.0));
    }
    points
}

/// Draw the chart for one run, or several runs of the same scenario (the comparison).
pub fn write(path: &Path, runs: &[Run<'_>]) -> anyhow::Result<()> {
    let Some(first) = runs.first() else {
        anyhow::bail!("a chart needs a run");
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let base = marks(first.report);
    let warm = 30.0;
    let end = runs
        .iter()
        .map(|r| {
            let m = marks(r.report);
            m.end.max(m.failback.unwrap_or(0.0))
        })
        .fold(60.0, f64::max)
        * 1.03;
    let x_range = -warm..end;

    let root = SVGBackend::new(path, (1100, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "wsdr drill: {}, {} users; x = AWS-equivalent seconds since the fault",
        first.report.scenario.name(),
        first.report.clients
    );
    let (top, bottom) = root
        .titled(&title, ("sans-serif", 18))?
        .split_vertically(390);

    let mut restored = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), 0f64..105f64)?;
    restored
        .configure_mesh()
        .y_desc("users restored in the secondary (%)")
        .x_labels(12)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    shade_and_mark(&mut restored, &base, 105.0)?;
    for run in runs {
        let style = run.colour.stroke_width(2);
        restored
            .draw_series(LineSeries::new(restored_curve(run.report), style))?
            .label(format!(
                "{}: {}/{} restored",
                run.name, run.report.restored, run.report.clients
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        for (label, value, share) in [
            ("p50", run.report.rto_aws_s.p50, 50.0),
            ("p99", run.report.rto_aws_s.p99, 99.0),
        ] {
            if let Some(t) = value {
                restored.draw_series(std::iter::once(Circle::new(
                    (t, share),
                    4,
                    run.colour.filled(),
                )))?;
                restored.draw_series(std::iter::once(Text::new(
                    format!("{label} {t:.0} s"),
                    (t + end * 0.006, share - 6.0),
                    ("sans-serif", 12).into_font().color(&run.colour),
                )))?;
            }
        }
    }
    restored
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;

    let steps = &first.report.connections_aws;
    let peak = steps
        .values()
        .flat_map(|s| s.iter().map(|p| p.1 as f64))
        .fold(1.0, f64::max);
    let mut conns = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(32)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, 0f64..peak * 1.1)?;
    conns
        .configure_mesh()
        .x_desc(format!(
            "AWS-equivalent seconds since the fault ({})",
            first.name
        ))
        .y_desc("connections")
        .x_labels(12)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    shade_and_mark(&mut conns, &base, peak * 1.1)?;
    for (i, (region, points)) in steps.iter().enumerate() {
        let colour = REGION_COLOURS[i % REGION_COLOURS.len()];
        let mut stepped = vec![(-warm, 0.0)];
        let mut last = 0.0;
        for (t, n) in points {
            let n = *n as f64;
            stepped.push((*t, last));
            stepped.push((*t, n));
            last = n;
        }
        stepped.push((end, last));
        let style = colour.stroke_width(2);
        conns
            .draw_series(LineSeries::new(stepped, style))?
            .label(region.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    conns
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    root.present()?;
    Ok(())
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The fault windows shaded, and a labelled line at each event of the run.
fn shade_and_mark(chart: &mut Chart<'_, '_>, marks: &Marks, top: f64) -> anyhow::Result<()> {
    for (start, end) in &marks.windows {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(*start, 0.0), (*end, top)],
            RED.mix(0.08).filled(),
        )))?;
    }
    let events = [
        ("fault", Some(0.0), RED),
        ("detection", marks.detection, RGBColor(180, 0, 0)),
        ("DNS flip", marks.dns_flip, BLUE),
        ("heal", marks.heal, GREEN),
        ("failback", marks.failback, RGBColor(0, 110, 0)),
    ];
    // Labels on staggered heights: events often fall within seconds of each other.
    for (k, (name, at, colour)) in events.into_iter().enumerate() {
        let Some(at) = at else { continue };
        chart.draw_series(LineSeries::new(
            [(at, 0.0), (at, top)],
            colour.mix(0.6).stroke_width(1),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{name} {at:.0} s"),
            (at, top * (0.97 - 0.07 * k as f64)),
            ("sans-serif", 11).into_font().color(&colour),
        )))?;
    }
    Ok(())
}

/// The drill chart of one report: users restored over time since the fault and connections
/// per Region, with the fault window and the events marked.
pub fn drill(report: &Report, path: &Path) -> anyhow::Result<()> {
    let (name, colour) = if report.client_fallback {
        ("client-assisted", CLIENT_ASSISTED)
    } else {
        ("DNS only", DNS_ONLY)
    };
    write(
        path,
        &[Run {
            report,
            name,
            colour,
        }],
    )
}

/// Both runs of a comparison on one chart: two restored curves, the DNS-only run's events
/// marked.
pub fn comparison(comparison: &Comparison, path: &Path) -> anyhow::Result<()> {
    write(
        path,
        &[
            Run {
                report: &comparison.dns_only,
                name: "DNS only",
                colour: DNS_ONLY,
            },
            Run {
                report: &comparison.client_assisted,
                name: "client-assisted",
                colour: CLIENT_ASSISTED,
            },
        ],
    )
}

/// The demo's chart: the reference design and wsdr's defaults (DNS-only clients, then wsdr
/// clients) on one time axis, three restored curves; the reference run's events marked.
pub fn reference_comparison(comparison: &ReferenceComparison, path: &Path) -> anyhow::Result<()> {
    write(
        path,
        &[
            Run {
                report: &comparison.reference,
                name: "reference design (alarm, 60 s TTL, DNS only)",
                colour: REFERENCE,
            },
            Run {
                report: &comparison.wsdr_dns_only,
                name: "wsdr defaults, DNS-only clients",
                colour: DNS_ONLY,
            },
            Run {
                report: &comparison.wsdr_clients,
                name: "wsdr defaults, wsdr clients",
                colour: CLIENT_ASSISTED,
            },
        ],
    )
}

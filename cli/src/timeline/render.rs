//! A [`Timeline`] drawn as SVG with plotters: x is seconds since the transfer started, y the
//! byte offset in the object; each fetch is a line in its mirror's colour rising from where
//! it started to where it got; marks show repairs, shrinks, grade changes and search levels.

use super::model::{MarkKind, Timeline};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;

/// Picture size in pixels.
const SIZE: (u32, u32) = (1200, 720);

/// Mirror colours, by source index modulo their count (none of them black: marks are black).
pub const MIRROR_COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The colour of repair, grade and lost-source marks.
pub const MARK_COLOUR: RGBColor = BLACK;

/// What explains the marks, under the chart, one line each.
const KEY: [&str; 2] = [
    "▲ repair: work moved off a fetch  |  × shrink: a fetch's range cut short, at its new end  |  \
     n conn: a mirror's search level  |  lost: a mirror dropped",
    "○ grade change, where the fetch had got to: white healthy, light grey suspect, grey \
     degraded, black stalled or dead",
];

/// Drawing failed (plotters' own error, one line).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the timeline: {0}")]
pub struct RenderError(String);

/// The colour of source `source`'s lines.
pub fn mirror_colour(source: usize) -> RGBColor {
    MIRROR_COLOURS[source % MIRROR_COLOURS.len()]
}

/// `t` as an SVG document.
pub fn svg(t: &Timeline) -> Result<String, RenderError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root, t).map_err(|e| RenderError(e.to_string()))?;
        root.present().map_err(|e| RenderError(e.to_string()))?;
    }
    Ok(out)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

/// The axes' extents: seconds, and MB with headroom above the object for repair marks.
struct Extent {
    seconds: f64,
    mb: f64,
}

impl Extent {
    fn of(t: &Timeline) -> Self {
        Extent {
            seconds: secs(t.end()).max(0.001) * 1.02,
            mb: mb(t.size).max(0.001) * 1.06,
        }
    }

    /// Where repair marks sit: just above the object's last byte.
    fn top(&self) -> f64 {
        self.mb / 1.06 * 1.03
    }
}

fn draw(root: &Area<'_>, t: &Timeline) -> Drawn {
    root.fill(&WHITE)?;
    let extent = Extent::of(t);
    let mut chart = ChartBuilder::on(root)
        .caption(
            "hydra: each connection's fetches, byte offset over time",
            ("sans-serif", 20),
        )
        .margin(12)
        .margin_bottom(52)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..extent.seconds, 0f64..extent.mb)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the transfer started")
        .y_desc("byte offset in the object, MB")
        .draw()?;
    lines(&mut chart, t)?;
    marks(&mut chart, t, &extent)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    for (i, line) in KEY.iter().enumerate() {
        let y = SIZE.1 as i32 - 40 + 18 * i as i32;
        root.draw(&Text::new(*line, (16, y), ("sans-serif", 13)))?;
    }
    Ok(())
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// One line per fetch; the first line of each mirror names it in the legend.
fn lines(chart: &mut Chart<'_, '_>, t: &Timeline) -> Drawn {
    let mut named = BTreeSet::new();
    for c in &t.connections {
        let colour = mirror_colour(c.source);
        for f in &c.fetches {
            let points = f.points.iter().map(|p| (secs(p.t), mb(p.offset)));
            let series = chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
            if named.insert(c.source) {
                let name = t.mirrors.get(c.source).cloned().unwrap_or_default();
                series.label(name).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled())
                });
            }
        }
    }
    Ok(())
}

/// One mark per recorded mark.
fn marks(chart: &mut Chart<'_, '_>, t: &Timeline, extent: &Extent) -> Drawn {
    let small = ("sans-serif", 12).into_font();
    for m in &t.marks {
        let x = secs(m.t);
        match &m.kind {
            MarkKind::Repair { .. } => {
                let at = (x, extent.top());
                chart.draw_series([TriangleMarker::new(at, 6, MARK_COLOUR.filled())])?;
            }
            MarkKind::Shrink { source, end, .. } => {
                let style = mirror_colour(*source).stroke_width(2);
                chart.draw_series([Cross::new((x, mb(*end)), 5, style)])?;
            }
            MarkKind::Grade { offset, grade, .. } => {
                let at = (x, mb(*offset));
                let fill = grade_fill(grade).filled();
                chart.draw_series([Circle::new(at, 5, fill)])?;
                chart.draw_series([Circle::new(at, 5, MARK_COLOUR.stroke_width(1))])?;
            }
            MarkKind::Limit { source, level, .. } => {
                // Stacked by source just above the x axis, in the mirror's colour.
                let y = extent.mb * (0.015 + 0.03 * *source as f64);
                let style = small.clone().color(&mirror_colour(*source));
                let text = format!("{level} conn");
                chart.draw_series([Text::new(text, (x, y), style)])?;
            }
            MarkKind::SourceLost { source } => {
                let y = extent.mb * (0.015 + 0.03 * *source as f64);
                let style = small.clone().color(&MARK_COLOUR);
                chart.draw_series([Text::new("lost".to_owned(), (x, y), style)])?;
            }
        }
    }
    Ok(())
}

/// A grade change's fill: white for healthy, darker the worse the grade.
fn grade_fill(grade: &str) -> RGBColor {
    match grade {
        "healthy" => WHITE,
        "suspect" => RGBColor(0xc8, 0xc8, 0xc8),
        "degraded" => RGBColor(0x80, 0x80, 0x80),
        _ => BLACK,
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::model::{Connection, Fetch, Mark, Point};

    fn at(ms: u64, offset: u64) -> Point {
        Point {
            t: Duration::from_millis(ms),
            offset,
        }
    }

    fn connection(source: usize, conn: u16, lo: u64, hi: u64) -> Connection {
        Connection {
            source,
            conn,
            fetches: vec![Fetch {
                points: vec![at(100, lo), at(400, (lo + hi) / 2), at(800, hi)],
            }],
        }
    }

    fn repair(ms: u64) -> Mark {
        Mark {
            t: Duration::from_millis(ms),
            kind: MarkKind::Repair {
                victim: 1,
                taker: None,
                bytes: 10,
            },
        }
    }

    fn sample() -> Timeline {
        Timeline {
            size: 3_000_000,
            mirrors: vec!["http://a/x".into(), "ftp://b/x".into()],
            connections: vec![
                connection(0, 0, 0, 1_000_000),
                connection(0, 1, 1_000_000, 2_000_000),
                connection(1, 2, 2_000_000, 3_000_000),
            ],
            marks: vec![
                repair(300),
                repair(500),
                Mark {
                    t: Duration::from_millis(200),
                    kind: MarkKind::Limit {
                        source: 1,
                        level: 2,
                        reason: "measuring".into(),
                    },
                },
            ],
        }
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// Elements named `tag` whose attribute `attr` is one of `values`.
    fn count(doc: &roxmltree::Document<'_>, tag: &str, attr: &str, values: &[String]) -> usize {
        doc.descendants()
            .filter(|n| n.has_tag_name(tag))
            .filter(|n| {
                n.attribute(attr)
                    .is_some_and(|v| values.iter().any(|w| w == v))
            })
            .count()
    }

    #[test]
    fn the_drawing_is_svg_with_one_line_per_connection_and_one_mark_per_repair() {
        let svg = svg(&sample()).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
        assert!(doc.root_element().has_tag_name("svg"));
        let mirrors: Vec<String> = MIRROR_COLOURS.iter().map(|&c| hex(c)).collect();
        assert_eq!(count(&doc, "polyline", "stroke", &mirrors), 3);
        assert_eq!(count(&doc, "polygon", "fill", &[hex(MARK_COLOUR)]), 2);
    }

    #[test]
    fn each_mirror_is_named_once_in_the_legend_in_its_colour() {
        let svg = svg(&sample()).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        assert_eq!(texts.iter().filter(|t| **t == "http://a/x").count(), 1);
        assert_eq!(texts.iter().filter(|t| **t == "ftp://b/x").count(), 1);
        let swatches = [hex(mirror_colour(0)), hex(mirror_colour(1))];
        assert_eq!(count(&doc, "rect", "fill", &swatches), 2);
    }

    #[test]
    fn an_empty_timeline_still_draws_a_well_formed_picture() {
        let svg = svg(&Timeline::default()).unwrap();
        assert!(roxmltree::Document::parse(&svg).is_ok());
    }
}

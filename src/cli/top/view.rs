//! Drawing `bfperf top`: a header, the view's tabs, the view, a line of keys. Fits
//! 80×24 and uses more room when there is more; colour only without NO_COLOR.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, Tabs, Wrap};
use ratatui::Frame;

use std::cmp::Reverse;

use crate::cli::output::readable;
use crate::cli::top::{App, MetricRow, PanelState, Tab};

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Draws the whole screen.
pub(super) fn draw(f: &mut Frame, app: &App) {
    let [head, tabs, body, keys] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(f.area());
    header(f, app, head);
    let titles = ["1 Overview", "2 Blocks", "3 Raw"];
    let selected = Tab::ALL.iter().position(|t| *t == app.tab).unwrap_or(0);
    f.render_widget(
        Tabs::new(titles.to_vec())
            .select(selected)
            .highlight_style(style(app, Color::Yellow).add_modifier(Modifier::BOLD)),
        tabs,
    );
    match app.tab {
        Tab::Overview => overview(f, app, body),
        Tab::Blocks => blocks(f, app, body),
        Tab::Raw => raw(f, app, body),
    }
    let status = if app.typing {
        format!(
            "filter blocks: {}_  (Enter to keep, Esc to clear)",
            app.filter
        )
    } else {
        let filter = match app.filter.is_empty() {
            true => String::new(),
            false => format!("  filter: {}", app.filter),
        };
        format!(
            "q quit  p pause  Tab view  s sort ({})  / filter  +/- interval  ? help{filter}",
            if app.by_name { "name" } else { "activity" }
        )
    };
    f.render_widget(Paragraph::new(status).style(dim(app)), keys);
    if app.help {
        help(f, app, body);
    }
}

fn style(app: &App, c: Color) -> Style {
    match app.color {
        true => Style::default().fg(c),
        false => Style::default(),
    }
}

fn dim(app: &App) -> Style {
    match app.color {
        true => Style::default().fg(Color::DarkGray),
        false => Style::default(),
    }
}

fn header(f: &mut Frame, app: &App, area: Rect) {
    let state = if app.paused { "  [paused]" } else { "" };
    let lines = vec![
        Line::from(vec![
            Span::styled(
                "bfperf top",
                style(app, Color::Cyan).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "  {}  every {}  event_list {}{}",
                app.generation,
                seconds(app.interval.as_secs_f64()),
                app.format,
                state
            )),
        ]),
        Line::from(Span::styled(
            fit(
                &format!("{}  lock: {}", app.device, app.owner),
                area.width as usize,
            ),
            dim(app),
        )),
    ];
    f.render_widget(Paragraph::new(lines), area);
}

fn seconds(s: f64) -> String {
    match s < 1.0 {
        true => format!("{:.0} ms", s * 1e3),
        false => format!("{s:.1} s"),
    }
}

/// A value and its unit, as people read it.
pub(super) fn value_text(v: Option<f64>, unit: &str) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    let digits = match v.abs() {
        a if a >= 1000.0 => 0,
        a if a >= 100.0 => 1,
        _ => 2,
    };
    format!("{v:.digits$} {unit}")
}

/// The last `width` values as a sparkline scaled to their maximum.
fn sparkline<'a>(values: impl DoubleEndedIterator<Item = &'a f64>, width: usize) -> String {
    let mut last: Vec<f64> = values.rev().take(width).copied().collect();
    last.reverse();
    let max = last.iter().copied().fold(0.0_f64, f64::max);
    last.iter()
        .map(|v| match max > 0.0 {
            true => BARS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize],
            false => BARS[0],
        })
        .collect()
}

fn coverage_text(row: &MetricRow) -> String {
    match (row.total, row.coverage) {
        (None, _) => row.reason.clone().unwrap_or_default(),
        (Some(_), c) if c < 0.999 => format!("{:.0}% counted", c * 100.0),
        _ => String::new(),
    }
}

/// `text` in `width` columns: whole, or cut after the last whole word (or `_` part)
/// that fits, with `…`, never mid-word when a word boundary is in the second half.
pub(super) fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let room = width - 1;
    let cut: String = text.chars().take(room).collect();
    let boundary = cut
        .char_indices()
        .filter(|(_, c)| matches!(c, ' ' | '_' | ',' | ';' | ':' | '/' | '('))
        .map(|(i, _)| i)
        .rfind(|&i| i >= room / 2);
    match boundary {
        Some(i) => format!("{}…", cut[..i].trim_end()),
        None => format!("{cut}…"),
    }
}

/// The width of the metric names' column: the longest name, within reason.
fn name_width(app: &App) -> usize {
    app.panels
        .iter()
        .flat_map(|p| &p.rows)
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(12, 32)
}

fn overview(f: &mut Frame, app: &App, area: Rect) {
    let n = app.panels.len().max(1);
    let mut heights: Vec<Constraint> = app
        .panels
        .iter()
        .map(|p| Constraint::Length(p.rows.len() as u16 + 2))
        .collect();
    heights.push(Constraint::Min(0));
    let areas = Layout::vertical(heights).split(area);
    // Borders and the spaces between five columns, then the name, value and strip.
    let name = name_width(app);
    let fixed = 2 + 4 + name + 12 + 10;
    let width = area.width as usize;
    let spark = width.saturating_sub(fixed + 24).clamp(8, 60);
    let note = width.saturating_sub(fixed + spark).max(6);
    for (p, a) in app.panels.iter().zip(areas.iter()).take(n) {
        // A panel with no value at all has no history to draw: its reasons get the
        // room.
        let table = match p.rows.iter().any(|r| r.total.is_some()) {
            true => panel_table(app, p, [name, spark, note], true),
            false => {
                let note = width.saturating_sub(2 + 2 + name + 12);
                panel_table(app, p, [name, 0, note], false)
            }
        };
        f.render_widget(
            table.block(Block::bordered().title(format!(" {} ", p.title))),
            *a,
        );
    }
}

/// A panel's rows: name, value, history and the blocks' strip (when `history`),
/// note.
fn panel_table<'a>(app: &App, p: &PanelState, widths: [usize; 3], history: bool) -> Table<'a> {
    let [name, spark, note] = widths;
    let rows: Vec<Row> = p
        .rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                Cell::from(fit(&r.name, name)),
                Cell::from(value_text(r.total, &r.unit)).style(style(app, Color::Green)),
            ];
            if history {
                let strip = sparkline(r.blocks.iter().filter_map(|(_, v)| v.as_ref()), 10);
                cells.push(
                    Cell::from(sparkline(r.history.iter(), spark)).style(style(app, Color::Cyan)),
                );
                cells.push(Cell::from(strip).style(style(app, Color::Magenta)));
            }
            cells.push(Cell::from(fit(&coverage_text(r), note)).style(dim(app)));
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![Constraint::Length(name as u16), Constraint::Length(12)];
    if history {
        widths.push(Constraint::Length(spark as u16));
        widths.push(Constraint::Length(10));
    }
    widths.push(Constraint::Min(6));
    Table::new(rows, widths)
}

fn shown(app: &App, block: &str) -> bool {
    app.filter.is_empty() || block.contains(app.filter.as_str())
}

/// One row of the blocks view: metric, block, value, share of the busiest, unit.
type BlockRow = (String, String, Option<f64>, f64, String);

fn block_rows(app: &App) -> Vec<BlockRow> {
    let mut rows: Vec<BlockRow> = Vec::new();
    for p in &app.panels {
        for r in &p.rows {
            let max = r
                .blocks
                .iter()
                .filter_map(|(_, v)| *v)
                .fold(0.0_f64, f64::max);
            for (b, v) in r.blocks.iter().filter(|(b, _)| shown(app, b)) {
                let share = match (v, max > 0.0) {
                    (Some(v), true) => v / max,
                    _ => 0.0,
                };
                rows.push((r.name.clone(), b.clone(), *v, share, r.unit.clone()));
            }
        }
    }
    let natural = crate::device::natural_key;
    if app.by_name {
        rows.sort_by(|a, b| (&a.0, natural(&a.1)).cmp(&(&b.0, natural(&b.1))));
    } else {
        // Busiest first by whole percent of the busiest, then by block: stable.
        let percent = |share: f64| -((share * 100.0).round() as i64);
        rows.sort_by(|a, b| {
            (&a.0, percent(a.3), natural(&a.1)).cmp(&(&b.0, percent(b.3), natural(&b.1)))
        });
    }
    rows
}

fn blocks(f: &mut Frame, app: &App, area: Rect) {
    let rows = block_rows(app);
    let name = name_width(app);
    let bar_width = (area.width as usize)
        .saturating_sub(name + 34)
        .clamp(10, 60);
    let table_rows: Vec<Row> = rows
        .iter()
        .map(|(m, b, v, share, unit)| {
            let filled = (share * bar_width as f64).round() as usize;
            Row::new(vec![
                Cell::from(fit(m, name)),
                Cell::from(b.clone()),
                Cell::from(value_text(*v, unit)).style(style(app, Color::Green)),
                Cell::from("█".repeat(filled)).style(style(app, heat(*share))),
            ])
        })
        .collect();
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(name as u16),
            Constraint::Length(14),
            Constraint::Length(14),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(vec!["METRIC", "BLOCK", "VALUE", "SHARE OF THE BUSIEST"]).style(dim(app)))
    .block(Block::bordered().title(" Blocks: activity per block (imbalance shows as short bars) "));
    f.render_widget(table, area);
}

fn heat(share: f64) -> Color {
    match share {
        s if s > 0.8 => Color::Red,
        s if s > 0.5 => Color::Yellow,
        _ => Color::Green,
    }
}

/// What the raw view shows of a rate: per second in its unit (`GB/s` for bytes), a
/// level as it is, or why there is none (another program changed the counter's
/// event during the interval: no rate is its).
fn raw_value(r: &crate::ops::watch::Rate) -> String {
    match (r.per_s, r.level, r.idle) {
        // A perf event is idle when the kernel refused it.
        (_, _, true) if r.kind == crate::block::BlockKind::Perf => "<not supported>".to_string(),
        (_, _, true) => "not programmed".to_string(),
        _ if r.reprogrammed => "re-programmed".to_string(),
        (Some(v), true, _) => format!("{v:.0}"),
        (Some(v), false, _) => {
            let (n, u) = match r.unit {
                "bytes" => readable(v, "B/s"),
                _ => readable(v, "/s"),
            };
            format!("{n} {u}")
        }
        (None, _, _) => "-".to_string(),
    }
}

/// A rate's step on a scale of 20 a decade (rounded: a rate at a power of ten sits
/// in the middle of its step, not at its edge); below every rate, one never counted.
fn activity_step(per_s: f64) -> i64 {
    match per_s > 0.0 && per_s.is_finite() {
        true => (per_s.log10() * 20.0).round() as i64,
        false => i64::MIN,
    }
}

fn raw(f: &mut Frame, app: &App, area: Rect) {
    let mut rates: Vec<&crate::ops::watch::Rate> =
        app.raw.iter().filter(|r| shown(app, &r.block)).collect();
    // Owned: the key is kept for the sort.
    let natural = |name: &str| {
        let (head, n, tail) = crate::device::natural_key(name);
        (head.to_string(), n, tail.to_string())
    };
    if !app.by_name {
        // Busiest first (by the value kept through jitter, in steps of 20 a decade:
        // rates that read alike are equal), then block and counter: the same order
        // every refresh.
        let key = |r: &&crate::ops::watch::Rate| {
            let kept = app
                .raw_order
                .get(&(r.block.clone(), r.counter, r.name.clone()))
                .copied()
                .or(r.per_s)
                .unwrap_or(-1.0);
            (Reverse(activity_step(kept)), natural(&r.block), r.counter)
        };
        rates.sort_by_cached_key(key);
    }
    let name = (area.width as usize)
        .saturating_sub(2 + 3 + 16 + 4 + 16)
        .clamp(20, 44);
    let rows: Vec<Row> = rates
        .iter()
        .map(|r| {
            Row::new(vec![
                Cell::from(r.block.clone()),
                Cell::from(r.counter.map(|c| c.to_string()).unwrap_or_default()),
                Cell::from(fit(&r.name, name)),
                Cell::from(raw_value(r)),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(16),
            Constraint::Length(4),
            Constraint::Length(name as u16),
            Constraint::Min(12),
        ],
    )
    .header(Row::new(vec!["BLOCK", "CTR", "EVENT OR REGISTER", "PER SECOND"]).style(dim(app)))
    .block(Block::bordered().title(" Raw: every counter and register "));
    f.render_widget(table, area);
}

fn help(f: &mut Frame, app: &App, area: Rect) {
    let text = "q, Ctrl-C   quit (the device is put back as it was)\n\
        p, space    pause / resume\n\
        Tab, ←/→    switch view (1 overview, 2 blocks, 3 raw)\n\
        s           sort by activity or by name\n\
        /           filter blocks by name (Enter keeps, Esc clears)\n\
        +, -        refresh half as often / twice as often\n\
        ?           this help\n\n\
        Overview: each metric's value over the last interval (the kind's blocks\n\
        summed), its history, and a strip of its blocks. 'N% counted': multiplexed,\n\
        the value is scaled from the share of the interval it was counted.";
    let w = area.width.min(80);
    let h = area.height.min(14);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: false }).block(
            Block::bordered()
                .title(" Help ")
                .style(style(app, Color::White)),
        ),
        r,
    );
}

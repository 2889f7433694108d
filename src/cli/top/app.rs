//! `top`'s state and its updates: panels, metric rows and their history, the tab
//! and sort, keys, and a refresh from the sources. No terminal here.

use super::keys::Key;
use super::source::Sources;
use super::{panels, HISTORY};
use crate::device::values::monotonic_ns;
use crate::error::Result;
use crate::metrics::{MetricSet, MetricValue};
use crate::ops::watch::Rate;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// One metric of a panel: its kind's total (or its one block's value), its blocks.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetricRow {
    pub name: String,
    pub unit: String,
    pub total: Option<f64>,
    pub coverage: f64,
    pub reason: Option<String>,
    pub history: VecDeque<f64>,
    pub blocks: Vec<(String, Option<f64>)>,
}

/// A panel as shown.
#[derive(Debug, Clone)]
pub(crate) struct PanelState {
    pub title: String,
    pub rows: Vec<MetricRow>,
}

/// The views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    Overview,
    Blocks,
    Raw,
}

impl Tab {
    pub(crate) const ALL: [Tab; 3] = [Tab::Overview, Tab::Blocks, Tab::Raw];

    pub(crate) fn next(self, step: isize) -> Tab {
        let i = Tab::ALL.iter().position(|t| *t == self).unwrap_or(0) as isize;
        Tab::ALL[(i + step).rem_euclid(3) as usize]
    }
}

/// Everything the screen shows.
pub(crate) struct App {
    pub device: String,
    pub generation: String,
    pub format: String,
    pub owner: String,
    pub interval: Duration,
    pub tab: Tab,
    pub paused: bool,
    pub by_name: bool,
    pub filter: String,
    pub typing: bool,
    pub help: bool,
    pub color: bool,
    pub panels: Vec<PanelState>,
    pub raw: Vec<Rate>,
    /// Each raw row's activity as sorted: it moves only when the rate moves by more
    /// than a tenth, so jitter never reorders rows. Keyed by block, counter, name.
    pub raw_order: HashMap<(String, Option<u32>, String), f64>,
    pub refreshes: u64,
}

impl App {
    /// A view of `device`, `generation`, its `event_list` format and its `owner`
    /// (in that order), refreshed every `interval`, with these panels: the first
    /// tab, nothing typed, paused or sorted, no colour until told.
    pub(crate) fn new(names: [String; 4], interval: Duration, panels: Vec<PanelState>) -> App {
        let [device, generation, format, owner] = names;
        App {
            device,
            generation,
            format,
            owner,
            interval,
            tab: Tab::Overview,
            paused: false,
            by_name: false,
            filter: String::new(),
            typing: false,
            help: false,
            color: false,
            panels,
            raw: Vec::new(),
            raw_order: HashMap::new(),
            refreshes: 0,
        }
    }
}

/// The generation's panels, and the metrics asked for with -M in one of their own:
/// each a title and its metrics' names.
pub(crate) fn titled_panels(
    gen: crate::block::Generation,
    set: &MetricSet,
    asked: &[String],
) -> Result<Vec<(String, Vec<String>)>> {
    let mut titled: Vec<(String, Vec<String>)> = panels::for_generation(gen)
        .map(|p| {
            let names = p.metrics.iter().map(|m| m.to_string()).collect();
            (p.title.to_string(), names)
        })
        .collect();
    if !asked.is_empty() {
        let chosen = set.select(asked)?;
        let names = chosen.iter().map(|m| m.def.name.clone()).collect();
        titled.push(("Metrics (-M)".into(), names));
    }
    Ok(titled)
}

/// The panels' rows, empty panels (no metric of theirs defined) left out.
pub(crate) fn panel_states(titled: &[(String, Vec<String>)], set: &MetricSet) -> Vec<PanelState> {
    titled
        .iter()
        .map(|(t, names)| PanelState {
            title: t.clone(),
            rows: names
                .iter()
                .filter_map(|n| set.get(n))
                .map(|m| MetricRow {
                    name: m.def.name.clone(),
                    unit: m.unit.clone(),
                    ..MetricRow::default()
                })
                .collect(),
        })
        .filter(|p| !p.rows.is_empty())
        .collect()
}

/// The raw rows' sort values: a rate that moved by a tenth or less keeps the one it
/// had.
pub(crate) fn keep_raw_order(app: &mut App) {
    let mut order = HashMap::new();
    for r in &app.raw {
        let key = (r.block.clone(), r.counter, r.name.clone());
        let now = r.per_s.unwrap_or(-1.0);
        let kept = match app.raw_order.get(&key) {
            Some(&was) if (now - was).abs() <= 0.1 * was.abs() => was,
            _ => now,
        };
        order.insert(key, kept);
    }
    app.raw_order = order;
}

/// Handles a key; true to quit.
pub(crate) fn key(app: &mut App, k: Key) -> bool {
    if k == Key::Interrupt {
        return true;
    }
    if app.typing {
        match k {
            Key::Enter | Key::Esc => app.typing = false,
            Key::Backspace => {
                app.filter.pop();
            }
            Key::Char(c) => app.filter.push(c),
            _ => {}
        }
        return false;
    }
    match k {
        Key::Char('q') => return true,
        Key::Char('p') | Key::Char(' ') => app.paused = !app.paused,
        Key::Tab | Key::Right => app.tab = app.tab.next(1),
        Key::BackTab | Key::Left => app.tab = app.tab.next(-1),
        Key::Char('1') => app.tab = Tab::Overview,
        Key::Char('2') => app.tab = Tab::Blocks,
        Key::Char('3') => app.tab = Tab::Raw,
        Key::Char('s') => app.by_name = !app.by_name,
        Key::Char('/') => {
            app.typing = true;
            app.filter.clear();
        }
        Key::Char('+') => app.interval = (app.interval * 2).min(Duration::from_secs(60)),
        Key::Char('-') => {
            app.interval = (app.interval / 2).max(Duration::from_millis(100));
        }
        Key::Char('?') | Key::Char('h') => app.help = !app.help,
        Key::Esc => {
            app.help = false;
            app.filter.clear();
        }
        _ => {}
    }
    false
}

/// One refresh: the values over the last interval, into the panels and their history.
pub(crate) fn refresh(app: &mut App, sources: &mut Sources) {
    let now = monotonic_ns();
    let (source, watch) = (&mut *sources.device, &mut *sources.watch);
    app.raw = watch.sample(now).to_vec();
    let mut values = source.values(watch, now);
    if let Some(cores) = sources.cores.as_deref_mut() {
        app.raw.extend_from_slice(cores.sample(now));
        // The blocks' counts over the exporter's last interval, or per second.
        let blocks = match source.interval() {
            Some((counts, span)) => crate::measure::metric_inputs(counts, span),
            None => watch.inputs(),
        };
        values.extend(cores.values(sources.set, blocks));
    }
    if let Some((counts, span)) = source.interval() {
        app.raw
            .extend(counts.iter().filter(|c| c.unit != "level").map(|c| Rate {
                block: c.block.to_string(),
                kind: c.kind,
                name: c.event.to_string(),
                counter: c.counter,
                unit: c.unit,
                per_s: c.value.filter(|_| span > 0.0).map(|v| v as f64 / span),
                idle: false,
                level: false,
                reprogrammed: false,
            }));
    }
    keep_raw_order(app);
    for panel in &mut app.panels {
        for row in &mut panel.rows {
            let mine: Vec<&MetricValue> = values.iter().filter(|v| v.metric == row.name).collect();
            row.blocks = mine
                .iter()
                .filter(|v| !v.of_kind)
                .map(|v| (v.block.clone(), v.value))
                .collect();
            let total = mine.iter().find(|v| v.of_kind).or(if mine.len() == 1 {
                mine.first()
            } else {
                None
            });
            row.total = total.and_then(|v| v.value);
            row.coverage = total.map_or(0.0, |v| v.coverage);
            row.reason = total.and_then(|v| v.reason.clone());
            if mine.is_empty() {
                row.reason = Some("not counted on this device".into());
            }
            if let Some(t) = row.total {
                row.history.push_back(t);
                if row.history.len() > HISTORY {
                    row.history.pop_front();
                }
            }
        }
    }
    app.refreshes += 1;
    // The crash path's test: a panic after N refreshes must leave the terminal and
    // the device as they were (the unwinding guards restore both).
    if std::env::var("BFPERF_TOP_PANIC_AFTER")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| app.refreshes >= n)
    {
        panic!("BFPERF_TOP_PANIC_AFTER: the crash path, as asked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> App {
        let names = ["simulated", "BlueField-3", "upstream", ""].map(String::from);
        App::new(names, Duration::from_secs(1), Vec::new())
    }

    #[test]
    fn keys_switch_tabs_pause_and_filter_without_a_terminal() {
        let mut a = app();
        assert!(!key(&mut a, Key::Tab));
        assert!(a.tab == Tab::Blocks);
        key(&mut a, Key::Char('3'));
        assert!(a.tab == Tab::Raw);
        key(&mut a, Key::Char('p'));
        assert!(a.paused);
        // While typing a filter, letters are the filter's, not commands.
        key(&mut a, Key::Char('/'));
        for c in "llt".chars() {
            key(&mut a, Key::Char(c));
        }
        assert!(!key(&mut a, Key::Char('q')));
        key(&mut a, Key::Backspace);
        key(&mut a, Key::Enter);
        assert_eq!(a.filter, "llt");
        // The interval halves and doubles within its bounds.
        for _ in 0..10 {
            key(&mut a, Key::Char('-'));
        }
        assert_eq!(a.interval, Duration::from_millis(100));
        for _ in 0..10 {
            key(&mut a, Key::Char('+'));
        }
        assert_eq!(a.interval, Duration::from_secs(60));
        assert!(key(&mut a, Key::Char('q')));
        assert!(key(&mut a, Key::Interrupt));
    }
}

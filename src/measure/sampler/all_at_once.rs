//! Blocks that count all at once (L3, BlueField-3's crspace blocks): windows opened
//! and closed by `enable`, read while stopped, and checked between ticks.

use super::*;

/// Opens an all-at-once block's window (`enable` 1), timed; where the write took
/// long, the window is opened again (`enable` 0 and 1: it restarts from 0), twice at
/// most. Its moment and how far from it the opening may be.
pub(super) fn open_window(st: &mut BlockState<'_>, stamp: &Stamp<'_>) -> Result<(u64, u64)> {
    let mut opened = (0, 0);
    for attempt in 0..3 {
        if attempt > 0 {
            st.enable(false)?;
        }
        let (on, mid, half) = timed_within(stamp, || st.enable(true));
        on?;
        opened = (mid, half);
        if half <= TIGHT_NS {
            break;
        }
    }
    Ok(opened)
}

impl<'d> Sampler<'d> {
    /// Whether an all-at-once block was stopped, its count_clock or events changed,
    /// or a counter written (it went backwards since the last probe of the window:
    /// marked here, as the tick cannot see it).
    pub(super) fn probe_all_at_once(&mut self, i: usize) -> Result<bool> {
        {
            let (p, st) = (&self.plans[i], &mut self.states[i]);
            if let Some(r) = st.enable_state.as_mut() {
                if r.value()? == 0 {
                    return Ok(true);
                }
            }
            if let Some(r) = st.clock_state.as_mut() {
                if r.value()? as u32 != p.count_clock_while(st.group, st.saved_mask) {
                    return Ok(true);
                }
            }
        }
        if self.changed_events(i)?.is_some() {
            return Ok(true);
        }
        let (p, st) = (&self.plans[i], &mut self.states[i]);
        let mut written = None;
        for s in &p.groups[st.group] {
            let v = st.counter(s.counter)?;
            let before = std::mem::replace(&mut st.window_last[s.counter as usize], v);
            if v < before && written.is_none() {
                written = Some((s.item, s.counter));
            }
        }
        let Some((item, counter)) = written else {
            return Ok(false);
        };
        self.states[i].spoiled.push(item);
        self.note(i, vec![item], Foreign::Written { counter });
        Ok(true)
    }

    /// What another program did to all-at-once block `i` since its window opened:
    /// stopped it, changed its count_clock or its events.
    fn window_touched(&mut self, i: usize) -> Result<Option<(Vec<usize>, Foreign)>> {
        let group_items = |p: &BlockPlan, g: usize| p.groups[g].iter().map(|s| s.item).collect();
        let mut found = None;
        {
            let (p, st) = (&self.plans[i], &mut self.states[i]);
            if let Some(r) = st.enable_state.as_mut() {
                if r.value()? == 0 {
                    found = Some((group_items(p, st.group), Foreign::Stopped));
                }
            }
            if let Some(r) = st.clock_state.as_mut() {
                let mask = r.value()? as u32;
                if mask != p.count_clock_while(st.group, st.saved_mask) && found.is_none() {
                    found = Some((
                        group_items(p, st.group),
                        Foreign::CountClock { found: mask },
                    ));
                }
            }
        }
        match found {
            Some(f) => Ok(Some(f)),
            None => self.changed_events(i),
        }
    }

    // Apart from `tick_block`, which the other mechanisms' ticks share: a
    // tick's code is what it pays for (docs/performance.md).
    #[inline(never)]
    pub(super) fn tick_all_at_once(
        &mut self,
        i: usize,
        dt: u64,
    ) -> Result<Option<(Vec<usize>, Foreign)>> {
        let mut found = self.window_touched(i)?;
        let (p, st, stamp) = (&self.plans[i], &mut self.states[i], &self.stamp);
        let mut foreign: Vec<usize> = found.as_ref().map_or_else(Vec::new, |(f, _)| f.clone());
        foreign.append(&mut st.spoiled);
        st.window_last.iter_mut().for_each(|v| *v = 0);
        // The window is what the block counted between the writes that opened and
        // closed it; the gap before it (stopped to be read) is not counted.
        let (stopped, closed, close_half) = timed_within(stamp, || st.enable(false));
        stopped?;
        let counted = closed.saturating_sub(st.open_ns);
        // Bounds not known well enough (a write preempted, not merely slow): the
        // window is left out, its time not counted (the next turn of its items
        // stands for it).
        let unknown = st.open_half + close_half;
        let uncertain = unknown_beyond_bound(unknown, counted);
        let turn = dt.saturating_sub(std::mem::take(&mut st.gap_ns));
        if let Some(wrap) = st.wrap_ns.filter(|w| counted > *w) {
            // Stalled past a wrap: the window's counts are not known.
            let why = Foreign::Stalled {
                ms: counted / 1_000_000,
                wrap_ms: wrap / 1_000_000,
            };
            let items: Vec<usize> = p.groups[st.group].iter().map(|s| s.item).collect();
            foreign.extend(&items);
            found = found.or(Some((items, why)));
        }
        let now = st.last_ns;
        for s in &p.groups[st.group] {
            // The window started at 0: the value is the count, unless another
            // program changed what it counts during it: then nothing of the
            // window is known, and it is left out.
            let v = st.counter(s.counter)?;
            // Its first window is kept whatever (an item never counted would show
            // nothing at all: the exporter's series, a short command's count), and
            // marked when its bounds are not known well enough.
            let first = st.accs[s.item].counted_ns == 0;
            if foreign.contains(&s.item) {
                // Nothing of the window is known: its span goes to the item's next
                // window, whose count the running estimate scales over it.
                continue;
            }
            let span = now - std::mem::replace(&mut st.turn_end[s.item], now);
            let Some(g) = Gain::of_window(v, st.width_mask, turn, counted, span) else {
                continue;
            };
            if uncertain && !first {
                // Left out of the count, its time not counted; the running
                // estimate (the exporter's series) still takes it, so that a
                // series never stands a whole sweep behind the time it is read.
                st.accs[s.item].estimate += g.estimate();
                continue;
            }
            accumulate(&mut st.accs[s.item], g);
            if uncertain && first {
                st.accs[s.item].uncertain_ns += unknown;
            }
        }
        if p.multiplexed() {
            st.group = (st.group + 1) % p.groups.len();
        }
        let again = p.multiplexed() || found.is_some();
        let opened = self.reopen(i, now, again)?;
        self.states[i].gap_ns = opened.saturating_sub(closed);
        Ok(found)
    }

    /// Opens all-at-once block `i`'s next window (stopped now, at `now`): the
    /// counters lent join or leave, the group is programmed where that or `again`
    /// (another group's turn, another program's write) asks, and the window opens.
    /// When it opened.
    pub(super) fn reopen(&mut self, i: usize, now: u64, again: bool) -> Result<u64> {
        if self.regroup(i, now) || again {
            let (p, st) = (&self.plans[i], &self.states[i]);
            program_group(self.device, p, st.group, st.saved_mask)?;
        }
        let (st, stamp) = (&mut self.states[i], &self.stamp);
        let (opened, half) = open_window(st, stamp)?;
        (st.open_ns, st.open_half) = (opened, half);
        Ok(opened)
    }
}

//! Blocks read counter by counter (taking turns when multiplexed), and register
//! blocks: their ticks, their probes and the check of their events.

use super::*;

impl<'d> Sampler<'d> {
    /// Whether a taking-turns block's counters went backwards or its events changed.
    pub(super) fn probe_per_counter(&mut self, i: usize) -> Result<bool> {
        if self.states[i].fresh && self.changed_events(i)?.is_some() {
            return Ok(true);
        }
        let (p, st) = (&self.plans[i], &mut self.states[i]);
        for s in &p.groups[st.group] {
            if st.counter(s.counter)? < st.last[s.counter as usize] && st.width_mask == u64::MAX {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(super) fn tick_registers(
        &mut self,
        i: usize,
        dt: u64,
    ) -> Result<Option<(Vec<usize>, Foreign)>> {
        let (st, stamp) = (&mut self.states[i], &self.stamp);
        let now = st.last_ns;
        let mut cleared = Vec::new();
        let mut chain = Chain::start(stamp);
        for r in 0..st.registers.len() {
            let (v, at) = chain.timed(stamp, || st.registers[r].value());
            let v = v?;
            let last = std::mem::replace(&mut st.last[r], v);
            let counted = at.saturating_sub(std::mem::replace(&mut st.read_ns[r], at));
            if st.levels[r] {
                // A level (a clock monitor's count): its latest value.
                st.accs[r].total = v;
                st.accs[r].estimate = v;
                st.accs[r].level = true;
                st.accs[r].active_ns += dt;
            } else {
                match Gain::of(last, v, st.width_mask, dt, counted, dt) {
                    Some(g) => accumulate(&mut st.accs[r], g),
                    None => cleared.push(r),
                }
            }
            st.turn_end[r] = now;
        }
        Ok((!cleared.is_empty()).then_some((cleared, Foreign::Cleared)))
    }

    /// The items of the current group whose `event<N>` no longer reads what was
    /// programmed (only where it is read back).
    pub(super) fn changed_events(&mut self, i: usize) -> Result<Option<(Vec<usize>, Foreign)>> {
        let (p, st) = (&self.plans[i], &mut self.states[i]);
        let mut changed = Vec::new();
        let mut why = None;
        for s in &p.groups[st.group] {
            let Some(reader) = st.events[s.counter as usize].as_mut() else {
                continue;
            };
            let found = reader.event()?;
            if found != p.items[s.item].number() {
                changed.push(s.item);
                why = Some(Foreign::EventChanged {
                    counter: s.counter,
                    found,
                });
            }
        }
        Ok(why.map(|w| (changed, w)))
    }

    /// Every block's counters of its current group that another program
    /// re-programmed, as their `event<N>` reads now: (block index, item index).
    pub fn reprogrammed(&mut self) -> Result<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        for i in 0..self.plans.len() {
            // A register block counts no events.
            if self.plans[i].groups.is_empty() {
                continue;
            }
            if let Some((items, _)) = self.changed_events(i)? {
                out.extend(items.into_iter().map(|item| (i, item)));
            }
        }
        Ok(out)
    }

    pub(super) fn tick_per_counter(
        &mut self,
        i: usize,
        dt: u64,
    ) -> Result<Option<(Vec<usize>, Foreign)>> {
        // Events are read back at every tick: another event programmed over a
        // counter makes its count fall only sometimes. A counter that goes
        // backwards was reset.
        let mut found = self.changed_events(i)?;
        self.states[i].fresh = false;
        let (p, st, stamp) = (&self.plans[i], &mut self.states[i], &self.stamp);
        let now = st.last_ns;
        let foreign: Vec<usize> = found.as_ref().map_or_else(Vec::new, |(f, _)| f.clone());
        let mut chain = Chain::start(stamp);
        for s in &p.groups[st.group] {
            let c = s.counter as usize;
            let (v, at) = chain.timed(stamp, || st.counter(s.counter));
            let v = v?;
            let last = std::mem::replace(&mut st.last[c], v);
            let counted = at.saturating_sub(std::mem::replace(&mut st.read_ns[c], at));
            if foreign.contains(&s.item) {
                // It counted another program's event: none of it is ours. Its span
                // goes to the item's next turn, whose count the running estimate
                // scales over it.
                continue;
            }
            let span = now - st.turn_end[s.item];
            match Gain::of(last, v, st.width_mask, dt, counted, span) {
                Some(g) => {
                    accumulate(&mut st.accs[s.item], g);
                    st.turn_end[s.item] = now;
                }
                None if found.is_none() => {
                    let why = reset_cause(st.events[c].as_mut(), p, s)?;
                    found = Some((vec![s.item], why));
                }
                None => {}
            }
        }
        if p.multiplexed() {
            st.group = (st.group + 1) % p.groups.len();
        } else if found.is_none() {
            return Ok(None);
        }
        // The next turn, or the same group again over what someone else wrote:
        // programming resets the counters, which count from then.
        let (programmed, at) = timed(stamp, || {
            program_group(self.device, p, st.group, st.saved_mask)
        });
        programmed?;
        st.fresh = true;
        for s in &p.groups[st.group] {
            (st.last[s.counter as usize], st.read_ns[s.counter as usize]) = (0, at);
        }
        Ok(found)
    }
}

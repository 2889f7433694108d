//! A SIGHUP's new configuration taken up in place: the blocks it keeps go on
//! counting, the others are put back and programmed anew.

use super::*;

impl<'d> Collector<'d> {
    /// Takes up `config` ([`check`]ed against this device: `checked`) in place of
    /// this exporter's: a block whose plan stays the
    /// same keeps counting, untouched (neither put back nor programmed again, its
    /// series going on without a gap); the others are put back and programmed for
    /// `config`, their series that continue keeping their totals. The journal
    /// records, before anything new is programmed, the prior state of every block
    /// programmed then. On failure the device is put back as it was before the
    /// exporter and the error comes with the running totals, for the old
    /// configuration to start again from.
    #[allow(clippy::result_large_err)]
    pub fn reload(
        mut self,
        config: &Counting,
        checked: Checked,
        set: MetricSet,
    ) -> std::result::Result<Collector<'d>, (Error, Totals)> {
        let totals = self.running_totals();
        let device = self.device;
        // Lent counters belong to clients, and a reload ends them first; with any
        // left, the whole device starts again.
        let prepared = prepare(device, &StatRequest::for_specs(checked.specs))
            .map(|(plans, _)| (checked.metrics, plans));
        let (metric_names, plans) = match prepared {
            Ok(p) if self.lent.is_empty() && self.clients.is_empty() => p,
            Ok(_) | Err(_) => {
                let e = prepared.err().unwrap_or_else(|| Error::BadConfig {
                    path: "(reload)".into(),
                    problem: "counters are still lent to clients".into(),
                });
                return Err((self.undo(e), totals));
            }
        };
        let kept: Vec<Option<usize>> = plans
            .iter()
            .map(|p| {
                self.own.iter().position(|o| {
                    o.block.name == p.block.name && o.items == p.items && o.groups == p.groups
                })
            })
            .collect();
        match self.take_up(config, &plans, &kept) {
            Ok(saved) => {
                Ok(self.continued(config, set, metric_names, plans, &kept, saved, &totals))
            }
            Err(e) => Err((self.undo(e), totals)),
        }
    }

    /// A reload that failed with `e`: the device put back as it was before the
    /// exporter (what could not be, said with `e`).
    fn undo(self, e: Error) -> Error {
        match self.stop() {
            Ok(()) => e,
            Err(r) => crate::error::with_context(e, &r.to_string()),
        }
    }

    /// The device's side of a reload: the blocks not `kept` put back, the prior
    /// state of the new ones recorded (in the journal too), and the sampler taking
    /// the kept blocks over and starting the others. Returns the prior state of
    /// every block programmed now.
    fn take_up(
        &mut self,
        config: &Counting,
        plans: &[BlockPlan<'d>],
        kept: &[Option<usize>],
    ) -> Result<Vec<Saved>> {
        let device = self.device;
        let kept_blocks: Vec<&str> = kept
            .iter()
            .flatten()
            .map(|&j| self.own[j].block.name.as_str())
            .collect();
        let (stay, go): (Vec<Saved>, Vec<Saved>) = self
            .saved
            .iter()
            .cloned()
            .partition(|s| kept_blocks.contains(&s.block.as_str()));
        device.fs().still_here().map_err(|source| Error::File {
            what: "cannot program the device at",
            path: device.location().into(),
            source,
        })?;
        session::restore(device, &go)?;
        // What was put back is off the device's programming from here on.
        self.saved = stay.clone();
        let fresh: Vec<BlockPlan<'d>> = plans
            .iter()
            .zip(kept)
            .filter(|(_, k)| k.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        let mut saved = stay;
        saved.extend(session::save(device, &fresh)?);
        self.journal = match (self.journal.take(), config.journal) {
            (_, true) => Some(journal::write(device, &saved)?),
            (Some(j), false) => {
                j.remove()?;
                None
            }
            (None, false) => None,
        };
        self.saved = saved.clone();
        let masks = session::clock_masks(&saved);
        let empty = Sampler::open(device, Vec::new(), &masks, self.sampler.stamp())?;
        let old = std::mem::replace(&mut self.sampler, empty);
        let mut sampler = Sampler::open_keeping(device, plans.to_vec(), &masks, old, kept)?;
        let now = (sampler.stamp())();
        sampler.start_others(now, kept)?;
        self.sampler = sampler;
        Ok(saved)
    }

    /// The exporter after a reload's [`Collector::take_up`]: the kept blocks'
    /// series go on with what they carried, the others carry `totals`.
    #[allow(clippy::too_many_arguments)]
    fn continued(
        mut self,
        config: &Counting,
        set: MetricSet,
        metric_names: Vec<String>,
        plans: Vec<BlockPlan<'d>>,
        kept: &[Option<usize>],
        saved: Vec<Saved>,
        totals: &Totals,
    ) -> Collector<'d> {
        let carried: Vec<Vec<u64>> = plans
            .iter()
            .zip(kept)
            .map(|(p, k)| match k {
                Some(j) => self
                    .carried
                    .get(*j)
                    .cloned()
                    .unwrap_or_else(|| vec![0; p.items.len()]),
                None => p
                    .items
                    .iter()
                    .map(|item| {
                        let key = (p.block.name.clone(), item.clone());
                        totals.get(&key).copied().unwrap_or(0)
                    })
                    .collect(),
            })
            .collect();
        self.series = families::series_of(&plans);
        self.own = plans;
        self.saved = saved;
        self.carried = carried;
        self.set = set;
        self.metric_names = metric_names;
        self.params = config.params.clone();
        self.gauges = config.metric_gauges;
        self.user_share = config.user_share.unwrap_or(USER_SHARE);
        self.values = Vec::new();
        self.interval = (Vec::new(), 0.0);
        self.last_ns = (self.sampler.stamp())();
        self.last_accs = self.own_totals();
        self
    }
}

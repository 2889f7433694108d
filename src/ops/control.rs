//! Starting, stopping and clearing.

use serde::Serialize;

use crate::block::{Block, Mechanism};
use crate::device::plan::Plan;
use crate::device::resolve::parse_counter;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kinds::{Role, STOP_EVENT};
use crate::ops::read::{read_blocks, BlockReading};
use crate::sysfs::layout;

/// The control commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Start an all-at-once block (`enable` 1, which resets its counters).
    Start,
    /// Stop a block or un-program counters.
    Stop,
    /// Reset counters or registers to 0.
    Clear,
}

impl Action {
    /// The command's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Clear => "clear",
        }
    }
}

/// What a control command did (or would do, on a dry run).
#[derive(Debug, Clone, Serialize)]
pub struct ControlOutcome {
    /// The block.
    pub block: String,
    /// What was done.
    pub action: Action,
    /// The writes, in order.
    pub plan: Plan,
    /// The bytes each write ended up using (a stop may fall back to 0xff).
    pub written: Vec<String>,
    /// Values read just before a stop (programming resets a counter to 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_values: Option<BlockReading>,
    /// What happened besides, for people.
    pub notes: Vec<String>,
}

fn not_supported(block: &Block, problem: String) -> Error {
    Error::NotSupported {
        block: block.name.clone(),
        problem,
    }
}

/// Refuses a block with nothing to write.
fn not_empty(block: &Block, action: Action) -> Result<()> {
    if block.is_empty() {
        return Err(Error::EmptyBlock {
            block: block.name.clone(),
            action: action.as_str(),
        });
    }
    Ok(())
}

fn all_at_once_only(block: &Block, action: Action) -> Result<()> {
    let action = action.as_str();
    match block.mechanism {
        Mechanism::AllAtOnce => Ok(()),
        Mechanism::PerCounter => Err(not_supported(block, format!(
            "{b} counts per counter: each counter starts when it is programmed (`bfperf program {b} COUNTER EVENT`); `{action}` is for blocks with an enable file (l3cache, BF3 crspace)",
            b = block.name
        ))),
        Mechanism::Registers => Err(not_supported(block, format!(
            "{b} holds statistics registers that run free; they cannot be started or stopped (reset them with `bfperf clear {b}`)",
            b = block.name
        ))),
    }
}

/// Plans `enable` 1 on an L3/crspace block.
pub fn plan_start(device: &Device, block_name: &str) -> Result<ControlOutcome> {
    let block = device.block(block_name)?;
    all_at_once_only(block, Action::Start)?;
    let mut plan = Plan::default();
    plan.push(
        layout::enable(&block.name),
        "1".into(),
        "the kernel refused to start the block",
    );
    Ok(ControlOutcome {
        block: block.name.clone(),
        action: Action::Start,
        plan,
        written: Vec::new(),
        final_values: None,
        notes: vec![format!(
            "{} started: all its counters were reset to 0 and count together",
            block.name
        )],
    })
}

/// Plans a stop: `enable` 0 on L3/crspace blocks, or un-programming counters of a
/// per-counter block (DISABLE where its table has it, else 0xff; 0xff again if the
/// kernel refuses DISABLE).
pub fn plan_stop(
    device: &Device,
    block_name: &str,
    counter: Option<&str>,
) -> Result<ControlOutcome> {
    let block = device.block(block_name)?;
    not_empty(block, Action::Stop)?;
    let mut plan = Plan::default();
    let mut notes = Vec::new();
    match block.mechanism {
        Mechanism::Registers => all_at_once_only(block, Action::Stop)?,
        Mechanism::AllAtOnce => {
            if let Some(c) = counter {
                return Err(not_supported(block, format!(
                    "the counters of {b} stop together; `bfperf stop {b}` stops all of them (counter {c} cannot be stopped alone)",
                    b = block.name
                )));
            }
            plan.push(
                layout::enable(&block.name),
                "0".into(),
                "the kernel refused to stop the block",
            );
            notes.push(format!(
                "{} stopped: its counters keep their values for reading",
                block.name
            ));
        }
        Mechanism::PerCounter => {
            let indices = match counter {
                Some(c) => vec![parse_counter(block, c)?],
                None => block.counters.clone(),
            };
            let catalog = device.catalog(block)?;
            let disable = catalog.disable_number();
            for i in indices {
                let path = layout::event(&block.name, i);
                let refused = match disable {
                    Some(_) => format!(
                        "this kernel refuses both DISABLE and 0x{STOP_EVENT:x}: the counter cannot be stopped here; it keeps counting its event"
                    ),
                    None => format!(
                        "this kernel validates event numbers and the {} table has no DISABLE event, so the counter cannot be stopped on this kernel; it keeps counting its event",
                        block.kind.as_str()
                    ),
                };
                match disable {
                    Some(d) => plan.push_with_fallback(
                        path,
                        format!("0x{d:x}"),
                        format!("0x{STOP_EVENT:x}"),
                        refused,
                    ),
                    None => plan.push(path, format!("0x{STOP_EVENT:x}"), refused),
                }
            }
            notes.push(
                "stopping re-programs a counter, which resets it to 0: the values before the stop are shown"
                    .to_string(),
            );
        }
    }
    Ok(ControlOutcome {
        block: block.name.clone(),
        action: Action::Stop,
        plan,
        written: Vec::new(),
        final_values: None,
        notes,
    })
}

/// The register a user named, checked against the block's files.
fn named_register(device: &Device, block: &Block, typed: &str) -> Result<String> {
    let catalog = device.catalog(block)?;
    if let Ok(e) = catalog.resolve(typed) {
        if block.registers.iter().any(|r| *r == e.name) {
            return Ok(e.name.to_string());
        }
    }
    Err(Error::BadEvent {
        block: block.name.clone(),
        problem: crate::catalog::no_register(&block.name, &block.registers, typed),
    })
}

/// The registers a clear writes: without a name, the count registers only; a named
/// control register only with `force`; never a level.
fn registers_to_clear(
    device: &Device,
    block: &Block,
    target: Option<&str>,
    force: bool,
) -> Result<Vec<String>> {
    let def = block.def();
    let Some(typed) = target else {
        let counts: Vec<String> = block
            .registers
            .iter()
            .filter(|r| def.role(r) == Role::Count)
            .cloned()
            .collect();
        if counts.is_empty() {
            return Err(not_supported(
                block,
                format!(
                    "{} has no count registers to clear: its registers are read-only measurements or controls",
                    block.name
                ),
            ));
        }
        return Ok(counts);
    };
    let name = named_register(device, block, typed)?;
    match def.role(&name) {
        Role::Count => Ok(vec![name]),
        Role::Control if force => Ok(vec![name]),
        Role::Control => Err(not_supported(
            block,
            format!(
                "{}/{name} is a control register (error injection or a switch), not a count: bfperf writes it only with --force",
                block.name
            ),
        )),
        Role::Level => Err(not_supported(
            block,
            format!(
                "{}/{name} is a read-only measurement; it cannot be cleared",
                block.name
            ),
        )),
    }
}

/// Plans a clear: 0 to counter files (per-counter and crspace blocks) or to count
/// registers (control registers only when named, with `force`).
pub fn plan_clear(
    device: &Device,
    block_name: &str,
    target: Option<&str>,
    force: bool,
) -> Result<ControlOutcome> {
    let block = device.block(block_name)?;
    not_empty(block, Action::Clear)?;
    let mut plan = Plan::default();
    if block.mechanism == Mechanism::Registers {
        for n in registers_to_clear(device, block, target, force)? {
            plan.push(
                layout::register(&block.name, &n),
                "0".into(),
                "the kernel refused to reset this register",
            );
        }
    } else if !block.def().clear_counters {
        return Err(not_supported(block, format!(
            "the counters of {b} cannot be cleared one by one (the driver rejects every write to them); `bfperf start {b}` resets all of them to 0 and starts them",
            b = block.name
        )));
    } else {
        let indices = match target {
            Some(c) => vec![parse_counter(block, c)?],
            None => block.counters.clone(),
        };
        for i in indices {
            plan.push(
                layout::counter(&block.name, i),
                "0".into(),
                "the kernel refused to clear this counter",
            );
        }
    }
    Ok(ControlOutcome {
        block: block.name.clone(),
        action: Action::Clear,
        plan,
        written: Vec::new(),
        final_values: None,
        notes: Vec::new(),
    })
}

/// Applies a planned control command. A stop of a per-counter block first reads the
/// values it is about to reset.
pub fn apply(device: &Device, mut outcome: ControlOutcome) -> Result<ControlOutcome> {
    if outcome.action == Action::Stop {
        let block = device.block(&outcome.block)?;
        if block.mechanism == Mechanism::PerCounter {
            let r = read_blocks(device, &[block])?;
            outcome.final_values = r.blocks.into_iter().next().map(|mut b| {
                let stopped: Vec<String> =
                    outcome.plan.writes.iter().map(|w| w.path.clone()).collect();
                b.counters
                    .retain(|c| stopped.contains(&layout::event(&outcome.block, c.counter)));
                b
            });
        }
    }
    outcome.written = outcome.plan.apply(device.fs())?;
    Ok(outcome)
}

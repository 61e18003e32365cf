//! The lever's *direction*. Seed 001 puts a marked process at the head of the ready queue;
//! raising it (nice -20) does that and also puts it ahead of everything else in its cgroup
//! that is not followed (a front such as nginx, the hog). *Lowering the rest* gives the same
//! order among the followed tasks without touching anyone else: every followed task POS
//! does not hold raised is put at a low priority (`--rest-nice`, +19 by default: weight 15
//! against 1024) and a marked one is put back to its own value.
//!
//! The decision is POS's ([`policy::kpos::Kpos::raised`]: marked, or asleep past SLP, while
//! the CPU is the bottleneck); this module only inverts where the lever is pulled. The lever
//! is the same journaled [`Lever`], configured with the low nice value, so a task held low is
//! restored like a raised one (on exit, on a signal, after a crash).

use std::collections::BTreeSet;
use std::io::Write;

use os::lever::{Lever, LeverError};
use os::proctrace::Tid;
use policy::kpos::Kpos;

/// Which way the lever moves tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Raise the tasks POS marks (seed 001's head of the queue, the default).
    RaiseMarked,
    /// Lower the followed tasks POS does not mark (see the module docs).
    LowerRest,
}

impl Direction {
    /// Parse `raise` or `lower-rest`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "raise" => Ok(Self::RaiseMarked),
            "lower-rest" => Ok(Self::LowerRest),
            _ => Err(format!("unknown direction {s:?} (raise, lower-rest)")),
        }
    }

    /// The name [`Direction::parse`] reads.
    pub fn name(&self) -> &'static str {
        match self {
            Self::RaiseMarked => "raise",
            Self::LowerRest => "lower-rest",
        }
    }
}

/// Holds the followed tasks POS does not mark at the lever's (low) value.
#[derive(Default)]
pub struct Rest {
    /// Tasks the lever may not change (a one-line error was counted once): not retried.
    refused: BTreeSet<Tid>,
}

impl Rest {
    /// Put every task of `known` where POS wants it: low if `kpos` does not hold it raised
    /// and the CPU is the bottleneck (or `always`), back to its own value otherwise. Returns
    /// the number of lever errors (written to `out`, first of each task only).
    pub fn sync(
        &mut self,
        known: &BTreeSet<Tid>,
        kpos: &Kpos,
        lever: &mut Lever,
        always: bool,
        out: &mut dyn Write,
    ) -> u64 {
        let active = always || kpos.stats().load.bottleneck;
        let mut errors = 0;
        for &t in known {
            if self.refused.contains(&t) {
                continue;
            }
            let low = active && !kpos.raised(t as u64);
            let r = match (low, lever.is_raised(t)) {
                (true, false) => lever.raise(t),
                (false, true) => lever.lower(t),
                _ => continue,
            };
            match r {
                Ok(()) => {}
                Err(LeverError::Gone(_)) => lever.forget(t),
                Err(e) => {
                    errors += 1;
                    self.refused.insert(t);
                    let _ = writeln!(out, "lever: {e}");
                }
            }
        }
        errors
    }
}

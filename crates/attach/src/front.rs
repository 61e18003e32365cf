//! The *front*: processes every request crosses before and after the followed ones (nginx
//! in front of php-fpm), which POS does not classify but which must not starve behind raised
//! tasks. At nice 0 beside tasks at -20 a task gets about 1% of the CPU (weights 1024 against
//! 88761): a page whose script ran raised still waits for its front to relay it. So the
//! front's tasks are raised with the followed ones, by the same lever and journal, for as
//! long as at least one followed task is raised (priority inheritance, the rule triage's
//! own CGI relay threads follow, docs/cgi.md), and restored when none is.

use std::collections::BTreeSet;
use std::io::Write;

use os::lever::{Lever, LeverError};
use os::proctrace::{targets, Target, Tid};

/// See the module docs.
pub struct Front {
    /// The front's processes, as given (`--front-pid`): their threads and descendants are
    /// looked up again at every [`Front::rescan`] (a front may fork workers).
    pids: Vec<i32>,
    /// The front's tasks found so far.
    tasks: BTreeSet<Tid>,
    /// Front tasks held raised now.
    held: BTreeSet<Tid>,
    /// Times the front was raised (for the log).
    pub raises: u64,
}

impl Front {
    /// The front made of `pids` (and their descendants); no task is raised yet.
    pub fn new(pids: &[i32]) -> Self {
        let mut f = Self {
            pids: pids.to_vec(),
            tasks: BTreeSet::new(),
            held: BTreeSet::new(),
            raises: 0,
        };
        f.rescan();
        f
    }

    /// Whether there is a front at all.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }

    /// The front's tasks found so far.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Front tasks held raised now (to tell them from the followed tasks the lever holds).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Look the front's tasks up again (new workers; exited ones are dropped when the lever
    /// finds them gone).
    pub fn rescan(&mut self) {
        for &p in &self.pids {
            if let Ok(ts) = targets::tasks(&Target::Pid(p)) {
                self.tasks.extend(ts);
            }
        }
    }

    /// Raise every front task if `any_raised` (a followed task is held raised), restore them
    /// if not. Errors other than a task being gone are written to `out` (first few) and
    /// counted in the return value.
    pub fn sync(&mut self, lever: &mut Lever, any_raised: bool, out: &mut dyn Write) -> u64 {
        let mut errors = 0;
        let want: Vec<Tid> = if any_raised {
            self.tasks.difference(&self.held).copied().collect()
        } else {
            Vec::new()
        };
        if !want.is_empty() {
            self.raises += 1;
        }
        for t in want {
            match lever.raise(t) {
                Ok(()) => {
                    self.held.insert(t);
                }
                Err(LeverError::Gone(_)) => {
                    lever.forget(t);
                    self.tasks.remove(&t);
                }
                Err(e) => {
                    errors += 1;
                    if errors == 1 {
                        let _ = writeln!(out, "front: {e}");
                    }
                    // Not the lever's to change: stop trying.
                    self.tasks.remove(&t);
                }
            }
        }
        if !any_raised {
            for t in std::mem::take(&mut self.held) {
                if let Err(e) = lever.lower(t) {
                    errors += 1;
                    let _ = writeln!(out, "front: {e}");
                }
            }
        }
        errors
    }
}

//! The fallback logger: reads `/proc/<tid>/stat` of every followed task every interval and
//! reports state changes (running or ready `R` as [`Kind::Run`], anything else as
//! [`Kind::Wait`]), new children (`/proc/<tid>/task/<tid>/children`) and exits, stamped with
//! the poll's time. Coarse: a state shorter than the interval may be missed.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use super::{monotonic_ns, Kind, TaskEvent, Tid};

/// See the module docs.
pub struct PollTracer {
    every: Duration,
    /// Followed tasks and the state last seen (`None` before the first poll).
    tasks: BTreeMap<Tid, Option<Kind>>,
    /// When the next poll is due (monotonic ns).
    next: u64,
}

impl PollTracer {
    pub fn new(every: Duration) -> Self {
        Self {
            every: every.max(Duration::from_micros(100)),
            tasks: BTreeMap::new(),
            next: 0,
        }
    }

    pub fn every(&self) -> Duration {
        self.every
    }

    pub fn follow(&mut self, tid: Tid) {
        self.tasks.entry(tid).or_insert(None);
    }

    pub fn unfollow(&mut self, tid: Tid) {
        self.tasks.remove(&tid);
    }

    pub fn poll(&mut self, timeout: Duration, out: &mut Vec<TaskEvent>) -> io::Result<()> {
        let now = monotonic_ns();
        if self.next > now {
            let wait = Duration::from_nanos(self.next - now).min(timeout);
            std::thread::sleep(wait);
            if monotonic_ns() < self.next {
                return Ok(());
            }
        }
        self.next = monotonic_ns() + self.every.as_nanos() as u64;
        let t_ns = monotonic_ns();
        let tids: Vec<Tid> = self.tasks.keys().copied().collect();
        for tid in tids {
            let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok();
            let state = stat.as_deref().and_then(crate::procfs::stat_state);
            let kind = match state {
                None | Some('Z') | Some('X') => {
                    self.tasks.remove(&tid);
                    out.push(TaskEvent {
                        t_ns,
                        tid,
                        tgid: 0,
                        kind: Kind::Exit,
                    });
                    continue;
                }
                Some('R') => Kind::Run,
                Some(_) => Kind::Wait,
            };
            if self.tasks.get(&tid) != Some(&Some(kind)) {
                self.tasks.insert(tid, Some(kind));
                out.push(TaskEvent {
                    t_ns,
                    tid,
                    tgid: 0,
                    kind,
                });
            }
            let kids = std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/children"))
                .unwrap_or_default();
            for c in kids
                .split_whitespace()
                .filter_map(|c| c.parse::<Tid>().ok())
            {
                for t in super::targets::threads(c) {
                    if let std::collections::btree_map::Entry::Vacant(e) = self.tasks.entry(t) {
                        e.insert(None);
                        out.push(TaskEvent {
                            t_ns,
                            tid: t,
                            tgid: c,
                            kind: Kind::Fork { parent: tid },
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

//! The record of what a [`super::Lever`] raised, so that it can be restored after a crash:
//! an append-only file `<dir>/<daemon pid>-<daemon start time>.lever`, one line per change:
//!
//! ```text
//! R <tid> <task start time> <nice before> <slice ns before> <cgroup before or ->
//! P <tid> <scheduling policy before>
//! L <tid>
//! ```
//!
//! `R` records a raise with what to restore, `P` (after its `R`, only when the raise changes
//! the task's scheduling policy: the real-time lever) the policy to put back, `L` that the
//! task was restored (or exited). On
//! the next start [`super::recover`] replays the files of daemons that are gone and restores every
//! task still raised whose start time matches (the tid was not reused).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::proctrace::Tid;

/// What a raise changed on one task: enough to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The task.
    pub tid: Tid,
    /// Its start time (`/proc/<tid>/stat` field 22), to tell it from a later task with the
    /// same id.
    pub start_time: u64,
    /// Its nice value before the raise.
    pub nice: i32,
    /// Its slice request before the raise (ns; 0 = the default).
    pub slice_ns: u64,
    /// The cgroup directory it was moved out of (weight lever), if any.
    pub cgroup: Option<PathBuf>,
    /// Its scheduling policy before the raise, when the raise changes it (the real-time
    /// lever); `None`: the policy is left alone.
    pub policy: Option<i32>,
}

impl Saved {
    fn line(&self) -> String {
        let cg = self
            .cgroup
            .as_ref()
            .map_or("-".to_owned(), |p| p.display().to_string());
        let mut line = format!(
            "R {} {} {} {} {}\n",
            self.tid, self.start_time, self.nice, self.slice_ns, cg
        );
        if let Some(p) = self.policy {
            line.push_str(&format!("P {} {p}\n", self.tid));
        }
        line
    }
}

/// Parse a journal: the tasks still raised at its end (a later `L` cancels an `R`; a
/// malformed line, as a torn last write, is skipped).
pub fn parse(text: &str) -> BTreeMap<Tid, Saved> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        match f.as_slice() {
            ["R", tid, start, nice, slice, cg] => {
                let (Ok(tid), Ok(start_time), Ok(nice), Ok(slice_ns)) =
                    (tid.parse(), start.parse(), nice.parse(), slice.parse())
                else {
                    continue;
                };
                let cgroup = (*cg != "-").then(|| PathBuf::from(cg));
                out.insert(
                    tid,
                    Saved {
                        tid,
                        start_time,
                        nice,
                        slice_ns,
                        cgroup,
                        policy: None,
                    },
                );
            }
            ["P", tid, policy] => {
                if let (Ok(tid), Ok(p)) = (tid.parse::<Tid>(), policy.parse::<i32>()) {
                    if let Some(s) = out.get_mut(&tid) {
                        s.policy = Some(p);
                    }
                }
            }
            ["L", tid] => {
                if let Ok(tid) = tid.parse::<Tid>() {
                    out.remove(&tid);
                }
            }
            _ => {}
        }
    }
    out
}

/// An open journal of this process.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Lines written since the file was last compacted.
    lines: usize,
}

/// Compact the journal after this many lines.
const COMPACT_AFTER: usize = 20_000;

impl Journal {
    /// Create this process's journal in `dir` (created if missing).
    pub fn create(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let me = std::process::id() as i32;
        let start = start_time(me).unwrap_or(0);
        let path = dir.join(format!("{me}-{start}.lever"));
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?;
        Ok(Self {
            path,
            file,
            lines: 0,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record a raise (before it is made, so a crash between the two restores a value that
    /// was never changed: harmless).
    pub fn raised(&mut self, s: &Saved) -> io::Result<()> {
        self.append(&s.line())
    }

    /// Record that `tid` is no longer raised.
    pub fn lowered(&mut self, tid: Tid) -> io::Result<()> {
        self.append(&format!("L {tid}\n"))
    }

    /// Rewrite the file with just the tasks still raised, when it has grown long.
    pub fn compact_if_long(&mut self, live: &BTreeMap<Tid, Saved>) -> io::Result<()> {
        if self.lines < COMPACT_AFTER {
            return Ok(());
        }
        let text: String = live.values().map(Saved::line).collect();
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path)?;
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        self.lines = live.len();
        Ok(())
    }

    fn append(&mut self, line: &str) -> io::Result<()> {
        self.lines += 1;
        self.file.write_all(line.as_bytes())
    }

    /// Remove the file (everything was restored).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Start time of task `tid` (`/proc/<tid>/stat` field 22, clock ticks since boot).
pub fn start_time(tid: Tid) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    parse_start_time(&s)
}

/// Field 22 of a `/proc/<pid>/stat` line.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3: field 22 is index 19.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The journals in `dir` whose daemon is gone (its pid dead, or reused by a process started
/// at another time).
pub fn stale(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".lever") else {
            continue;
        };
        let Some((pid, start)) = stem.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<Tid>(), start.parse::<u64>()) else {
            continue;
        };
        let alive = start_time(pid) == Some(start) && !crate::task::ended(pid);
        if !alive {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

//! Processes the lab starts (servers, peers, the CPU hog, the load generator), each owned by a
//! [`Managed`] guard that stops it (and its whole process group) when dropped.
//!
//! Every child:
//! - runs in its own process group (a terminal's Ctrl-C reaches only the lab, which then stops
//!   the children in order; stopping a child signals its whole group, so Apache's prefork
//!   children and nginx's worker go too);
//! - gets `PR_SET_PDEATHSIG = SIGKILL`, so even a `kill -9` of the lab does not leave it running;
//! - may be pinned to one CPU and placed in a network namespace before it executes anything
//!   (`os::cpu::CpuMask`, `os::netns::enter_raw`: one system call each, no allocation);
//! - may join a cgroup before it executes (`os::Cgroup::join_hook`, between fork and exec), so
//!   a server and every process it forks at start are inside the server-side cgroup from their
//!   first instruction.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::error::{LabError, Result};
use crate::signals;

/// How to start one child process.
pub struct Launch<'a> {
    /// Short name used in messages and logs ("nginx", "triage serve", "hog").
    pub label: String,
    /// The program to execute.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// Pin to these CPUs instead of `cpu` when not empty (a multi-core server or load
    /// generator: `triage bench static --cores`).
    pub cpu_set: Vec<usize>,
    /// Enter this network namespace.
    pub netns: Option<&'a os::netns::NetNs>,
    /// Append stdout and stderr here (otherwise discarded).
    pub log: Option<PathBuf>,
    /// Write stdout here instead (stderr still goes to `log`), for output that is parsed.
    pub stdout: Option<PathBuf>,
    /// Join this cgroup before executing `program`.
    pub cgroup: Option<&'a os::Cgroup>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
}

impl<'a> Launch<'a> {
    /// A launch of `program args` with no placement.
    pub fn new(label: impl Into<String>, program: impl Into<PathBuf>) -> Self {
        Launch {
            label: label.into(),
            program: program.into(),
            args: Vec::new(),
            cpu: None,
            cpu_set: Vec::new(),
            netns: None,
            log: None,
            stdout: None,
            cgroup: None,
            env: Vec::new(),
        }
    }

    /// Append arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Start the child.
    pub fn spawn(self) -> Result<Managed> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stdin(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let append = |path: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| LabError::io("opening log", path, e))
        };
        let (out, err) = match &self.log {
            Some(path) => {
                let f = append(path)?;
                let f2 = f
                    .try_clone()
                    .map_err(|e| LabError::io("opening log", path, e))?;
                (Stdio::from(f), Stdio::from(f2))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let out = match &self.stdout {
            Some(path) => Stdio::from(append(path)?),
            None => out,
        };
        cmd.stdout(out).stderr(err);
        cmd.process_group(0);
        let cpuset = match (self.cpu, self.cpu_set.is_empty()) {
            (_, false) => {
                Some(
                    os::cpu::CpuMask::of(&self.cpu_set).map_err(|e| LabError::Process {
                        name: self.label.clone(),
                        msg: format!("cannot pin to CPUs {:?}: {e}", self.cpu_set),
                    })?,
                )
            }
            (Some(cpu), true) => {
                Some(os::cpu::CpuMask::one(cpu).map_err(|e| LabError::Process {
                    name: self.label.clone(),
                    msg: format!("cannot pin to CPU {cpu}: {e}"),
                })?)
            }
            (None, true) => None,
        };
        let netns_fd = self.netns.map(|n| n.raw_fd());
        let join = match self.cgroup {
            Some(cg) => Some(cg.join_hook().map_err(|e| {
                LabError::Os(format!(
                    "{}: cannot prepare joining cgroup {}: {e}",
                    self.label,
                    cg.path().display()
                ))
            })?),
            None => None,
        };
        // SAFETY: the closure only makes async-signal-safe system calls (prctl,
        // sched_setaffinity, write to cgroup.procs, setns) on data prepared before fork; it
        // does not allocate. The namespace's descriptor stays open: `self.netns` outlives the
        // spawn.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                if let Some(set) = &cpuset {
                    set.apply_to_current_thread()?;
                }
                if let Some(j) = &join {
                    j.join()?;
                }
                if let Some(fd) = netns_fd {
                    os::netns::enter_raw(fd)?;
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| LabError::Process {
            name: self.label.clone(),
            msg: format!("cannot start `{}`: {e}", self.program.display()),
        })?;
        Ok(Managed {
            child,
            label: self.label.clone(),
            log: self.log.clone(),
            done: None,
        })
    }
}

/// A running child; dropping it kills its process group and reaps it.
pub struct Managed {
    child: Child,
    label: String,
    log: Option<PathBuf>,
    done: Option<ExitStatus>,
}

impl Managed {
    /// The child's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The label it was launched with.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Its log file, if any.
    pub fn log_path(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// The exit status if it has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if let Some(s) = self.done {
            return Ok(Some(s));
        }
        let s = self.child.try_wait().map_err(|e| LabError::Process {
            name: self.label.clone(),
            msg: format!("waiting: {e}"),
        })?;
        if s.is_some() {
            self.done = s;
        }
        Ok(s)
    }

    /// Wait until it exits or `deadline` passes (`Ok(None)`); returns `Interrupted` on a signal.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<Option<ExitStatus>> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            signals::check()?;
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ask it (and its group) to stop with SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Ok(Some(s)) = self.try_wait() {
            self.kill_group(Signal::SIGKILL); // stragglers in its group
            return Some(s);
        }
        self.kill_group(Signal::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Ok(Some(s)) = self.try_wait() {
                self.kill_group(Signal::SIGKILL);
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_group(Signal::SIGKILL);
        let s = self.child.wait().ok();
        self.done = s;
        s
    }

    /// Kill it (and its group) with SIGKILL now, and reap it (a crash, for failover runs).
    pub fn kill(&mut self) -> Option<ExitStatus> {
        self.kill_group(Signal::SIGKILL);
        let s = self.child.wait().ok();
        self.done = s;
        s
    }

    fn kill_group(&self, sig: Signal) {
        let _ = killpg(Pid::from_raw(self.pid() as i32), sig);
    }

    /// The last `max_bytes` of its log (for error messages).
    pub fn log_tail(&self, max_bytes: usize) -> String {
        log_tail(self.log.as_deref(), max_bytes)
    }
}

/// The last `max_bytes` of a log file, or an empty string.
pub fn log_tail(path: Option<&Path>, max_bytes: usize) -> String {
    let Some(p) = path else { return String::new() };
    let Ok(bytes) = std::fs::read(p) else {
        return String::new();
    };
    let start = bytes.len().saturating_sub(max_bytes);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.done.is_none() {
            self.kill_group(Signal::SIGKILL);
            let _ = self.child.wait();
        } else {
            self.kill_group(Signal::SIGKILL);
        }
    }
}

/// Run a helper command to completion; error with its stderr if it fails.
pub fn run_cmd(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Command {
            cmd: format!("{program} {}", args.join(" ")),
            msg: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LabError::Command {
            cmd: format!("{program} {}", args.join(" ")),
            msg: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where `name` is on `PATH` (or in /usr/sbin, /sbin, where Debian puts nginx and apache2).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for d in ["/usr/sbin", "/sbin", "/usr/local/sbin"] {
        dirs.push(PathBuf::from(d));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

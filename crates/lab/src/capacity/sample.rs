//! `triage capacity sample`: record a server's CPU by mode at an interval, as seed 002 logged
//! its clock-interrupt counters, into the file [`super::cpu_csv`] describes. Sources: the
//! whole machine (`/proc/stat`), one cgroup, one process, or triage's own `/metrics`
//! (`triage_process_cpu_seconds_total{mode=...}`). The kernel is read through `os`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::cpu_csv::{format_line, CpuSample, HEADER};
use super::CapacityError;

/// Where the CPU figures come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Every CPU of the machine (its idle time is the kernel's own).
    Machine,
    /// One cgroup's accounting directory (v2 group directory, or v1 under cpuacct).
    Cgroup(PathBuf),
    /// One process (all its threads).
    Pid(i32),
    /// A triage `/metrics` URL (`http://host:port/metrics`).
    Metrics(String),
}

impl Source {
    /// The source in words, for the file's comment line.
    pub fn describe(&self) -> String {
        match self {
            Source::Machine => "the whole machine (kernel counters)".into(),
            Source::Cgroup(p) => format!("cgroup {}", p.display()),
            Source::Pid(p) => format!("process {p}"),
            Source::Metrics(u) => format!("metrics {u}"),
        }
    }
}

/// Reads cumulative samples from a [`Source`]. For a cgroup, a process or `/metrics`, idle is
/// what `cpus` CPUs left unused since the first reading.
pub struct Reader {
    source: Source,
    /// CPUs the sampled group may use (idle = cpus x elapsed - used).
    cpus: f64,
    /// The first reading's time and total used seconds (idle counts from there).
    start: Option<(f64, f64)>,
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn err(what: String) -> CapacityError {
    CapacityError::Sample(what)
}

/// GET an `http://` URL's body (small responses only).
fn http_body(url: &str) -> Result<String, CapacityError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| err(format!("{url}: only http:// URLs are read")))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| err(format!("{url}: {e}")))?
        .next()
        .ok_or_else(|| err(format!("{url}: no address")))?;
    let t = Duration::from_secs(5);
    let mut s = TcpStream::connect_timeout(&addr, t).map_err(|e| err(format!("{url}: {e}")))?;
    let _ = s.set_read_timeout(Some(t));
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| err(format!("{url}: {e}")))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| err(format!("{url}: {e}")))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => {
            Ok(body.to_owned())
        }
        _ => Err(err(format!(
            "{url}: unexpected answer `{}`",
            text.lines().next().unwrap_or("")
        ))),
    }
}

/// `triage_process_cpu_seconds_total{mode="user"|"system"}` of a Prometheus text.
pub fn metrics_split(text: &str) -> Option<(f64, f64)> {
    let get = |mode: &str| {
        let key = format!("triage_process_cpu_seconds_total{{mode=\"{mode}\"}}");
        text.lines().find_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            (k.trim() == key).then(|| v.trim().parse::<f64>().ok())?
        })
    };
    Some((get("user")?, get("system")?))
}

impl Reader {
    /// A reader of `source`; `cpus` is what a cgroup, process or `/metrics` source may use.
    pub fn new(source: Source, cpus: f64) -> Reader {
        Reader {
            source,
            cpus,
            start: None,
        }
    }

    /// One reading now.
    pub fn read(&mut self) -> Result<CpuSample, CapacityError> {
        let t = now_unix();
        let (user, system, used) = match &self.source {
            Source::Machine => {
                let s = os::cpusplit::machine_split(None)
                    .map_err(|e| err(format!("the machine's CPU counters: {e}")))?;
                return Ok(CpuSample {
                    unix_s: t,
                    user_s: s.user.as_secs_f64(),
                    system_s: s.system.as_secs_f64(),
                    idle_s: s.idle.as_secs_f64(),
                });
            }
            Source::Cgroup(dir) => {
                // The split in ticks, idle from the precise total.
                let g = os::cpusplit::cgroup_split(dir).map_err(|e| err(e.to_string()))?;
                (
                    g.split.user.as_secs_f64(),
                    g.split.system.as_secs_f64(),
                    g.total.as_secs_f64(),
                )
            }
            Source::Pid(pid) => {
                let s = os::cpusplit::process_split(*pid)
                    .map_err(|e| err(format!("process {pid}: {e}")))?;
                let (u, k) = (s.user.as_secs_f64(), s.system.as_secs_f64());
                (u, k, u + k)
            }
            Source::Metrics(url) => {
                let (u, k) = metrics_split(&http_body(url)?).ok_or_else(|| {
                    err(format!(
                        "{url} has no triage_process_cpu_seconds_total{{mode=\"user\"|\"system\"}}"
                    ))
                })?;
                (u, k, u + k)
            }
        };
        let (t0, used0) = *self.start.get_or_insert((t, used));
        Ok(CpuSample {
            unix_s: t,
            user_s: user,
            system_s: system,
            idle_s: self.cpus * (t - t0) - (used - used0),
        })
    }

    /// The comment and header lines a samples file starts with.
    pub fn preamble(&self, every: Duration) -> String {
        let cpus = match self.source {
            Source::Machine => String::new(),
            _ => format!(" ({} CPU)", self.cpus),
        };
        format!(
            "# triage capacity sample: {}{cpus}, every {}\n{HEADER}\n",
            self.source.describe(),
            units::format_duration(every)
        )
    }
}

/// Sleep until the next whole multiple of `every` since the epoch (so samples line up with
/// the log's whole seconds); false when interrupted.
fn sleep_to_next(every: Duration) -> bool {
    let e = every.as_secs_f64();
    let now = now_unix();
    let next = ((now / e).floor() + 1.0) * e;
    crate::signals::sleep(Duration::from_secs_f64((next - now).max(0.0))).is_ok()
}

/// Record a reading every `every` for `duration` (or until SIGINT/SIGTERM) into `out`, flushed
/// line by line; returns how many readings were written.
pub fn record(
    reader: &mut Reader,
    every: Duration,
    duration: Duration,
    out: &mut dyn Write,
) -> Result<usize, CapacityError> {
    let end = now_unix() + duration.as_secs_f64();
    record_while(reader, every, out, &|t| t < end - 1e-3)
}

/// Record a reading every `every` into `out` while `go(time of the last reading)` holds (and
/// no signal came); returns how many readings were written.
pub fn record_while(
    reader: &mut Reader,
    every: Duration,
    out: &mut dyn Write,
    go: &dyn Fn(f64) -> bool,
) -> Result<usize, CapacityError> {
    if every.is_zero() {
        return Err(CapacityError::Config("--interval must be above 0".into()));
    }
    let io = |e: std::io::Error| err(format!("writing the samples: {e}"));
    out.write_all(reader.preamble(every).as_bytes())
        .map_err(io)?;
    let mut n = 0;
    while sleep_to_next(every) {
        let s = reader.read()?;
        writeln!(out, "{}", format_line(&s)).map_err(io)?;
        out.flush().map_err(io)?;
        n += 1;
        if !go(s.unix_s) {
            break;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::cpu_csv::parse_cpu_csv;

    #[test]
    fn metrics_lines_are_found() {
        let t = "# HELP x\ntriage_process_cpu_seconds_total{mode=\"user\"} 1.5\n\
                 triage_process_cpu_seconds_total{mode=\"system\"} 0.25\n";
        assert_eq!(metrics_split(t), Some((1.5, 0.25)));
        assert_eq!(metrics_split("triage_requests_total 3\n"), None);
    }

    #[test]
    fn records_a_process_and_the_machine() {
        // A sleeping child, not this process: the other tests of this binary run beside it
        // and would make this one's CPU anything.
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let mut r = Reader::new(Source::Pid(child.id() as i32), 1.0);
        let mut out = Vec::new();
        let n = record(
            &mut r,
            Duration::from_millis(100),
            Duration::from_millis(300),
            &mut out,
        )
        .unwrap();
        assert!(n >= 3, "{n}");
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("# triage capacity sample: process"),
            "{text}"
        );
        let v = parse_cpu_csv(&text).unwrap();
        // Mostly asleep: idle grows by about the elapsed time.
        let d = v.last().unwrap().minus(&v[0]);
        assert!(d.idle_s > 0.5 * d.unix_s, "{d:?}");
        let mut m = Reader::new(Source::Machine, 1.0);
        let a = m.read().unwrap();
        assert!(a.idle_s + a.user_s > 0.0);
        let mut g = Reader::new(Source::Cgroup("/nonexistent".into()), 1.0);
        assert!(g.read().is_err());
        let mut bad = Reader::new(Source::Pid(i32::MAX), 1.0);
        assert!(bad.read().unwrap_err().to_string().contains("process"));
        let _ = child.kill();
        let _ = child.wait();
    }
}

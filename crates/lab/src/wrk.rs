//! wrk, the closed-loop HTTP load every CGI lab and benchmark uses: [`Wrk`] runs one on the
//! client side of a testbed (pinned to the client CPU, in the client namespace) and
//! [`parse_wrk`] reads its report.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::process::{which, Managed};
use crate::testbed::Testbed;

/// What wrk reports for one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WrkResult {
    /// Completed requests.
    pub requests: u64,
    /// The run's duration as wrk measured it (seconds).
    pub duration_s: f64,
    /// Requests per second.
    pub rps: f64,
    /// Mean latency (ms).
    pub latency_mean_ms: f64,
    /// Median latency (ms).
    pub latency_p50_ms: f64,
    /// 90th percentile latency (ms).
    pub latency_p90_ms: f64,
    /// 99th percentile latency (ms).
    pub latency_p99_ms: f64,
    /// Largest latency (ms).
    pub latency_max_ms: f64,
    /// Socket errors (connect + read + write + timeout).
    pub errors: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Responses with a status other than 2xx/3xx.
    pub non_2xx: u64,
}

/// `512.33us`, `1.20ms`, `2.00s`, `1.5m` in milliseconds (wrk's own notation).
fn parse_time_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mul) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e3)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600e3)
    } else {
        (s, 1.0)
    };
    num.parse::<f64>().ok().map(|v| v * mul)
}

/// Parse wrk's report (run with `--latency`). Fails if the summary lines are missing.
pub fn parse_wrk(text: &str) -> Result<WrkResult> {
    let mut r = WrkResult::default();
    let mut saw_requests = false;
    for line in text.lines() {
        let t = line.trim();
        let f: Vec<&str> = t.split_whitespace().collect();
        if f.first() == Some(&"Latency") && f.len() >= 4 {
            r.latency_mean_ms = parse_time_ms(f[1]).unwrap_or(f64::NAN);
            r.latency_max_ms = parse_time_ms(f[3]).unwrap_or(f64::NAN);
        } else if f.len() == 2 && f[0].ends_with('%') {
            let v = parse_time_ms(f[1]).unwrap_or(f64::NAN);
            match f[0] {
                "50%" => r.latency_p50_ms = v,
                "90%" => r.latency_p90_ms = v,
                "99%" => r.latency_p99_ms = v,
                _ => {}
            }
        } else if f.len() >= 4 && f[1] == "requests" && f[2] == "in" {
            r.requests = f[0].parse().unwrap_or(0);
            r.duration_s = parse_time_ms(f[3].trim_end_matches(','))
                .map(|ms| ms / 1e3)
                .unwrap_or(f64::NAN);
            saw_requests = true;
        } else if let Some(rest) = t.strip_prefix("Socket errors:") {
            for part in rest.split(',') {
                let mut it = part.split_whitespace();
                if let (Some(k), Some(v)) = (it.next(), it.next()) {
                    let v: u64 = v.parse().unwrap_or(0);
                    r.errors += v;
                    if k == "timeout" {
                        r.timeouts = v;
                    }
                }
            }
        } else if let Some(rest) = t.strip_prefix("Non-2xx or 3xx responses:") {
            r.non_2xx = rest.trim().parse().unwrap_or(0);
        } else if let Some(rest) = t.strip_prefix("Requests/sec:") {
            r.rps = rest.trim().parse().unwrap_or(f64::NAN);
        }
    }
    if !saw_requests {
        return Err(LabError::Results(format!(
            "no summary in wrk's output: {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    if r.requests == 0 {
        // wrk prints latency statistics of nothing as 0; make that visible.
        r.latency_mean_ms = f64::NAN;
        r.latency_p50_ms = f64::NAN;
        r.latency_p90_ms = f64::NAN;
        r.latency_p99_ms = f64::NAN;
        r.latency_max_ms = f64::NAN;
    }
    Ok(r)
}

/// One wrk run: `conns` connections in closed loop on one thread, for `duration` (whole
/// seconds: wrk's unit), against `url`.
#[derive(Debug, Clone)]
pub struct WrkSpec {
    /// The URL requested.
    pub url: String,
    /// Connections.
    pub conns: usize,
    /// How long it runs (rounded down to whole seconds, at least one).
    pub duration: Duration,
    /// Per-request timeout (1..=30 s; wrk's latency histogram has one slot per microsecond of
    /// it, so it is kept short); `None`: wrk's default (2 s).
    pub timeout: Option<Duration>,
    /// Extra request headers (`Host: x`, `Accept-Encoding: gzip`).
    pub headers: Vec<String>,
    /// The wrk binary (`None`: `wrk` on `PATH`).
    pub program: Option<PathBuf>,
    /// A Lua script (`-s`) choosing each request (the cluster lab's trace replay).
    pub script: Option<PathBuf>,
    /// wrk threads (`-t`); at least 1.
    pub threads: usize,
    /// Pin wrk to these CPUs instead of the testbed's client CPU (empty: the client CPU).
    pub cpus: Vec<usize>,
}

impl WrkSpec {
    /// `conns` connections against `url` for `duration`, no extra header, default timeout.
    pub fn new(url: impl Into<String>, conns: usize, duration: Duration) -> WrkSpec {
        WrkSpec {
            url: url.into(),
            conns,
            duration,
            timeout: None,
            headers: Vec::new(),
            program: None,
            script: None,
            threads: 1,
            cpus: Vec::new(),
        }
    }

    /// wrk's command line (without the program).
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            format!("-t{}", self.threads.max(1)).into(),
            format!("-c{}", self.conns.max(1)).into(),
            format!("-d{}s", self.duration.as_secs().max(1)).into(),
        ];
        if let Some(t) = self.timeout {
            args.push(format!("--timeout={}s", t.as_secs().clamp(1, 30)).into());
        }
        args.push("--latency".into());
        if let Some(s) = &self.script {
            args.push("-s".into());
            args.push(s.into());
        }
        for h in &self.headers {
            args.push("-H".into());
            args.push(h.into());
        }
        args.push(self.url.clone().into());
        args
    }
}

/// A wrk running on the client side of a testbed.
pub struct Wrk {
    child: Managed,
    log: PathBuf,
}

impl Wrk {
    /// Whether wrk is installed (the labs need it).
    pub fn available() -> Option<PathBuf> {
        which("wrk")
    }

    /// Start `spec` on the client CPU and namespace; its report goes to `<label>.wrk.log` in
    /// the testbed's work directory.
    pub fn start(tb: &Testbed, label: &str, spec: &WrkSpec) -> Result<Wrk> {
        let prog = match &spec.program {
            Some(p) => p.clone(),
            None => Self::available().ok_or_else(|| LabError::Process {
                name: "wrk".into(),
                msg: "wrk is not installed (scripts/deps.sh installs it)".into(),
            })?,
        };
        let log = tb.workdir().join(format!("{label}.wrk.log"));
        let _ = std::fs::remove_file(&log);
        let mut l = tb.client_launch(label, &prog).args(spec.args());
        if !spec.cpus.is_empty() {
            l.cpu_set = spec.cpus.clone();
        }
        l.log = Some(log.clone());
        let child = l.spawn()?;
        Ok(Wrk { child, log })
    }

    /// Wait for wrk to finish (at most `within`) and parse its report.
    pub fn finish(mut self, within: Duration) -> Result<WrkResult> {
        let st = self.child.wait_until(Instant::now() + within)?;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        match st {
            Some(s) if s.success() => parse_wrk(&text),
            Some(s) => Err(LabError::Process {
                name: self.child.label().to_owned(),
                msg: format!(
                    "wrk failed ({s}): {}",
                    text.chars().take(500).collect::<String>()
                ),
            }),
            None => Err(LabError::Process {
                name: self.child.label().to_owned(),
                msg: format!("wrk still running after {within:?}"),
            }),
        }
    }

    /// Start `spec` and wait for its report (its duration plus 20 s at most).
    pub fn run(tb: &Testbed, label: &str, spec: &WrkSpec) -> Result<WrkResult> {
        Self::start(tb, label, spec)?.finish(spec.duration + Duration::from_secs(20))
    }

    /// Stop wrk now (the connections close: the server sees its clients go away).
    pub fn stop(mut self) {
        self.child.stop(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Running 5s test @ http://10.77.0.1:20000/1k.html
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   512.33us  100.20us   3.00ms   90.00%
    Req/Sec    31.20k     1.20k   33.00k    80.00%
  Latency Distribution
     50%  500.00us
     75%  550.00us
     90%  600.00us
     99%    1.00ms
  155000 requests in 5.00s, 180.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:  31000.00
Transfer/sec:     36.00MB
";

    #[test]
    fn parses_wrk_reports() {
        let r = parse_wrk(SAMPLE).unwrap();
        assert_eq!(r.requests, 155_000);
        assert_eq!(r.duration_s, 5.0);
        assert_eq!(r.rps, 31000.0);
        assert!((r.latency_mean_ms - 0.51233).abs() < 1e-9);
        assert_eq!(r.latency_p50_ms, 0.5);
        assert_eq!(r.latency_p99_ms, 1.0);
        assert_eq!(r.latency_max_ms, 3.0);
        assert_eq!((r.errors, r.timeouts, r.non_2xx), (5, 3, 12));
        assert!(parse_wrk("garbage").is_err());
        assert_eq!(parse_time_ms("2.00s"), Some(2000.0));
        assert_eq!(parse_time_ms("1.50m"), Some(90_000.0));
        // A benchmark's report: microsecond p99, no errors.
        let out = "Running 2s test @ http://127.0.0.1:1/file.html\n  1 threads and 50 connections\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   1.10ms  200.00us   5.00ms   90.00%\n  Latency Distribution\n     50%    1.00ms\n     75%    1.20ms\n     90%    1.50ms\n     99%  850.00us\n  91234 requests in 2.00s, 100.00MB read\nRequests/sec:  45617.00\nTransfer/sec:     50.00MB\n";
        let r = parse_wrk(out).unwrap();
        assert_eq!((r.rps, r.requests, r.non_2xx), (45617.0, 91234, 0));
        assert!((r.latency_p99_ms - 0.85).abs() < 1e-9);
    }

    #[test]
    fn command_line() {
        let mut s = WrkSpec::new("http://a/x", 8, Duration::from_millis(2500));
        assert_eq!(s.args(), ["-t1", "-c8", "-d2s", "--latency", "http://a/x"]);
        s.timeout = Some(Duration::from_secs(90));
        s.headers.push("Host: b".into());
        assert_eq!(
            s.args(),
            [
                "-t1",
                "-c8",
                "-d2s",
                "--timeout=30s",
                "--latency",
                "-H",
                "Host: b",
                "http://a/x"
            ]
        );
    }
}

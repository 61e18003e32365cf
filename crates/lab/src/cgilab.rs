//! What the two CGI labs share ([`crate::containers`], seed 003; [`crate::reservations`],
//! seed 000): their CGI scripts, the static 1 KB document, wrk as the closed-loop load (one
//! wrk per request stream, pinned to the client CPU in the client namespace), Apache's mod_cgi
//! configuration, and CPU accounting of the server side's processes.
//!
//! The scripts are Perl (run by triage and by Apache alike, no shell):
//! - `burn.pl` burns about 2 s of CPU (`?s=SECONDS`), measured with `times()`, then answers
//!   with the CPU time it used (seed 003's "CGI request process consumed about 2 seconds of CPU
//!   time");
//! - `rand.pl` computes half a million random numbers with `rand()` and returns 1 KB (seed
//!   000); about 25 ms of CPU on this machine (measured by the lab and reported).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::process::{which, Managed};
use crate::testbed::Testbed;

/// Seed 003's CGI: burns `s` seconds of CPU (default 2).
pub const BURN_PL: &str = r#"#!/usr/bin/env perl
# triage lab (seed 003): burn about 2 s of CPU (QUERY_STRING "s=SECONDS"), then report it.
use strict;
use warnings;
my ($s) = ($ENV{QUERY_STRING} // '') =~ /s=([0-9.]+)/;
$s //= 2;
my $x = 0;
while (1) {
    for (1 .. 20000) { $x += $_ * 0.5 }
    my @t = times;
    last if $t[0] + $t[1] >= $s;
}
my @t = times;
print "Content-Type: text/plain\r\n\r\n";
printf "cpu=%.3f\n", $t[0] + $t[1];
"#;

/// Seed 000's CGI: half a million `rand()` calls, a 1 KB reply.
pub const RAND_PL: &str = r#"#!/usr/bin/env perl
# triage lab (seed 000): compute half a million random numbers, return 1 KB.
use strict;
use warnings;
my $acc = 0;
$acc += rand() for 1 .. 500_000;
my $line = sprintf("sum=%.6f\n", $acc);
print "Content-Type: text/plain\r\n\r\n";
print $line, "x" x (1023 - length $line), "\n";
"#;

/// The `comm` (`/proc/<pid>/comm`, at most 15 bytes) of processes started from `program`:
/// how the lab tells the server's own processes from its scripts (whatever their interpreter,
/// and also before they exec: a child between fork and exec still bears the server's name).
pub fn comm_of(program: &Path) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.chars().take(15).collect()
}

/// Write `burn.pl` and `rand.pl` (mode 0755) into `dir/cgi-bin`, and a 1 KB static document
/// `dir/www/1k.html`. Returns (document root, script directory).
pub fn install(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let root = dir.join("www");
    let bin = dir.join("cgi-bin");
    for d in [&root, &bin] {
        std::fs::create_dir_all(d).map_err(|e| LabError::io("creating", d, e))?;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", d, e))?;
    }
    for (name, text) in [("burn.pl", BURN_PL), ("rand.pl", RAND_PL)] {
        let p = bin.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::io("writing", &p, e))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", &p, e))?;
    }
    let p = root.join("1k.html");
    std::fs::write(&p, static_1k()).map_err(|e| LabError::io("writing", &p, e))?;
    Ok((root, bin))
}

/// The 1 KB static document (exactly 1024 bytes of HTML).
pub fn static_1k() -> Vec<u8> {
    let head = b"<!DOCTYPE html><html><body><p>";
    let tail = b"</p></body></html>\n";
    let mut v = head.to_vec();
    v.resize(1024 - tail.len(), b'x');
    v.extend_from_slice(tail);
    v
}

/// Apache configuration for CGI (mpm_prefork + mod_cgi): `ScriptAlias /cgi-bin/` to `bin`,
/// and one name-based virtual host per entry of `vhosts` (all serving `root` and the same
/// scripts), for the reservations lab's two sites.
pub fn apache_cgi_extra(bin: &Path, root: &Path, listen: SocketAddr, vhosts: &[&str]) -> String {
    let m = crate::peers::APACHE_MODULES;
    let mut s = format!(
        "LoadModule alias_module {m}/mod_alias.so\n\
         LoadModule cgi_module {m}/mod_cgi.so\n\
         ScriptAlias /cgi-bin/ \"{}/\"\n\
         <Directory \"{}\">\n  Options +ExecCGI\n  AllowOverride None\n  Require all granted\n</Directory>\n",
        bin.display(),
        bin.display()
    );
    for v in vhosts {
        s.push_str(&format!(
            "<VirtualHost {listen}>\n  ServerName {v}\n  DocumentRoot \"{}\"\n  ScriptAlias /cgi-bin/ \"{}/\"\n</VirtualHost>\n",
            root.display(),
            bin.display()
        ));
    }
    s
}

/// What wrk reports for one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WrkResult {
    /// Completed requests.
    pub requests: u64,
    /// The run's duration as wrk measured it (seconds).
    pub duration_s: f64,
    pub rps: f64,
    pub latency_mean_ms: f64,
    pub latency_p50_ms: f64,
    pub latency_p90_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
    /// Socket errors (connect + read + write + timeout).
    pub errors: u64,
    pub timeouts: u64,
    /// Responses with a status other than 2xx/3xx.
    pub non_2xx: u64,
}

/// `512.33us`, `1.20ms`, `2.00s`, `1.5m` in milliseconds.
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

/// One wrk run on the client side: `conns` connections in closed loop (one thread), for
/// `duration` (whole seconds), with a per-request `timeout` (1..=30 s), optional `Host`.
pub struct Wrk {
    child: Managed,
    log: PathBuf,
}

impl Wrk {
    /// Whether wrk is installed (the labs need it).
    pub fn available() -> Option<PathBuf> {
        which("wrk")
    }

    /// Start wrk on the client CPU and namespace.
    pub fn start(
        tb: &Testbed,
        label: &str,
        url: &str,
        conns: usize,
        duration: Duration,
        timeout: Duration,
        host: Option<&str>,
    ) -> Result<Wrk> {
        let prog = Self::available().ok_or_else(|| LabError::Process {
            name: "wrk".into(),
            msg: "wrk is not installed (scripts/deps.sh installs it)".into(),
        })?;
        let log = tb.workdir().join(format!("{label}.wrk.log"));
        let _ = std::fs::remove_file(&log);
        let mut args: Vec<OsString> = vec![
            "-t1".into(),
            format!("-c{}", conns.max(1)).into(),
            // wrk takes whole seconds; its latency histogram has one slot per microsecond
            // of the timeout, so keep the timeout short.
            format!("-d{}s", duration.as_secs().max(1)).into(),
            format!("--timeout={}s", timeout.as_secs().clamp(1, 30)).into(),
            "--latency".into(),
        ];
        if let Some(h) = host {
            args.push("-H".into());
            args.push(format!("Host: {h}").into());
        }
        args.push(url.into());
        let child = tb.spawn_client(label, &prog, &args, Some(log.clone()))?;
        Ok(Wrk { child, log })
    }

    /// Wait for wrk to finish (at most `within`) and parse its report.
    pub fn finish(mut self, within: Duration) -> Result<WrkResult> {
        let st = self.child.wait_until(std::time::Instant::now() + within)?;
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

    /// Stop wrk now (the connections close: the server sees its clients go away).
    pub fn stop(mut self) {
        self.child.stop(Duration::from_millis(200));
    }
}

/// A process of the server side: its `comm` (from `/proc/<pid>/stat`) and its CPU time so far,
/// all threads included, with nanosecond precision (the process's CPU-time clock,
/// `clock_getcpuclockid`; `/proc`'s utime/stime count 10 ms ticks, too coarse for a one-second
/// window split over a dozen Apache children).
pub fn proc_cpu(pid: i32) -> Option<(String, Duration)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s[open + 1..close].to_owned();
    let mut clock: libc::clockid_t = 0;
    // SAFETY: out-pointers to locals; the calls have no other preconditions.
    unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0 {
            return None;
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if libc::clock_gettime(clock, &mut ts) != 0 {
            return None;
        }
        Some((comm, Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)))
    }
}

/// Processes of `cg` that are not the server's own (scripts, their children). For triage
/// (one server process, [`Running::only`]) every other process is a script, also a child
/// between fork and exec that still bears the server's name (under a tight cap that stage can
/// last a while); for Apache, every process not named [`Running::comm`].
fn scripts_in(cg: &os::Cgroup, srv: &Running) -> Vec<i32> {
    cg.all_pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| match srv.only {
            Some(only) => p != only,
            None => proc_cpu(p).is_some_and(|(c, _)| c != srv.comm),
        })
        .collect()
}

/// How long the server side must have no script before a point counts as clean: a request
/// sent just before its client stopped may still be on its way to a (throttled) server, which
/// would start its script after a single empty look.
const QUIET: Duration = Duration::from_millis(300);

/// After a point: give the scripts left in `cg` up to `grace` to end by themselves (triage
/// kills a script's process group when its client goes away), then kill the rest (Apache
/// leaves a script whose client went away running until it writes) and wait until none is
/// left (at most 5 s more). Returns how many had to be killed. Returns once no script was
/// seen for [`QUIET`].
pub fn kill_strays(cg: &os::Cgroup, srv: &Running, grace: Duration) -> usize {
    let t0 = std::time::Instant::now();
    let mut empty_since: Option<std::time::Instant> = None;
    while t0.elapsed() < grace.max(QUIET) {
        if scripts_in(cg, srv).is_empty() {
            let since = *empty_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= QUIET {
                return 0;
            }
        } else {
            empty_since = None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let mut killed = std::collections::HashSet::new();
    empty_since = None;
    loop {
        let strays = scripts_in(cg, srv);
        let now = std::time::Instant::now();
        if strays.is_empty() {
            let since = *empty_since.get_or_insert(now);
            if now.duration_since(since) >= QUIET {
                return killed.len();
            }
        } else {
            empty_since = None;
        }
        if now >= end {
            return killed.len();
        }
        for p in strays {
            // SAFETY: plain kill(2) of a process in our lab's server cgroup (never the server:
            // `scripts_in` leaves it out).
            if unsafe { libc::kill(p, libc::SIGKILL) } == 0 {
                killed.insert(p);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request of a [`ClosedLoop`] client.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub start: std::time::Instant,
    pub end: std::time::Instant,
    /// A complete 200 response.
    pub ok: bool,
}

/// Closed-loop HTTP clients for CGI requests: each client sends one request at a time
/// (`Connection: close`: a CGI request costs a process anyway), waits for the whole response,
/// and starts the next at once. They run on threads of the lab process (pinned to the client
/// CPU) inside the client network namespace. Stopping closes the connections of the requests in
/// flight: the server sees its clients go away.
pub struct ClosedLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

impl ClosedLoop {
    /// Start `clients` clients requesting `path` from `addr` with `Host: host`.
    pub fn start(
        tb: &Testbed,
        addr: SocketAddr,
        path: &str,
        host: &str,
        clients: usize,
    ) -> Result<ClosedLoop> {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let enter = tb.enter_client_ns_fn();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let s2 = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let handle = std::thread::Builder::new()
            .name("lab-cgi-load".into())
            .spawn(move || {
                if let Err(e) = enter() {
                    let _ = ready_tx.send(Err(e));
                    return Vec::new();
                }
                let _ = ready_tx.send(Ok(()));
                // Threads created here inherit the namespace (and the CPU affinity).
                let hs: Vec<_> = (0..clients)
                    .map(|_| {
                        let stop = s2.clone();
                        let req = req.clone();
                        std::thread::spawn(move || client_loop(addr, &req, &stop))
                    })
                    .collect();
                hs.into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
            .map_err(|e| LabError::Os(format!("starting the CGI load threads: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(LabError::Os("the CGI load thread died".into())),
        }
        Ok(ClosedLoop {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop every client (closing requests in flight) and return all samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ClosedLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Whether `raw` (a whole HTTP/1.x response read to EOF) is a complete 200.
pub fn complete_200(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let ok = lines
        .next()
        .is_some_and(|l| l.starts_with("http/1.") && l.split(' ').nth(1) == Some("200"));
    let mut len = None;
    let mut chunked = false;
    for l in lines {
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        } else if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    ok && match (len, chunked) {
        (Some(n), _) => body.len() == n,
        (None, true) => body.ends_with(b"0\r\n\r\n"),
        (None, false) => true,
    }
}

fn client_loop(addr: SocketAddr, req: &str, stop: &std::sync::atomic::AtomicBool) -> Vec<Sample> {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while !stop.load(Relaxed) {
        let start = std::time::Instant::now();
        let mut ok = false;
        if let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            if s.write_all(req.as_bytes()).is_ok() {
                let mut resp = Vec::new();
                loop {
                    if stop.load(Relaxed) {
                        // Hang up mid-request: the server must notice.
                        return out;
                    }
                    match s.read(&mut buf) {
                        Ok(0) => {
                            ok = complete_200(&resp);
                            break;
                        }
                        Ok(n) => resp.extend_from_slice(&buf[..n]),
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            }
        }
        let end = std::time::Instant::now();
        out.push(Sample { start, end, ok });
        if !ok {
            // Do not spin on a refused connection.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    out
}

/// Throughput (requests/s) and response times (ms) of the successful requests that ended in
/// `[t0, t1]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WindowStats {
    pub completed: u64,
    pub failed: u64,
    pub rps: f64,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub max_ms: f64,
}

/// [`WindowStats`] of `samples` over `[t0, t1]`.
pub fn window_stats(
    samples: &[Sample],
    t0: std::time::Instant,
    t1: std::time::Instant,
) -> WindowStats {
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.end >= t0 && s.end <= t1)
        .collect();
    let mut lat: Vec<f64> = inside
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.end.duration_since(s.start).as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let n = lat.len();
    let dt = t1.duration_since(t0).as_secs_f64().max(1e-9);
    let pick = |q: f64| {
        if n == 0 {
            f64::NAN
        } else {
            crate::results::nearest_rank(&lat, q)
        }
    };
    WindowStats {
        completed: n as u64,
        failed: (inside.len() - n) as u64,
        rps: n as f64 / dt,
        mean_ms: if n == 0 {
            f64::NAN
        } else {
            lat.iter().sum::<f64>() / n as f64
        },
        median_ms: pick(0.5),
        p90_ms: pick(0.9),
        max_ms: lat.last().copied().unwrap_or(f64::NAN),
    }
}

/// One site of a triage configuration for a CGI lab.
#[derive(Debug, Clone)]
pub struct TriageSite {
    pub name: String,
    pub root: PathBuf,
    pub bin: PathBuf,
    /// `false`: scripts run as plain child processes (no per-request containers).
    pub cgroups: bool,
    /// The site's CGI container (`None`: triage's default, `site-<name>/cgi`).
    pub container: Option<String>,
    pub cpu_max: Option<f64>,
    pub weight: Option<u32>,
    /// `cgi.max_running`: most scripts of the site running at once (none = no limit).
    pub max_running: Option<usize>,
    /// `cgi.slice`: the scheduler slice of the site's scripts (none = the kernel's default).
    pub slice: Option<Duration>,
}

fn toml_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The `triage serve` configuration of a CGI lab: one slot, the sites with their script
/// directory at `/cgi-bin`, CGI timeout `cgi_timeout` (long: a capped script may take minutes).
pub fn triage_config(
    listen: SocketAddr,
    admin: SocketAddr,
    sites: &[TriageSite],
    cgi_timeout: Duration,
) -> String {
    let mut s = format!(
        "# generated by triage lab\nlisten = {}\nadmin = {}\nslots = 1\nthreads = 1\n\
         keepalive_timeout = \"15s\"\nsend_timeout = \"600s\"\n",
        toml_str(&listen.to_string()),
        toml_str(&admin.to_string())
    );
    for t in sites {
        s.push_str(&format!(
            "\n[[site]]\nname = {}\nroot = {}\n[site.cgi]\ndirs = [{{ url = \"/cgi-bin\", dir = {} }}]\n\
             timeout = \"{}ms\"\ncgroups = {}\n",
            toml_str(&t.name),
            toml_str(&t.root.display().to_string()),
            toml_str(&t.bin.display().to_string()),
            cgi_timeout.as_millis(),
            t.cgroups
        ));
        if let Some(c) = &t.container {
            s.push_str(&format!("container = {}\n", toml_str(c)));
        }
        if let Some(f) = t.cpu_max {
            s.push_str(&format!("cpu_max = {f}\n"));
        }
        if let Some(w) = t.weight {
            s.push_str(&format!("weight = {w}\n"));
        }
        if let Some(n) = t.max_running {
            s.push_str(&format!("max_running = {n}\n"));
        }
        if let Some(d) = t.slice {
            s.push_str(&format!("slice = \"{}us\"\n", d.as_micros()));
        }
    }
    s
}

/// A server under test of a CGI lab, running on the server side of the testbed.
pub struct Running {
    pub child: Managed,
    pub addr: SocketAddr,
    /// The `comm` of the server's processes (see [`comm_of`]).
    pub comm: String,
    /// The server is this one process (triage): its children, even before they exec, are
    /// scripts. `None` (Apache): every process named [`Running::comm`] is the server's.
    pub only: Option<i32>,
    /// triage's admin address (`/metrics`); `None` for a peer.
    pub admin: Option<SocketAddr>,
}

impl Running {
    /// Start `triage serve` with `sites`.
    pub fn triage(
        tb: &Testbed,
        triage_bin: &Path,
        label: &str,
        sites: &[TriageSite],
        cgi_timeout: Duration,
        dir: &Path,
    ) -> Result<Running> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io("creating", dir, e))?;
        let addr = tb.server_addr()?;
        let admin = tb.server_addr()?;
        let conf = dir.join("triage.toml");
        let text = triage_config(addr, admin, sites, cgi_timeout);
        std::fs::write(&conf, text).map_err(|e| LabError::io("writing", &conf, e))?;
        let args: Vec<OsString> = vec!["serve".into(), "--config".into(), conf.into()];
        let mut child =
            tb.spawn_server_side(label, triage_bin, &args, Some(dir.join("server.log")))?;
        tb.wait_listening(addr, &mut child, Duration::from_secs(15))?;
        let pid = child.pid() as i32;
        Ok(Running {
            child,
            addr,
            comm: comm_of(triage_bin),
            only: Some(pid),
            admin: Some(admin),
        })
    }

    /// Start Apache httpd (prefork + mod_cgi) serving `root` and `bin` at `/cgi-bin/`, with
    /// one name-based virtual host per entry of `vhosts`.
    pub fn apache(
        tb: &Testbed,
        root: &Path,
        bin: &Path,
        vhosts: &[&str],
        prefork: &crate::peers::Prefork,
        dir: &Path,
    ) -> Result<Running> {
        let addr = tb.server_addr()?;
        let site = crate::peers::PeerSite {
            root: root.to_owned(),
            listen: addr,
            gzip: None,
            keepalive_s: 15,
            extra: apache_cgi_extra(bin, root, addr, vhosts),
        };
        let p = crate::peers::Peer::Apache.prepare(&dir.join("apache"), &site, prefork)?;
        let mut child =
            tb.spawn_server_side("apache", &p.program, &p.args, Some(dir.join("server.log")))?;
        tb.wait_listening(addr, &mut child, Duration::from_secs(15))?;
        Ok(Running {
            child,
            addr,
            comm: comm_of(&p.program),
            only: None,
            admin: None,
        })
    }

    /// Stop the server (its process group; the testbed's cgroup kill catches the rest).
    pub fn stop(mut self, tb: &Testbed) {
        self.child.stop(Duration::from_secs(3));
        if let Some(cg) = tb.server_cgroup() {
            let _ = cg.kill_all();
        }
    }

    /// Stop the server after a variant's points; if one failed (`(label, error)`), the error
    /// names the run and carries the end of the server's log (an interruption passes as is).
    pub fn finish(self, tb: &Testbed, failed: Option<(String, LabError)>) -> Result<()> {
        let log = self.child.log_tail(1500);
        self.stop(tb);
        match failed {
            None => Ok(()),
            Some((_, LabError::Interrupted)) => Err(LabError::Interrupted),
            Some((label, e)) => Err(LabError::Process {
                name: format!("run {label}"),
                msg: format!("{e}; server log: {log}"),
            }),
        }
    }

    /// `triage_cgi_cpu_seconds_total` per site from `/metrics` (triage only).
    pub fn cgi_cpu(&self, tb: &Testbed) -> Option<std::collections::BTreeMap<String, f64>> {
        let admin = self.admin?;
        let text = tb
            .in_server_ns(|| {
                crate::testbed::http_get(admin, "/metrics", Duration::from_secs(5)).ok()
            })
            .ok()
            .flatten()?;
        Some(parse_cgi_cpu(&text))
    }
}

/// `site -> seconds` from `triage_cgi_cpu_seconds_total{site="..."} v` lines.
pub fn parse_cgi_cpu(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    let mut m = std::collections::BTreeMap::new();
    for l in metrics.lines() {
        let Some(rest) = l.strip_prefix("triage_cgi_cpu_seconds_total{site=\"") else {
            continue;
        };
        let Some((site, tail)) = rest.split_once("\"}") else {
            continue;
        };
        if let Ok(v) = tail.trim().parse::<f64>() {
            m.insert(site.to_owned(), v);
        }
    }
    m
}

/// CPU counters of the server side at one instant.
#[derive(Debug, Clone)]
pub struct CpuSnap {
    pub at: std::time::Instant,
    /// The server-side cgroup's total usage.
    pub total: Duration,
    /// CPU time of each of the server's own processes.
    pub servers: std::collections::HashMap<i32, Duration>,
    /// Context switches of the server's own processes so far, all threads: (voluntary = went
    /// to sleep, involuntary = preempted).
    pub switches: std::collections::HashMap<i32, (u64, u64)>,
}

/// Context switches of all threads of `pid`: (voluntary, involuntary), from
/// `/proc/<pid>/task/*/status`.
pub fn proc_switches(pid: i32) -> Option<(u64, u64)> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let (mut v, mut nv) = (0u64, 0u64);
    for e in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        for l in text.lines() {
            if let Some(x) = l.strip_prefix("voluntary_ctxt_switches:") {
                v += x.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(x) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                nv += x.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((v, nv))
}

impl CpuSnap {
    /// Read the counters of `cg` now for the server `srv` (see [`Running::only`]).
    pub fn take(cg: &os::Cgroup, srv: &Running) -> CpuSnap {
        let total = cg.cpu_usage().unwrap_or_default();
        let mut servers = std::collections::HashMap::new();
        let mut switches = std::collections::HashMap::new();
        for pid in cg.all_pids().unwrap_or_default() {
            if srv.only.is_some_and(|only| only != pid) {
                continue;
            }
            if let Some((comm, t)) = proc_cpu(pid) {
                if comm == srv.comm {
                    servers.insert(pid, t);
                    if let Some(sw) = proc_switches(pid) {
                        switches.insert(pid, sw);
                    }
                }
            }
        }
        CpuSnap {
            at: std::time::Instant::now(),
            total,
            servers,
            switches,
        }
    }

    /// Context switches of the server processes between `self` and `later`: (voluntary,
    /// involuntary), over the processes seen both times.
    pub fn switches(&self, later: &CpuSnap) -> (u64, u64) {
        let (mut v, mut nv) = (0, 0);
        for (pid, b) in &later.switches {
            if let Some(a) = self.switches.get(pid) {
                v += b.0.saturating_sub(a.0);
                nv += b.1.saturating_sub(a.1);
            }
        }
        (v, nv)
    }

    /// Shares of one CPU between `self` (earlier) and `later`: `(server processes, CGI)`,
    /// where CGI is the cgroup total minus the server processes (scripts come and go; the
    /// server processes are long-lived, so their time is measured exactly).
    pub fn shares(&self, later: &CpuSnap) -> (f64, f64) {
        let dt = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let total = later.total.saturating_sub(self.total).as_secs_f64();
        let mut srv = 0.0;
        for (pid, t1) in &later.servers {
            let t0 = self.servers.get(pid).copied().unwrap_or_default();
            srv += t1.saturating_sub(t0).as_secs_f64();
        }
        let srv = srv.min(total);
        (srv / dt, (total - srv).max(0.0) / dt)
    }
}

/// Per-CPU time from `/proc/stat` at one instant (clock ticks): what the rest of a shared
/// machine did while a point was measured. The labs record, per point, how busy the server's
/// CPU was with work outside the server side, how busy the client CPU was, and the hypervisor's
/// steal time: on a shared 2-CPU VM these explain much of the spread between repetitions.
#[derive(Debug, Clone, Default)]
pub struct CpuTicks {
    pub at: Option<std::time::Instant>,
    /// Per CPU: (busy = user+nice+system+irq+softirq, steal, total incl. idle/iowait).
    pub cpus: Vec<(u64, u64, u64)>,
}

/// Clock ticks per second of `/proc/stat`.
fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Parse the `cpuN` lines of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Vec<(u64, u64, u64)> {
    let mut v = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(n) = name.strip_prefix("cpu") else {
            continue;
        };
        let Ok(i) = n.parse::<usize>() else { continue };
        let x: Vec<u64> = f.map(|t| t.parse().unwrap_or(0)).collect();
        let g = |k: usize| x.get(k).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        let busy = g(0) + g(1) + g(2) + g(5) + g(6);
        let total = busy + g(3) + g(4) + g(7);
        if v.len() <= i {
            v.resize(i + 1, (0, 0, 0));
        }
        v[i] = (busy, g(7), total);
    }
    v
}

impl CpuTicks {
    /// Read `/proc/stat` now (empty when unreadable).
    pub fn take() -> CpuTicks {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        CpuTicks {
            at: Some(std::time::Instant::now()),
            cpus: parse_proc_stat(&text),
        }
    }

    /// Busy and steal of `cpu` between `self` and `later`, in % of one CPU (NaN if unknown).
    pub fn busy_steal_pct(&self, later: &CpuTicks, cpu: usize) -> (f64, f64) {
        let (Some(a), Some(b)) = (self.cpus.get(cpu), later.cpus.get(cpu)) else {
            return (f64::NAN, f64::NAN);
        };
        let (Some(t0), Some(t1)) = (self.at, later.at) else {
            return (f64::NAN, f64::NAN);
        };
        let dt = t1.duration_since(t0).as_secs_f64().max(1e-9);
        let hz = clk_tck();
        let busy = b.0.saturating_sub(a.0) as f64 / hz / dt * 100.0;
        let steal = b.1.saturating_sub(a.1) as f64 / hz / dt * 100.0;
        (busy, steal)
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
    }

    #[test]
    fn triage_config_has_every_key() {
        let t = TriageSite {
            name: "site-a".into(),
            root: "/x/www".into(),
            bin: "/x/cgi \"bin\"".into(),
            cgroups: true,
            container: Some("res/a".into()),
            cpu_max: Some(0.3),
            weight: Some(50),
            max_running: Some(2),
            slice: Some(Duration::from_millis(30)),
        };
        let text = triage_config(
            "10.77.0.1:20000".parse().unwrap(),
            "10.77.0.1:20001".parse().unwrap(),
            &[t],
            Duration::from_secs(600),
        );
        for want in [
            "listen = \"10.77.0.1:20000\"",
            "slots = 1",
            "[site.cgi]",
            "dir = \"/x/cgi \\\"bin\\\"\"",
            "timeout = \"600000ms\"",
            "container = \"res/a\"",
            "cpu_max = 0.3",
            "weight = 50",
            "max_running = 2",
            "slice = \"30000us\"",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
    }

    #[test]
    fn cgi_cpu_metrics_are_read_per_site() {
        let m = parse_cgi_cpu(
            "# HELP x\ntriage_cgi_cpu_seconds_total{site=\"a\"} 1.5\n\
             triage_cgi_cpu_seconds_total{site=\"b.test\"} 0.25\nother 3\n",
        );
        assert_eq!(m.get("a"), Some(&1.5));
        assert_eq!(m.get("b.test"), Some(&0.25));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn responses_are_checked_whole() {
        assert!(complete_200(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
        ));
        assert!(!complete_200(
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabc"
        ));
        assert!(complete_200(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        ));
        assert!(!complete_200(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
        ));
        assert!(complete_200(b"HTTP/1.0 200 OK\r\n\r\nuntil eof"));
        assert!(!complete_200(b"HTTP/1.1 502 Bad Gateway\r\n\r\n"));
        assert!(!complete_200(b"HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn window_stats_count_what_ended_inside() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let s = [
            Sample {
                start: at(0),
                end: at(50),
                ok: true,
            }, // before the window
            Sample {
                start: at(80),
                end: at(200),
                ok: true,
            }, // 120 ms
            Sample {
                start: at(150),
                end: at(400),
                ok: true,
            }, // 250 ms
            Sample {
                start: at(300),
                end: at(500),
                ok: false,
            },
            Sample {
                start: at(900),
                end: at(1500),
                ok: true,
            }, // after
        ];
        let w = window_stats(&s, at(100), at(1100));
        assert_eq!((w.completed, w.failed), (2, 1));
        assert!((w.rps - 2.0).abs() < 1e-9);
        assert!((w.mean_ms - 185.0).abs() < 1e-6);
        assert_eq!(w.max_ms, 250.0);
    }

    #[test]
    fn proc_stat_lines_per_cpu() {
        let v = parse_proc_stat(
            "cpu  10 1 2 30 4 0 0 0 0 0\ncpu0 5 1 2 10 1 1 1 3 0 0\ncpu1 7 0 0 20 0 0 0 0 0 0\nintr 1\n",
        );
        assert_eq!(v, vec![(10, 3, 24), (7, 0, 27)]);
    }

    #[test]
    fn static_document_is_one_kilobyte() {
        assert_eq!(static_1k().len(), 1024);
    }

    #[test]
    fn apache_extra_has_script_alias_and_vhosts() {
        let s = apache_cgi_extra(
            Path::new("/x/cgi-bin"),
            Path::new("/x/www"),
            "10.77.0.1:8080".parse().unwrap(),
            &["site-a", "site-b"],
        );
        assert!(s.contains("mod_cgi.so"));
        assert!(s.contains("ScriptAlias /cgi-bin/ \"/x/cgi-bin/\""));
        assert_eq!(s.matches("<VirtualHost 10.77.0.1:8080>").count(), 2);
        assert!(s.contains("ServerName site-b"));
    }
}

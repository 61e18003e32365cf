//! `triage bench load`: how fast is the load generator itself? Starts nginx (one process,
//! its own config, port and temp dir, access log off) pinned to CPU 0 serving a 1 KB file,
//! then alternates rounds of wrk (CPU 1, one thread, N connections, D seconds) and `triage
//! load --plain` (CPU 1, single-threaded runtime, the same N connections) in `closed` mode
//! and, optionally, in `rate` mode at the request rate wrk reached in that round. Prints the
//! triage-load/wrk req/s ratio per round and the median (goal >= 0.8), the CPU time per
//! request of both clients (from the children's rusage: steadier on a noisy machine), and writes
//! `results/bench-load/<timestamp>/summary.json`. Everything it starts is stopped, and its
//! temp dir removed, also on error.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use super::UsageError;

/// Arguments of `triage bench load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Connections, the same for wrk and triage load.
    #[arg(long, short = 'c', default_value_t = 32)]
    connections: usize,
    /// Seconds per round and tool.
    #[arg(long, short = 'd', default_value_t = 10)]
    duration: u64,
    /// Rounds (each runs every tool once, alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Size of the served file in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Skip the rate-mode rounds (triage load --mode rate at wrk's measured rate).
    #[arg(long)]
    no_rate: bool,
    /// Directory for results (a timestamped subdirectory is created).
    #[arg(long, default_value = "results/bench-load")]
    out: PathBuf,
}

/// A temp dir removed on drop.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nginx, killed on drop (it runs with `master_process off`: one process, no orphans).
struct Nginx(Child);
impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding a probe port")?;
    Ok(l.local_addr()?.port())
}

fn start_nginx(nginx: &Path, dir: &Path, port: u16, size: usize) -> anyhow::Result<Nginx> {
    let www = dir.join("www");
    std::fs::create_dir_all(&www)?;
    std::fs::write(www.join("1k.html"), vec![b'x'; size])?;
    for p in [dir, www.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    }
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 100000000;\n  keepalive_timeout 60s;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; root {d}/www; }}\n}}\n"
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf)?;
    let child = Command::new("taskset")
        .args(["-c", "0"])
        .arg(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nginx under taskset")?;
    let mut ng = Nginx(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t0 = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        if let Some(st) = ng.0.try_wait()? {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            bail!("nginx exited ({st}) before listening on {addr}: {log}");
        }
        if t0.elapsed() > Duration::from_secs(5) {
            bail!("nginx did not listen on {addr} within 5 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(ng)
}

fn run_wrk(wrk: &Path, url: &str, conns: usize, secs: u64) -> anyhow::Result<f64> {
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(wrk)
        .args(["-t1", &format!("-c{conns}"), &format!("-d{secs}s"), url])
        .stdin(Stdio::null())
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wrk failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if let Some(l) = text
        .lines()
        .find(|l| l.contains("Socket errors") || l.contains("Non-2xx"))
    {
        eprintln!("  wrk reported: {}", l.trim());
    }
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no Requests/sec in wrk's output: {text}"))
}

struct LoadRun {
    rps: f64,
    errors: u64,
    p99_ms: Option<f64>,
}

fn run_triage(url: &str, conns: usize, secs: u64, rate: Option<f64>) -> anyhow::Result<LoadRun> {
    let exe = std::env::current_exe().context("locating the triage binary")?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "1"]).arg(exe).args([
        "load",
        url,
        "--plain",
        "--duration",
        &format!("{secs}s"),
        "--threads",
        "1",
        "--json",
    ]);
    match rate {
        None => cmd.args([
            "--mode",
            "closed",
            "--browsers",
            &conns.to_string(),
            "-k",
            "1",
        ]),
        Some(r) => cmd.args([
            "--mode",
            "rate",
            "--rate",
            &format!("{r:.0}"),
            "--connections",
            &conns.to_string(),
        ]),
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("running triage load")?;
    if !out.status.success() {
        bail!(
            "triage load failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing triage load's summary")?;
    Ok(LoadRun {
        rps: v["requests_per_s"].as_f64().unwrap_or(0.0),
        errors: v["errors"].as_u64().unwrap_or(0),
        p99_ms: v["t1"]["p99_ms"].as_f64(),
    })
}

/// CPU seconds (user + system) used so far by this process's waited-for children, from
/// /proc/self/stat (cutime + cstime, in USER_HZ = 100 ticks/s on Linux).
fn children_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let cutime: f64 = f.get(13)?.parse().ok()?;
    let cstime: f64 = f.get(14)?.parse().ok()?;
    Some((cutime + cstime) / 100.0)
}

/// Runs `f` (which waits for a child) and returns its result with the child's CPU seconds.
fn with_cpu<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, Option<f64>)> {
    let before = children_cpu_secs();
    let r = f()?;
    let cpu = match (before, children_cpu_secs()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok((r, cpu))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// `YYYYmmdd-HHMMSS` in UTC.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.connections == 0 || args.duration == 0 || args.rounds == 0 || args.size == 0 {
        return Err(UsageError(
            "--connections, --duration, --rounds and --size must be at least 1".into(),
        )
        .into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        bail!("bench load pins nginx to CPU 0 and the clients to CPU 1, but only {cpus} CPU is usable");
    }
    let missing = |p: &str| format!("{p} is not installed (scripts/deps.sh installs it)");
    let nginx = which("nginx").with_context(|| missing("nginx"))?;
    let wrk = which("wrk").with_context(|| missing("wrk"))?;
    which("taskset").with_context(|| missing("taskset (util-linux)"))?;
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `cargo build --release`");
    }

    let dir = TempDir(std::env::temp_dir().join(format!(
        "triage-bench-load-{}-{}",
        std::process::id(),
        timestamp()
    )));
    std::fs::create_dir_all(&dir.0)?;
    let port = free_port()?;
    let _nginx = start_nginx(&nginx, &dir.0, port, args.size)?;
    let url = format!("http://127.0.0.1:{port}/1k.html");
    let (c, d) = (args.connections, args.duration);
    println!(
        "nginx (1 process, CPU 0) serving {} bytes; clients on CPU 1: {c} connections, {d} s per run, {} rounds",
        args.size, args.rounds
    );
    println!(
        "{:>5} {:>12} {:>14} {:>7} {:>14} {:>7} {:>10} {:>10} {:>10}",
        "round",
        "wrk req/s",
        "closed req/s",
        "ratio",
        "rate req/s",
        "ratio",
        "rate p99ms",
        "wrk us/req",
        "load us/req"
    );
    let mut rounds = Vec::new();
    let (mut closed_ratios, mut rate_ratios, mut cpu_ratios) = (Vec::new(), Vec::new(), Vec::new());
    for r in 1..=args.rounds {
        let (w, w_cpu) = with_cpu(|| run_wrk(&wrk, &url, c, d))?;
        let (cl, cl_cpu) = with_cpu(|| run_triage(&url, c, d, None))?;
        // CPU per request (µs): less sensitive to a noisy machine than req/s.
        let per_req = |cpu: Option<f64>, rps: f64| {
            cpu.filter(|_| rps > 0.0)
                .map(|s| s * 1e6 / (rps * d as f64))
        };
        let (w_us, cl_us) = (per_req(w_cpu, w), per_req(cl_cpu, cl.rps));
        if let (Some(a), Some(b)) = (w_us, cl_us) {
            cpu_ratios.push(a / b);
        }
        let rt = if args.no_rate {
            None
        } else {
            Some(run_triage(&url, c, d, Some(w))?)
        };
        let cr = cl.rps / w;
        closed_ratios.push(cr);
        let rr = rt.as_ref().map(|x| x.rps / w);
        rate_ratios.extend(rr);
        let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$}"));
        println!(
            "{r:>5} {w:>12.0} {:>14.0} {cr:>7.3} {:>14} {:>7} {:>10} {:>10} {:>10}",
            cl.rps,
            f(rt.as_ref().map(|x| x.rps), 0),
            f(rr, 3),
            f(rt.as_ref().and_then(|x| x.p99_ms), 2),
            f(w_us, 2),
            f(cl_us, 2)
        );
        let _ = std::io::stdout().flush();
        if cl.errors > 0 || rt.as_ref().is_some_and(|x| x.errors > 0) {
            eprintln!(
                "  triage load counted errors: closed {}, rate {}",
                cl.errors,
                rt.as_ref().map_or(0, |x| x.errors)
            );
        }
        rounds.push(serde_json::json!({
            "round": r,
            "wrk_rps": w,
            "closed_rps": cl.rps,
            "closed_ratio": cr,
            "closed_errors": cl.errors,
            "wrk_cpu_us_per_req": w_us,
            "closed_cpu_us_per_req": cl_us,
            "rate_target_rps": rt.as_ref().map(|_| w),
            "rate_rps": rt.as_ref().map(|x| x.rps),
            "rate_ratio": rr,
            "rate_p99_ms": rt.as_ref().and_then(|x| x.p99_ms),
            "rate_errors": rt.as_ref().map(|x| x.errors),
        }));
    }
    let mc = median(closed_ratios);
    let mr = median(rate_ratios);
    let mcpu = median(cpu_ratios);
    let f3 = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3}"));
    println!(
        "median triage-load/wrk req/s ratio: closed {}, rate {} (goal >= 0.8); \
         CPU efficiency (wrk us/req / triage us/req): {}",
        f3(mc),
        f3(mr),
        f3(mcpu)
    );
    let out = args.out.join(timestamp());
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let summary = serde_json::json!({
        "bench": "load",
        "server": "nginx, 1 process, pinned to CPU 0, access log off",
        "clients": "pinned to CPU 1; wrk -t1; triage load --plain --threads 1",
        "connections": c,
        "duration_s": d,
        "size_bytes": args.size,
        "debug_build": cfg!(debug_assertions),
        "rounds": rounds,
        "median_closed_ratio": mc,
        "median_rate_ratio": mr,
        "median_cpu_efficiency_ratio": mcpu,
        "goal_ratio": 0.8,
    });
    let path = out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_timestamps() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        let t = timestamp();
        assert_eq!(t.len(), 15, "{t}");
        assert!(t.starts_with("20"), "{t}");
    }
}

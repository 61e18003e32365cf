//! `triage bench static`: triage against nginx on one small static file, both pinned to CPU 0
//! with one worker/slot, wrk pinned to CPU 1. Prints req/s and p99 ratios for `--policy fifo`
//! and `--policy pos`, the gate's cost (against `--gate off`), CPU per request with 0 and with
//! N idle keep-alive connections held open, and resident memory per idle connection. With
//! `--gzip LEVEL` the file is one of the POS lab's BMP images (`lab::site::bmp`), compressed on
//! the fly by both servers at that level, so CPU per request is mostly the compressor's. Writes
//! `results/bench-static/<unix time>/summary.json`. A release-build benchmark, not a test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;

use super::UsageError;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// Rounds (targets alternate order every round; medians are reported).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// wrk connections.
    #[arg(long, default_value_t = 50)]
    pub connections: usize,
    /// Idle keep-alive connections for the idle-cost measurement (0 skips it).
    #[arg(long, default_value_t = 5000)]
    pub idle: usize,
    /// Size of the file served, bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Serve a BMP image of `--size` bytes compressed on the fly at this gzip level (1-9) by
    /// both servers, requested with `Accept-Encoding: gzip`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub gzip: Option<u32>,
    /// CPU the servers are pinned to.
    #[arg(long, default_value_t = 0)]
    pub server_cpu: usize,
    /// CPU wrk is pinned to.
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Results directory.
    #[arg(long, default_value = "results/bench-static")]
    pub out: PathBuf,
    /// nginx binary.
    #[arg(long, default_value = "nginx")]
    pub nginx: String,
    /// wrk binary.
    #[arg(long, default_value = "wrk")]
    pub wrk: String,
}

/// One server under test.
struct Target {
    name: &'static str,
    child: Child,
    pid: i32,
    addr: SocketAddr,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

fn wait_listening(addr: SocketAddr, child: &mut Child, what: &str) -> anyhow::Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        if let Some(st) = child.try_wait()? {
            bail!("{what} exited before listening ({st})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("{what} did not listen on {addr} within 10 s")
}

fn pinned(cpu: usize, program: &str) -> Command {
    let mut c = Command::new("taskset");
    c.arg("-c").arg(cpu.to_string()).arg(program);
    c
}

/// The pid of the program `taskset` execs (same pid: taskset execs in place).
fn start_triage(
    a: &Args,
    name: &'static str,
    root: &Path,
    extra: &[&str],
) -> anyhow::Result<Target> {
    let exe = std::env::current_exe().context("locating the triage binary")?;
    let addr = free_port()?;
    let mut cmd = pinned(a.server_cpu, &exe.to_string_lossy());
    cmd.arg("serve")
        .arg("--root")
        .arg(root)
        .args(["--listen", &addr.to_string(), "--slots", "1"])
        .args(["--keepalive-timeout", "1h", "--header-timeout", "1h"])
        .args(["--max-conns", &(a.idle + a.connections + 100).to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().context("starting triage serve under taskset")?;
    wait_listening(addr, &mut child, name)?;
    Ok(Target {
        name,
        pid: child.id() as i32,
        child,
        addr,
    })
}

fn start_nginx(a: &Args, dir: &Path, root: &Path) -> anyhow::Result<Target> {
    let addr = free_port()?;
    let conf = dir.join("nginx.conf");
    let conns = a.idle + a.connections + 100;
    let gzip = a.gzip.map_or(String::new(), |l| {
        format!(
            "  gzip on;\n  gzip_comp_level {l};\n  gzip_min_length 0;\n  gzip_types image/bmp;\n"
        )
    });
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\nworker_rlimit_nofile {nofile};\n\
             pid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
             events {{ worker_connections {conns}; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  keepalive_timeout 3600;\n  keepalive_requests 100000000;\n\
             client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fcgi;\n\
             uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;\n\
             types {{ text/html html; image/bmp bmp; application/octet-stream bin; }}\n{gzip}\
             server {{ listen {addr}; root {root}; }}\n}}\n",
            nofile = conns * 2 + 100,
            dir = dir.display(),
            root = root.display(),
        ),
    )?;
    let mut child = pinned(a.server_cpu, &a.nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {} (is nginx installed?)", a.nginx))?;
    if let Err(e) = wait_listening(addr, &mut child, "nginx") {
        let mut err = String::new();
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        return Err(e.context(err));
    }
    Ok(Target {
        name: "nginx",
        pid: child.id() as i32,
        child,
        addr,
    })
}

/// One wrk measurement.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rps: f64,
    p99_ms: f64,
    requests: u64,
    cpu_s: f64,
}

fn parse_ms(v: &str) -> Option<f64> {
    let v = v.trim();
    for (suf, k) in [("us", 1e-3), ("ms", 1.0), ("s", 1e3), ("m", 60e3)] {
        if let Some(n) = v.strip_suffix(suf) {
            if let Ok(x) = n.parse::<f64>() {
                return Some(x * k);
            }
        }
    }
    None
}

fn parse_wrk(out: &str) -> Option<(f64, f64, u64)> {
    let rps = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))?
        .trim()
        .parse()
        .ok()?;
    let p99 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(parse_ms)?;
    let requests = out
        .lines()
        .find(|l| l.contains("requests in"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((rps, p99, requests))
}

fn run_wrk(a: &Args, t: &Target, path: &str) -> anyhow::Result<Sample> {
    let cpu0 = os::procfs::cpu_time(t.pid)?;
    let mut wrk = pinned(a.client_cpu, &a.wrk);
    if a.gzip.is_some() {
        wrk.args(["-H", "Accept-Encoding: gzip"]);
    }
    let out = wrk
        .args(["-t1", "-c", &a.connections.to_string()])
        .args(["-d", &format!("{}s", a.duration), "--latency"])
        .arg(format!("http://{}{path}", t.addr))
        .output()
        .with_context(|| format!("running {} (is wrk installed?)", a.wrk))?;
    let cpu1 = os::procfs::cpu_time(t.pid)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some((rps, p99_ms, requests)) = parse_wrk(&text) else {
        bail!(
            "unparsable wrk output for {}: {text}{}",
            t.name,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if text.contains("Non-2xx") {
        bail!("{} answered non-2xx responses: {text}", t.name);
    }
    Ok(Sample {
        rps,
        p99_ms,
        requests,
        cpu_s: (cpu1 - cpu0).as_secs_f64(),
    })
}

/// Fail unless the server `name` at `addr` answers `path` with `Content-Encoding: gzip` when
/// asked for it.
fn check_gzip(name: &str, addr: SocketAddr, path: &str) -> anyhow::Result<()> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    );
    c.write_all(req.as_bytes())?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if !text.starts_with("http/1.1 200") || !text.contains("content-encoding: gzip") {
        bail!(
            "{name} did not compress {path} when asked for gzip: {}",
            text.lines().take(12).collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(())
}

/// Open `n` keep-alive connections, each served one request, and keep them.
fn open_idle(addr: SocketAddr, n: usize, path: &str) -> anyhow::Result<Vec<TcpStream>> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = TcpStream::connect(addr)
            .with_context(|| format!("opening idle connection {i} of {n}"))?;
        c.write_all(req.as_bytes())?;
        conns.push(c);
    }
    // Read every response so each connection is established, served and idle.
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf)?;
        if n == 0 || !buf.starts_with(b"HTTP/1.1 200") {
            bail!(
                "idle connection was not served: {}",
                String::from_utf8_lossy(&buf[..n])
            );
        }
    }
    Ok(conns)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.duration == 0 || a.rounds == 0 {
        return Err(UsageError("--duration and --rounds must be at least 1".into()).into());
    }
    if cfg!(debug_assertions) {
        eprintln!("bench static: warning: this is a debug build; build with --release to measure");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if a.server_cpu >= cpus || a.client_cpu >= cpus {
        return Err(UsageError(format!(
            "--server-cpu {} / --client-cpu {} but only {cpus} CPU(s) are available",
            a.server_cpu, a.client_cpu
        ))
        .into());
    }
    let nofile = os::procfs::raise_nofile((a.idle as u64) * 3 + 1024)?;
    if (nofile as usize) < a.idle * 2 + 200 {
        bail!("RLIMIT_NOFILE is {nofile}, too low for --idle {}", a.idle);
    }
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("www");
    std::fs::create_dir(&root)?;
    let path = if a.gzip.is_some() {
        std::fs::write(root.join("file.bmp"), lab::site::bmp(a.size, 1))?;
        "/file.bmp"
    } else {
        let data: Vec<u8> = (0..a.size).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(root.join("file.html"), &data)?;
        "/file.html"
    };
    let level = a.gzip.map(|l| l.to_string());
    let with_gzip = |base: &[&'static str]| -> Vec<&str> {
        let mut v = base.to_vec();
        if let Some(l) = &level {
            v.extend(["--gzip-level", l]);
        }
        v
    };
    let ngdir = tmp.path().join("nginx");
    std::fs::create_dir(&ngdir)?;

    let nginx_ok = Command::new(&a.nginx).arg("-v").output().is_ok();
    if !nginx_ok {
        eprintln!(
            "bench static: nginx ({}) not found: measuring triage only",
            a.nginx
        );
    }
    let mut targets: Vec<Target> = Vec::new();
    if nginx_ok {
        targets.push(start_nginx(&a, &ngdir, &root)?);
    }
    targets.push(start_triage(
        &a,
        "triage-fifo",
        &root,
        &with_gzip(&["--policy", "fifo"]),
    )?);
    targets.push(start_triage(
        &a,
        "triage-pos",
        &root,
        &with_gzip(&["--policy", "pos"]),
    )?);
    targets.push(start_triage(
        &a,
        "triage-gate-off",
        &root,
        &with_gzip(&["--policy", "fifo", "--gate", "off"]),
    )?);
    if a.gzip.is_some() {
        // Measure compression, not a silent fallback to the plain file.
        for t in &targets {
            check_gzip(t.name, t.addr, path)?;
        }
    }
    let names: Vec<&str> = targets.iter().map(|t| t.name).collect();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); targets.len()];

    let total = a.rounds * targets.len() + if a.idle > 0 { 2 * targets.len() } else { 0 };
    let mut step = 0;
    for r in 0..a.rounds {
        let order: Vec<usize> = if r % 2 == 0 {
            (0..targets.len()).collect()
        } else {
            (0..targets.len()).rev().collect()
        };
        for i in order {
            step += 1;
            eprintln!(
                "bench static: [{step}/{total}] round {} {}",
                r + 1,
                targets[i].name
            );
            samples[i].push(run_wrk(&a, &targets[i], path)?);
        }
    }

    // Idle connections: CPU per request and memory per connection, per target.
    let mut idle_res = Vec::new();
    if a.idle > 0 {
        for t in &targets {
            step += 1;
            eprintln!(
                "bench static: [{step}/{total}] {} with 0 idle connections",
                t.name
            );
            let base = run_wrk(&a, t, path)?;
            let rss0 = os::procfs::rss_kib(t.pid)?;
            let held = open_idle(t.addr, a.idle, path)?;
            std::thread::sleep(Duration::from_millis(300));
            let rss1 = os::procfs::rss_kib(t.pid)?;
            step += 1;
            eprintln!(
                "bench static: [{step}/{total}] {} with {} idle connections",
                t.name, a.idle
            );
            let loaded = run_wrk(&a, t, path)?;
            drop(held);
            let cpr0 = base.cpu_s / base.requests.max(1) as f64;
            let cpr1 = loaded.cpu_s / loaded.requests.max(1) as f64;
            idle_res.push(json!({
                "target": t.name,
                "cpu_per_req_us_0_idle": cpr0 * 1e6,
                "cpu_per_req_us_n_idle": cpr1 * 1e6,
                "cpu_per_req_ratio": cpr1 / cpr0,
                "rss_kib_before": rss0,
                "rss_kib_after": rss1,
                "rss_kib_per_idle_conn": (rss1 as f64 - rss0 as f64) / a.idle as f64,
                "rps_0_idle": base.rps,
                "rps_n_idle": loaded.rps,
            }));
        }
    }

    let med = |i: usize, f: fn(&Sample) -> f64| {
        let mut v: Vec<f64> = samples[i].iter().map(f).collect();
        median(&mut v)
    };
    let idx = |n: &str| names.iter().position(|x| *x == n);
    let rps = |n: &str| idx(n).map(|i| med(i, |s| s.rps));
    let p99 = |n: &str| idx(n).map(|i| med(i, |s| s.p99_ms));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let gate_cost = ratio(rps("triage-fifo"), rps("triage-gate-off")).map(|r| 1.0 - r);
    let per_target: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "target": n,
                "rps_median": med(i, |s| s.rps),
                "p99_ms_median": med(i, |s| s.p99_ms),
                "cpu_per_req_us_median": med(i, |s| s.cpu_s / s.requests.max(1) as f64 * 1e6),
                "rounds": samples[i].iter().map(|s| json!({"rps": s.rps, "p99_ms": s.p99_ms, "requests": s.requests, "cpu_s": s.cpu_s})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let summary = json!({
        "bench": "static",
        "file_bytes": a.size,
        "gzip_level": a.gzip,
        "duration_s": a.duration,
        "rounds": a.rounds,
        "connections": a.connections,
        "idle_connections": a.idle,
        "server_cpu": a.server_cpu,
        "client_cpu": a.client_cpu,
        "debug_build": cfg!(debug_assertions),
        "targets": per_target,
        "ratios": {
            "fifo_vs_nginx_rps": ratio(rps("triage-fifo"), rps("nginx")),
            "pos_vs_nginx_rps": ratio(rps("triage-pos"), rps("nginx")),
            "fifo_vs_nginx_p99": ratio(p99("triage-fifo"), p99("nginx")),
            "pos_vs_nginx_p99": ratio(p99("triage-pos"), p99("nginx")),
            "gate_cost": gate_cost,
        },
        "idle": idle_res,
        "targets_goal": {"rps_vs_nginx_min": 0.9, "gate_cost_max": 0.05, "idle_cpu_ratio_max": 1.1, "rss_kib_per_idle_conn_max": 20.0},
    });
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let dir = a.out.join(stamp.to_string());
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("summary.json");
    std::fs::write(&file, serde_json::to_string_pretty(&summary)?)?;

    println!(
        "{:<16} {:>12} {:>10} {:>14}",
        "target", "req/s", "p99 ms", "cpu/req us"
    );
    for t in &per_target {
        println!(
            "{:<16} {:>12.0} {:>10.3} {:>14.2}",
            t["target"].as_str().unwrap_or(""),
            t["rps_median"].as_f64().unwrap_or(f64::NAN),
            t["p99_ms_median"].as_f64().unwrap_or(f64::NAN),
            t["cpu_per_req_us_median"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let show = |k: &str| {
        summary["ratios"][k]
            .as_f64()
            .map_or("n/a".to_string(), |v| format!("{v:.3}"))
    };
    println!(
        "triage-fifo / nginx req/s: {} (goal >= 0.9)",
        show("fifo_vs_nginx_rps")
    );
    println!("triage-pos  / nginx req/s: {}", show("pos_vs_nginx_rps"));
    println!("triage-fifo / nginx p99:   {}", show("fifo_vs_nginx_p99"));
    println!("triage-pos  / nginx p99:   {}", show("pos_vs_nginx_p99"));
    println!(
        "gate cost (1 - fifo/gate-off req/s): {} (goal <= 0.05)",
        show("gate_cost")
    );
    for r in &idle_res {
        println!(
            "{:<16} idle x{}: cpu/req ratio {:.3} (goal <= 1.1), rss {:.2} KiB per idle conn (goal <= 20)",
            r["target"].as_str().unwrap_or(""),
            a.idle,
            r["cpu_per_req_ratio"].as_f64().unwrap_or(f64::NAN),
            r["rss_kib_per_idle_conn"].as_f64().unwrap_or(f64::NAN)
        );
    }
    println!("wrote {}", file.display());
    drop(targets);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot server on a real socket that answers with `head`.
    fn canned(head: &'static str) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed before its request ended");
                req.extend_from_slice(&buf[..n]);
            }
            assert!(req.starts_with(b"GET /file.bmp HTTP/1.1\r\n"));
            c.write_all(head.as_bytes()).unwrap();
        });
        (addr, h)
    }

    #[test]
    fn gzip_check_refuses_a_plain_answer() {
        let (addr, h) = canned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let e = check_gzip("canned", addr, "/file.bmp")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not compress /file.bmp"), "{e}");
        h.join().unwrap();
        let (addr, h) =
            canned("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n");
        check_gzip("canned", addr, "/file.bmp").unwrap();
        h.join().unwrap();
    }

    #[test]
    fn parses_wrk_output() {
        let out = "Running 2s test @ http://127.0.0.1:1/file.html\n  1 threads and 50 connections\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   1.10ms  200.00us   5.00ms   90.00%\n  Latency Distribution\n     50%    1.00ms\n     75%    1.20ms\n     90%    1.50ms\n     99%  850.00us\n  91234 requests in 2.00s, 100.00MB read\nRequests/sec:  45617.00\nTransfer/sec:     50.00MB\n";
        let (rps, p99, n) = parse_wrk(out).unwrap();
        assert_eq!(rps, 45617.0);
        assert!((p99 - 0.85).abs() < 1e-9);
        assert_eq!(n, 91234);
        assert_eq!(parse_ms("1.5s"), Some(1500.0));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    }
}

//! One point of `triage lab cluster`: start the back ends and the front end of a variant
//! ([`start`]), replay the trace through it with wrk and read what the back ends and the front
//! end did ([`measure`]).
//!
//! Everything runs on the testbed: the back ends (`triage serve` with an LRU content cache of
//! the point's budget and the LARD paper's emulated disk) and the front end (`triage front`,
//! HAProxy or nginx, one thread or process) on the server side; wrk on the client side, its
//! Lua script replaying the trace's paths in order from a start index, closing its connection
//! after every `per_conn`-th request on average (`Connection: close`), and stopping after one
//! pass through the trace.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::opts::ClusterOpts;
use super::plan::{ClusterPoint, Engine, Params};
use super::summary::Measured;
use crate::error::{LabError, Result};
use crate::peers::{haproxy_proxy_conf, haproxy_source_policy, nginx_proxy_conf, Peer};
use crate::process::{run_cmd, Managed};
use crate::testbed::{http_get, Testbed};
use crate::wrk::{Wrk, WrkSpec};

/// What a point of the lab needs.
pub struct Setup<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// The parameters.
    pub p: &'a Params,
    /// The options.
    pub o: &'a ClusterOpts,
    /// The site's document root (the trace's files).
    pub root: &'a Path,
    /// The trace's paths, one per line.
    pub paths: &'a Path,
    /// Requests in the trace.
    pub requests: usize,
    /// The largest file (the back ends' cache must be allowed to hold it).
    pub max_file: u64,
    /// The trace, for the simulator's check of each point.
    pub trace: &'a sim::trace::Trace,
}

/// One back end.
pub struct Backend {
    /// The `triage serve` process (`None` once killed by a failover run).
    pub child: Option<Managed>,
    /// Where it serves.
    pub addr: SocketAddr,
    /// Its admin address (`/metrics`).
    pub admin: SocketAddr,
}

/// A point's cluster, running.
pub struct Running {
    /// The back ends, node `i` of the policy first.
    pub backends: Vec<Backend>,
    /// The front end's process (its CPU time is the front end's).
    pub front: Managed,
    /// Where the clients connect.
    pub front_addr: SocketAddr,
    /// The front end's admin address (`triage front` only).
    pub front_admin: Option<SocketAddr>,
}

impl Running {
    /// Stop the front end, then the back ends; returns the end of the front end's log.
    /// The back ends hold nothing worth a graceful stop (their caches go with them) and
    /// would wait for the front end's pooled connections: they are killed.
    pub fn stop(mut self) -> String {
        let log = self.front.log_tail(1500);
        self.front.stop(Duration::from_secs(1));
        for b in &mut self.backends {
            if let Some(c) = b.child.as_mut() {
                c.kill();
            }
        }
        log
    }
}

fn os(v: impl std::fmt::Display) -> OsString {
    v.to_string().into()
}

/// Start the back ends and front end of `pt` (logs and configuration in `dir`).
pub fn start(s: &Setup<'_>, pt: &ClusterPoint, dir: &Path) -> Result<Running> {
    let tb = s.tb;
    let n = pt.nodes;
    let mut addrs = Vec::with_capacity(n);
    for _ in 0..n {
        addrs.push((tb.server_addr()?, tb.server_addr()?));
    }
    let forward =
        matches!(&pt.variant.engine, Engine::Triage { mechanism, .. } if mechanism == "forward");
    let mut backends = Vec::with_capacity(n);
    for (i, &(addr, admin)) in addrs.iter().enumerate() {
        let mut args: Vec<OsString> = ["serve", "--root"].iter().map(OsString::from).collect();
        args.push(s.root.as_os_str().to_owned());
        for (k, v) in [
            ("--listen", addr.to_string()),
            ("--admin", admin.to_string()),
            ("--threads", "1".into()),
            ("--cache-policy", "lru".into()),
            ("--cache-budget", format!("{}B", pt.cache)),
            ("--cache-max-file", format!("{}B", s.max_file.max(1))),
            ("--disk", "lard".into()),
            ("--disk-scale", s.p.disk_scale.to_string()),
            ("--max-conns", "20000".into()),
        ] {
            args.push(k.into());
            args.push(v.into());
        }
        if forward {
            args.push("--forward-from".into());
            args.push(os(addr.ip()));
            for (j, (peer, _)) in addrs.iter().enumerate() {
                if j != i {
                    args.push("--forward-peer".into());
                    args.push(os(peer));
                }
            }
        }
        let label = format!("triage serve b{i}");
        let mut child = tb.spawn_server_side(
            &label,
            &s.o.triage_bin,
            &args,
            Some(dir.join(format!("backend-{i}.log"))),
        )?;
        tb.wait_listening(addr, &mut child, Duration::from_secs(10))?;
        backends.push(Backend {
            child: Some(child),
            addr,
            admin,
        });
    }
    let front_addr = tb.server_addr()?;
    let backend_args = || {
        let mut a: Vec<String> = vec!["front".into(), "--listen".into(), front_addr.to_string()];
        for b in &backends {
            a.push("--backend".into());
            a.push(b.addr.to_string());
        }
        a
    };
    let (mut front, front_admin) = match &pt.variant.engine {
        Engine::Triage { policy, mechanism } => {
            let admin = tb.server_addr()?;
            let mut a = backend_args();
            a.extend(
                [
                    "--admin",
                    &admin.to_string(),
                    "--policy",
                    policy,
                    "--mechanism",
                    mechanism,
                    "--threads",
                    "1",
                    "--health-interval",
                    "500ms",
                ]
                .map(String::from),
            );
            if let Some(e) = &s.o.front_engine {
                a.extend(["--engine".to_string(), e.clone()]);
            }
            let args: Vec<OsString> = a.into_iter().map(OsString::from).collect();
            let child = tb.spawn_server_side(
                "triage front",
                &s.o.triage_bin,
                &args,
                Some(dir.join("front.log")),
            )?;
            (child, Some(admin))
        }
        Engine::Haproxy { balance } => {
            let src = haproxy_source_policy(balance).ok_or_else(|| {
                LabError::Config(format!("no HAProxy balance `{balance}` in the lab"))
            })?;
            let mut a = backend_args();
            a.extend(
                [
                    "--policy",
                    src,
                    "--health-interval",
                    "500ms",
                    "--emit",
                    "haproxy",
                ]
                .map(String::from),
            );
            let emitted = emit(&s.o.triage_bin, &a)?;
            let conf = haproxy_proxy_conf(&emitted, balance).map_err(LabError::Config)?;
            let path = dir.join("haproxy.cfg");
            write(&path, &conf)?;
            let prog = Peer::Haproxy
                .binary()
                .ok_or_else(|| LabError::Config("haproxy is not installed".into()))?;
            let args = vec![os("-f"), path.into_os_string(), os("-db")];
            let child =
                tb.spawn_server_side("haproxy", &prog, &args, Some(dir.join("front.log")))?;
            (child, None)
        }
        Engine::Nginx { mode } => {
            let mut a = backend_args();
            a.extend(
                [
                    "--policy",
                    "chbl",
                    "--health-interval",
                    "500ms",
                    "--emit",
                    "nginx",
                ]
                .map(String::from),
            );
            let emitted = emit(&s.o.triage_bin, &a)?;
            let prefix = dir.join("nginx");
            for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                let d = prefix.join("tmp").join(t);
                std::fs::create_dir_all(&d).map_err(|e| LabError::io("creating", &d, e))?;
            }
            let conf = nginx_proxy_conf(&emitted, &prefix, mode).map_err(LabError::Config)?;
            let path = prefix.join("nginx.conf");
            write(&path, &conf)?;
            let prog = Peer::Nginx
                .binary()
                .ok_or_else(|| LabError::Config("nginx is not installed".into()))?;
            let args = vec![
                os("-p"),
                prefix.clone().into_os_string(),
                os("-c"),
                path.into_os_string(),
                os("-e"),
                prefix.join("error.log").into_os_string(),
            ];
            let child = tb.spawn_server_side("nginx", &prog, &args, Some(dir.join("front.log")))?;
            (child, None)
        }
    };
    tb.wait_listening(front_addr, &mut front, Duration::from_secs(10))?;
    Ok(Running {
        backends,
        front,
        front_addr,
        front_admin,
    })
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| LabError::io("writing", path, e))
}

/// `triage front ... --emit ENGINE`'s text.
fn emit(triage: &Path, args: &[String]) -> Result<String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    run_cmd(&triage.to_string_lossy(), &a)
}

/// The Lua script replaying the paths in `paths` from index `start` (0-based), closing the
/// connection after every `per_conn`-th request on average, and stopping after `limit`
/// responses (one pass through the trace).
pub fn wrk_script(paths: &Path, start: usize, per_conn: u32, limit: usize) -> String {
    format!(
        r#"-- generated by triage lab cluster: replay the trace's paths in order
local paths = {{}}
for line in io.lines("{}") do paths[#paths + 1] = line end
local n = #paths
local i = {start} % n
local sent = 0
local done = 0
local close = {{["Connection"] = "close"}}
local keep = {{}}
request = function()
  i = i % n + 1
  sent = sent + 1
  local h = keep
  if sent % {per_conn} == 0 then h = close end
  return wrk.format("GET", paths[i], h)
end
response = function(status, headers, body)
  done = done + 1
  if done >= {limit} then wrk.thread:stop() end
end
"#,
        paths
            .display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\""),
        per_conn = per_conn.max(1),
        limit = limit.max(1),
    )
}

/// The sum of every sample of metric `name` in a Prometheus text (`None`: no sample).
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for l in text.lines() {
        let Some(rest) = l.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        if let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *sum.get_or_insert(0.0) += v;
        }
    }
    sum
}

/// Cache lookups of one back end: (hits, misses); `None` when it does not answer.
fn lookups(tb: &Testbed, admin: SocketAddr) -> Option<(f64, f64)> {
    let text = tb
        .in_server_ns(|| http_get(admin, "/metrics", Duration::from_secs(2)))
        .ok()?
        .ok()?;
    Some((
        metric_sum(&text, "triage_cache_hits_total")?,
        metric_sum(&text, "triage_cache_misses_total")?,
    ))
}

fn front_counter(tb: &Testbed, admin: Option<SocketAddr>, name: &str) -> Option<f64> {
    let text = tb
        .in_server_ns(|| http_get(admin?, "/metrics", Duration::from_secs(2)).ok())
        .ok()??;
    metric_sum(&text, name)
}

fn cpu_s(pid: u32) -> f64 {
    os::procfs::cpu_time(pid as i32).map_or(f64::NAN, |d| d.as_secs_f64())
}

/// CPU time of a back end's process, s (NaN: killed).
fn backend_cpu_s(b: &Backend) -> f64 {
    b.child.as_ref().map_or(f64::NAN, |c| cpu_s(c.pid()))
}

/// Measure `pt` against its running cluster.
pub fn measure(
    s: &Setup<'_>,
    run: &mut Running,
    pt: &ClusterPoint,
    dir: &Path,
) -> Result<Measured> {
    let tb = s.tb;
    let url = format!("http://{}/", run.front_addr);
    let warm_s = s.p.warmup_s;
    if pt.role == super::plan::Role::Fits {
        // The caches hold the working set (the steady state "fits" means) before the warm-up.
        let paths: Vec<String> = (0..s.trace.sizes.len())
            .map(|i| super::workload::path(s.o.log.is_some(), i))
            .collect();
        let addrs: Vec<SocketAddr> = run.backends.iter().map(|b| b.addr).collect();
        super::prewarm::fill(tb, &addrs, &paths, Duration::from_secs(30))?;
    }
    let spec = |script: PathBuf, secs: f64| WrkSpec {
        timeout: Some(Duration::from_secs(10)),
        script: Some(script),
        ..WrkSpec::new(
            url.clone(),
            pt.conns,
            Duration::from_secs_f64(secs.max(1.0)),
        )
    };
    // Warm-up: the trace from its start.
    let warm_script = dir.join("warm.lua");
    write(
        &warm_script,
        &wrk_script(s.paths, 0, pt.per_conn, s.requests),
    )?;
    let warm = Wrk::run(
        tb,
        &format!("{}-warm", label(pt)),
        &spec(warm_script, warm_s),
    )?;
    // The window: the trace from where the warm-up stopped.
    let start = (warm.requests as usize).min(s.requests.saturating_sub(1));
    let script = dir.join("window.lua");
    write(
        &script,
        &wrk_script(s.paths, start, pt.per_conn, s.requests - start),
    )?;
    let before: Vec<Option<(f64, f64)>> =
        run.backends.iter().map(|b| lookups(tb, b.admin)).collect();
    let backend_cpu0: Vec<f64> = run.backends.iter().map(backend_cpu_s).collect();
    let retries0 = front_counter(tb, run.front_admin, "triage_front_retries_total");
    let cpu0 = cpu_s(run.front.pid());
    let t0 = Instant::now();
    let w = Wrk::start(tb, &label(pt), &spec(script, s.p.window_s))?;
    let mut killed = None;
    if pt.role == super::plan::Role::Failover {
        crate::signals::sleep(Duration::from_secs_f64(s.p.window_s / 2.0))?;
        if let Some(c) = run.backends[0].child.as_mut() {
            c.kill();
            killed = Some(0);
        }
        run.backends[0].child = None;
    }
    let r = w.finish(Duration::from_secs_f64(s.p.window_s) + Duration::from_secs(20))?;
    let cpu1 = cpu_s(run.front.pid());
    let elapsed = t0.elapsed().as_secs_f64();
    let after: Vec<Option<(f64, f64)>> = run
        .backends
        .iter()
        .map(|b| b.child.as_ref().and_then(|_| lookups(tb, b.admin)))
        .collect();
    let backend_cpu1: Vec<f64> = run.backends.iter().map(backend_cpu_s).collect();
    let retries1 = front_counter(tb, run.front_admin, "triage_front_retries_total");
    let mut served = Vec::new();
    let (mut hits, mut total) = (0.0, 0.0);
    // CPU and lookups of the back ends read before and after (a killed one is left out).
    let (mut backend_cpu, mut backend_lookups) = (0.0, 0.0);
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        match (b, a) {
            (Some(b), Some(a)) => {
                let h = a.0 - b.0;
                let m = a.1 - b.1;
                hits += h;
                total += h + m;
                served.push(h + m);
                let cpu = backend_cpu1[i] - backend_cpu0[i];
                if cpu.is_finite() {
                    backend_cpu += cpu;
                    backend_lookups += h + m;
                }
            }
            _ => served.push(f64::NAN),
        }
    }
    let backend_cpu_us_per_req = if backend_lookups > 0.0 {
        backend_cpu * 1e6 / backend_lookups
    } else {
        f64::NAN
    };
    let sim = super::summary::simulate(s, pt, start, r.requests as usize, backend_cpu_us_per_req);
    Ok(Measured {
        variant: pt.variant.name.clone(),
        role: pt.role,
        nodes: pt.nodes,
        cache: pt.cache,
        per_conn: pt.per_conn,
        conns: pt.conns,
        rep: pt.rep,
        window_s: if r.duration_s.is_finite() && r.duration_s > 0.0 {
            r.duration_s
        } else {
            elapsed
        },
        requests: r.requests,
        rps: r.rps,
        latency_p50_ms: r.latency_p50_ms,
        latency_p99_ms: r.latency_p99_ms,
        failed: r.errors + r.non_2xx,
        socket_errors: r.errors,
        non_2xx: r.non_2xx,
        hit_ratio: if total > 0.0 { hits / total } else { f64::NAN },
        balance: super::summary::balance(&served),
        served,
        front_cpu_us_per_req: if r.requests > 0 {
            (cpu1 - cpu0) * 1e6 / r.requests as f64
        } else {
            f64::NAN
        },
        retries: match (retries0, retries1) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
        killed_backend: killed,
        warm_requests: warm.requests,
        backend_cpu_us_per_req,
        sim_hit_ratio: sim.map(|x| x.hit_ratio),
        sim_balance: sim.map(|x| x.balance),
        sim_cpu_scale: sim.map(|x| x.cpu_scale),
    })
}

/// The label of a point in progress lines and wrk logs.
pub fn label(pt: &ClusterPoint) -> String {
    format!(
        "{} {} n={}{} rep {}",
        pt.variant.name,
        pt.role.name(),
        pt.nodes,
        if pt.per_conn == 1 { " close" } else { "" },
        pt.rep + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_over_labels() {
        let t = "# HELP triage_cache_hits_total x\n\
                 triage_cache_hits_total{site=\"a\",policy=\"lru\"} 10\n\
                 triage_cache_hits_total{site=\"b\",policy=\"lru\"} 5\n\
                 triage_cache_hits_totally 99\n\
                 triage_front_retries_total 3\n";
        assert_eq!(metric_sum(t, "triage_cache_hits_total"), Some(15.0));
        assert_eq!(metric_sum(t, "triage_front_retries_total"), Some(3.0));
        assert_eq!(metric_sum(t, "triage_cache_misses_total"), None);
    }

    #[test]
    fn the_script_replays_from_its_start_and_stops() {
        let s = wrk_script(Path::new("/w/paths.txt"), 7, 8, 100);
        assert!(s.contains("io.lines(\"/w/paths.txt\")"));
        assert!(s.contains("local i = 7 % n"));
        assert!(s.contains("sent % 8 == 0"));
        assert!(s.contains("done >= 100"));
        let s = wrk_script(Path::new("/w/p"), 0, 0, 0);
        assert!(s.contains("sent % 1 == 0") && s.contains("done >= 1"));
    }
}

//! One point of `triage lab containers`: start a server variant ([`start`]) and measure the
//! static throughput and the CPU shares while `k` CGI requests burn the CPU ([`measure`]).

use std::path::Path;
use std::time::Duration;

use super::opts::ContainersOpts;
use super::plan::{Kind, Params, Variant};
use super::summary::Point;
use crate::cgi::{kill_strays, ClosedLoop, CpuSnap, CpuTicks, Running, TriageSite};
use crate::error::{LabError, Result};
use crate::peers::Prefork;
use crate::testbed::Testbed;
use crate::wrk::{Wrk, WrkSpec};

/// What a point of the lab needs.
pub struct Setup<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// CPUs of the server side (its quota): caps and shares are fractions of it.
    pub capacity: f64,
    /// The parameters.
    pub p: &'a Params,
    /// The options.
    pub o: &'a ContainersOpts,
    /// The static document root.
    pub root: &'a Path,
    /// The script directory.
    pub bin: &'a Path,
}

/// Start the server of variant `v`.
pub fn start(env: &Setup<'_>, v: &Variant, dir: &Path) -> Result<Running> {
    match &v.kind {
        Kind::Triage {
            cgroups,
            cap,
            budget,
        } => Running::triage(
            env.tb,
            &env.o.triage_bin,
            &format!("triage serve ({})", v.name),
            &[TriageSite {
                name: "site".into(),
                root: env.root.to_owned(),
                bin: env.bin.to_owned(),
                cgroups: *cgroups,
                container: Some(if *budget { "site-box" } else { "cgi" }.into()),
                cpu_max: cap.map(|c| c * env.capacity),
                weight: None,
                max_running: None,
                slice: None,
                one_budget: if *budget {
                    cap.map(|c| c * env.capacity)
                } else {
                    None
                },
            }],
            Duration::from_secs(3600),
            dir,
        ),
        Kind::Apache => Running::apache(env.tb, env.root, env.bin, &[], &Prefork::default(), dir),
    }
}

/// Measure one point against the running server `srv`: `k` CGI requests kept in flight,
/// static throughput over the window, the server side's CPU shares around it.
pub fn measure(env: &Setup<'_>, srv: &Running, v: &Variant, k: usize, rep: usize) -> Result<Point> {
    let tb = env.tb;
    let window = Duration::from_secs_f64(env.p.window_s);
    let warm = Duration::from_secs_f64(env.p.warmup_s);
    let cg = tb.server_cgroup().ok_or_else(|| {
        LabError::Os("the testbed has no server cgroup: CPU shares cannot be measured".into())
    })?;
    let load = if k > 0 {
        Some(ClosedLoop::start(
            tb,
            srv.addr,
            &format!("/cgi-bin/burn.pl?s={}", env.p.cgi_cpu_s),
            "site",
            k,
        )?)
    } else {
        None
    };
    crate::signals::sleep(warm)?;
    let m0 = srv.cgi_cpu(tb);
    let t0 = CpuTicks::take();
    let s0 = CpuSnap::take(cg, srv);
    let spec = WrkSpec {
        timeout: Some(Duration::from_secs(10)),
        ..WrkSpec::new(
            format!("http://{}/1k.html", srv.addr),
            env.p.static_conns,
            window,
        )
    };
    let st = Wrk::run(tb, &format!("static-{}-k{k}-r{rep}", v.name), &spec)?;
    let s1 = CpuSnap::take(cg, srv);
    let t1 = CpuTicks::take();
    let m1 = srv.cgi_cpu(tb);
    let dt = s1.at.duration_since(s0.at).as_secs_f64();
    // The CGI load runs past the window: stop it (its clients go away).
    let samples = load.map(ClosedLoop::stop).unwrap_or_default();
    let strays = kill_strays(cg, srv, Duration::from_secs(2));
    let (srv_share, cgi_share) = s0.shares(&s1);
    let sw = s0.switches(&s1);
    let cap = env.capacity;
    let side = s1.total.saturating_sub(s0.total).as_secs_f64() / dt.max(1e-9) * 100.0;
    let (busy0, steal0) = tb
        .info()
        .server_cpu
        .map_or((f64::NAN, f64::NAN), |c| t0.busy_steal_pct(&t1, c));
    let (busy1, _) = tb
        .info()
        .client_cpu
        .map_or((f64::NAN, f64::NAN), |c| t0.busy_steal_pct(&t1, c));
    let metrics_share = match (m0, m1) {
        (Some(a), Some(b)) => match (a.get("site"), b.get("site")) {
            (Some(x), Some(y)) if dt > 0.0 => Some((y - x) / dt / cap * 100.0),
            _ => None,
        },
        _ => None,
    };
    Ok(Point {
        variant: v.name.clone(),
        rep,
        cgi: k,
        window_s: dt,
        static_requests: st.requests,
        static_rps: st.rps,
        static_latency_mean_ms: st.latency_mean_ms,
        static_latency_p99_ms: st.latency_p99_ms,
        static_errors: st.errors + st.non_2xx,
        cgi_completed: samples.iter().filter(|x| x.ok).count() as u64,
        server_share_pct: srv_share / cap * 100.0,
        cgi_share_pct: cgi_share / cap * 100.0,
        cgi_share_metrics_pct: metrics_share,
        strays_killed: strays,
        static_per_server_cpu_ms: if srv_share > 0.0 {
            st.rps / (srv_share * 1e3)
        } else {
            f64::NAN
        },
        server_preempt_per_req: if st.requests > 0 {
            sw.1 as f64 / st.requests as f64
        } else {
            f64::NAN
        },
        server_sleeps_per_req: if st.requests > 0 {
            sw.0 as f64 / st.requests as f64
        } else {
            f64::NAN
        },
        cpu0_other_pct: (busy0 - side).max(0.0),
        cpu1_busy_pct: busy1,
        steal0_pct: steal0,
    })
}

/// How a point went, in one progress line.
pub fn describe(pt: &Point, tb: &Testbed) -> String {
    format!(
        "static {:.0} req/s, CGI {:.1}% CPU (server {:.1}%){}; {:.1} req/server-ms, {:.3} \
         preemptions and {:.3} sleeps per request, CPU {} others {:.0}%, steal {:.0}%, CPU {} \
         busy {:.0}%",
        pt.static_rps,
        pt.cgi_share_pct,
        pt.server_share_pct,
        pt.cgi_share_metrics_pct
            .map_or(String::new(), |m| format!(", container {m:.1}%")),
        pt.static_per_server_cpu_ms,
        pt.server_preempt_per_req,
        pt.server_sleeps_per_req,
        tb.info().server_cpu.map_or("-".into(), |c| c.to_string()),
        pt.cpu0_other_pct,
        pt.steal0_pct,
        tb.info().client_cpu.map_or("-".into(), |c| c.to_string()),
        pt.cpu1_busy_pct
    )
}

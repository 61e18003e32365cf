//! One point of `triage lab containers`: start a server variant ([`start`], with its reference
//! twin for a capped variant) and measure the static throughput and the CPU shares while `k`
//! CGI requests burn the CPU ([`measure`]).
//!
//! The twin is a second `triage serve` with the same configuration on the testbed's twin
//! server side (its own cgroup, the same quota, the same CPU), loaded in the same windows with a
//! fixed number of CGI requests (`Params::twin_cgi`). This machine's speed moves by 10-20%
//! between windows (a shared host; a CPU-bound loop alone on CPU 0 took 0.79-1.50 s for the
//! same work), and by up to 2x over a minute, and it moves both servers alike: two loops sharing
//! CPU 0 stayed within 2-4% of each other while their speed halved. So the point's static
//! throughput over the twin's is the server's throughput with the machine's drift taken out.

use std::path::Path;
use std::time::Duration;

use super::opts::ContainersOpts;
use super::plan::{Kind, Params, Variant};
use super::summary::Point;
use crate::cgi::{kill_strays, ClosedLoop, CpuSnap, CpuTicks, Running, Servers, TriageSite};
use crate::error::{LabError, Result};
use crate::peers::Prefork;
use crate::testbed::{ServerSide, Testbed};
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

/// Start the server of variant `v` (and its twin, in `dir/twin`).
pub fn start(env: &Setup<'_>, v: &Variant, dir: &Path) -> Result<Servers> {
    let main = start_one(env, v, ServerSide::Main, dir)?;
    let twin = if v.has_twin(env.p) {
        Some(start_one(env, v, ServerSide::Twin, &dir.join("twin"))?)
    } else {
        None
    };
    Ok(Servers { main, twin })
}

fn start_one(env: &Setup<'_>, v: &Variant, side: ServerSide, dir: &Path) -> Result<Running> {
    let label = match side {
        ServerSide::Main => format!("triage serve ({})", v.name),
        ServerSide::Twin => format!("triage serve (twin of {})", v.name),
    };
    match &v.kind {
        Kind::Triage {
            cgroups,
            cap,
            budget,
        } => Running::triage_on(
            env.tb,
            side,
            &env.o.triage_bin,
            &label,
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

/// `k` CGI requests kept in flight against `srv` (none for 0).
fn cgi_load(env: &Setup<'_>, srv: &Running, k: usize) -> Result<Option<ClosedLoop>> {
    if k == 0 {
        return Ok(None);
    }
    ClosedLoop::start(
        env.tb,
        srv.addr,
        &format!("/cgi-bin/burn.pl?s={}", env.p.cgi_cpu_s),
        "site",
        k,
    )
    .map(Some)
}

/// The static load of a window against `srv`.
fn static_spec(env: &Setup<'_>, srv: &Running) -> WrkSpec {
    WrkSpec {
        timeout: Some(Duration::from_secs(10)),
        ..WrkSpec::new(
            format!("http://{}/1k.html", srv.addr),
            env.p.static_conns,
            Duration::from_secs_f64(env.p.window_s),
        )
    }
}

/// The cgroup of `srv`'s server side.
fn cgroup_of<'a>(tb: &'a Testbed, srv: &Running) -> Result<&'a os::Cgroup> {
    srv.cgroup(tb).ok_or_else(|| {
        LabError::Os("the testbed has no server cgroup: CPU shares cannot be measured".into())
    })
}

/// Measure one point against the running servers: `k` CGI requests kept in flight (the twin:
/// `Params::twin_cgi`), static throughput of both over the same window, the server side's CPU
/// shares around it.
pub fn measure(
    env: &Setup<'_>,
    srvs: &Servers,
    v: &Variant,
    k: usize,
    rep: usize,
) -> Result<Point> {
    let tb = env.tb;
    let srv = &srvs.main;
    let warm = Duration::from_secs_f64(env.p.warmup_s);
    let cg = cgroup_of(tb, srv)?;
    let twin = match (&srvs.twin, env.p.twin_cgi) {
        (Some(t), Some(tk)) => Some((t, cgroup_of(tb, t)?, tk)),
        _ => None,
    };
    let load = cgi_load(env, srv, k)?;
    let twin_load = match &twin {
        Some((t, _, tk)) => cgi_load(env, t, *tk)?,
        None => None,
    };
    crate::signals::sleep(warm)?;
    let m0 = srv.cgi_cpu(tb);
    let t0 = CpuTicks::take();
    let s0 = CpuSnap::take(cg, srv);
    let tw0 = twin.as_ref().map(|(t, tcg, _)| CpuSnap::take(tcg, t));
    let spec = static_spec(env, srv);
    let label = format!("static-{}-k{k}-r{rep}", v.name);
    let main_wrk = Wrk::start(tb, &label, &spec)?;
    let twin_wrk = match &twin {
        Some((t, _, _)) => Some(Wrk::start(
            tb,
            &format!("twin-{label}"),
            &static_spec(env, t),
        )?),
        None => None,
    };
    let within = spec.duration + Duration::from_secs(20);
    let st = main_wrk.finish(within);
    let tw = twin_wrk.map(|w| w.finish(within)).transpose();
    let (st, tw) = (st?, tw?);
    let s1 = CpuSnap::take(cg, srv);
    let tw1 = twin.as_ref().map(|(t, tcg, _)| CpuSnap::take(tcg, t));
    let t1 = CpuTicks::take();
    let m1 = srv.cgi_cpu(tb);
    let dt = s1.at.duration_since(s0.at).as_secs_f64();
    // The CGI load runs past the window: stop it (its clients go away).
    let samples = load.map(ClosedLoop::stop).unwrap_or_default();
    drop(twin_load.map(ClosedLoop::stop));
    let mut strays = kill_strays(cg, srv, Duration::from_secs(2));
    if let Some((t, tcg, _)) = &twin {
        strays += kill_strays(tcg, t, Duration::from_secs(2));
    }
    let (srv_share, cgi_share) = s0.shares(&s1);
    let twin_shares = tw0.zip(tw1).map(|(a, b)| a.shares(&b));
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
        twin_cgi: twin.as_ref().map(|(_, _, tk)| *tk),
        twin_static_rps: tw.as_ref().map(|w| w.rps),
        twin_server_share_pct: twin_shares.map(|(s, _)| s / cap * 100.0),
        twin_cgi_share_pct: twin_shares.map(|(_, c)| c / cap * 100.0),
        cpu0_other_pct: (busy0 - side - twin_shares.map_or(0.0, |(s, c)| (s + c) * 100.0)).max(0.0),
        cpu1_busy_pct: busy1,
        steal0_pct: steal0,
    })
}

/// How a point went, in one progress line.
pub fn describe(pt: &Point, tb: &Testbed) -> String {
    let twin = match (pt.twin_static_rps, pt.twin_server_share_pct, pt.twin_cgi) {
        (Some(r), Some(s), Some(k)) => format!(
            " (x{:.3} the twin's {r:.0} req/s at {k} CGI, server {s:.1}%)",
            pt.static_rps / r
        ),
        _ => String::new(),
    };
    format!(
        "static {:.0} req/s{twin}, CGI {:.1}% CPU (server {:.1}%){}; {:.1} req/server-ms, {:.3} \
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

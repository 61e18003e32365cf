//! One point of `triage lab reservations`: start a server variant ([`start`], with the reference
//! twin) and measure both sites while the competing site has `n` clients ([`measure`]).
//!
//! The twin is a second `triage serve` on the testbed's twin server side (its own cgroup on the
//! same CPU, [`TWIN_QUOTA_SHARE`] of the quota) serving the site of interest alone, loaded by
//! as many clients in the same windows. Its throughput follows the machine's speed, which moves
//! by 10-20% between windows on a shared host (see the containers lab), so the site's
//! throughput over the twin's compares a point with competitors to the point alone free of it.

use std::path::Path;
use std::time::{Duration, Instant};

use super::opts::ReservationsOpts;
use super::plan::{Kind, Params, Variant, SITE_A, SITE_B};
use super::summary::Point;
use crate::cgi::{kill_strays, window_stats, ClosedLoop, CpuSnap, Running, Servers, TriageSite};
use crate::error::{LabError, Result};
use crate::peers::Prefork;
use crate::testbed::{ServerSide, Testbed};

/// What a point of the lab needs.
pub struct Setup<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// The parameters.
    pub p: &'a Params,
    /// The options.
    pub o: &'a ReservationsOpts,
    /// CPUs of the server side (its quota): shares are fractions of it.
    pub capacity: f64,
    /// The static document root.
    pub root: &'a Path,
    /// The script directory.
    pub bin: &'a Path,
}

/// The twin's quota as a share of the server side's: half, so that the CPU is not saturated
/// (a 50% side and its twin leave a quarter of the CPU to the kernel's network work).
pub const TWIN_QUOTA_SHARE: f64 = 0.5;

/// Start the server of variant `v` and the twin (in `dir/twin`).
pub fn start(env: &Setup<'_>, v: &Variant, dir: &Path) -> Result<Servers> {
    let main = start_variant(env, v, dir)?;
    let twin = if env.p.twin {
        let dir = dir.join("twin");
        Some(Running::triage_on(
            env.tb,
            ServerSide::Twin,
            &env.o.triage_bin,
            &format!("triage serve (twin of {})", v.name),
            &[TriageSite {
                name: SITE_A.into(),
                root: env.root.to_owned(),
                bin: env.bin.to_owned(),
                cgroups: true,
                container: Some("res-a".into()),
                cpu_max: None,
                weight: None,
                max_running: env.o.max_running.0,
                slice: env.o.cgi_slice.0,
                one_budget: None,
            }],
            Duration::from_secs(600),
            &dir,
        )?)
    } else {
        None
    };
    Ok(Servers { main, twin })
}

fn start_variant(env: &Setup<'_>, v: &Variant, dir: &Path) -> Result<Running> {
    let site = |name: &str, container: &str, weight: Option<u32>| TriageSite {
        name: name.into(),
        root: env.root.to_owned(),
        bin: env.bin.to_owned(),
        cgroups: true,
        container: Some(container.into()),
        cpu_max: None,
        weight,
        max_running: env.o.max_running.0,
        slice: env.o.cgi_slice.0,
        one_budget: None,
    };
    let sites = match v.kind {
        Kind::Weights(a, b) => vec![
            site(SITE_A, "res-a", Some(a)),
            site(SITE_B, "res-b", Some(b)),
        ],
        Kind::Shared => vec![site(SITE_A, "shared", None), site(SITE_B, "shared", None)],
        Kind::Apache => {
            return Running::apache(
                env.tb,
                env.root,
                env.bin,
                &[SITE_A, SITE_B],
                &Prefork {
                    start: 16,
                    min_spare: 8,
                    max_spare: 64,
                    max_workers: 256,
                },
                dir,
            )
        }
    };
    Running::triage(
        env.tb,
        &env.o.triage_bin,
        &format!("triage serve ({})", v.name),
        &sites,
        Duration::from_secs(600),
        dir,
    )
}

/// Measure one point against the running server `srv`: both sites' closed-loop clients over
/// the window, the sites' container CPU and the server's own.
pub fn measure(
    env: &Setup<'_>,
    srvs: &Servers,
    v: &Variant,
    n: usize,
    rep: usize,
    seq: usize,
) -> Result<Point> {
    let tb = env.tb;
    let srv = &srvs.main;
    let window = Duration::from_secs_f64(env.p.window_s);
    let warm = Duration::from_secs_f64(env.p.warmup_s);
    let cg = tb.server_cgroup().ok_or_else(|| {
        LabError::Os("the testbed has no server cgroup: the lab needs one".into())
    })?;
    let path = "/cgi-bin/rand.pl";
    let b = if n > 0 {
        Some(ClosedLoop::start(tb, srv.addr, path, SITE_B, n)?)
    } else {
        None
    };
    let a = ClosedLoop::start(tb, srv.addr, path, SITE_A, env.p.clients)?;
    let twin = match &srvs.twin {
        Some(t) => Some(ClosedLoop::start(tb, t.addr, path, SITE_A, env.p.clients)?),
        None => None,
    };
    crate::signals::sleep(warm)?;
    // The containers' counters are read right at the window's ends (`dt`); the server's own
    // counters around them (they carry their own timestamps).
    let s0 = CpuSnap::take(cg, srv);
    let m0 = srv.cgi_cpu(tb);
    let t0 = Instant::now();
    crate::signals::sleep(window)?;
    let t1 = Instant::now();
    let m1 = srv.cgi_cpu(tb);
    let s1 = CpuSnap::take(cg, srv);
    let a_samples = a.stop();
    let b_samples = b.map(ClosedLoop::stop).unwrap_or_default();
    let twin_samples = twin.map(ClosedLoop::stop);
    let mut strays = kill_strays(cg, srv, Duration::from_secs(2));
    if let Some(t) = &srvs.twin {
        if let Some(tcg) = t.cgroup(tb) {
            strays += kill_strays(tcg, t, Duration::from_secs(2));
        }
    }
    let dt = t1.duration_since(t0).as_secs_f64();
    let (server_cpu, cgi_cpu) = s0.shares(&s1);
    let is_triage = srv.only.is_some();
    let (a_stats, b_stats) = (
        window_stats(&a_samples, t0, t1),
        window_stats(&b_samples, t0, t1),
    );
    let done = (a_stats.completed + b_stats.completed).max(1) as f64;
    let (vol, invol) = s0.switches(&s1);
    let shared = v.kind == Kind::Shared;
    let cpu = |site: &str| -> Option<f64> {
        if shared {
            return None;
        }
        let (x, y) = (m0.as_ref()?.get(site)?, m1.as_ref()?.get(site)?);
        Some((y - x) / dt / env.capacity * 100.0)
    };
    Ok(Point {
        variant: v.name.clone(),
        rep,
        seq,
        competitors: n,
        window_s: dt,
        a: a_stats,
        b: b_stats,
        twin_a: twin_samples.map(|s| window_stats(&s, t0, t1)),
        a_cpu_pct: cpu(SITE_A),
        b_cpu_pct: cpu(SITE_B),
        server_cpu_pct: is_triage.then(|| server_cpu / env.capacity * 100.0),
        side_cpu_pct: (server_cpu + cgi_cpu) / env.capacity * 100.0,
        server_switches_per_req: is_triage.then(|| (vol as f64 / done, invol as f64 / done)),
        strays_killed: strays,
    })
}

/// How a point went, in one progress line.
pub fn describe(pt: &Point) -> String {
    format!(
        "site of interest {:.1} req/s{}, {:.0} ms mean; competitor {:.1} req/s{}",
        pt.a.rps,
        pt.twin_a.as_ref().map_or(String::new(), |t| format!(
            " (x{:.3} the twin's {:.1})",
            pt.a.rps / t.rps,
            t.rps
        )),
        pt.a.mean_ms,
        pt.b.rps,
        match (pt.a_cpu_pct, pt.b_cpu_pct) {
            (Some(x), Some(y)) => format!("; CPU {x:.1}% / {y:.1}%"),
            _ => String::new(),
        }
    )
}

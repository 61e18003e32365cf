//! The lab's parameters resolved from its options ([`Params`]), the servers ([`Server`]) and
//! the measuring order ([`sessions`]): per server and repetition one session; within it, per
//! cold count (ascending, so cold connections are only ever added), wrk's saturation run, the
//! open loop's overload run (the measured saturation of the traffic the rates send), the
//! rates from low to high, and at a cold count above 0 the paired CPU-per-request runs
//! against a twin server holding none.

use std::time::Duration;

use serde::Serialize;

use super::opts::{EventsOpts, Page};
use crate::error::{LabError, Result};
use crate::harness::Session;
use crate::peers::{EventHandler, Peer};

/// A server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// `triage serve` (epoll through tokio).
    Triage,
    /// nginx, one process (epoll).
    Nginx,
    /// lighttpd on `linux-sysepoll`.
    LighttpdEpoll,
    /// lighttpd on `poll`.
    LighttpdPoll,
    /// lighttpd on `select`.
    LighttpdSelect,
}

/// Every server, in measuring order.
pub const ALL: [Server; 5] = [
    Server::Triage,
    Server::Nginx,
    Server::LighttpdEpoll,
    Server::LighttpdPoll,
    Server::LighttpdSelect,
];

/// select's descriptor limit (glibc's FD_SETSIZE): lighttpd on select holds no more.
pub const FD_SETSIZE: usize = 1024;

impl Server {
    /// The name in reports and flags.
    pub fn name(self) -> &'static str {
        match self {
            Server::Triage => "triage",
            Server::Nginx => "nginx",
            Server::LighttpdEpoll => "lighttpd-epoll",
            Server::LighttpdPoll => "lighttpd-poll",
            Server::LighttpdSelect => "lighttpd-select",
        }
    }

    /// The server named `s`.
    pub fn parse(s: &str) -> Option<Server> {
        ALL.into_iter().find(|v| v.name() == s)
    }

    /// The peer it is, if it is one.
    pub fn peer(self) -> Option<Peer> {
        match self {
            Server::Triage => None,
            Server::Nginx => Some(Peer::Nginx),
            _ => Some(Peer::Lighttpd),
        }
    }

    /// lighttpd's readiness interface.
    pub fn handler(self) -> Option<EventHandler> {
        match self {
            Server::LighttpdEpoll => Some(EventHandler::Epoll),
            Server::LighttpdPoll => Some(EventHandler::Poll),
            Server::LighttpdSelect => Some(EventHandler::Select),
            _ => None,
        }
    }
}

/// What one point measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Step {
    /// wrk's closed loop as fast as the server goes: the rate grid's first reference.
    Saturate,
    /// The open loop offered [`OVERLOAD`] times wrk's peak: what it serves is the saturation
    /// of the rates' own traffic, the rate the prediction is checked against.
    Overload,
    /// Alternating short wrk runs against this server (cold connections held) and its twin
    /// (none), in the same cgroup: CPU per request in pairs, seconds apart.
    Pairs,
    /// Open loop at `frac` of the peak just measured (rate number `idx`, from 0).
    Rate {
        /// Which rate, from 0.
        idx: usize,
        /// Fraction of the measured saturation (the overload run's served rate).
        frac: f64,
    },
    /// Open loop at the rate the saturation search ([`super::search::SatSearch`]) asks for
    /// next, after the ladder (probe number `idx`, from 0).
    Probe {
        /// Which probe, from 0.
        idx: usize,
    },
}

/// One point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EvPoint {
    /// The server.
    pub server: Server,
    /// Repetition, from 0.
    pub rep: usize,
    /// Cold connections held.
    pub cold: usize,
    /// What is measured.
    pub step: Step,
}

/// The parameters every point uses.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Cold counts, ascending.
    pub cold: Vec<usize>,
    /// Rate fractions of the peak, ascending.
    pub fracs: Vec<f64>,
    /// Window of each point (s).
    pub window_s: u64,
    /// Pairs of CPU-per-request runs at each cold count above 0 (0: none, no twin).
    pub pairs: usize,
    /// Window of each run of a pair (s).
    pub pair_window_s: u64,
    /// Repetitions.
    pub reps: usize,
    /// Probes of the saturation search after each cold count's ladder.
    pub probes: usize,
    /// What the measured saturation is: where the CPU ran out, or the highest rate sustained.
    pub saturation: super::opts::Saturation,
    /// Hot connections.
    pub hot_conns: usize,
    /// Whether the client side runs real-time (`SCHED_FIFO`) while it measures: asked for
    /// with `--client-sched fifo`, and refused (not root) turned off with a note.
    pub client_fifo: bool,
    /// What the capacity runs request (`gzip` or `small`); the cold connections and the
    /// pairs ask for the small file.
    pub page: Page,
    /// The path the capacity runs request.
    pub page_path: &'static str,
    /// Its size (bytes, as stored).
    pub page_bytes: usize,
    /// The zlib level every server compresses it at (the gzip page only).
    pub gzip_level: Option<u32>,
    /// CPU quota of the server side in the capacity runs (fraction of one CPU; `None`: no
    /// quota, the whole server CPU).
    pub quota: Option<f64>,
    /// CPU quota of the server side during the pairs (the small file; `None`: none).
    pub pairs_quota: Option<f64>,
    /// CFS period of the quotas (ms): the server is throttled for `(1 - quota) x period` of
    /// each period it exhausts its quota in.
    pub period_ms: f64,
    /// The servers asked for, in order.
    pub servers: Vec<Server>,
}

impl Params {
    /// The window as a duration.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_s)
    }

    /// The largest cold count.
    pub fn max_cold(&self) -> usize {
        self.cold.last().copied().unwrap_or(0)
    }

    /// The server side's capacity in the capacity runs (CPUs): its quota, or the whole CPU.
    /// Idle shares are of it.
    pub fn capacity(&self) -> f64 {
        self.quota.unwrap_or(1.0)
    }

    /// The server side's capacity during the pairs (CPUs).
    pub fn pairs_capacity(&self) -> f64 {
        self.pairs_quota.unwrap_or(1.0)
    }

    /// The capacity runs' page and budget in words, for the report and the table.
    pub fn page_and_budget(&self) -> String {
        let page = match self.gzip_level {
            Some(l) => format!(
                "{} ({} bytes of seeded text, compressed per request at gzip level {l}, \
                 Accept-Encoding: gzip)",
                self.page_path, self.page_bytes
            ),
            None => format!(
                "{} ({} bytes, sent as it is)",
                self.page_path, self.page_bytes
            ),
        };
        format!(
            "page {}: {page}, on {}; pairs on {SMALL_PATH} ({SMALL_BYTES} bytes), on {}",
            self.page.name(),
            budget(self.quota, self.period_ms),
            budget(self.pairs_quota, self.period_ms)
        )
    }
}

/// A CPU budget in words: `a 20% quota of 5 ms periods`, or `the whole CPU, no quota`.
pub fn budget(quota: Option<f64>, period_ms: f64) -> String {
    match quota {
        Some(q) => format!("a {:.0}% quota of {period_ms} ms periods", q * 100.0),
        None => "the whole CPU, no quota".into(),
    }
}

/// The small file: what the cold connections and the pairs request, and the capacity runs
/// with `--page small` (1 KiB of HTML).
pub const SMALL_PATH: &str = "/file.html";
/// Its size.
pub const SMALL_BYTES: usize = 1024;
/// The gzip page: what the capacity runs request with `--page gzip`.
pub const GZIP_PATH: &str = "/page.html";
/// Its size: 64 KiB of text, about 2 ms of zlib level 6 per request here.
pub const GZIP_BYTES: usize = 64 * 1024;

/// A quota as the kernel gets it: 100% of a CPU or more is none (the server has its CPU).
fn applied(q: f64) -> Option<f64> {
    (q < 1.0).then_some(q)
}

/// Lowest and highest rate, as fractions of the measured saturation.
pub const FRAC_RANGE: (f64, f64) = (0.10, 0.95);

/// The rates below the busy range: the lowest two of a ladder of [`DENSE_FROM_RATES`] or
/// more (Table 4's low end, where waking an idle server dominates the cost of a request).
pub const LOW_FRACS: [f64; 2] = [0.10, 0.30];

/// The busy range of the ladder starts here (a fraction of the measured saturation): the
/// prediction is fitted there, so that is where the rates are dense.
pub const BUSY_FROM: f64 = 0.50;

/// `--quick`'s ladder without `--rates`: the lowest rate and six over the busy range
/// (the 30% rate is below the prediction's cut, and each rate costs 4 s of the run).
pub const QUICK_FRACS: [f64; 7] = [0.10, 0.50, 0.59, 0.68, 0.77, 0.86, 0.95];

/// From this many rates on, the ladder is [`LOW_FRACS`] and the rest spread evenly over
/// [`BUSY_FROM`]..95% (fewer: evenly over [`FRAC_RANGE`]).
pub const DENSE_FROM_RATES: usize = 6;

/// The overload run offers this many times wrk's peak (the open loop's traffic costs the
/// servers more per request than wrk's, so its saturation lies below wrk's peak).
pub const OVERLOAD: f64 = 1.25;

/// Window of each run of a pair (s).
pub const PAIR_WINDOW_S: u64 = 1;

/// `n` fractions of the measured saturation, ascending: with [`DENSE_FROM_RATES`] or more,
/// the two [`LOW_FRACS`] and `n - 2` spread evenly over [`BUSY_FROM`]..95% (the busy range,
/// where the prediction's line is fitted, holds most of them); with fewer, spread evenly over
/// [`FRAC_RANGE`].
pub fn fracs(n: usize) -> Vec<f64> {
    let (lo, hi) = FRAC_RANGE;
    let spread = |n: usize, lo: f64| -> Vec<f64> {
        if n == 1 {
            return vec![hi];
        }
        (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect()
    };
    if n < DENSE_FROM_RATES {
        return spread(n, lo);
    }
    let mut v = LOW_FRACS.to_vec();
    v.extend(spread(n - LOW_FRACS.len(), BUSY_FROM));
    v
}

/// Resolve `o` into parameters (an error names a bad option).
pub fn resolve(o: &EventsOpts) -> Result<Params> {
    let bad = |m: String| Err(LabError::Config(m));
    let mut cold = o.cold.clone().unwrap_or_else(|| {
        if o.quick {
            vec![0, 10_000]
        } else {
            vec![0, 1_000, 5_000, 10_000]
        }
    });
    cold.sort_unstable();
    cold.dedup();
    if cold.is_empty() {
        return bad("--cold needs at least one count".into());
    }
    let rates = o
        .rates
        .unwrap_or(if o.quick { QUICK_FRACS.len() } else { 10 });
    if rates < 3 {
        return bad(format!(
            "--rates {rates}: a regression needs at least 3 rates"
        ));
    }
    let window = o.window.unwrap_or(Duration::from_secs(3));
    if window.subsec_nanos() != 0 {
        return bad("--window must be whole seconds".into());
    }
    let reps = o.reps.unwrap_or(if o.quick { 1 } else { 3 });
    let pairs = o.pairs;
    if reps == 0 || o.hot_conns == 0 {
        return bad("--reps and --hot-conns must be at least 1".into());
    }
    let servers = match &o.servers {
        Some(v) => v
            .iter()
            .map(|s| {
                Server::parse(s).ok_or_else(|| {
                    LabError::Config(format!(
                        "unknown server `{s}` (one of {})",
                        ALL.map(Server::name).join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?,
        None if o.quick => ALL[..4].to_vec(),
        None => ALL.to_vec(),
    };
    if servers.is_empty() {
        return bad("--servers names none".into());
    }
    let period_us = o.period.as_micros() as f64;
    let quota = o.quota.map_or(o.page.default_quota(), applied);
    let pairs_quota = applied(o.pairs_quota);
    for (flag, q) in [("--quota", quota), ("--pairs-quota", pairs_quota)] {
        let Some(q) = q else { continue };
        if !(1_000.0..=1_000_000.0).contains(&period_us) || q * period_us < 1_000.0 {
            return bad(format!(
                "{flag} {:.0}% of --period {:?}: the kernel takes periods of 1 ms to 1 s and a \
                 quota of at least 1 ms per period (at this quota: a period of at least {:.2} \
                 ms)",
                q * 100.0,
                o.period,
                1.0 / q
            ));
        }
    }
    let (page_path, page_bytes, gzip_level) = match o.page {
        Page::Gzip => (GZIP_PATH, GZIP_BYTES, Some(o.gzip_level)),
        Page::Small => (SMALL_PATH, SMALL_BYTES, None),
    };
    Ok(Params {
        cold,
        fracs: match o.rates {
            None if o.quick => QUICK_FRACS.to_vec(),
            _ => fracs(rates),
        },
        window_s: window.as_secs(),
        pairs,
        pair_window_s: PAIR_WINDOW_S,
        reps,
        probes: o.probes,
        saturation: o.saturation,
        hot_conns: o.hot_conns,
        client_fifo: o.client_sched == super::opts::ClientSched::Fifo,
        page: o.page,
        page_path,
        page_bytes,
        gzip_level,
        quota,
        pairs_quota,
        period_ms: period_us / 1e3,
        servers,
    })
}

/// The sessions in measuring order: repetitions outermost, servers inside (interleaved), and
/// in each session every cold count with its saturation run and rates.
pub fn sessions(p: &Params) -> Vec<Session<EvPoint>> {
    let mut out = Vec::new();
    for rep in 0..p.reps {
        for &server in &p.servers {
            let mut points = Vec::new();
            for &cold in &p.cold {
                let pt = |step| EvPoint {
                    server,
                    rep,
                    cold,
                    step,
                };
                points.push(pt(Step::Saturate));
                points.push(pt(Step::Overload));
                for (idx, &frac) in p.fracs.iter().enumerate() {
                    points.push(pt(Step::Rate { idx, frac }));
                }
                for idx in 0..p.probes {
                    points.push(pt(Step::Probe { idx }));
                }
                if cold > 0 && p.pairs > 0 {
                    points.push(pt(Step::Pairs));
                }
            }
            out.push(Session {
                variant: server.name().into(),
                dir: format!("{}-r{rep}", server.name()),
                points,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn quick_and_full_plans() {
        let mut o = EventsOpts::new(PathBuf::from("/bin/true"));
        let p = resolve(&o).unwrap();
        assert_eq!(p.cold, [0, 1000, 5000, 10000]);
        assert_eq!((p.fracs.len(), p.window_s, p.reps), (10, 3, 3));
        assert_eq!(p.servers.len(), 5);
        assert!((p.fracs[0] - 0.10).abs() < 1e-12 && (p.fracs[9] - 0.95).abs() < 1e-12);
        // Dense in the busy range: 0.10, 0.30, then 0.50 to 0.95 in 8 steps.
        assert!((p.fracs[1] - 0.30).abs() < 1e-12 && (p.fracs[2] - 0.50).abs() < 1e-12);
        assert!(p.fracs.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(p.fracs.iter().filter(|&&f| f >= BUSY_FROM).count(), 8);
        // Few rates: evenly over the whole range.
        let f = fracs(4);
        assert!((f[1] - (0.10 + 0.85 / 3.0)).abs() < 1e-12, "{f:?}");
        assert_eq!(fracs(1), [0.95]);
        assert_eq!(p.pairs, 12);
        o.quick = true;
        let p = resolve(&o).unwrap();
        assert_eq!(p.cold, [0, 10000]);
        assert_eq!(
            p.servers,
            [
                Server::Triage,
                Server::Nginx,
                Server::LighttpdEpoll,
                Server::LighttpdPoll
            ]
        );
        let s = sessions(&p);
        assert_eq!(s.len(), 4);
        assert_eq!((p.fracs.len(), p.window_s, p.probes), (7, 3, 5));
        // The busy range as in a ladder of 8, without its 30% rate.
        let eight = fracs(8);
        assert_eq!(p.fracs[0], eight[0]);
        for (q, e) in p.fracs[1..].iter().zip(&eight[2..]) {
            assert!((q - e).abs() < 1e-12, "{:?} {eight:?}", p.fracs);
        }
        // 0 cold: saturate, overload, 7 rates, 5 probes; 10000: the same and the pairs.
        assert_eq!(s[0].points.len(), 14 + 15);
        assert_eq!(s[0].points[0].step, Step::Saturate);
        assert_eq!(s[0].points[1].step, Step::Overload);
        assert_eq!(s[0].points[9].step, Step::Probe { idx: 0 });
        assert_eq!(s[0].points[14].cold, 10000);
        assert_eq!(s[0].points[28].step, Step::Pairs);
        o.pairs = 0;
        assert_eq!(sessions(&resolve(&o).unwrap())[0].points.len(), 28);
        o.pairs = 8;
        assert_eq!(s[3].dir, "lighttpd-poll-r0");
        o.servers = Some(vec!["apache".into()]);
        assert!(resolve(&o)
            .unwrap_err()
            .to_string()
            .contains("unknown server"));
        o.servers = None;
        o.rates = Some(2);
        assert!(resolve(&o).is_err());
        o.rates = None;
        o.cold = Some(vec![10, 0, 10]);
        assert_eq!(resolve(&o).unwrap().cold, [0, 10]);
        // The gzip page by default: no quota on the capacity runs nor on the pairs.
        let d = resolve(&o).unwrap();
        assert_eq!(
            (d.page_path, d.page_bytes, d.gzip_level),
            ("/page.html", 65536, Some(6))
        );
        assert_eq!((d.quota, d.pairs_quota, d.capacity()), (None, None, 1.0));
        assert!(d
            .page_and_budget()
            .contains("on the whole CPU, no quota; pairs on /file.html"));
        // 20% of 4 ms is 0.8 ms: under the kernel's 1 ms quota; 5 ms gives 1 ms. Both
        // quotas are checked.
        o.quota = Some(0.2);
        o.period = Duration::from_millis(4);
        let e = resolve(&o).unwrap_err().to_string();
        assert!(
            e.contains("--quota 20%") && e.contains("at least 5.00 ms"),
            "{e}"
        );
        o.quota = Some(1.0);
        o.pairs_quota = 0.2;
        let e = resolve(&o).unwrap_err().to_string();
        assert!(e.contains("--pairs-quota 20%"), "{e}");
        o.pairs_quota = 1.0;
        let w = resolve(&o).unwrap();
        assert_eq!(
            (w.quota, w.pairs_quota, w.pairs_capacity()),
            (None, None, 1.0)
        );
        o.period = Duration::from_millis(5);
        o.pairs_quota = 0.2;
        assert_eq!(resolve(&o).unwrap().period_ms, 5.0);
        // The small file takes the 20% quota unless told otherwise.
        o.quota = None;
        o.page = Page::Small;
        let sm = resolve(&o).unwrap();
        assert_eq!(
            (sm.page_path, sm.gzip_level, sm.quota),
            ("/file.html", None, Some(0.2))
        );
        assert!(sm.page_and_budget().contains("20% quota of 5 ms periods"));
    }
}

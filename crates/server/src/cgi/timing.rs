//! Where a CGI request's time goes, per class of what the script served (text, media,
//! unknown: its `Content-Type`, known only once it printed it): `gate`, the wait for the gate's
//! slot and the preparing burst; `start`, the fork and exec until it runs; the script's
//! life split by the kernel's own accounting (`/proc/<pid>/schedstat`, read when the script
//! has exited and before it is reaped) into running, waiting for a CPU (run queue, throttled
//! time included) and the rest (blocked, or exited and not yet seen to: the exit counts as
//! the earlier of its reaping and the end of its output), and the relay's tail after the
//! script exited; `total` runs from asking the gate to the end of the output.
//! Beside each part, `thr_<part>` is the time the server's own cgroup was throttled (its CPU
//! quota spent) during that part (`os::cgroup::OwnThrottle`, read at each mark; 0 without a
//! quota): how much of a hand-off is the quota rather than the order of the run queue.
//! Summed per class in [`ClassTimes`] (admin `/metrics`: `triage_cgi_time_seconds_total` and
//! `triage_cgi_timed_total`); the labs turn them into means per script.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use os::procfs::SchedStat;
use policy::ContentClass;

/// The parts a request's time is split into, in the order they happen (metric label `part`).
pub const PARTS: [&str; 13] = [
    "gate",
    "start",
    "run",
    "runq",
    "blocked",
    "relay",
    "total",
    "raised",
    "thr_gate",
    "thr_start",
    "thr_life",
    "thr_relay",
    "thr_total",
];

/// A moment of a request: when, and the server's cgroup's throttled time then (ns; 0 without
/// a quota or a readable `cpu.stat`).
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    /// When.
    pub at: Instant,
    /// The own cgroup's throttled time at that moment (ns), to subtract from a later one.
    pub throttled_ns: u64,
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        Stamp {
            at: Instant::now(),
            throttled_ns: throttled_ns(),
        }
    }
}

/// The own cgroup's throttled time (ns), from one `cpu.stat` kept open for the process.
fn throttled_ns() -> u64 {
    static OWN: std::sync::OnceLock<Option<os::cgroup::OwnThrottle>> = std::sync::OnceLock::new();
    OWN.get_or_init(os::cgroup::OwnThrottle::open)
        .as_ref()
        .and_then(|t| t.throttled())
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The classes (metric label `class`).
pub const CLASSES: [&str; 3] = ["text", "media", "unknown"];

fn class_index(c: ContentClass) -> usize {
    match c {
        ContentClass::Text => 0,
        ContentClass::Media => 1,
        ContentClass::Unknown => 2,
    }
}

/// Sums per class (nanoseconds; `raised` counts scripts started raised).
#[derive(Debug, Default)]
pub struct ClassTimes {
    /// Requests timed, per class.
    count: [AtomicU64; 3],
    /// Per class, per part of [`PARTS`].
    sums: [[AtomicU64; 13]; 3],
}

impl ClassTimes {
    /// Requests timed in class `c` (a name of [`CLASSES`]).
    pub fn count(&self, c: usize) -> u64 {
        self.count[c].load(Relaxed)
    }

    /// The sum of part `p` of class `c` (indices into [`CLASSES`] and [`PARTS`]).
    pub fn sum(&self, c: usize, p: usize) -> u64 {
        self.sums[c][p].load(Relaxed)
    }

    fn add(&self, c: usize, parts: [u64; 13]) {
        self.count[c].fetch_add(1, Relaxed);
        for (s, v) in self.sums[c].iter().zip(parts) {
            s.fetch_add(v, Relaxed);
        }
    }
}

/// What one request has recorded so far.
#[derive(Debug)]
struct Marks {
    /// The request asked the gate for its preparing burst.
    arrived: Stamp,
    /// The gate granted it and the preparing burst ended.
    granted: Stamp,
    /// The script was running (forked and exec'd).
    spawned: Stamp,
    /// It was started raised (the CGI lever).
    raised: bool,
    /// What it served.
    class: ContentClass,
    /// It exited, with the kernel's accounting of it (if it could be read).
    exited: Option<(Stamp, Option<SchedStat>)>,
    /// Its output was relayed to its end.
    relayed: Option<Stamp>,
}

/// One request's timing, shared by the relay (the end of the output) and the reaper (the
/// script's exit); recorded into [`ClassTimes`] when both are done and the last holder drops
/// it. A request that did not complete (client gone, error) is not recorded.
#[derive(Debug)]
pub struct ScriptTiming {
    /// Where it is recorded.
    times: Arc<ClassTimes>,
    /// The marks, set from two tasks.
    marks: Mutex<Marks>,
}

impl ScriptTiming {
    /// A script of a request that asked the gate at `arrived`, was granted at `granted`, and
    /// runs since `spawned`.
    pub fn new(
        times: Arc<ClassTimes>,
        arrived: Stamp,
        granted: Stamp,
        spawned: Stamp,
        raised: bool,
    ) -> Self {
        Self {
            times,
            marks: Mutex::new(Marks {
                arrived,
                granted,
                spawned,
                raised,
                class: ContentClass::Unknown,
                exited: None,
                relayed: None,
            }),
        }
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the script serves (its `Content-Type`).
    pub fn class(&self, c: ContentClass) {
        self.marks().class = c;
    }

    /// The script exited (read before it was reaped).
    pub fn exited(&self, sched: Option<SchedStat>) {
        self.marks().exited = Some((Stamp::now(), sched));
    }

    /// Its output was relayed to the end.
    pub fn relayed(&self) {
        self.marks().relayed = Some(Stamp::now());
    }
}

impl Drop for ScriptTiming {
    fn drop(&mut self) {
        let m = self.marks();
        let (Some((exit, sched)), Some(relayed)) = (m.exited, m.relayed) else {
            return;
        };
        let ns = |a: Stamp, b: Stamp| b.at.saturating_duration_since(a.at).as_nanos() as u64;
        let thr = |a: Stamp, b: Stamp| b.throttled_ns.saturating_sub(a.throttled_ns);
        // The exit is seen when the server's thread reaps the script, which may be late; the
        // end of its output (it closes its stdout when it exits) bounds it too.
        let exit = if relayed.at < exit.at { relayed } else { exit };
        let life = ns(m.spawned, exit);
        let s = sched.unwrap_or_default();
        let parts = [
            ns(m.arrived, m.granted),
            ns(m.granted, m.spawned),
            s.run_ns,
            s.wait_ns,
            life.saturating_sub(s.run_ns + s.wait_ns),
            ns(exit, relayed),
            ns(m.arrived, relayed),
            u64::from(m.raised),
            thr(m.arrived, m.granted),
            thr(m.granted, m.spawned),
            thr(m.spawned, exit),
            thr(exit, relayed),
            thr(m.arrived, relayed),
        ];
        self.times.add(class_index(m.class), parts);
    }
}

/// Prometheus lines of one site's [`ClassTimes`].
pub fn render(out: &mut String, site: &str, t: &ClassTimes) {
    use std::fmt::Write as _;
    for (c, class) in CLASSES.iter().enumerate() {
        let _ = writeln!(
            out,
            "triage_cgi_timed_total{{site=\"{site}\",class=\"{class}\"}} {}",
            t.count(c)
        );
        for (p, part) in PARTS.iter().enumerate() {
            let v = t.sum(c, p);
            if *part == "raised" {
                let _ = writeln!(
                    out,
                    "triage_cgi_timed_raised_total{{site=\"{site}\",class=\"{class}\"}} {v}"
                );
            } else {
                let _ = writeln!(
                    out,
                    "triage_cgi_time_seconds_total{{site=\"{site}\",class=\"{class}\",part=\"{part}\"}} {:.6}",
                    v as f64 / 1e9
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_completed_request_is_split_into_its_parts_an_incomplete_one_is_not_recorded() {
        let times = Arc::new(ClassTimes::default());
        let ms = Duration::from_millis;
        // The request arrived 100 ms ago; it exits and is relayed now.
        let t0 = Instant::now() - ms(100);
        let at = |d: u64, thr: u64| Stamp {
            at: t0 + ms(d),
            throttled_ns: thr,
        };
        let t = ScriptTiming::new(times.clone(), at(0, 0), at(5, 4), at(7, 6), true);
        t.class(ContentClass::Media);
        t.exited(Some(SchedStat {
            run_ns: 10_000_000,
            wait_ns: 30_000_000,
            slices: 9,
        }));
        t.relayed();
        drop(t);
        let media = 1;
        assert_eq!(times.count(media), 1);
        assert_eq!(times.count(0), 0);
        let part = |p: &str| times.sum(media, PARTS.iter().position(|x| *x == p).unwrap());
        assert_eq!(part("gate"), 5_000_000);
        assert_eq!(part("start"), 2_000_000);
        assert_eq!(part("run"), 10_000_000);
        assert_eq!(part("runq"), 30_000_000);
        assert_eq!(part("raised"), 1);
        // Throttled time between the marks (the exit and the relay read it now: at least
        // what the spawn read, never less).
        assert_eq!(part("thr_gate"), 4);
        assert_eq!(part("thr_start"), 2);
        // Life (spawned -> exit: 93 ms at least) is run + runq + blocked.
        assert!(part("blocked") >= 53_000_000, "{}", part("blocked"));
        assert!(part("total") >= 100_000_000);
        // No exit seen (client gone): nothing recorded.
        let t = ScriptTiming::new(times.clone(), at(0, 0), at(0, 0), at(0, 0), false);
        t.relayed();
        drop(t);
        assert_eq!(times.count(2) + times.count(0) + times.count(media), 1);
        let mut out = String::new();
        render(&mut out, "a", &times);
        assert!(
            out.contains(
                "triage_cgi_time_seconds_total{site=\"a\",class=\"media\",part=\"runq\"} 0.030000"
            ),
            "{out}"
        );
        assert!(out.contains("triage_cgi_timed_total{site=\"a\",class=\"media\"} 1"));
    }
}

//! Where a CGI request's time goes, per class of what the script served (text, media,
//! unknown: its `Content-Type`, known only once it printed it): `gate`, the wait for the gate's
//! slot and the preparing burst; `start`, the fork and exec until it runs; the script's
//! life split by the kernel's own accounting (`/proc/<pid>/schedstat`, read when the script
//! has exited and before it is reaped) into running, waiting for a CPU (run queue, throttled
//! time included) and the rest (blocked, or exited and not yet seen to: the exit counts as
//! the earlier of its reaping and the end of its output), and the relay's tail after the
//! script exited; `total` runs from asking the gate to the end of the output.
//! Summed per class in [`ClassTimes`] (admin `/metrics`: `triage_cgi_time_seconds_total` and
//! `triage_cgi_timed_total`); the labs turn them into means per script.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use os::procfs::SchedStat;
use policy::ContentClass;

/// The parts a request's time is split into, in the order they happen (metric label `part`).
pub const PARTS: [&str; 8] = [
    "gate", "start", "run", "runq", "blocked", "relay", "total", "raised",
];

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
    sums: [[AtomicU64; 8]; 3],
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

    fn add(&self, c: usize, parts: [u64; 8]) {
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
    arrived: Instant,
    /// The gate granted it and the preparing burst ended.
    granted: Instant,
    /// The script was running (forked and exec'd).
    spawned: Instant,
    /// It was started raised (the CGI lever).
    raised: bool,
    /// What it served.
    class: ContentClass,
    /// It exited, with the kernel's accounting of it (if it could be read).
    exited: Option<(Instant, Option<SchedStat>)>,
    /// Its output was relayed to its end.
    relayed: Option<Instant>,
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
        arrived: Instant,
        granted: Instant,
        spawned: Instant,
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
        self.marks().exited = Some((Instant::now(), sched));
    }

    /// Its output was relayed to the end.
    pub fn relayed(&self) {
        self.marks().relayed = Some(Instant::now());
    }
}

impl Drop for ScriptTiming {
    fn drop(&mut self) {
        let m = self.marks();
        let (Some((exit, sched)), Some(relayed)) = (m.exited, m.relayed) else {
            return;
        };
        let ns = |a: Instant, b: Instant| b.saturating_duration_since(a).as_nanos() as u64;
        // The exit is seen when the server's thread reaps the script, which may be late; the
        // end of its output (it closes its stdout when it exits) bounds it too.
        let exit = exit.min(relayed);
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
        let t = ScriptTiming::new(times.clone(), t0, t0 + ms(5), t0 + ms(7), true);
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
        // Life (spawned -> exit: 93 ms at least) is run + runq + blocked.
        assert!(part("blocked") >= 53_000_000, "{}", part("blocked"));
        assert!(part("total") >= 100_000_000);
        // No exit seen (client gone): nothing recorded.
        let t = ScriptTiming::new(times.clone(), t0, t0, t0, false);
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

//! One budget per resource container (seed 003): a container capped at `cap` CPUs spends at
//! most `cap` on everything done on its behalf, the server's own work for its sites (bursts in
//! the gate) and its processes (CGI scripts in its cgroup) together.
//!
//! The two are enforced by two mechanisms (the gate's `share` cap and the kernel's cgroup
//! cap), so the budget is split between them every period ([`split`]), from what each side
//! used in the period before:
//! - a side that was held back by its part (the gate queued the server's work at its cap, the
//!   kernel throttled the processes: [`Used::server_held`], [`Used::procs_held`]) or used at
//!   least [`SATURATED`] of it is taken to want more; a side that used less wants what it used
//!   plus a quarter, plus [`FLOOR`] (room to grow);
//! - max-min fairness: each side gets what it wants up to half the cap, and what one side
//!   leaves goes to the other; when both want more than half, each gets half;
//! - each side keeps at least [`FLOOR`] (the kernel's smallest quota is 1 ms per 100 ms
//!   period), and the two always add up to the cap.
//!
//! The mechanisms do not hold their parts exactly. The kernel refills a cgroup's quota
//! whenever its `cpu.max` is written, even with the same value, so a part written mid-period
//! can be spent twice in that period (rewriting it every period let a container capped at 0.3
//! CPU spend 0.46); and the gate lets a burst that started under the cap run to its end. So:
//! - the processes' part is rewritten only when the fair split moves it by at least
//!   [`REWRITE_STEP`] of the cap; meanwhile the server's part takes up the difference
//!   ([`settle`]: the gate's cap can change every period at no cost);
//! - the budget is one *account* ([`Ledger`]): what both sides spent above the cap is a debt,
//!   and the next periods split less than the cap ([`Ledger::budget`]), taken from the
//!   server's part first, until it is paid back. Over any stretch of periods the two sides
//!   together spend at most the cap, plus the overrun not yet paid back.
//!
//! Pure: the mechanism (the server) measures, calls [`Ledger::record`], [`split`],
//! [`Ledger::budget`] and [`settle`], and applies the result.

/// The smallest share of the budget either side keeps (CPUs).
pub const FLOOR: f64 = 0.01;

/// A side that used at least this fraction of its share in a period is taken to want more.
pub const SATURATED: f64 = 0.9;

/// How a container's budget is split for the next period, in CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The server's own work for the container (the gate's cap for it, in process CPU).
    pub server: f64,
    /// The container's processes (its cgroup's cap).
    pub procs: f64,
}

impl Split {
    /// The first split: half each.
    pub fn even(cap: f64) -> Split {
        Split {
            server: cap / 2.0,
            procs: cap / 2.0,
        }
    }
}

/// What one period used, in CPUs (CPU time over the period's length), and whether each side
/// was held back by its part.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Used {
    /// The server's own work for the container.
    pub server: f64,
    /// The container's processes.
    pub procs: f64,
    /// The gate held the server's work back at the container's cap during the period. The
    /// gate enforces its cap in slot time, which is more than the CPU the bursts get when they
    /// are preempted, so the CPU used alone can say "idle" of a side that is starved.
    pub server_held: bool,
    /// The kernel throttled the processes at their part during the period (`nr_throttled`).
    pub procs_held: bool,
}

/// Periods over which a debt is paid back: the next period's budget is the cap less this
/// fraction of the debt per period (paying it all at once would swing both parts to their floor
/// and back, and every change of the processes' part costs a kernel refill).
pub const PAYBACK_PERIODS: f64 = 5.0;

/// The processes' part is rewritten only when the fair split moves it by at least this fraction
/// of the cap (every write refills the kernel's quota: see the module docs).
pub const REWRITE_STEP: f64 = 0.1;

/// The account of a budget across periods: CPU time spent above the cap, not yet paid back.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Ledger {
    /// CPU-seconds spent above the cap and not yet paid back (never negative: budget left unused
    /// in a quiet period is not saved up for a busy one, as a cap is a ceiling at every moment).
    pub debt: f64,
}

impl Ledger {
    /// Record a period of `dt` seconds in which both sides together used `used` of a budget
    /// capped at `cap` CPUs: spending above the cap adds to the debt, spending below pays it.
    pub fn record(&mut self, cap: f64, used: Used, dt: f64) {
        if !(dt > 0.0 && dt.is_finite() && cap.is_finite()) {
            return;
        }
        let total = used.server.max(0.0) + used.procs.max(0.0);
        self.debt = (self.debt + (total - cap) * dt).max(0.0);
    }

    /// What to split for the next period of `period` seconds: the cap less the part of the debt
    /// due in it ([`PAYBACK_PERIODS`]), never less than both sides' floors (`2 * FLOOR`, or the
    /// cap if smaller), so that neither side is ever left without a part.
    pub fn budget(&self, cap: f64, period: f64) -> f64 {
        if !(cap > 0.0 && cap.is_finite()) {
            return 0.0;
        }
        let due = if period > 0.0 {
            self.debt / (PAYBACK_PERIODS * period)
        } else {
            0.0
        };
        (cap - due).max((2.0 * FLOOR).min(cap))
    }
}

/// What a side wants next, from what it used under its last share and whether it was held back.
fn want(used: f64, share: f64, floor: f64, held: bool) -> f64 {
    if held || used >= SATURATED * share {
        f64::INFINITY
    } else {
        used * 1.25 + floor
    }
}

/// The split of `cap` for the next period, from the last split and what it used. See the
/// module docs.
pub fn split(cap: f64, last: Split, used: Used) -> Split {
    if !(cap > 0.0 && cap.is_finite()) {
        return Split {
            server: 0.0,
            procs: 0.0,
        };
    }
    let floor = FLOOR.min(cap / 2.0);
    let ws = want(used.server.max(0.0), last.server, floor, used.server_held);
    let wp = want(used.procs.max(0.0), last.procs, floor, used.procs_held);
    let half = cap / 2.0;
    let mut s = ws.min(half).max(floor);
    let mut p = wp.min(half).max(floor);
    let left = (cap - s - p).max(0.0);
    match (ws > s, wp > p) {
        (true, false) => s += left,
        (false, true) => p += left,
        // Both want more, or neither: share what is left.
        _ => {
            s += left / 2.0;
            p += left / 2.0;
        }
    }
    Split {
        server: s,
        procs: p,
    }
}

/// The parts to apply for the next period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settled {
    /// The server's part and the processes' part (together at most the budget, unless both
    /// floors exceed it).
    pub split: Split,
    /// Whether the processes' part must be written to the cgroup (it differs from `written`).
    pub write: bool,
}

/// Periods between two writes of the processes' part that lowers it or raises it from above
/// [`QUICK_RAISE`] of the cap. Every write refills the kernel's quota, so a part written every
/// period is a part spent up to twice in each: when a debt shrank the budget period after
/// period, the lowered part was written every period and the scripts spent 2 to 3 times it
/// (cgroup v2 reproduction: 0.1 CPU under a 0.04 part), which grew the debt that lowered it.
pub const MIN_WRITE_PERIODS: u32 = 10;

/// A raise of the processes' part from at most this fraction of the cap is written at once:
/// its refill costs at most the small part in force, and processes held at their floor while
/// the server is idle should not wait [`MIN_WRITE_PERIODS`].
pub const QUICK_RAISE: f64 = 0.25;

/// The processes' part as last written to the cgroup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Written {
    /// The part (CPUs).
    pub part: f64,
    /// Periods since it was written (0: in the period that just ended).
    pub age: u32,
}

/// The parts to apply for the next period: the processes get their part of the fair split
/// `fair` (from [`split`] of the cap), or keep `written` (the part the cgroup holds now) while
/// that is within [`REWRITE_STEP`] of the cap of it and within the budget, or while it is too
/// soon to write again ([`MIN_WRITE_PERIODS`], [`QUICK_RAISE`]); the server gets what is left
/// of `budget` ([`Ledger::budget`]: the debt comes out of its part first) once the processes'
/// *expected use* is set aside: their part if they were held back by it or used at least
/// [`SATURATED`] of it (`procs_used`, the last period's [`Used`]), else what they used plus a
/// quarter. So a budget whose processes are idle goes almost whole to the server, instead of
/// leaving the processes' floor (a sixth of a 0.06 CPU cap) unused; the cgroup keeps its part as
/// a limit, and what the processes spend of it beyond their expected use is a debt ([`Ledger`])
/// the next periods pay back. The processes' part shrinks below the fair one only when the
/// server's would otherwise fall under its floor.
pub fn settle(
    cap: f64,
    budget: f64,
    fair: Split,
    written: Option<Written>,
    procs_used: Used,
) -> Settled {
    let floor = FLOOR.min(budget / 2.0).max(0.0);
    let room = (budget - floor).max(floor);
    let target = fair.procs.min(room).max(floor);
    let (procs, write) = match written {
        None => (target, true),
        Some(w) => {
            let moved = (w.part - target).abs() >= REWRITE_STEP * cap || w.part > room;
            let due =
                w.age + 1 >= MIN_WRITE_PERIODS || (target > w.part && w.part <= QUICK_RAISE * cap);
            if moved && due && w.part != target {
                (target, true)
            } else {
                (w.part, false)
            }
        }
    };
    let used = procs_used.procs.max(0.0);
    let expected = if procs_used.procs_held || used >= SATURATED * procs {
        procs
    } else {
        (used * 1.25).min(procs)
    };
    Settled {
        split: Split {
            server: (budget - expected).max(floor),
            procs,
        },
        write,
    }
}

/// A ratio of two quantities measured period by period (the process's CPU per CPU of the
/// gate's bursts; the gate's slot time per CPU of a container's bursts), read over the recent
/// periods: both sums decay by [`RecentRatio::DECAY`] per period, and the ratio is taken once
/// the denominator's sum reaches a minimum. Periods with little of the denominator (1 KB pages:
/// a few microseconds of burst each) add up to a reading instead of being dropped one by one,
/// which left the ratio at its first value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecentRatio {
    /// The numerator's decayed sum.
    num: f64,
    /// The denominator's decayed sum.
    den: f64,
    /// The last ratio read (kept while the denominator's sum is below the minimum).
    value: f64,
}

impl RecentRatio {
    /// Weight of the sums carried into the next period (about ten periods of memory).
    pub const DECAY: f64 = 0.9;

    /// A ratio of `initial` until a reading.
    pub fn new(initial: f64) -> RecentRatio {
        RecentRatio {
            num: 0.0,
            den: 0.0,
            value: initial,
        }
    }

    /// Add a period's `num` and `den` (non-negative); the ratio, read when the denominator's
    /// decayed sum is at least `min_den`, is kept within `lo..=hi`.
    pub fn add(&mut self, num: f64, den: f64, min_den: f64, lo: f64, hi: f64) -> f64 {
        if num.is_finite() && den.is_finite() && num >= 0.0 && den >= 0.0 {
            self.num = self.num * Self::DECAY + num;
            self.den = self.den * Self::DECAY + den;
        }
        if self.den >= min_den && self.den > 0.0 {
            self.value = (self.num / self.den).clamp(lo, hi);
        }
        self.value
    }

    /// The ratio now.
    pub fn get(&self) -> f64 {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Processes held back by their part: they are expected to spend all of it.
    const BUSY: Used = Used {
        server: 0.0,
        procs: 0.0,
        server_held: true,
        procs_held: true,
    };

    /// A part written long enough ago that any move may be written.
    fn old(part: f64) -> Option<Written> {
        Some(Written {
            part,
            age: MIN_WRITE_PERIODS,
        })
    }

    /// The cgroup of the loop models: the part in force and its age; `apply` returns what
    /// the processes may spend in the next period when they spend all they can: the new part,
    /// plus the old one in a period where it was written (the kernel's refill: what they spent
    /// before the write is forgotten).
    #[derive(Default)]
    struct Cg {
        written: Option<Written>,
        writes: usize,
    }

    impl Cg {
        fn apply(&mut self, s: &Settled) -> f64 {
            let before = self.written.map_or(0.0, |w| w.part);
            match (&mut self.written, s.write) {
                (w, true) => {
                    *w = Some(Written {
                        part: s.split.procs,
                        age: 0,
                    });
                    self.writes += 1;
                    s.split.procs + before
                }
                (Some(w), false) => {
                    w.age += 1;
                    w.part
                }
                (None, false) => s.split.procs,
            }
        }
    }

    #[test]
    fn both_saturated_get_half_and_sum_to_the_cap() {
        let cap = 0.3;
        let s = split(
            cap,
            Split::even(cap),
            Used {
                server: 0.15,
                procs: 0.15,
                ..Used::default()
            },
        );
        assert!(close(s.server, 0.15) && close(s.procs, 0.15), "{s:?}");
    }

    #[test]
    fn an_idle_side_leaves_its_share_to_the_busy_one() {
        let cap = 0.3;
        // No CGI: the server gets all but what the processes may grow into.
        let s = split(
            cap,
            Split::even(cap),
            Used {
                server: 0.15,
                procs: 0.0,
                ..Used::default()
            },
        );
        assert!(close(s.procs, FLOOR), "{s:?}");
        assert!(close(s.server + s.procs, cap), "{s:?}");
        // No static load: the scripts get the rest.
        let s = split(
            cap,
            Split::even(cap),
            Used {
                server: 0.02,
                procs: 0.15,
                ..Used::default()
            },
        );
        assert!(close(s.server, 0.02 * 1.25 + FLOOR), "{s:?}");
        assert!(close(s.server + s.procs, cap), "{s:?}");
    }

    #[test]
    fn a_side_that_was_held_back_grows_back_to_half() {
        let cap = 0.3;
        let mut last = Split {
            server: 0.29,
            procs: FLOOR,
        };
        // CGI arrives: it uses its whole floor, so it wants more; the server is busy too.
        for _ in 0..3 {
            last = split(
                cap,
                last,
                Used {
                    server: last.server,
                    procs: last.procs,
                    ..Used::default()
                },
            );
        }
        assert!(
            close(last.server, 0.15) && close(last.procs, 0.15),
            "{last:?}"
        );
    }

    #[test]
    fn overspending_is_a_debt_paid_back_by_smaller_budgets() {
        let cap = 0.3;
        let mut l = Ledger::default();
        // Within the cap: nothing owed, the whole cap is split.
        l.record(
            cap,
            Used {
                server: 0.1,
                procs: 0.2,
                ..Used::default()
            },
            0.1,
        );
        assert!(close(l.debt, 0.0), "{l:?}");
        assert!(close(l.budget(cap, 0.1), cap));
        // A period at 0.45 (the processes spent their part twice): 0.015 CPU-s owed.
        l.record(
            cap,
            Used {
                server: 0.15,
                procs: 0.3,
                ..Used::default()
            },
            0.1,
        );
        assert!(close(l.debt, 0.015), "{l:?}");
        // Paid over PAYBACK_PERIODS periods: 0.075 CPU less per period.
        let b = l.budget(cap, 0.1);
        assert!(close(b, cap - 0.015 / (PAYBACK_PERIODS * 0.1)), "{b}");
        // Spending the smaller budget pays the debt; spending nothing does not bank credit.
        l.record(
            cap,
            Used {
                server: b / 2.0,
                procs: b / 2.0,
                ..Used::default()
            },
            0.1,
        );
        assert!(close(l.debt, 0.015 - (cap - b) * 0.1), "{l:?}");
        l.record(cap, Used::default(), 1.0);
        assert_eq!(l.debt, 0.0);
        assert!(close(l.budget(cap, 0.1), cap));
        // A huge debt leaves both floors, never nothing.
        l.debt = 10.0;
        assert!(close(l.budget(cap, 0.1), 2.0 * FLOOR));
        assert!(close(l.budget(0.015, 0.1), 0.015));
        assert_eq!(l.budget(0.0, 0.1), 0.0);
    }

    /// The whole loop against a model of the mechanisms: both sides always want more; the
    /// processes spend all their cgroup allows ([`Cg`]: the old part too in a period where a
    /// new one was written); the server spends its part and, every third period with
    /// `leak_server`, 30% more (a last burst), or with `debt_server` a third of the cap more
    /// than its part for the first 50 periods (CPU the budget did not see coming: a debt that
    /// shrinks the budget period after period, so the processes' part must come down).
    fn run_loop(cap: f64, leak_server: bool, debt_server: bool, n: usize) -> (f64, usize) {
        let dt = 0.1;
        let mut l = Ledger::default();
        let mut last = Split::even(cap);
        let mut cg = Cg::default();
        let mut procs_next = last.procs;
        let mut spent = 0.0;
        for i in 0..n {
            let extra = if leak_server && i % 3 == 0 { 1.3 } else { 1.0 };
            let unseen = if debt_server && i < 50 {
                cap * 0.6
            } else {
                0.0
            };
            let used = Used {
                server: last.server * extra + unseen,
                procs: procs_next,
                server_held: true,
                procs_held: true,
            };
            spent += (used.server + used.procs) * dt;
            l.record(cap, used, dt);
            let fair = split(cap, last, used);
            let s = settle(cap, l.budget(cap, dt), fair, cg.written, used);
            procs_next = cg.apply(&s);
            last = s.split;
        }
        (spent / (n as f64 * dt), cg.writes)
    }

    #[test]
    fn leaky_mechanisms_are_held_to_the_cap_on_average() {
        for cap in [0.06, 0.3, 1.0] {
            for (leak_server, debt_server) in [(false, false), (true, false), (false, true)] {
                let (avg, writes) = run_loop(cap, leak_server, debt_server, 400);
                assert!(
                    avg <= cap * 1.02 + 1e-9,
                    "cap {cap}: average {avg} ({writes} writes)"
                );
                assert!(
                    avg >= cap * 0.9,
                    "cap {cap}: average {avg}: the budget went unused"
                );
                // The processes' part settles: a handful of writes, not one per period (14
                // with a debt that lowers the budget period after period, were the part written
                // whenever it moves).
                assert!(writes <= 8, "cap {cap}: {writes} writes in 400 periods");
            }
        }
    }

    /// The server always wants more and spends its part; the processes are idle except for
    /// stretches of `on` periods every `every`, when they spend their whole cgroup part (twice
    /// it in a period where it was written). Returns the average spent and the server's
    /// average part over the idle periods.
    fn run_intermittent(cap: f64, every: usize, on: usize, n: usize) -> (f64, f64) {
        let dt = 0.1;
        let mut l = Ledger::default();
        let mut last = Split::even(cap);
        let mut cg = Cg::default();
        let mut procs_next = last.procs;
        let (mut spent, mut idle_server, mut idle_n) = (0.0, 0.0, 0);
        for i in 0..n {
            let busy = i % every < on;
            let used = Used {
                server: last.server,
                procs: if busy { procs_next } else { 0.0 },
                server_held: true,
                procs_held: busy,
            };
            spent += (used.server + used.procs) * dt;
            l.record(cap, used, dt);
            let fair = split(cap, last, used);
            let s = settle(cap, l.budget(cap, dt), fair, cg.written, used);
            procs_next = cg.apply(&s);
            last = s.split;
            if !busy && i % every > on + 5 {
                idle_server += last.server;
                idle_n += 1;
            }
        }
        (spent / (n as f64 * dt), idle_server / idle_n as f64)
    }

    #[test]
    fn idle_processes_leave_the_budget_to_the_server_within_the_cap() {
        for cap in [0.06, 0.3, 1.0] {
            let (avg, idle) = run_intermittent(cap, 40, 10, 2000);
            assert!(avg <= cap * 1.02 + 1e-9, "cap {cap}: average {avg}");
            assert!(avg >= cap * 0.9, "cap {cap}: average {avg}: budget unused");
            // Settled in an idle stretch: the server has the whole cap, not cap - FLOOR.
            assert!(
                idle >= cap * 0.99,
                "cap {cap}: server's part {idle} while idle"
            );
        }
        // One period's view: idle processes keep their cgroup part (a limit) but the server's
        // part is the whole budget; processes using a little are expected to use a quarter more.
        let idle = Used {
            server_held: true,
            ..Used::default()
        };
        let fair = split(0.06, Split::even(0.06), idle);
        assert!(close(fair.procs, FLOOR), "{fair:?}");
        let s = settle(0.06, 0.06, fair, None, idle);
        assert!(s.write && close(s.split.procs, FLOOR) && close(s.split.server, 0.06));
        let light = Used {
            procs: 0.004,
            ..Used::default()
        };
        let s = settle(0.06, 0.06, fair, old(FLOOR), light);
        assert!(!s.write && close(s.split.server, 0.06 - 0.005), "{s:?}");
    }

    #[test]
    fn a_recent_ratio_adds_up_small_periods() {
        let mut r = RecentRatio::new(1.0);
        // 0.1 ms of bursts per period, 5x as much process CPU: no single period reaches the
        // 0.5 ms minimum, the decayed sums do after a few.
        let mut reads = Vec::new();
        for _ in 0..10 {
            reads.push(r.add(0.5e-3, 0.1e-3, 0.5e-3, 1.0, 16.0));
        }
        assert!(close(reads[0], 1.0) && close(reads[3], 1.0), "{reads:?}");
        assert!(close(reads[9], 5.0), "{reads:?}");
        // Clamped, and kept through periods without the denominator.
        for _ in 0..10 {
            r.add(0.1, 1e-3, 0.5e-3, 1.0, 16.0);
        }
        assert!(close(r.get(), 16.0));
        for _ in 0..100 {
            r.add(0.0, 0.0, 0.5e-3, 1.0, 16.0);
        }
        assert!(close(r.get(), 16.0), "{r:?}");
        // It follows a change within a few tens of periods.
        for _ in 0..60 {
            r.add(2e-3, 1e-3, 0.5e-3, 1.0, 16.0);
        }
        assert!((r.get() - 2.0).abs() < 0.05, "{r:?}");
        // Bad input is ignored.
        let before = r;
        r.add(f64::NAN, -1.0, 0.5e-3, 1.0, 16.0);
        assert!(r.get() == before.get());
    }

    #[test]
    fn a_side_held_back_wants_more_whatever_it_used() {
        let cap = 0.3;
        // The gate held the server's work at its part, although its bursts got little CPU
        // (preempted): it is starved, not idle, and the busy processes do not take its half.
        let s = split(
            cap,
            Split::even(cap),
            Used {
                server: 0.01,
                procs: 0.15,
                server_held: true,
                procs_held: false,
            },
        );
        assert!(close(s.server, 0.15) && close(s.procs, 0.15), "{s:?}");
        // Without the signal the server would shrink to what it used.
        let s = split(
            cap,
            Split::even(cap),
            Used {
                server: 0.01,
                procs: 0.15,
                ..Used::default()
            },
        );
        assert!(s.server < 0.05, "{s:?}");
        // Throttled processes want more too.
        let s = split(
            cap,
            Split {
                server: 0.25,
                procs: 0.05,
            },
            Used {
                server: 0.1,
                procs: 0.02,
                procs_held: true,
                ..Used::default()
            },
        );
        assert!(close(s.server, 0.1 * 1.25 + FLOOR), "{s:?}");
        assert!(close(s.procs, cap - s.server), "{s:?}");
    }

    #[test]
    fn the_processes_part_is_rewritten_only_when_it_moves() {
        let cap = 0.3;
        let fair = Split {
            server: 0.12,
            procs: 0.18,
        };
        // Nothing written yet: write the fair part.
        let s = settle(cap, cap, fair, None, BUSY);
        assert!(s.write && close(s.split.procs, 0.18) && close(s.split.server, 0.12));
        // Close to what is written: keep it, the server gets the rest of the budget.
        let s = settle(cap, cap, fair, old(0.16), BUSY);
        assert!(
            !s.write && close(s.split.procs, 0.16) && close(s.split.server, 0.14),
            "{s:?}"
        );
        // Moved by a tenth of the cap or more: write.
        let s = settle(cap, cap, fair, old(0.14), BUSY);
        assert!(s.write && close(s.split.procs, 0.18), "{s:?}");
        // The same value is never rewritten.
        assert!(!settle(cap, cap, fair, old(0.18), BUSY).write);
        // A debt comes out of the server's part first...
        let s = settle(cap, 0.25, fair, old(0.18), BUSY);
        assert!(!s.write && close(s.split.server, 0.07), "{s:?}");
        // ...and out of the processes' only below the server's floor.
        let s = settle(cap, 0.15, fair, old(0.18), BUSY);
        assert!(s.write, "{s:?}");
        assert!(
            close(s.split.procs, 0.15 - FLOOR) && close(s.split.server, FLOOR),
            "{s:?}"
        );
        // Too soon after the last write: a lower part waits (the server at its floor)...
        let recent = Some(Written {
            part: 0.18,
            age: MIN_WRITE_PERIODS.saturating_sub(2),
        });
        let s = settle(cap, 0.15, fair, recent, BUSY);
        assert!(!s.write && close(s.split.procs, 0.18), "{s:?}");
        assert!(close(s.split.server, FLOOR), "{s:?}");
        // ...until MIN_WRITE_PERIODS periods have passed;
        let due = Some(Written {
            part: 0.18,
            age: MIN_WRITE_PERIODS - 1,
        });
        assert!(settle(cap, 0.15, fair, due, BUSY).write);
        // a raise from a small part is written at once (its refill costs little).
        let small = Some(Written {
            part: FLOOR,
            age: 0,
        });
        let s = settle(cap, cap, fair, small, BUSY);
        assert!(s.write && close(s.split.procs, 0.18), "{s:?}");
        let big = Some(Written { part: 0.09, age: 0 });
        assert!(!settle(cap, cap, fair, big, BUSY).write);
    }

    #[test]
    fn always_within_the_cap_and_above_the_floor() {
        for cap in [0.015, 0.05, 0.3, 1.0, 3.0] {
            for us in [0.0, 0.01, 0.1, 0.5, 5.0] {
                for up in [0.0, 0.01, 0.1, 0.5, 5.0] {
                    let s = split(
                        cap,
                        Split::even(cap),
                        Used {
                            server: us,
                            procs: up,
                            ..Used::default()
                        },
                    );
                    assert!(s.server + s.procs <= cap + 1e-9, "{cap} {s:?}");
                    let floor = FLOOR.min(cap / 2.0);
                    assert!(
                        s.server >= floor - 1e-12 && s.procs >= floor - 1e-12,
                        "{s:?}"
                    );
                }
            }
        }
        let z = split(0.0, Split::even(0.3), Used::default());
        assert_eq!((z.server, z.procs), (0.0, 0.0));
    }
}

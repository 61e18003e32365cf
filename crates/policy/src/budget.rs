//! One budget per resource container (seed 003): a container capped at `cap` CPUs spends at
//! most `cap` on everything done on its behalf, the server's own work for its sites (bursts in
//! the gate) and its processes (CGI scripts in its cgroup) together.
//!
//! The two are enforced by two mechanisms (the gate's `share` cap and the kernel's cgroup
//! cap), so the budget is split between them every period ([`split`]), from what each side
//! used in the period before:
//! - a side that used at least [`SATURATED`] of its share is taken to want more (it was held
//!   back); a side that used less wants what it used plus a quarter, plus [`FLOOR`] (room to
//!   grow);
//! - max-min fairness: each side gets what it wants up to half the cap, and what one side
//!   leaves goes to the other; when both want more than half, each gets half;
//! - each side keeps at least [`FLOOR`] (the kernel's smallest quota is 1 ms per 100 ms
//!   period), and the two always add up to the cap.
//!
//! Pure: the mechanism (the server) measures, calls [`split`], and applies the result.

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

/// What one period used, in CPUs (CPU time over the period's length).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Used {
    /// The server's own work for the container.
    pub server: f64,
    /// The container's processes.
    pub procs: f64,
}

/// What a side wants next, from what it used under its last share.
fn want(used: f64, share: f64, floor: f64) -> f64 {
    if used >= SATURATED * share {
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
    let ws = want(used.server.max(0.0), last.server, floor);
    let wp = want(used.procs.max(0.0), last.procs, floor);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
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
                },
            );
        }
        assert!(
            close(last.server, 0.15) && close(last.procs, 0.15),
            "{last:?}"
        );
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

//! Buckets that follow a load test's rate ladder (`triage capacity --steps`): instead of
//! fixed-width buckets, one bucket per *step*, a run of whole seconds whose request counts stay
//! at one rate, so that no bucket mixes two rates and none cuts a step in two. Seconds between
//! steps (the ramp from one rate to the next, a pause) form runs shorter than the shortest
//! step and are counted as outside, not used. Pure.
//!
//! Why: a rate ladder (any load generator stepping its rate every few seconds) gives a handful
//! of steady rates; fixed buckets that straddle two steps make points between them, on no
//! rate the server really ran at, and the fit then differs from the one over the steps
//! themselves. Nothing here knows who made the ladder: the steps are read off the log.
//!
//! A second joins the current run when its count lies within [`STEP_SIGMAS`] Poisson standard
//! deviations or [`STEP_REL`] of the run's mean count so far, whichever is wider; runs shorter
//! than a step that lie, with a neighbouring run, within [`FRAGMENT_REL`] of their joint mean
//! are one step ([`merge_fragments`]: a step near saturation, where the server falls behind
//! and catches up); a lone partial second at either end of a step ([`PARTIAL_MIN`]) is counted
//! in with its fraction.

use super::bucket::{Bucket, Bucketed, Overlap};
use super::cpu_csv::{at, CpuSample};
use super::regress::MIN_POINTS;
use super::CapacityError;

/// A second belongs to the current step when its count lies within this many Poisson standard
/// deviations (sqrt of the mean) of the step's mean count.
pub const STEP_SIGMAS: f64 = 3.0;

/// A lone second beside a step holding at least this fraction of the step's rate (and at
/// most all of it) is the step's partial first or last second: a step that starts or ends
/// inside a second (an overloaded step's drain runs on into the next) leaves one there; one
/// between two steps with no pause is the earlier step's, its partial last second or, under
/// this fraction of that step's rate, its drain. It
/// is counted in with the fraction of a second it stands for, and the whole second's CPU
/// (the rest of it is the pause beside the step); under this fraction it is taken for the
/// seconds between steps (a short drain, a pause), which are left out.
pub const PARTIAL_MIN: f64 = 0.5;

/// ... or within this fraction of that mean, whichever is wider (open-loop load generators
/// hold their rate within a few percent; the server's own hiccups move a second more than
/// Poisson noise does at high rates).
pub const STEP_REL: f64 = 0.05;

/// Runs shorter than the shortest step whose seconds lie, together with a neighbouring run's,
/// within this fraction of their joint mean count (or [`STEP_SIGMAS`] Poisson standard
/// deviations, whichever is wider) are one step: near saturation a server falls behind and
/// catches up, and the requests it completes move by 5-8% from one second to the next (a
/// step of 6833 req/s logged 6506, 6836 and 7152), more than [`STEP_REL`]. A second that far
/// from its neighbours' rate is a whole second of their step, not a partial one.
pub const FRAGMENT_REL: f64 = 0.10;

/// A step fell behind when its drain ([`Bucket::drain_requests`]) is more than this share of
/// its requests. The lab counts an open-loop run as not sustained when it served under 97% of
/// its rate over its window (from its start to its last response): a 3 s run whose last
/// response came more than 0.093 s after its rate ended. Its drain is smaller than that time
/// at the rate served (the last responses of a queue come sparser): the threshold is chosen
/// on the lab's saved ladders, where it catches most of the rates that failed on "served"
/// with idle left and few of the sustained ones (docs/results-log.md).
pub const DRAIN_SHARE_MAX: f64 = 0.02;

/// Whether the step `b` fell behind its rate: its drain is more than [`DRAIN_SHARE_MAX`] of
/// its requests. Out of CPU for the knee (`super::analyze::bucket_fit`), as the lab counts a
/// run not sustained.
pub fn fell_behind(b: &Bucket) -> bool {
    b.drain_requests as f64 > DRAIN_SHARE_MAX * b.requests as f64
}

/// The runs of [`steps_of`] with the fragments joined: a run shorter than `min_s` seconds
/// joins its neighbour (itself a fragment or a step) when every second of the two lies within
/// [`FRAGMENT_REL`] (or [`STEP_SIGMAS`] Poisson standard deviations) of their joint mean. Two
/// runs each at least `min_s` long are never joined: they are two steps. In order, covering
/// every second.
pub fn merge_fragments(
    counts: &[u64],
    runs: &[(usize, usize)],
    min_s: usize,
) -> Vec<(usize, usize)> {
    let within = |a: usize, len: usize| {
        let v = &counts[a..a + len];
        let mean = v.iter().sum::<u64>() as f64 / len as f64;
        let tol = (STEP_SIGMAS * mean.max(1.0).sqrt()).max(FRAGMENT_REL * mean);
        v.iter().all(|&c| (c as f64 - mean).abs() <= tol)
    };
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &(a, len) in runs {
        match out.last_mut() {
            Some(g) if (g.1 < min_s || len < min_s) && within(g.0, g.1 + len) => g.1 += len,
            _ => out.push((a, len)),
        }
    }
    out
}

/// The steps of whole seconds in the request `times` (seconds since the epoch) within the span
/// the CPU `samples` cover, each at least `min_s` seconds long, as buckets (each with its own
/// width). Requests in shorter runs or outside the samples are counted as outside. Errors as
/// [`super::bucket::bucketize`]'s: no overlap, fewer than [`MIN_POINTS`] steps.
pub fn bucketize_steps(
    times: &[i64],
    samples: &[CpuSample],
    min_s: u64,
) -> Result<Bucketed, CapacityError> {
    if min_s == 0 {
        return Err(CapacityError::Config("--steps must be at least 1s".into()));
    }
    let ov = Overlap::of(times, samples)?;
    let (o0, o1) = (ov.start, ov.end);
    let first = o0.ceil() as i64;
    let end = o1.floor() as i64;
    if end <= first {
        return Err(ov.none());
    }
    let n = (end - first) as usize;
    let mut counts = vec![0u64; n];
    let mut outside = 0u64;
    for &t in times {
        if t >= first && t < end {
            counts[(t - first) as usize] += 1;
        } else {
            outside += 1;
        }
    }
    let runs = merge_fragments(&counts, &steps_of(&counts), min_s as usize);
    // First the steps and the partial seconds they claim, then each step's drain: the second
    // after a step is its drain unless the next step claimed it as its partial first second.
    let mut claimed = vec![false; runs.len()];
    let mut steps = Vec::new();
    for (i, &(a, len)) in runs.iter().enumerate() {
        if (len as u64) < min_s {
            continue;
        }
        let full: u64 = counts[a..a + len].iter().sum();
        let rate = full as f64 / len as f64;
        // A lone second on either side holding part of this step's rate is the step's own
        // partial second (the step started or ended inside it): counted in, with the fraction
        // of a second it stands for.
        let edge = |j: usize, claimed: &mut Vec<bool>| -> Option<(u64, f64)> {
            let (b, l) = runs[j];
            let c = counts[b];
            let f = c as f64 / rate;
            (l == 1 && !claimed[j] && (PARTIAL_MIN..=1.0).contains(&f)).then(|| {
                claimed[j] = true;
                (c, f)
            })
        };
        // A lone second between two steps, with no pause on either side, is the earlier
        // step's (its partial last second, or its drain): a load test that steps on whole
        // seconds, as the lab's does, leaves the queue of a step that fell behind there, and
        // it can hold half the next step's rate (lead-evq8: 197 requests after a step of 399
        // req/s, before one of 391).
        let after_a_step = i >= 2 && runs[i - 2].1 as u64 >= min_s;
        let head = if i > 0 && !after_a_step {
            edge(i - 1, &mut claimed)
        } else {
            None
        };
        let tail = if i + 1 < runs.len() {
            edge(i + 1, &mut claimed)
        } else {
            None
        };
        claimed[i] = true;
        steps.push((i, full, rate, head, tail));
    }
    let mut buckets = Vec::new();
    for &(i, full, rate, head, tail) in &steps {
        let (a, len) = runs[i];
        let (hc, hf) = head.unwrap_or((0, 0.0));
        let (tc, tf) = tail.unwrap_or((0, 0.0));
        // The second after the step (after its partial last second), when it holds less than
        // a partial second would: what it holds was served after the step's rate ended, its
        // drain. A second holding more (a step that caught up, the next step's first second)
        // is not a drain. When the step started inside a second (a claimed partial first
        // second: a ladder not aligned on whole seconds), its last second holds the rest of
        // that second of its own (a step of whole seconds that started 0.4 s into one ends
        // 0.4 s into another): the drain is what its last second and the one after hold
        // beyond that.
        let next = i + 1 + usize::from(tail.is_some());
        let after = match runs.get(next) {
            Some(&(b, l))
                if (l as u64) < min_s
                    && !claimed[next]
                    && (counts[b] as f64) < PARTIAL_MIN * rate =>
            {
                counts[b]
            }
            _ => 0,
        };
        let drain = if head.is_some() {
            ((tc + after) as f64 - (1.0 - hf) * rate).max(0.0).round() as u64
        } else {
            after
        };
        // The CPU of the whole seconds, partial ones included: the rest of a partial second
        // is the pause beside the step, where the server used next to nothing, and CPU within
        // a second is not spread evenly (a drain comes first), so it is not interpolated.
        // Its shares are of the capacity over the step's span, whole plus partial seconds.
        let s = first + a as i64 - i64::from(head.is_some());
        let e = first + (a + len) as i64 + i64::from(tail.is_some());
        let x = at(samples, s as f64).expect("inside the samples' span");
        let y = at(samples, e as f64).expect("inside the samples' span");
        let d = y.minus(&x);
        let span = len as f64 + hf + tf;
        let capacity = (d.user_s + d.system_s + d.idle_s) / (e - s) as f64 * span;
        let pct = |v: f64| {
            if capacity > 0.0 {
                100.0 * v / capacity
            } else {
                0.0
            }
        };
        let reqs = full + hc + tc;
        let (user_pct, kernel_pct) = (pct(d.user_s), pct(d.system_s));
        buckets.push(Bucket {
            start_unix: first + a as i64,
            width_s: len as u64,
            edge_s: hf + tf,
            requests: reqs,
            drain_requests: drain,
            rate: reqs as f64 / span,
            user_pct,
            kernel_pct,
            idle_pct: 100.0 - user_pct - kernel_pct,
        });
    }
    let used: u64 = buckets.iter().map(|b| b.requests).sum();
    outside += counts.iter().sum::<u64>() - used;
    if buckets.len() < MIN_POINTS {
        return Err(CapacityError::TooFewBuckets {
            got: buckets.len(),
            need: MIN_POINTS,
            width_s: min_s,
            overlap_s: o1 - o0,
        });
    }
    Ok(Bucketed {
        width_s: min_s,
        steps: true,
        buckets,
        requests_outside: outside,
    })
}

/// The runs of `counts` (one per second) at one rate: (first index, length), in order,
/// covering every second.
pub fn steps_of(counts: &[u64]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut sum = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        let len = i - start;
        if len > 0 {
            let mean = sum as f64 / len as f64;
            let tol = (STEP_SIGMAS * mean.max(1.0).sqrt()).max(STEP_REL * mean);
            if (c as f64 - mean).abs() > tol {
                out.push((start, len));
                start = i;
                sum = 0;
            }
        }
        sum += c;
    }
    if start < counts.len() {
        out.push((start, counts.len() - start));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ladder_splits_at_its_steps_and_drops_the_seconds_between() {
        // 3 s at 100/s, a 1 s pause (2 requests), 3 s at 300/s, a ramp second at 200, 3 s at
        // 500 with Poisson-sized noise.
        let c = [100, 97, 104, 2, 300, 310, 291, 200, 500, 520, 489];
        assert_eq!(
            steps_of(&c),
            [(0, 3), (3, 1), (4, 3), (7, 1), (8, 3)],
            "{c:?}"
        );
        assert!(steps_of(&[]).is_empty());
        assert_eq!(steps_of(&[5]), [(0, 1)]);
        // A steady rate stays one step however long.
        assert_eq!(steps_of(&[1000; 50]), [(0, 50)]);
    }

    #[test]
    fn a_step_near_saturation_stays_one_step_however_uneven_its_seconds() {
        // Per-second counts of the lab's own logs (cap8-quick4 nginx at 10000 cold, offered
        // 5539, 6186, 6833 req/s; cap8-quick5 triage at 10000, offered 8284 and 9252), each
        // step after a drain second: near saturation the server falls behind and catches up.
        let c = [
            5533, 5534, 5538, 11, 6108, 6252, 6186, 13, 6506, 6836, 7152, 7, 8210, 7971, 8654, 17,
            9243, 8612, 9832, 70,
        ];
        let runs = merge_fragments(&c, &steps_of(&c), 2);
        let steps: Vec<(usize, usize)> = runs.into_iter().filter(|r| r.1 >= 2).collect();
        assert_eq!(steps, [(0, 3), (4, 3), (8, 3), (12, 3), (16, 3)], "{c:?}");
        // Two steps of 2 s or more are never joined, however close their rates.
        let c = [1000, 1000, 1040, 1040];
        assert_eq!(merge_fragments(&c, &[(0, 2), (2, 2)], 2), [(0, 2), (2, 2)]);
        // Nor is a second 20% off its neighbours, nor a drain second.
        let c = [1000, 1000, 800, 3];
        let runs = merge_fragments(&c, &steps_of(&c), 2);
        assert_eq!(runs, [(0, 2), (2, 1), (3, 1)]);
    }

    /// Requests and CPU samples second by second from `first`: for each second, its requests
    /// (all stamped with that second) and the user and system CPU it used (of one CPU).
    fn per_second(
        first: i64,
        seconds: impl IntoIterator<Item = (usize, f64, f64)>,
    ) -> (Vec<i64>, Vec<CpuSample>) {
        let mut s = vec![CpuSample {
            unix_s: first as f64,
            user_s: 0.0,
            system_s: 0.0,
            idle_s: 0.0,
        }];
        let mut times = Vec::new();
        for (k, (n, user, system)) in seconds.into_iter().enumerate() {
            let p = *s.last().unwrap();
            s.push(CpuSample {
                unix_s: p.unix_s + 1.0,
                user_s: p.user_s + user,
                system_s: p.system_s + system,
                idle_s: p.idle_s + 1.0 - user - system,
            });
            times.extend(std::iter::repeat_n(first + k as i64, n));
        }
        (times, s)
    }

    #[test]
    fn steps_become_buckets_with_their_own_width_and_cpu() {
        // Samples every second from 1000 to 1012; CPU busy 0.1 + 0.001 * rate of one CPU.
        let rates = [100u64, 100, 100, 0, 300, 300, 300, 300, 0, 500, 500, 500];
        let (mut times, s) = per_second(
            1000,
            rates.map(|r| {
                (
                    r as usize,
                    (0.1 + 0.001 * r as f64) / 2.0,
                    (0.1 + 0.001 * r as f64) / 2.0,
                )
            }),
        );
        times.push(990); // before the samples
        let b = bucketize_steps(&times, &s, 2).unwrap();
        assert!(b.steps);
        let got: Vec<(i64, u64, f64)> = b
            .buckets
            .iter()
            .map(|x| (x.start_unix, x.width_s, x.rate))
            .collect();
        assert_eq!(got, [(1000, 3, 100.0), (1004, 4, 300.0), (1009, 3, 500.0)]);
        assert_eq!(b.requests_outside, 1);
        assert!((b.buckets[1].idle_pct - 60.0).abs() < 1e-9);
        // Steps of at least 4 s: only one left, an error that says so.
        let e = bucketize_steps(&times, &s, 4).unwrap_err().to_string();
        assert!(e.contains("1 bucket(s)"), "{e}");
        let e = bucketize_steps(&[5000], &s, 2).unwrap_err().to_string();
        assert!(e.contains("do not overlap"), "{e}");
        assert!(bucketize_steps(&times, &s, 0).is_err());
    }

    #[test]
    fn a_step_ending_inside_a_second_keeps_its_partial_last_second() {
        // Steps of 1000, 2000 and 3000 req/s over [1001, 1003.8), [1005, 1007.8) and
        // [1009, 1011.8) (an overloaded step's drain runs on into its last second; the
        // server is idle between steps). CPU (of one CPU): 0.0002 * rate while a step runs,
        // the whole of it in the first 0.8 s of the last second.
        let step = |t: f64| match t {
            t if (1001.0..1003.8).contains(&t) => 1000.0,
            t if (1005.0..1007.8).contains(&t) => 2000.0,
            t if (1009.0..1011.8).contains(&t) => 3000.0,
            _ => 0.0,
        };
        let (times, s) = per_second(
            1000,
            (1000..1012i64).map(|k| {
                // Tenths of a second.
                let n: f64 = (0..10)
                    .map(|i| step(k as f64 + i as f64 / 10.0) / 10.0)
                    .sum();
                (n.round() as usize, 0.0002 * n, 0.0)
            }),
        );
        let b = bucketize_steps(&times, &s, 2).unwrap();
        let got: Vec<(i64, u64, f64, f64, f64)> = b
            .buckets
            .iter()
            .map(|x| (x.start_unix, x.width_s, x.edge_s, x.rate, x.idle_pct))
            .collect();
        let want = [
            (1001, 2, 0.8, 1000.0, 80.0),
            (1005, 2, 0.8, 2000.0, 60.0),
            (1009, 2, 0.8, 3000.0, 40.0),
        ];
        assert_eq!(got.len(), 3, "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1), (w.0, w.1), "{got:?}");
            for (x, y) in [(g.2, w.2), (g.3, w.3), (g.4, w.4)] {
                assert!((x - y).abs() < 1e-6, "{got:?}");
            }
        }
        assert_eq!(b.requests_outside, 0);
    }

    #[test]
    fn a_step_that_fell_behind_leaves_its_queue_in_the_next_second() {
        // Per-second counts of the lab's own log (cap11-quick2, nginx at 10000 cold), its
        // steps starting on whole seconds: offered 5662 and 6526 req/s, both sustained (6 and
        // 20 requests in the second after them, 0.04 and 0.1% of theirs), then 7390, which
        // fell behind (served 7049 over its window: 848 requests after its rate ended, 3.98%).
        let counts = [
            5651usize, 5663, 5668, 6, 6520, 6506, 6533, 20, 7187, 7542, 6593, 848, 0,
        ];
        let (times, s) = per_second(1000, counts.map(|n| (n, 0.3, 0.3)));
        let b = bucketize_steps(&times, &s, 2).unwrap();
        let got: Vec<(u64, u64, u64, bool)> = b
            .buckets
            .iter()
            .map(|x| (x.width_s, x.requests, x.drain_requests, fell_behind(x)))
            .collect();
        assert_eq!(
            got,
            [
                (3, 16982, 6, false),
                (3, 19559, 20, false),
                (3, 21322, 848, true)
            ]
        );
        // The threshold: just over it is behind, at it is not.
        let mut x = b.buckets[2];
        x.drain_requests = (DRAIN_SHARE_MAX * x.requests as f64).floor() as u64;
        assert!(!fell_behind(&x));
        x.drain_requests += 1;
        assert!(fell_behind(&x));
        // A second after the step holding more than a partial one would (a step that caught
        // up, a burst) is no drain: 15372 after 12970 and 12961 (cap11-quick2, lighttpd-poll
        // at 0 cold).
        let (times, s) = per_second(
            1000,
            [
                11000usize, 11000, 11000, 10, 12144, 12156, 12145, 24, 12970, 12961, 15372, 729, 0,
            ]
            .map(|n| (n, 0.4, 0.4)),
        );
        let b = bucketize_steps(&times, &s, 2).unwrap();
        let drains: Vec<u64> = b.buckets.iter().map(|x| x.drain_requests).collect();
        assert_eq!(drains, [10, 24, 0], "{:?}", b.buckets);
    }

    #[test]
    fn a_queue_between_two_steps_is_the_earlier_steps_drain() {
        // lead-evq8's triage at 10000 cold, steps on whole seconds: a step of 399 req/s that fell
        // behind left 197 requests in the second after it, right before the next step of
        // 391 req/s: half of that step's rate, but the earlier step's drain, not the later
        // step's partial first second.
        let counts = [
            377usize, 0, 421, 411, 401, 29, 389, 380, 428, 197, 392, 379, 403, 88, 0,
        ];
        let (times, s) = per_second(1000, counts.map(|n| (n, 0.4, 0.4)));
        let b = bucketize_steps(&times, &s, 2).unwrap();
        let got: Vec<(u64, u64, u64)> = b
            .buckets
            .iter()
            .map(|x| (x.width_s, x.requests, x.drain_requests))
            .collect();
        assert_eq!(got, [(3, 1233, 29), (3, 1197, 197), (3, 1174, 88)]);
        assert!(fell_behind(&b.buckets[1]));
    }

    #[test]
    fn a_ladder_not_aligned_on_whole_seconds_has_partial_last_seconds_not_drains() {
        // Steps of 3 s starting 0.4 s into a second, 1 s apart: 1000, 2000 and 3000 req/s.
        // Each step's first second holds 0.6 of its rate (its partial first second), its last
        // 0.4 (the rest of its third second): the step's own, not a drain.
        let sustained = [
            0usize, 600, 1000, 1000, 400, 0, 1200, 2000, 2000, 800, 0, 1800, 3000, 3000, 1200, 0,
        ];
        // Each step: (requests, drain requests, fell behind).
        let steps = |per_s: [usize; 16]| -> Vec<(u64, u64, bool)> {
            let (times, s) = per_second(1000, per_s.map(|n| (n, 0.3, 0.3)));
            let b = bucketize_steps(&times, &s, 2).unwrap();
            b.buckets
                .iter()
                .map(|x| (x.requests, x.drain_requests, fell_behind(x)))
                .collect()
        };
        assert_eq!(
            steps(sustained),
            [(2600, 0, false), (5200, 0, false), (7800, 0, false)]
        );
        // The third step offered 3000 req/s, served at 2700: of its 9000 requests 1620, 2700
        // and 2700 fall in its first three seconds, 1080 in the 0.4 s of its rate left and the
        // 900 queued after it in the next 0.33 s, 1980 in all (a partial last second of 0.73):
        // 900 beyond its own 0.4 s, 10% of its requests.
        let behind = [
            0usize, 600, 1000, 1000, 400, 0, 1200, 2000, 2000, 800, 0, 1620, 2700, 2700, 1980, 0,
        ];
        assert_eq!(
            steps(behind),
            [(2600, 0, false), (5200, 0, false), (9000, 900, true)]
        );
    }
}

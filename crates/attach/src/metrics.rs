//! What the daemon reports: a [`Snapshot`] it refreshes while it runs, rendered as
//! Prometheus text for `/metrics` and as the one-line summary printed on exit.

use std::fmt::Write;

use crate::hist::Hist;

/// The daemon's state at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The logger in use (`bpf` or `proc-poll`).
    pub logger: &'static str,
    /// The lever (`nice`, `nice+slice`, `weight`) or `none` (logging only).
    pub lever: &'static str,
    /// POS's counters and parameters, and the followed tasks' load.
    pub pos: policy::kpos::KposStats,
    /// Transitions received.
    pub events: u64,
    /// Transitions per second over the last second.
    pub events_per_s: f64,
    /// Events the kernel dropped (ring buffer full).
    pub dropped: u64,
    /// Lever calls that failed for another reason than the task being gone.
    pub lever_errors: u64,
    /// CPU time this daemon used (s).
    pub cpu_s: f64,
    /// Wall time since it started (s).
    pub wall_s: f64,
    /// Wake-ups of raised tasks: 0 when raised before the wake-up, else how long after it
    /// the lever was applied.
    pub wake_to_lever: Hist,
    /// Wake-ups of raised tasks that were raised before they woke.
    pub raised_before_wake: u64,
    /// Delay from a transition in the kernel to the daemon handling it.
    pub delivery: Hist,
    /// Time each call of the lever on POS's decisions took (a raise, a restore, a change of
    /// level): a nice value's `setpriority`, or the weight lever's cgroup write.
    pub lever_call: Hist,
}

impl Snapshot {
    /// The daemon's CPU as a share of one CPU.
    pub fn cpu_share(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }

    /// Prometheus text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let p = &self.pos;
        let _ = writeln!(
            o,
            "# triage pos attach (logger {}, lever {})",
            self.logger, self.lever
        );
        let g = |o: &mut String, name: &str, v: f64| {
            let _ = writeln!(o, "triage_attach_{name} {v}");
        };
        g(&mut o, "slp_seconds", p.slp as f64 / 1e9);
        g(&mut o, "rw", p.rw as f64);
        g(&mut o, "marks_total", p.marks as f64);
        g(&mut o, "demotions_total", p.demotions as f64);
        g(&mut o, "raises_total", p.raises as f64);
        g(&mut o, "lowers_total", p.lowers as f64);
        g(&mut o, "tasks", p.live as f64);
        g(&mut o, "raised", p.raised as f64);
        g(&mut o, "pl", p.load.pl);
        g(&mut o, "lrq", p.load.lrq);
        g(&mut o, "wake_delay_seconds", p.load.wake_delay as f64 / 1e9);
        g(&mut o, "bottleneck", f64::from(u8::from(p.load.bottleneck)));
        g(
            &mut o,
            "budget_seconds",
            p.budget.map_or(0.0, |b| b as f64 / 1e9),
        );
        g(&mut o, "budget_lowers_total", p.budget_lowers as f64);
        g(&mut o, "tail_head_raises_total", p.tail_head_raises as f64);
        g(&mut o, "companions_total", p.companions as f64);
        g(&mut o, "events_total", self.events as f64);
        g(&mut o, "events_per_second", self.events_per_s);
        g(&mut o, "events_dropped_total", self.dropped as f64);
        g(&mut o, "lever_errors_total", self.lever_errors as f64);
        g(&mut o, "cpu_seconds_total", self.cpu_s);
        g(&mut o, "cpu_share", self.cpu_share());
        g(
            &mut o,
            "raised_before_wake_total",
            self.raised_before_wake as f64,
        );
        for (name, h) in [
            ("wake_to_lever_seconds", &self.wake_to_lever),
            ("delivery_seconds", &self.delivery),
            ("lever_call_seconds", &self.lever_call),
        ] {
            for (le, c) in h.cumulative() {
                let le = le.map_or("+Inf".to_owned(), |us| format!("{}", us as f64 / 1e6));
                let _ = writeln!(o, "triage_attach_{name}_bucket{{le=\"{le}\"}} {c}");
            }
            let _ = writeln!(o, "triage_attach_{name}_sum {}", h.sum_ns() as f64 / 1e9);
            let _ = writeln!(o, "triage_attach_{name}_count {}", h.count());
        }
        o
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        let p = &self.pos;
        let q = |h: &Hist, q| h.quantile_us(q).map_or("-".into(), |u| format!("<={u}us"));
        format!(
            "tasks {} raised {} | SLP {:.1} ms RW {} | marks {} demotions {} | {:.0} ev/s \
             (dropped {}) | PL {:.2} LRQ {:.2} wake delay {:.2} ms bottleneck {} | budget {} \
             lowered {} | tail heads {} | own CPU {:.2}% | wake-to-lever p50 {} p99 {} \
             (raised before wake {}) | lever call p50 {} p99 {}",
            p.live,
            p.raised,
            p.slp as f64 / 1e6,
            p.rw,
            p.marks,
            p.demotions,
            self.events_per_s,
            self.dropped,
            p.load.pl,
            p.load.lrq,
            p.load.wake_delay as f64 / 1e6,
            p.load.bottleneck,
            p.budget
                .map_or("-".into(), |b| format!("{:.2} ms", b as f64 / 1e6)),
            p.budget_lowers,
            p.tail_head_raises,
            100.0 * self.cpu_share(),
            q(&self.wake_to_lever, 0.5),
            q(&self.wake_to_lever, 0.99),
            self.raised_before_wake,
            q(&self.lever_call, 0.5),
            q(&self.lever_call, 0.99),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series() {
        let mut s = Snapshot {
            logger: "bpf",
            lever: "nice",
            events: 10,
            cpu_s: 0.01,
            wall_s: 1.0,
            ..Default::default()
        };
        s.pos.marks = 3;
        s.wake_to_lever.record(0);
        s.wake_to_lever.record(70_000);
        let t = s.render();
        assert!(t.contains("triage_attach_marks_total 3"));
        assert!(t.contains("triage_attach_wake_to_lever_seconds_count 2"));
        assert!(t.contains("triage_attach_wake_to_lever_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(t.contains("triage_attach_cpu_share 0.01"));
        assert!(t.contains("triage_attach_budget_seconds 0"));
        assert!(s.line().contains("p99 <=128us"), "{}", s.line());
        s.lever_call.record(90_000);
        assert!(s
            .render()
            .contains("triage_attach_lever_call_seconds_count 1"));
        assert!(
            s.line().ends_with("lever call p50 <=128us p99 <=128us"),
            "{}",
            s.line()
        );
    }
}

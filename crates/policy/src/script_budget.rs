//! POS's characteristic 2 applied to a process the kernel runs (issue 16, the CGI lever): a
//! script started raised because its worker looked like text, that has then *run longer than
//! a text script runs*, shows the image behaviour and is lowered.
//!
//! A CPU-bound script never blocks, so it shows no run/wait change for RW to count: what it
//! shows is its own CPU time. The budget of a text script is learnt from the scripts' own
//! behaviour, not from what they serve (POS must work on opaque handlers): every script that
//! ends tells its CPU time; the lengths go into the same decaying histogram and two-means split
//! as the `split` RW rule ([`crate::predict::SplitRw`], [`crate::predict::Split::separated`]),
//! in units of [`UNIT`]; while the histogram shows two separated classes (short work and long
//! work), the **text budget** is the short class's longest CPU time. Without two separated
//! classes there is no budget and nothing is lowered by this rule (the worker's own run/wait
//! changes still are).
//!
//! The mechanism (`server::cgi::lever`) arms a check when a raised script starts, at the
//! budget (a script cannot use more CPU than the wall time that passed), reads the script's
//! CPU from the kernel then, and calls [`ScriptBudget::check`] again after the time the
//! verdict names. The histogram decays once per policy period in which scripts ended (`now` is passed in; no clock).
//!
//! **A program's previous executions** ([`ScriptBudget::predicts_long`]): seed 001's POS
//! (Program Oriented Schedule) alters a program's execution "according to the predicted
//! behavior from the previous execution(s)". A CGI script is a program run again and again;
//! every ending script also tells which program it ran (a key the mechanism derives from the
//! script's file), and a program whose last execution ran past the text budget is predicted
//! to show the image behaviour again: the mechanism starts it unraised even for a marked
//! worker (the worker's mark does not know which program its request will run). Only CPU
//! time is used, never what the script serves. A program whose behaviour changes is
//! predicted from its last execution, so one execution corrects the prediction.

use crate::predict::SplitRw;
use crate::Nanos;

/// Length unit of the histogram: 100 us of CPU (a 10 ms script is 100 units; the histogram's
/// bound, [`crate::predict::MAX_EPISODE`] units, is 1 s).
pub const UNIT: Nanos = 100_000;

/// What to do with a raised script after a look at its CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No budget is known (no two separated classes yet): leave it to its worker's rule.
    Unarmed,
    /// It has used more CPU than a text script does: lower it.
    Lower,
    /// Within the budget: look again after this much time (it cannot reach the budget sooner).
    RecheckAfter(Nanos),
}

/// The learnt text budget. See the module docs.
#[derive(Debug, Clone)]
pub struct ScriptBudget {
    /// CPU times of ended scripts, in [`UNIT`]s, decaying every period.
    hist: SplitRw,
    /// The policy period (the histogram halves once per period).
    period: Nanos,
    /// End of the current period (`None` before the first observation).
    period_end: Option<Nanos>,
    /// The CPU time of each program's last execution, by the mechanism's program key (at most
    /// [`MAX_PROGRAMS`]: past that, forgotten all at once).
    programs: std::collections::HashMap<u64, Nanos>,
}

/// The most programs whose last execution is remembered; one more and all are forgotten (a
/// server with more distinct scripts than this learns them again).
pub const MAX_PROGRAMS: usize = 4096;

impl ScriptBudget {
    /// Nothing learnt; the histogram decays every `period` (the policy's, e.g. 500 ms).
    pub fn new(period: Nanos) -> Self {
        Self {
            hist: SplitRw::new(),
            period: period.max(1),
            period_end: None,
            programs: std::collections::HashMap::new(),
        }
    }

    /// Halve the histogram once when a period with observations has ended by `now`. A period
    /// without an ending script says nothing and does not age what was learnt (an idle server
    /// between bursts keeps its budget, as `kpos` keeps its bottleneck verdict).
    fn age(&mut self, now: Nanos) {
        match self.period_end {
            Some(end) if now < end => {}
            Some(_) => {
                self.hist.decay();
                self.period_end = Some(now + self.period);
            }
            None => self.period_end = Some(now + self.period),
        }
    }

    /// A script ended at `now` having used `cpu` of CPU.
    pub fn observe(&mut self, now: Nanos, cpu: Nanos) {
        self.age(now);
        let units = u32::try_from(cpu.div_ceil(UNIT)).unwrap_or(u32::MAX);
        self.hist.add(units.max(1));
    }

    /// A script of `program` (the mechanism's key for its file) ended at `now` having used
    /// `cpu`: learnt as [`ScriptBudget::observe`] does, and remembered as that program's last
    /// execution.
    pub fn observe_program(&mut self, now: Nanos, program: u64, cpu: Nanos) {
        self.observe(now, cpu);
        if self.programs.len() >= MAX_PROGRAMS && !self.programs.contains_key(&program) {
            self.programs.clear();
        }
        self.programs.insert(program, cpu);
    }

    /// Whether `program`'s last execution ran past the text budget (the image behaviour): its
    /// next one is predicted to as well. `false` without a budget or without a previous
    /// execution.
    pub fn predicts_long(&self, program: u64) -> bool {
        match (self.budget(), self.programs.get(&program)) {
            (Some(b), Some(&last)) => last > b,
            _ => false,
        }
    }

    /// The text budget: the short class's longest CPU time while two separated
    /// classes show; `None` otherwise.
    pub fn budget(&self) -> Option<Nanos> {
        let s = self.hist.split()?;
        s.separated().then(|| Nanos::from(s.short_max) * UNIT)
    }

    /// The `q`-quantile (by weight, `q` in (0, 1]) of the short class's CPU times while two
    /// separated classes show (`q` = 1: [`ScriptBudget::budget`]); `None` otherwise. A budget
    /// below the short class's longest lowers the slowest text episodes too, and lowers the
    /// long ones sooner.
    pub fn budget_quantile(&self, q: f64) -> Option<Nanos> {
        let s = self.hist.split()?;
        if !s.separated() {
            return None;
        }
        let l = self.hist.quantile_upto(s.short_max, q)?;
        Some(Nanos::from(l) * UNIT)
    }

    /// The verdict on a raised script that has used `cpu` of CPU so far.
    pub fn check(&self, cpu: Nanos) -> Verdict {
        match self.budget() {
            None => Verdict::Unarmed,
            Some(b) if cpu > b => Verdict::Lower,
            Some(b) => Verdict::RecheckAfter(b - cpu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    const PERIOD: Nanos = 500 * MS;

    /// Pages of about 3 ms and images of about 10 ms of CPU, one page to four images.
    fn learn(b: &mut ScriptBudget, now: Nanos) {
        for i in 0..10u64 {
            b.observe(now, 3 * MS + (i % 3) * UNIT);
            for k in 0..4u64 {
                b.observe(now, 10 * MS + k * UNIT);
            }
        }
    }

    #[test]
    fn unarmed_until_two_kinds_of_script_show() {
        let mut b = ScriptBudget::new(PERIOD);
        assert_eq!(b.check(50 * MS), Verdict::Unarmed);
        // One kind only (however spread): no budget.
        for _ in 0..20 {
            b.observe(0, 10 * MS);
            b.observe(0, 11 * MS);
        }
        assert_eq!(b.budget(), None);
        assert_eq!(b.check(50 * MS), Verdict::Unarmed);
    }

    #[test]
    fn a_script_running_past_the_text_budget_is_lowered_a_text_one_never() {
        let mut b = ScriptBudget::new(PERIOD);
        learn(&mut b, 0);
        // The longest page: 3.2 ms.
        assert_eq!(b.budget(), Some(3 * MS + 2 * UNIT));
        // A page script is never lowered: it ends within the budget.
        assert_eq!(b.check(MS), Verdict::RecheckAfter(2 * MS + 2 * UNIT));
        assert_eq!(b.check(3 * MS + 2 * UNIT), Verdict::RecheckAfter(0));
        // An image script still running raised past it is.
        assert_eq!(b.check(3 * MS + 3 * UNIT), Verdict::Lower);
        assert_eq!(b.check(9 * MS), Verdict::Lower);
    }

    #[test]
    fn a_quantile_budget_is_the_short_class_quantile_not_the_long_class() {
        let mut b = ScriptBudget::new(PERIOD);
        assert_eq!(b.budget_quantile(0.5), None);
        // Pages of 3.0, 3.1, 3.2 ms (4, 3 and 3 of them), images of 10-10.3 ms.
        learn(&mut b, 0);
        assert_eq!(b.budget_quantile(1.0), b.budget());
        assert_eq!(b.budget_quantile(0.4), Some(3 * MS));
        assert_eq!(b.budget_quantile(0.5), Some(3 * MS + UNIT));
        assert_eq!(b.budget_quantile(0.75), Some(3 * MS + 2 * UNIT));
        // One class only: no budget at any quantile.
        let mut one = ScriptBudget::new(PERIOD);
        for _ in 0..20 {
            one.observe(0, 10 * MS);
            one.observe(0, 11 * MS);
        }
        assert_eq!(one.budget_quantile(0.5), None);
    }

    #[test]
    fn a_program_is_predicted_from_its_last_execution_once_a_budget_is_known() {
        let (page, image) = (1u64, 2u64);
        let mut b = ScriptBudget::new(PERIOD);
        // Before any budget: no prediction, whatever was seen.
        b.observe_program(0, image, 10 * MS);
        assert!(!b.predicts_long(image));
        learn(&mut b, 0);
        assert!(
            b.predicts_long(image),
            "its last execution ran past the budget"
        );
        b.observe_program(0, page, 3 * MS);
        assert!(!b.predicts_long(page), "within the budget");
        assert!(!b.predicts_long(3), "never seen: no prediction");
        // The program changes: one execution corrects the prediction.
        b.observe_program(0, image, 2 * MS);
        assert!(!b.predicts_long(image));
        b.observe_program(0, page, 12 * MS);
        assert!(b.predicts_long(page));
    }

    #[test]
    fn past_the_bound_the_programs_are_forgotten_not_the_budget() {
        let mut b = ScriptBudget::new(PERIOD);
        learn(&mut b, 0);
        for p in 0..MAX_PROGRAMS as u64 {
            b.observe_program(0, p, 10 * MS);
        }
        assert!(b.predicts_long(0) && b.predicts_long(MAX_PROGRAMS as u64 - 1));
        // A known program does not overflow the memory.
        b.observe_program(0, 7, 10 * MS);
        assert!(b.predicts_long(0));
        // A new one does: all forgotten but it.
        b.observe_program(0, MAX_PROGRAMS as u64, 10 * MS);
        assert!(!b.predicts_long(0));
        assert!(b.predicts_long(MAX_PROGRAMS as u64));
        assert!(b.budget().is_some());
    }

    #[test]
    fn idle_time_keeps_the_budget_activity_replaces_it() {
        let mut b = ScriptBudget::new(PERIOD);
        learn(&mut b, 0);
        // Seconds without a script (between two bursts of browsers): still known.
        learn(&mut b, 0);
        let before = b.budget();
        b.observe(100 * PERIOD, 3 * MS);
        assert_eq!(b.budget(), before);
        // A new regime (pages of 1 ms, images of 5 ms) for a few active periods replaces it.
        for p in 101..125 {
            for _ in 0..10 {
                b.observe(p * PERIOD, MS);
                for _ in 0..4 {
                    b.observe(p * PERIOD, 5 * MS);
                }
            }
        }
        assert_eq!(b.budget(), Some(MS));
    }
}

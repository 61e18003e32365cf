//! The `+pos` variants of `triage lab pos`: unmodified servers with `triage pos attach`
//! following them (docs/kpos.md). They run only when `--variants` names them:
//! - `apache+pos`: Apache prefork with the daemon, the run's SLP and first RW, and the
//!   server's chosen options ([`default_pos_kind`]: the tail's head beside the text, the
//!   floor at -10, companions within 2 ms and the cgroup-weight lever); `apache+pos-plain`:
//!   POS alone with nice; `apache+pos-tailwith-floor10-comp2`: the same options with nice;
//! - `<server>+pos-<options>`: any options of [`pos_options`] (budget, tail's head, floor,
//!   ...), in any order;
//! - `apache+pos-slice`: POS alone with nice + a 0.1 ms slice;
//! - `apache+pos-log`: the daemon logging and classifying only (its overhead);
//! - `apache+all20`: every child raised all the time (SLP 0, RW never reached): the bound;
//! - `<server>+pos-always`: `+pos` without the daemon's bottleneck check (it raises whether
//!   or not the followed tasks wait for the CPU; the hog, which it does not follow, keeps the
//!   CPU busy all the time in exp 1);
//! - `php-fpm+pos`, `php-fpm+pos-slice`, `php-fpm+pos-log`, `php-fpm+all20`: the same
//!   with nginx + php-fpm ([`super::php`]), the daemon following the php-fpm master and its
//!   pool's children (nginx, a front, is not followed);
//! - `<kind>-front` (`php-fpm+pos-front`, `php-fpm+all20-front`): the same, with nginx (the
//!   front every request crosses) raised while any child is (`--front-pid`): whether the
//!   front starving behind children at -20 is what the lever loses;
//! - `<server>+pos-rest`: the lever's other direction, the unmarked children lowered to nice
//!   +19 and the marked left at 0 (`--direction lower-rest`): the same order among the
//!   children, the front and the hog untouched;
//! - `<server>+pos-budget`: `+pos` with the marked episode's CPU budget (`--budget learn`: a
//!   raised child is lowered once the CPU it ran since POS marked it passes the CPU a text
//!   episode takes, learnt from the episodes that ended; `policy::kpos`);
//! - `<server>+pos-tail`, `<server>+pos-budget-tail`: `+pos` and `+pos-budget` with the tail's
//!   head after the text (`--tail-head after-text`: the runnable child whose episode began
//!   first is raised too, one at a time, while no child raised as text is runnable: the
//!   images in their pages' order); `<server>+pos-tailwith`, `<server>+pos-budget-tailwith`:
//!   the head beside the text (`--tail-head with-text`), at the text's nice -20;
//!   `<server>+pos-tailbelow`, `<server>+pos-budget-tailbelow`: the head beside the text at
//!   nice -10 (`--tail-nice -10`: below the text, far above the competitor).
//!
//! - `<server>+pos-weight`: `<server>+pos`'s options with the cgroup-weight lever instead of
//!   nice (`--lever weight`; the floor is a nice value held beside it on every followed
//!   task); `weight` composes with the other options (`apache+pos-tail-weight`). A run that names one puts the server side's
//!   processes in a leaf cgroup below the quota's (`--server-layout nested`), so that the
//!   boost cgroup the lever moves a raised task into, the leaf's sibling, stays inside the
//!   one budget.
//!
//! The daemon runs on the client side (its CPU is not the server's); the server, its
//! children and the hog share the server side's one CPU budget (one leaf cgroup, no RT; with
//! the nested layout the quota is on the leaf's parent, which holds the boost cgroup too).

use serde::Serialize;

use super::plan::Params;
use super::summary::{improvement, Cell, Improvement, VariantSummary};
use crate::peers::Peer;
use crate::results::{Goal, Page};
use crate::runner::Variant;
use crate::stats::Stat;

/// A `+pos` variant against its server without the daemon (`apache+pos` against `apache`),
/// the paper's `(a - b) / a`, each with its 95% interval over bursts.
#[derive(Debug, Clone, Serialize)]
pub struct VsBaseline {
    /// The baseline variant's name.
    pub baseline: String,
    /// Improvement of mean t1 (fraction) with its interval.
    pub t1_mean_improvement: Option<Improvement>,
    /// Improvement of mean t2 (fraction) with its interval.
    pub t2_mean_improvement: Option<Improvement>,
}

/// The baseline of an attach variant's name (`php-fpm+pos-slice` -> `php-fpm`), if it is one.
pub fn baseline_of(name: &str) -> Option<&str> {
    [Peer::Apache, Peer::PhpFpm]
        .into_iter()
        .map(Peer::name)
        .find(|b| name.strip_prefix(b).is_some_and(|r| r.starts_with('+')))
}

/// `cell` (an attach variant) against its baseline among `cells` at the same browser count.
pub fn vs_baseline(cell: &Cell, cells: &[Cell]) -> Option<VsBaseline> {
    let base = baseline_of(&cell.variant.name)?;
    let b = cells
        .iter()
        .find(|c| c.variant.name == base && c.browsers == cell.browsers)?;
    let t1 = |p: &Page| p.t1_ms;
    let t2 = |p: &Page| p.t2_ms;
    Some(VsBaseline {
        baseline: base.to_owned(),
        t1_mean_improvement: improvement(b, cell, t1, Stat::Mean),
        t2_mean_improvement: improvement(b, cell, t2, Stat::Mean),
    })
}

/// The server a baseline's name names.
fn peer_of(base: &str) -> Option<Peer> {
    [Peer::Apache, Peer::PhpFpm]
        .into_iter()
        .find(|p| p.name() == base)
}

/// The bound on mean t1's improvement over the baseline the issue sets for `name`'s server:
/// the paper's 33.8% for Apache, 30% for nginx + php-fpm.
fn t1_goal(base: &str) -> f64 {
    if base == Peer::Apache.name() {
        0.338
    } else {
        0.30
    }
}

/// The marking accuracy in words.
fn marking_text(m: &crate::marking::MarkingReport) -> String {
    let pct = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.0}%", x * 100.0));
    format!(
        "; marking (the server's access log): {} of {} episodes marked, {} of them served text \
         ({}), {} of {} text episodes marked ({}); {} of the raised episode time served text",
        m.counts.marked,
        m.counts.episodes,
        m.counts.marked_text,
        pct(m.precision),
        m.counts.marked_text,
        m.counts.text,
        pct(m.recall),
        pct(m.time_precision)
    )
}

fn ci_text(i: Option<&Improvement>) -> String {
    match i {
        Some(Improvement {
            value,
            ci95: Some(c),
            ..
        }) => format!(
            "{:+.1}% ci95 [{:+.1}%, {:+.1}%]",
            value * 100.0,
            c.low * 100.0,
            c.high * 100.0
        ),
        Some(i) => format!("{:+.1}% (no ci95: too few bursts)", i.value * 100.0),
        None => "-".into(),
    }
}

/// The shortest quota period of the CPU budget issue 16 sets for the attach labs (ms): "a
/// quota period long enough for the 4 ms tick (100 ms)".
pub const ISSUE_PERIOD_MS: f64 = 100.0;

/// Whether a run's server-side budget is the one issue 16 sets for the attach labs: the
/// server, its children and the hog in one cgroup with "a quota period long enough for the 4
/// ms tick (100 ms) or a whole CPU saturated by the hog" (no quota, or a quota of one CPU or
/// more on the one CPU the server side is pinned to). The lab's default 10 ms period is not:
/// at 10% it grants 1 ms per period, which the kernel charges at its 4 ms tick (HZ=250), so
/// the server side runs in tick-sized lumps (docs/kpos.md "The quota period").
pub fn issue_budget(quota: Option<f64>, period_ms: f64) -> bool {
    quota.is_none_or(|q| q >= 1.0) || period_ms >= ISSUE_PERIOD_MS
}

/// The run's server-side budget in words, and whether it is the issue's.
fn budget_text(quota: Option<f64>, period_ms: f64) -> String {
    let budget = match quota {
        Some(q) => format!("{:.0}% of one CPU per {period_ms} ms period", q * 100.0),
        None => "a whole CPU, no quota".into(),
    };
    if issue_budget(quota, period_ms) {
        format!("budget {budget}: the issue's")
    } else {
        format!(
            "budget {budget}: NOT the issue's (a period of {ISSUE_PERIOD_MS} ms or more, or a \
             whole CPU saturated by the hog: --period 100ms or --quota 100%)"
        )
    }
}

/// The goals of the attach variants measured in `vs` in a run with the server-side `quota`
/// and `period_ms`: `<server>+pos` against `<server>` (mean t1 better by the issue's bound,
/// mean t2 at most 10% worse, in the issue's CPU budget: [`issue_budget`]), and every
/// daemon's own CPU at most 2% of one CPU with its wake-up-to-lever p99.
pub fn goals(vs: &[VariantSummary], quota: Option<f64>, period_ms: f64) -> Vec<Goal> {
    let in_budget = issue_budget(quota, period_ms);
    let budget = budget_text(quota, period_ms);
    let mut out = Vec::new();
    for v in vs {
        let Some(base) = baseline_of(&v.name) else {
            continue;
        };
        let how = v
            .name
            .strip_prefix(base)
            .and_then(|k| k.strip_prefix('+'))
            .map(|k| match peer_of(base) {
                Some(p) => server_kind(p, k),
                None => k.to_owned(),
            })
            .and_then(|k| {
                let (k, front) = match k.strip_suffix("-front") {
                    Some(k) => (k, " (the front raised with them)"),
                    None => (k.as_str(), ""),
                };
                pos_options(k).map(|o| format!("{}{front}", o.how))
            });
        // A real-time reference is reported apart ([`references`]), never against the goal.
        if let Some(how) = how.filter(|_| !v.variant.realtime_reference) {
            let bound = t1_goal(base);
            let goal = format!(
                "{base} + triage pos attach{how}: mean t1 >= {:.1}% better than {base} alone, \
                 mean t2 at most 10% worse, same CPU budget, the issue's (a quota period of \
                 {ISSUE_PERIOD_MS} ms or more, or a whole CPU)",
                bound * 100.0
            );
            let detail;
            let met;
            match &v.vs_baseline {
                Some(b) => {
                    let t1 = b.t1_mean_improvement.as_ref().map(|i| i.value);
                    let t2 = b.t2_mean_improvement.as_ref().map(|i| i.value);
                    met = in_budget
                        && t1.is_some_and(|x| x >= bound)
                        && t2.is_some_and(|x| x >= -0.10);
                    detail = format!(
                        "{}: mean t1 {}, mean t2 {} against {base}; {budget}; server-side CPU \
                         {:.2} s per run{}",
                        v.name,
                        ci_text(b.t1_mean_improvement.as_ref()),
                        ci_text(b.t2_mean_improvement.as_ref()),
                        v.server_cpu_s,
                        v.marking.map_or(String::new(), |m| marking_text(&m)),
                    );
                }
                None => {
                    met = false;
                    detail = format!("{base} (the baseline) was not measured beside {}", v.name);
                }
            }
            out.push(Goal { goal, met, detail });
        }
        if let Some(d) = &v.daemon {
            out.push(Goal {
                goal: format!(
                    "{}: the daemon's own CPU at most 2% of one CPU; wake-up-to-lever p99 \
                     reported",
                    v.name
                ),
                met: d.cpu_share <= 0.02,
                detail: format!(
                    "logger {}, own CPU {:.2}% of one CPU ({:.3} s per run), {:.0} events per \
                     run ({:.0} dropped), {:.0} marks, {:.0} demotions, {:.0} raises ({:.0} \
                     before the wake-up), {:.0} lowered past the episode budget ({:.2} ms at \
                     the end), {:.0} tail's heads raised, {:.0} companions, wake-up-to-lever \
                     p50 {} p99 {}, one lever call p50 {} p99 {}",
                    d.logger,
                    d.cpu_share * 100.0,
                    d.cpu_s,
                    d.events,
                    d.dropped,
                    d.marks,
                    d.demotions,
                    d.raises,
                    d.raised_before_wake,
                    d.budget_lowers,
                    d.budget_ms,
                    d.tail_head_raises,
                    d.companions,
                    d.wake_to_lever_p50_us
                        .map_or("-".into(), |u| format!("<= {u:.0} us")),
                    d.wake_to_lever_p99_us
                        .map_or("-".into(), |u| format!("<= {u:.0} us")),
                    d.lever_call_p50_us
                        .map_or("-".into(), |u| format!("<= {u:.0} us")),
                    d.lever_call_p99_us
                        .map_or("-".into(), |u| format!("<= {u:.0} us")),
                ),
            });
        }
    }
    out
}

/// The real-time references among `vs` ([`REALTIME_LABEL`]), each in a line with its figures
/// against its baseline and its server-side CPU: reported beside the goals, not as one.
pub fn references(vs: &[VariantSummary]) -> Vec<String> {
    vs.iter()
        .filter(|v| v.variant.realtime_reference)
        .map(|v| {
            let against = v.vs_baseline.as_ref().map_or(
                "its baseline was not measured beside it".to_owned(),
                |b| {
                    format!(
                        "mean t1 {}, mean t2 {} against {}",
                        ci_text(b.t1_mean_improvement.as_ref()),
                        ci_text(b.t2_mean_improvement.as_ref()),
                        b.baseline
                    )
                },
            );
            format!(
                "{} is {REALTIME_LABEL}: {against}; server-side CPU {:.2} s per run (real-time \
                 time included); not a goal",
                v.name, v.server_cpu_s
            )
        })
        .collect()
}

/// A POS variant's options, read from its kind (`pos-budget-tailwith-floor10`: `pos`, then
/// `-`-separated options in any order).
#[derive(Debug, Clone, PartialEq)]
pub struct PosOptions {
    /// The daemon's lever (`--lever`): `nice`, or `weight` with the `weight` option.
    pub lever: &'static str,
    /// The daemon's flags the options add.
    pub flags: Vec<String>,
    /// The options in words, for the goal lines (empty for plain POS).
    pub how: String,
    /// Whether the options need the front (`frontweight`).
    pub front: bool,
}

/// The words that label a real-time reference (`fifo`) wherever it is reported.
pub const REALTIME_LABEL: &str = "a reference on a second, real-time budget (SCHED_FIFO: the \
     server side's cgroup granted real-time time as large as its quota, which the quota does \
     not count), not a lever inside the one CPU budget";

impl PosOptions {
    /// Whether the daemon moves tasks between cgroups (the weight lever, for the followed
    /// tasks or the front): the run needs the nested layout and `favordynmods`.
    pub fn moves(&self) -> bool {
        self.lever == "weight" || self.front
    }

    /// Whether the raised tasks run on a second, real-time budget (`fifo`): a labelled
    /// reference, not a variant inside the one budget.
    pub fn realtime(&self) -> bool {
        self.lever == "fifo"
    }
}

/// The options of a POS variant kind: `pos` followed by any of
/// - `always`: `--always` (no bottleneck check);
/// - `budget`: `--budget learn`; `budgetp<N>`: `--budget learn-p<N>` (the text episodes'
///   N-th percentile, 1 to 99); `budget<N>us`: `--budget <N>us` (fixed);
/// - `tail`: `--tail-head after-text`; `tailwith`: `--tail-head with-text`; `tailbelow`: the
///   same at `--tail-nice -10`; `tail<N>`: the same at `--tail-nice -N`;
/// - `floor<N>`: `--floor-nice -N`;
/// - `grades<N>`: `--grades N` (2 to 20: the episode's levels below the budget);
/// - `batch`: `--event-batch 1ms`;
/// - `comp<N>`: `--companion-window <N>ms` (marks within N ms of one another are a page's
///   objects, not raised as text);
/// - `plain`: nothing (POS alone, when the server's `+pos` runs with options);
/// - `weight`: the cgroup-weight lever (`--lever weight`: a raised task moved into a
///   high-weight sibling of its cgroup) instead of nice; it has one level (a tail's head is
///   moved like the text, its nice moot), and `floor<N>` holds every followed task at nice -N
///   beside it;
/// - `frontweight`: the front (nginx) raised by the weight lever while the followed tasks
///   keep nice (`--front-lever weight`; the variant runs with its front);
/// - `fifo`: `SCHED_FIFO` instead of nice (`--lever fifo`): a reference on a second,
///   real-time budget ([`REALTIME_LABEL`]); `floor<N>` holds the others at nice -N beside it.
///
/// `None` if `kind` is not such a name. What `<server>+pos` itself runs is
/// [`default_pos_kind`], `<server>+pos-weight` [`server_kind`].
pub fn pos_options(kind: &str) -> Option<PosOptions> {
    let kind = if kind == "pos" { "pos-plain" } else { kind };
    let rest = kind.strip_prefix("pos-")?;
    let mut lever = "nice";
    let mut front = false;
    let mut flags: Vec<String> = Vec::new();
    let mut how: Vec<String> = Vec::new();
    let mut add = |f: &[&str], h: &str| {
        flags.extend(f.iter().map(|s| s.to_string()));
        if !h.is_empty() {
            how.push(h.to_owned());
        }
    };
    for opt in rest.split('-') {
        let num = |p: &str| {
            opt.strip_prefix(p)
                .filter(|n| !n.is_empty() && n.len() <= 2)
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| *n <= 20)
        };
        match opt {
            "plain" => add(&[], ""),
            "weight" | "fifo" if lever != "nice" => return None, // one lever
            "weight" => {
                lever = "weight";
                add(
                    &[],
                    "the cgroup-weight lever (a raised task moved into a high-weight sibling of \
                     the server's leaf cgroup, inside the budget)",
                );
            }
            "fifo" => {
                lever = "fifo";
                add(&[], "SCHED_FIFO (a real-time reference)");
            }
            "frontweight" => {
                front = true;
                add(
                    &["--front-lever", "weight"],
                    "the front moved into the boost cgroup while raised",
                );
            }
            "always" => add(&["--always"], "without the bottleneck check"),
            "batch" => add(&["--event-batch", "1ms"], "events taken in 1 ms batches"),
            "budget" => add(&["--budget", "learn"], "the episode's CPU budget"),
            "tail" => add(
                &["--tail-head", "after-text"],
                "the tail's head after the text",
            ),
            "tailwith" => add(
                &["--tail-head", "with-text"],
                "the tail's head beside the text",
            ),
            "tailbelow" => add(
                &["--tail-head", "with-text", "--tail-nice", "-10"],
                "the tail's head beside the text at nice -10",
            ),
            _ => {
                if let Some(n) = num("tail") {
                    add(
                        &["--tail-head", "with-text", "--tail-nice", &format!("-{n}")],
                        &format!("the tail's head beside the text at nice -{n}"),
                    );
                } else if let Some(n) = opt
                    .strip_prefix("budgetp")
                    .filter(|n| n.len() <= 2)
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| (1..=99).contains(n))
                {
                    add(
                        &["--budget", &format!("learn-p{n}")],
                        &format!("the episode's CPU budget at the text episodes' p{n}"),
                    );
                } else if let Some(us) = opt
                    .strip_prefix("budget")
                    .and_then(|r| r.strip_suffix("us"))
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| (1..=20_000).contains(n))
                {
                    add(
                        &["--budget", &format!("{us}us")],
                        &format!("a fixed episode CPU budget of {us} us"),
                    );
                } else if let Some(n) = num("grades").filter(|n| *n >= 2) {
                    add(
                        &["--grades", &n.to_string()],
                        &format!("{n} grades of the episode below the budget"),
                    );
                } else if let Some(n) = num("comp").filter(|n| *n >= 1) {
                    add(
                        &["--companion-window", &format!("{n}ms")],
                        &format!("marks within {n} ms of one another taken for a page's objects"),
                    );
                } else if let Some(n) = num("floor") {
                    add(
                        &["--floor-nice", &format!("-{n}")],
                        &format!("every other followed task held at nice -{n}"),
                    );
                } else {
                    return None;
                }
            }
        }
    }
    let how = if how.is_empty() {
        String::new()
    } else {
        format!(" with {}", how.join(", "))
    };
    Some(PosOptions {
        lever,
        flags,
        how,
        front,
    })
}

/// The kind a `<server>+<kind>` name runs on `peer`: `pos` is [`default_pos_kind`];
/// `pos-weight` the same options with the cgroup-weight lever (the floor held beside it, the
/// front kept); any other kind itself.
pub fn server_kind(peer: Peer, kind: &str) -> String {
    match kind {
        "pos" => default_pos_kind(peer).to_owned(),
        "pos-weight" => {
            let d = default_pos_kind(peer);
            if d.split('-').any(|o| o == "weight") {
                return d.to_owned();
            }
            match d.strip_suffix("-front") {
                Some(d) => format!("{d}-weight-front"),
                None => format!("{d}-weight"),
            }
        }
        k => k.to_owned(),
    }
}

/// Whether the variants named in `only` use the cgroup-weight lever (their runs need the
/// server side's processes in a leaf below the quota: [`crate::testbed::SERVER_LEAF`]).
pub fn uses_weight_lever(only: &[String]) -> bool {
    only.iter().any(|name| {
        [Peer::Apache, Peer::PhpFpm].into_iter().any(|peer| {
            name.strip_prefix(peer.name())
                .and_then(|k| k.strip_prefix('+'))
                .map(|k| server_kind(peer, k))
                .and_then(|k| {
                    let k = k.strip_suffix("-front").unwrap_or(&k).to_owned();
                    pos_options(&k)
                })
                .is_some_and(|o| o.moves())
        })
    })
}

/// What `<server>+pos` runs: the options that met the issue's goals on that server (see
/// docs/kpos.md), `-front` if the front is raised with them; `<server>+pos-plain` is POS
/// alone.
pub fn default_pos_kind(peer: Peer) -> &'static str {
    match peer {
        Peer::Apache => "pos-tailwith-floor10-comp2-weight",
        _ => "pos-budget500us-tailwith-floor5-frontweight",
    }
}

/// The `+pos` variants named in `only`, in the order named, for a run with `params`.
pub fn variants(only: &[String], p: &Params) -> Vec<Variant> {
    let slp = p.slp_s.map_or("auto".to_owned(), |s| {
        format!("{}ms", (s * 1e3).round() as u64)
    });
    let rw = p.rw.first().copied().unwrap_or(1).to_string();
    let mut out = Vec::new();
    for name in only {
        let Some((peer, kind)) = [Peer::Apache, Peer::PhpFpm].into_iter().find_map(|peer| {
            let kind = name.strip_prefix(peer.name())?.strip_prefix('+')?;
            Some((peer, kind))
        }) else {
            continue;
        };
        // `<server>+pos` runs the server's default options (the front included, if any),
        // `<server>+pos-weight` the same with the weight lever.
        let kind = server_kind(peer, kind);
        let (kind, front) = match kind.strip_suffix("-front") {
            Some(k) => (k, true),
            None => (kind.as_str(), false),
        };
        // The POS variants: nice as the lever, the run's SLP and RW, and the options each
        // variant adds.
        let pos_extra = match kind {
            "pos-slice" | "pos-log" | "pos-rest" => None,
            _ => pos_options(kind),
        };
        // Only php-fpm has a front (nginx).
        if peer != Peer::PhpFpm && pos_extra.as_ref().is_some_and(|o| o.front) {
            continue;
        }
        let flags: Vec<&str> = match (kind, pos_extra.as_ref()) {
            (_, Some(o)) => [
                &["--lever", o.lever, "--slp", &slp, "--rw", &rw][..],
                if o.moves() {
                    &["--favor-dynmods"][..]
                } else {
                    &[][..]
                },
                &o.flags.iter().map(String::as_str).collect::<Vec<_>>()[..],
            ]
            .concat(),
            ("pos-slice", None) => vec!["--lever", "nice+slice", "--slp", &slp, "--rw", &rw],
            ("pos-log", None) => vec!["--log-only", "--slp", &slp, "--rw", &rw],
            ("pos-rest", None) => vec![
                "--lever",
                "nice",
                "--direction",
                "lower-rest",
                "--slp",
                &slp,
                "--rw",
                &rw,
            ],
            ("all20", None) => vec![
                "--lever", "nice", "--slp", "0ms", "--rw", "100000", "--always",
            ],
            _ => continue,
        };
        let mut f = flags;
        f.extend(["--cpus", "1"]);
        let front = front || pos_extra.as_ref().is_some_and(|o| o.front);
        let mut v = Variant::peer(peer, p.hog).with_attach(name, &f);
        if front {
            v = v.with_front();
        }
        if pos_extra.as_ref().is_some_and(PosOptions::realtime) {
            v = v.with_realtime_reference();
        }
        out.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attach variants of the lab's default plan that `names` asks for.
    fn named(names: &[&str]) -> Vec<Variant> {
        let o = crate::pos::opts::PosOpts::new(1, std::path::PathBuf::from("/bin/false"));
        let p = crate::pos::plan::resolve(&o).unwrap();
        let only: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        variants(&only, &p)
    }

    #[test]
    fn named_attach_variants_follow_the_server() {
        let v = named(&[
            "fifo",
            "apache+pos",
            "apache+pos-log",
            "apache+pos-budget",
            "apache+pos-plain",
        ]);
        assert_eq!(v.len(), 4);
        assert!(v[2]
            .attach
            .as_ref()
            .unwrap()
            .windows(2)
            .any(|w| w == ["--budget", "learn"]));
        // `apache+pos` runs the server's default options; `+pos-plain` POS alone.
        let default = pos_options(default_pos_kind(Peer::Apache)).unwrap();
        assert!(v[0]
            .attach
            .as_ref()
            .unwrap()
            .ends_with(&[default.flags, vec!["--cpus".into(), "1".into()]].concat()));
        assert!(!v[3].attach.as_ref().unwrap().contains(&"--budget".into()));
        assert!(
            v[0].attach
                .as_ref()
                .unwrap()
                .windows(2)
                .any(|w| w == ["--companion-window", "2ms"]),
            "apache+pos takes a page's objects, asked for together, for companions"
        );
        assert!(
            v[0].attach
                .as_ref()
                .unwrap()
                .windows(2)
                .any(|w| w == ["--tail-head", "with-text"]),
            "apache+pos raises the tail's head beside the text"
        );
        assert_eq!(v[0].name, "apache+pos");
        let flags = v[0].attach.as_ref().unwrap();
        assert!(
            flags.windows(2).any(|w| w == ["--lever", "weight"]),
            "apache+pos moves the text into the boost cgroup"
        );
        assert!(v[3]
            .attach
            .as_ref()
            .unwrap()
            .windows(2)
            .any(|w| w == ["--lever", "nice"]));
        assert!(v[1].attach.as_ref().unwrap().contains(&"--log-only".into()));
        assert_eq!(v[0].peer_kind(), Some(Peer::Apache));
        let v = named(&["php-fpm+pos", "php-fpm+all20", "php-fpm+nothing"]);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].name, "php-fpm+pos");
        assert_eq!(v[0].peer_kind(), Some(Peer::PhpFpm));
        assert!(v[0].attach_front, "php-fpm+pos raises its front");
        assert!(v[1].attach.as_ref().unwrap().contains(&"--always".into()));
        let v = named(&[
            "php-fpm+all20-front",
            "php-fpm+pos-rest",
            "php-fpm+rest-front",
        ]);
        assert_eq!(v.len(), 2);
        assert!(v[0].attach_front && !v[1].attach_front);
        assert!(v[0].attach.as_ref().unwrap().contains(&"--always".into()));
        assert!(v[1].attach.as_ref().unwrap().contains(&"lower-rest".into()));
        assert_eq!(baseline_of("php-fpm+all20-front"), Some("php-fpm"));
        assert_eq!(baseline_of("php-fpm+pos-slice"), Some("php-fpm"));
        assert_eq!(baseline_of("apache+all20"), Some("apache"));
        assert_eq!(baseline_of("apache"), None);
        assert_eq!(baseline_of("pos-rw1"), None);
    }

    #[test]
    fn weight_variants_swap_the_lever_keep_the_options_and_nest_the_layout() {
        let v = named(&[
            "apache+pos-tailwith-floor10-comp2",
            "apache+pos-weight",
            "php-fpm+pos-weight",
            "apache+pos",
        ]);
        assert_eq!(v.len(), 4);
        let f = |i: usize| v[i].attach.clone().unwrap();
        assert!(f(0).windows(2).any(|w| w == ["--lever", "nice"]));
        // Apache's default is the weight lever: `+pos-weight` is `+pos`.
        assert_eq!(f(1), f(3));
        // The same options as with nice, with the weight lever.
        assert!(f(1).windows(2).any(|w| w == ["--lever", "weight"]));
        assert!(!f(1).iter().any(|x| x == "nice"));
        for pair in [
            ["--tail-head", "with-text"],
            ["--companion-window", "2ms"],
            ["--floor-nice", "-10"],
        ] {
            assert!(f(0).windows(2).any(|w| w == pair), "{pair:?}");
            assert!(f(1).windows(2).any(|w| w == pair), "{pair:?}");
        }
        // The weight lever's moves do not wait for a grace period; nice moves nothing.
        assert!(f(1).iter().any(|x| x == "--favor-dynmods"));
        assert!(!f(0).iter().any(|x| x == "--favor-dynmods"));
        assert_eq!(f(0).len() + 1, f(1).len(), "{:?}", f(1));
        // php-fpm's: its budget and front kept.
        assert!(v[2].attach_front);
        assert!(f(2).windows(2).any(|w| w == ["--lever", "weight"]));
        assert!(f(2).windows(2).any(|w| w == ["--budget", "500us"]));
        assert!(f(2).windows(2).any(|w| w == ["--front-lever", "weight"]));
        assert_eq!(
            server_kind(Peer::Apache, "pos-weight"),
            "pos-tailwith-floor10-comp2-weight"
        );
        assert_eq!(
            server_kind(Peer::PhpFpm, "pos-weight"),
            "pos-budget500us-tailwith-floor5-frontweight-weight"
        );
        assert_eq!(pos_options("pos-tail-comp2-weight").unwrap().flags.len(), 4);
        assert_eq!(pos_options("pos-tail-weight").unwrap().lever, "weight");
        assert_eq!(pos_options("pos-tail").unwrap().lever, "nice");
        let only = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // The front moved by the weight lever, the followed tasks by nice: a run with a
        // front, the nested layout and the moves favoured.
        let o = pos_options("pos-budget500us-tailwith-floor10-frontweight").unwrap();
        assert!(o.moves() && o.front && o.lever == "nice", "{o:?}");
        assert!(o.flags.windows(2).any(|w| w == ["--front-lever", "weight"]));
        assert!(uses_weight_lever(&only(&[
            "php-fpm",
            "php-fpm+pos-budget500us-tailwith-floor10-frontweight"
        ])));
        let v = named(&[
            "php-fpm+pos-budget500us-tailwith-floor10-frontweight",
            "apache+pos-tailwith-frontweight",
        ]);
        assert_eq!(v.len(), 1, "Apache has no front");
        assert!(v[0].attach_front);
        assert!(v[0]
            .attach
            .as_ref()
            .unwrap()
            .contains(&"--favor-dynmods".into()));
        assert!(uses_weight_lever(&only(&["apache", "apache+pos-weight"])));
        assert!(uses_weight_lever(&only(&["php-fpm+pos-tail-weight-front"])));
        assert!(!uses_weight_lever(&only(&[
            "apache",
            "apache+pos-tail-floor10-comp2",
            "php-fpm+pos-budget500us-tailwith-floor10-front"
        ])));
        assert!(
            uses_weight_lever(&only(&["php-fpm", "php-fpm+pos"])),
            "php-fpm+pos moves nginx"
        );
        assert!(
            uses_weight_lever(&only(&["apache", "apache+pos", "php-fpm", "php-fpm+pos"])),
            "the check's Apache variant uses the weight lever"
        );
        // The layout follows: nested when a weight variant runs, else flat, unless told.
        use crate::pos::opts::ServerLayout;
        let layout = |names: &[&str], told: Option<ServerLayout>| {
            let mut o = crate::pos::opts::PosOpts::new(1, std::path::PathBuf::from("/bin/false"));
            o.only = Some(only(names));
            o.server_layout = told;
            crate::pos::plan::resolve(&o).unwrap().server_layout
        };
        assert_eq!(
            layout(&["apache", "apache+pos", "apache+pos-weight"], None),
            ServerLayout::Nested
        );
        assert_eq!(
            layout(&["apache", "php-fpm", "php-fpm+pos-tailwith"], None),
            ServerLayout::Flat
        );
        assert_eq!(
            layout(
                &["php-fpm", "php-fpm+pos-tailwith"],
                Some(ServerLayout::Nested)
            ),
            ServerLayout::Nested
        );
        assert_eq!(
            layout(&["php-fpm", "php-fpm+pos"], None),
            ServerLayout::Nested
        );
        // The weight lever in the flat layout would run outside the quota: refused.
        let mut o = crate::pos::opts::PosOpts::new(1, std::path::PathBuf::from("/bin/false"));
        o.only = Some(only(&["apache", "apache+pos"]));
        o.server_layout = Some(ServerLayout::Flat);
        let e = crate::pos::plan::resolve(&o).unwrap_err().to_string();
        assert!(e.contains("outside the budget"), "{e}");
        // The goal line names the lever.
        assert!(pos_options(&server_kind(Peer::Apache, "pos-weight"))
            .unwrap()
            .how
            .contains("cgroup-weight lever"));
    }

    #[test]
    fn the_issues_budget_is_a_long_period_or_a_whole_cpu() {
        assert!(!issue_budget(Some(0.10), 10.0));
        assert!(!issue_budget(Some(0.10), 99.0));
        assert!(issue_budget(Some(0.10), 100.0));
        assert!(issue_budget(Some(0.10), 200.0));
        assert!(issue_budget(Some(1.0), 10.0));
        assert!(issue_budget(None, 10.0));
        let short = budget_text(Some(0.10), 10.0);
        assert!(
            short.contains("10% of one CPU per 10 ms period: NOT"),
            "{short}"
        );
        let long = budget_text(Some(0.10), 100.0);
        assert!(long.ends_with("per 100 ms period: the issue's"), "{long}");
    }

    #[test]
    fn pos_options_compose_in_any_order_and_refuse_unknown_ones() {
        let o = pos_options("pos-budget-tailwith-floor10").unwrap();
        assert_eq!(
            o.flags,
            [
                "--budget",
                "learn",
                "--tail-head",
                "with-text",
                "--floor-nice",
                "-10"
            ]
        );
        assert!(o.how.contains("budget") && o.how.contains("-10"));
        let o = pos_options("pos-budgetp50-budget600us").unwrap();
        assert_eq!(o.flags, ["--budget", "learn-p50", "--budget", "600us"]);
        assert!(o.how.contains("p50") && o.how.contains("600 us"));
        for bad in [
            "pos-budgetp0",
            "pos-budgetp100",
            "pos-budget0us",
            "pos-budgetus",
        ] {
            assert_eq!(pos_options(bad), None, "{bad}");
        }
        let o = pos_options("pos-tailwith-floor10-comp2").unwrap();
        assert_eq!(
            o.flags,
            [
                "--tail-head",
                "with-text",
                "--floor-nice",
                "-10",
                "--companion-window",
                "2ms"
            ]
        );
        assert_eq!(pos_options("pos-comp0"), None);
        let o = pos_options("pos-budget-grades4").unwrap();
        assert_eq!(o.flags, ["--budget", "learn", "--grades", "4"]);
        assert_eq!(pos_options("pos-grades1"), None);
        let o = pos_options("pos-tail15-always").unwrap();
        assert_eq!(
            o.flags,
            ["--tail-head", "with-text", "--tail-nice", "-15", "--always"]
        );
        assert_eq!(pos_options("pos").unwrap().flags, Vec::<String>::new());
        assert_eq!(pos_options("pos-plain").unwrap().how, "");
        for bad in [
            "pos-log",
            "pos-slice",
            "pos-rest",
            "pos-floor",
            "pos-tail25",
            "all20",
            "posx",
        ] {
            assert_eq!(pos_options(bad), None, "{bad}");
        }
        // The existing names read as before.
        assert_eq!(
            pos_options("pos-budget-tailbelow").unwrap().flags,
            [
                "--budget",
                "learn",
                "--tail-head",
                "with-text",
                "--tail-nice",
                "-10"
            ]
        );
        let v = named(&[
            "apache+pos-floor10-budget",
            "php-fpm+pos-always-budget-front",
        ]);
        assert_eq!(v.len(), 2);
        let f = v[0].attach.as_ref().unwrap();
        assert!(f.windows(2).any(|w| w == ["--floor-nice", "-10"]));
        assert!(v[1].attach_front);
        assert!(v[1].attach.as_ref().unwrap().contains(&"--always".into()));
    }
}

//! Seed 004's numbers beside the model's, for `triage sim lard`'s report: LARD over WRR,
//! extended LARD with back-end forwarding over WRR, the P-HTTP gain, the loss without a
//! mechanism, and how many back ends one front end feeds.

use serde::Serialize;

use crate::phttp::PhttpResult;
use crate::stats::round;

/// One claim of seed 004 and what the model gives.
#[derive(Debug, Clone, Serialize)]
pub struct PaperRow {
    /// What is compared.
    pub what: String,
    /// The paper's figure, as it states it.
    pub paper: String,
    /// Ours, as a number (a ratio, a percentage, a share, a node count); `None` when its runs
    /// were not made.
    pub ours: Option<f64>,
    /// Where ours comes from (node counts, variants).
    pub detail: String,
}

fn list(v: &[(usize, f64)], pct: bool) -> String {
    v.iter()
        .map(|(n, r)| {
            if pct {
                format!("{n}:{:+.1}%", (r - 1.0) * 100.0)
            } else {
                format!("{n}:{r:.2}x")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn best(v: &[(usize, f64)], max: bool) -> Option<f64> {
    let it = v.iter().map(|x| x.1);
    if max {
        it.reduce(f64::max)
    } else {
        it.reduce(f64::min)
    }
}

fn pct(x: Option<f64>) -> Option<f64> {
    x.map(|r| round((r - 1.0) * 100.0, 1))
}

/// The rows, from LARD/WRR ratios per node count of the `exceeds` workload and the P-HTTP part.
pub fn rows(lard_wrr: Option<&[(usize, f64)]>, p: Option<&PhttpResult>) -> Vec<PaperRow> {
    let mut out = Vec::new();
    if let Some(r) = lard_wrr {
        out.push(PaperRow {
            what: "LARD / WRR throughput, HTTP/1.0, working set 16x one cache".into(),
            paper: "2-4x in simulation; 4x on the 6-node prototype".into(),
            ours: best(r, true),
            detail: format!("best over node counts; {}", list(r, false)),
        });
    }
    let Some(p) = p else {
        return out;
    };
    let ratio = |a: &str, b: &str| p.ratios(a, b);
    let r = ratio("ext-lard/forward", "wrr/pin");
    out.push(PaperRow {
        what: "extended LARD + back-end forwarding / WRR, P-HTTP".into(),
        paper: "about 4x (prototype, with and without persistent connections)".into(),
        ours: best(&r, true),
        detail: format!("best; {}", list(&r, false)),
    });
    let r = ratio("ext-lard/forward", "lard/close");
    out.push(PaperRow {
        what: "P-HTTP gain: extended LARD + forwarding (P-HTTP) over LARD (HTTP/1.0), %".into(),
        paper: "up to +26% (prototype)".into(),
        ours: pct(best(&r, true)),
        detail: format!("best; {}", list(&r, true)),
    });
    let r = ratio("lard/pin", "lard/close");
    out.push(PaperRow {
        what: "LARD without a mechanism (pinned, P-HTTP) over LARD (HTTP/1.0), %".into(),
        paper: "up to -35% (prototype)".into(),
        ours: pct(best(&r, false)),
        detail: format!("worst; {}", list(&r, true)),
    });
    let r = ratio("ext-lard/forward", "lard/pin");
    out.push(PaperRow {
        what: "extended LARD + forwarding over LARD without a mechanism, P-HTTP, %".into(),
        paper: "issue 17's goal: >= +20% (implied by the paper: 1.26 / 0.65)".into(),
        ours: pct(best(&r, true)),
        detail: format!("best; {}", list(&r, true)),
    });
    let r = ratio("ext-lard/handoff", "ext-lard/forward");
    out.push(PaperRow {
        what: "multiple TCP handoff over back-end forwarding (extended LARD), %".into(),
        paper: "no substantial advantage in simulation (forwarding within 8% of ideal)".into(),
        ours: pct(best(&r, true)),
        detail: format!("best; {}", list(&r, true)),
    });
    if let Some(f) = &p.front {
        out.push(PaperRow {
            what: format!("front-end CPU with 6 back ends ({}), %", f.variant),
            paper: "about 60% (prototype)".into(),
            ours: f.util_at_6.map(|u| round(u * 100.0, 1)),
            detail: format!("front-end sweep, {} MB cache per node", f.cache_mb),
        });
        out.push(PaperRow {
            what: "back ends one front end feeds".into(),
            paper: "about 10 (6 / 0.6)".into(),
            ours: f.predicted_nodes,
            detail: format!(
                "6 / utilisation at 6; the sweep: front saturated (>= 95%) at {}, throughput \
                 linear (within 5%) up to {}",
                f.saturated_at
                    .map_or("none of the node counts run".into(), |n| n.to_string()),
                f.linear_until.map_or("-".into(), |n| n.to_string())
            ),
        });
    }
    out
}

/// The rows as a table.
pub fn table(rows: &[PaperRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from("seed 004 beside the model:\n");
    for r in rows {
        s += &format!(
            "  {:<78} paper: {:<62} ours: {:>7}  ({})\n",
            r.what,
            r.paper,
            r.ours.map_or("-".into(), |x| format!("{x}")),
            r.detail
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_extremes() {
        let r = [(2, 1.1), (4, 0.7)];
        assert_eq!(list(&r, true), "2:+10.0% 4:-30.0%");
        assert_eq!(best(&r, true), Some(1.1));
        assert_eq!(pct(best(&r, false)), Some(-30.0));
        assert_eq!(rows(None, None).len(), 0);
        assert_eq!(rows(Some(&r), None)[0].ours, Some(1.1));
    }
}

//! Marking accuracy of a `triage pos attach` daemon (issue 16), from the server's own access
//! log: which service episodes (one request served by one child) ran while POS had the child
//! marked, and what they served. Pure: [`parse_fpm_access`] reads php-fpm's log
//! ([`crate::peers::ACCESS_FORMAT`]), [`parse_apache_access`] Apache's, [`parse_actions`] the daemon's `--actions-log`,
//! [`accuracy`] matches them.

use std::collections::BTreeMap;

use serde::Serialize;

/// One request as the server logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// The child (task) that served it.
    pub tid: u64,
    /// When it was handed to the server (Unix ns).
    pub start_ns: u128,
    /// How long it took (ns).
    pub dur_ns: u128,
    /// Whether it served text (`text/*`).
    pub text: bool,
}

/// Read an access log whose lines start `<pid> <start> <duration> <status> <path>
/// <content type>`, the start in units of `start_ns` nanoseconds since the Unix epoch and
/// the duration in units of `dur_ns`; lines that do not parse are skipped.
fn parse_access(text: &str, start_ns: f64, dur_ns: f64) -> Vec<Episode> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let tid = f.first()?.parse().ok()?;
            let start: f64 = f.get(1)?.parse().ok()?;
            let dur: f64 = f.get(2)?.parse().ok()?;
            let ctype = f.get(5).copied().unwrap_or("");
            Some(Episode {
                tid,
                start_ns: (start * start_ns) as u128,
                dur_ns: (dur * dur_ns) as u128,
                text: ctype.starts_with("text/"),
            })
        })
        .collect()
}

/// Read php-fpm's access log in the lab's format ([`crate::peers::ACCESS_FORMAT`]: `%p
/// %{REQUEST_START}e %{milli}d %s %r %{Content-Type}o`, the start in seconds).
pub fn parse_fpm_access(text: &str) -> Vec<Episode> {
    parse_access(text, 1e9, 1e6)
}

/// Read Apache's access log in the lab's format ([`crate::peers::APACHE_ACCESS_FORMAT`]:
/// `%P %{usec}t %D %>s %U %{Content-Type}o`, start and duration in microseconds).
pub fn parse_apache_access(text: &str) -> Vec<Episode> {
    parse_access(text, 1e3, 1e3)
}

/// The daemon's decisions per task: `(Unix ns, raised)` in time order.
pub fn parse_actions(text: &str) -> BTreeMap<u64, Vec<(u128, bool)>> {
    let mut m: BTreeMap<u64, Vec<(u128, bool)>> = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(t), Some(a), Some(tid)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        let (Ok(t), Ok(tid)) = (t.parse::<u128>(), tid.parse::<u64>()) else {
            continue;
        };
        let raised = match *a {
            "raise" => true,
            "lower" => false,
            _ => continue,
        };
        m.entry(tid).or_default().push((t, raised));
    }
    for v in m.values_mut() {
        v.sort_by_key(|x| x.0);
    }
    m
}

/// Marked service episodes and what they served, over a run (or summed over runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MarkingAccuracy {
    /// Episodes in the access log.
    pub episodes: u64,
    /// Of them, those that served text.
    pub text: u64,
    /// Episodes during which the child was marked (raised at their start or during them).
    pub marked: u64,
    /// Marked episodes that served text.
    pub marked_text: u64,
    /// Time (ns) episodes spent with their child raised: an episode counts as marked if
    /// raised for a moment (an image demoted at its first band), this says for how long.
    pub raised_ns: u128,
    /// Of it, the time of episodes that served text.
    pub raised_text_ns: u128,
}

impl MarkingAccuracy {
    /// The share of marked episodes that served text (POS's precision); `None` if none was
    /// marked.
    pub fn precision(&self) -> Option<f64> {
        (self.marked > 0).then(|| self.marked_text as f64 / self.marked as f64)
    }

    /// The share of text episodes that were marked; `None` without text.
    pub fn recall(&self) -> Option<f64> {
        (self.text > 0).then(|| self.marked_text as f64 / self.text as f64)
    }

    /// The share of the raised episode time that served text (the precision weighted by
    /// how long each episode stayed raised); `None` if nothing was raised.
    pub fn time_precision(&self) -> Option<f64> {
        (self.raised_ns > 0).then(|| self.raised_text_ns as f64 / self.raised_ns as f64)
    }

    /// The sum of two runs' counts.
    pub fn plus(self, o: MarkingAccuracy) -> MarkingAccuracy {
        MarkingAccuracy {
            episodes: self.episodes + o.episodes,
            text: self.text + o.text,
            marked: self.marked + o.marked,
            marked_text: self.marked_text + o.marked_text,
            raised_ns: self.raised_ns + o.raised_ns,
            raised_text_ns: self.raised_text_ns + o.raised_text_ns,
        }
    }
}

/// [`MarkingAccuracy`] with its two shares, as the summary writes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MarkingReport {
    /// The counts.
    #[serde(flatten)]
    pub counts: MarkingAccuracy,
    /// [`MarkingAccuracy::precision`]: the share of marked episodes that served text.
    pub precision: Option<f64>,
    /// [`MarkingAccuracy::recall`]: the share of text episodes that were marked.
    pub recall: Option<f64>,
    /// [`MarkingAccuracy::time_precision`]: the share of raised episode time that served
    /// text.
    pub time_precision: Option<f64>,
}

impl From<MarkingAccuracy> for MarkingReport {
    fn from(counts: MarkingAccuracy) -> Self {
        MarkingReport {
            counts,
            precision: counts.precision(),
            recall: counts.recall(),
            time_precision: counts.time_precision(),
        }
    }
}

/// Whether the task with `acts` was marked at some moment of `[from, to]`.
fn marked_during(acts: &[(u128, bool)], from: u128, to: u128) -> bool {
    // Raised at `from`: the last decision before it was a raise.
    let before = acts.iter().take_while(|a| a.0 <= from).last();
    if before.is_some_and(|a| a.1) {
        return true;
    }
    acts.iter().any(|a| a.1 && a.0 > from && a.0 <= to)
}

/// How long the task with `acts` was raised within `[from, to]` (ns).
fn raised_within(acts: &[(u128, bool)], from: u128, to: u128) -> u128 {
    let mut raised_since = acts
        .iter()
        .take_while(|a| a.0 <= from)
        .last()
        .filter(|a| a.1)
        .map(|_| from);
    let mut total = 0;
    for &(t, up) in acts.iter().filter(|a| a.0 > from && a.0 <= to) {
        match (up, raised_since) {
            (true, None) => raised_since = Some(t),
            (false, Some(s)) => {
                total += t - s;
                raised_since = None;
            }
            _ => {}
        }
    }
    total + raised_since.map_or(0, |s| to - s)
}

/// Match `episodes` with the daemon's decisions `acts`.
pub fn accuracy(episodes: &[Episode], acts: &BTreeMap<u64, Vec<(u128, bool)>>) -> MarkingAccuracy {
    let mut m = MarkingAccuracy::default();
    for e in episodes {
        m.episodes += 1;
        m.text += u64::from(e.text);
        let marked = acts
            .get(&e.tid)
            .is_some_and(|a| marked_during(a, e.start_ns, e.start_ns + e.dur_ns));
        if marked {
            m.marked += 1;
            m.marked_text += u64::from(e.text);
            let r = raised_within(&acts[&e.tid], e.start_ns, e.start_ns + e.dur_ns);
            m.raised_ns += r;
            if e.text {
                m.raised_text_ns += r;
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_episodes_are_matched_by_child_and_time() {
        let log = "101 1000.000 3.000 200 /b0/index.html text/html\n\
                   102 1000.010 12.500 200 /b0/img0.bmp image/bmp\n\
                   101 1001.000 2.000 200 /b1/index.html text/html; charset=UTF-8\n\
                   103 1001.000 9.000 200 /b1/img1.bmp image/bmp\n\
                   garbage\n";
        let e = parse_fpm_access(log);
        assert_eq!(e.len(), 4);
        assert_eq!(e[1].tid, 102);
        assert_eq!(e[1].dur_ns, 12_500_000);
        assert!(e[0].text && !e[1].text && e[2].text);
        // 101 raised before its first request (while asleep) and lowered after it; 102
        // raised 5 ms into its request; 103 never.
        let acts = parse_actions(
            "999900000000 raise 101\n1000004000000 lower 101\n1000015000000 raise 102\n\
             1000030000000 lower 102\nnonsense\n",
        );
        assert_eq!(acts[&101].len(), 2);
        let m = accuracy(&e, &acts);
        assert_eq!(
            m,
            MarkingAccuracy {
                episodes: 4,
                text: 2,
                marked: 2,
                marked_text: 1,
                // 101: raised through [1000.000, 1000.003] (3 ms, lowered after it);
                // 102: raised from 1000.015 to its end at 1000.0225 (7.5 ms).
                raised_ns: 10_500_000,
                raised_text_ns: 3_000_000,
            }
        );
        assert_eq!(m.time_precision(), Some(3.0 / 10.5));
        assert_eq!(m.precision(), Some(0.5));
        assert_eq!(m.recall(), Some(0.5));
        assert_eq!(m.plus(m).marked, 4);
        assert_eq!(MarkingAccuracy::default().precision(), None);
        let a = parse_apache_access(
            "201 1000000000 2500 200 /b0/index.html text/html\n\
             202 1000001000 9000 200 /b0/img0.bmp image/bmp\n",
        );
        assert_eq!((a[0].start_ns, a[0].dur_ns), (1_000_000_000_000, 2_500_000));
        assert!(a[0].text && !a[1].text && a[1].tid == 202);
    }
}

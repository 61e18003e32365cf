//! What a run measured: one [`PageRecord`] per page (per request in `rate` mode), the
//! [`Summary`] (min/max/mean/median/p90/p99/range of t1 and t2: percentiles from an
//! HdrHistogram at microsecond resolution, 3 significant digits; min, max and mean exact), and
//! the writers: `pages.csv`, `summary.json`, `config.json` and a readable table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::client::ErrorKind;
use crate::config::LoadConfig;
use crate::pages::PageRow;
use crate::LoadError;

/// One page (or request, in `rate` mode).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageRecord {
    /// Browser index (connection index in `rate` mode).
    pub browser: u32,
    /// Start (scheduled start in the open-loop modes), ms since the run start.
    pub start_ms: f64,
    /// First byte of the HTML, ms after the start.
    pub t1_first_ms: Option<f64>,
    /// Last byte of the HTML, ms after the start.
    pub t1_ms: Option<f64>,
    /// All embedded objects done (= t1 without objects); None if any request failed.
    pub t2_ms: Option<f64>,
    /// Body bytes of the HTML and all its objects, as received (compressed if gzip-encoded).
    pub bytes: u64,
    /// The same bytes after content decoding (= `bytes` when nothing was gzip-encoded). Not
    /// in pages.csv (whose columns stay as they were); summed into summary.json.
    pub bytes_decoded: u64,
    /// Status of the HTML response (0: none).
    pub status: u16,
    /// Requests made for this page.
    pub requests: u32,
    /// Requests that failed (no complete response).
    pub failed_requests: u32,
    /// Class of the first error.
    pub error_kind: Option<ErrorKind>,
    /// The first error (and how many more).
    pub error: Option<String>,
    /// When each step of the HTML's request happened (`None` if it failed). Not in pages.csv;
    /// written to `html.csv`.
    pub html: Option<HtmlTiming>,
}

/// The steps of one page's HTML request, ms after the page's start (its scheduled start in
/// the open-loop modes), and the start as Unix time, so that they can be matched against a
/// server's access log and a scheduler trace (`html.csv`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HtmlTiming {
    /// The page's start, Unix time in microseconds.
    pub start_unix_us: f64,
    /// When the browser began the request (later than the start when the client was late).
    pub begin_ms: f64,
    /// When a new connection was opened (`None`: a kept-alive one was used).
    pub connect_ms: Option<f64>,
    /// When that connection's connect completed.
    pub connected_ms: Option<f64>,
    /// When the whole request was written.
    pub sent_ms: f64,
    /// When the first byte of the response was read.
    pub first_ms: f64,
    /// When the last byte of the response was read (t1).
    pub done_ms: f64,
}

/// The header line of `html.csv`.
pub const HTML_HEADER: &str =
    "browser,start_ms,start_unix_us,begin_ms,connect_ms,connected_ms,sent_ms,first_ms,done_ms";

/// `html.csv`: one line per page whose HTML arrived ([`HtmlTiming`]; times in ms with three
/// decimals, the start's Unix time in whole microseconds, empty when unknown).
pub fn html_csv(pages: &[PageRecord]) -> String {
    let mut s = String::from(HTML_HEADER);
    s.push('\n');
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    for p in pages {
        let Some(h) = &p.html else { continue };
        let _ = writeln!(
            s,
            "{},{:.3},{:.0},{:.3},{},{},{:.3},{:.3},{:.3}",
            p.browser,
            p.start_ms,
            h.start_unix_us,
            h.begin_ms,
            opt(h.connect_ms),
            opt(h.connected_ms),
            h.sent_ms,
            h.first_ms,
            h.done_ms
        );
    }
    s
}

impl From<&PageRecord> for PageRow {
    fn from(p: &PageRecord) -> PageRow {
        PageRow {
            browser: p.browser as usize,
            start_ms: p.start_ms,
            t1_first_ms: p.t1_first_ms,
            t1_ms: p.t1_ms,
            t2_ms: p.t2_ms,
            bytes: p.bytes,
            status: p.status,
            error: p.error.clone().unwrap_or_default(),
        }
    }
}

impl PageRecord {
    pub(crate) fn new(browser: usize, start_ms: f64) -> Self {
        PageRecord {
            browser: browser as u32,
            start_ms,
            t1_first_ms: None,
            t1_ms: None,
            t2_ms: None,
            bytes: 0,
            bytes_decoded: 0,
            status: 0,
            requests: 0,
            failed_requests: 0,
            error_kind: None,
            error: None,
            html: None,
        }
    }

    pub(crate) fn note_error(&mut self, kind: ErrorKind, msg: String) {
        if self.error.is_none() {
            self.error_kind = Some(kind);
            self.error = Some(msg);
        }
    }
}

/// Statistics of one time (ms). All `None` when no page had that time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Smallest value (exact).
    pub min_ms: Option<f64>,
    /// Largest value (exact).
    pub max_ms: Option<f64>,
    /// Mean (exact).
    pub mean_ms: Option<f64>,
    /// Median (from the histogram).
    pub median_ms: Option<f64>,
    /// 90th percentile (from the histogram).
    pub p90_ms: Option<f64>,
    /// 99th percentile (from the histogram).
    pub p99_ms: Option<f64>,
    /// `max - min`.
    pub range_ms: Option<f64>,
    /// How many values.
    pub count: u64,
}

impl Stats {
    /// Computes the statistics of `values` (ms).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Stats {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        h.auto(true);
        let (mut n, mut sum, mut min, mut max) = (0u64, 0f64, f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            let v = v.max(0.0);
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
            let us = (v * 1e3).round().max(1.0) as u64;
            let _ = h.record(us);
        }
        if n == 0 {
            return Stats::default();
        }
        let q = |p: f64| Some((h.value_at_quantile(p) as f64 / 1e3).clamp(min, max));
        Stats {
            min_ms: Some(min),
            max_ms: Some(max),
            mean_ms: Some(sum / n as f64),
            median_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            range_ms: Some(max - min),
            count: n,
        }
    }
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Pages (rows of pages.csv).
    pub pages: u64,
    /// Pages with an error (any request failed or answered >= 400, or the run cut it).
    pub errors: u64,
    /// Last byte of the HTML.
    pub t1: Stats,
    /// All objects done.
    pub t2: Stats,
    /// First byte of the HTML.
    pub t1_first: Stats,
    /// Completed requests (any status) per second of the run.
    pub requests_per_s: f64,
    /// Completed requests.
    pub requests: u64,
    /// Failed requests.
    pub request_errors: u64,
    /// Body bytes received, as on the wire (after de-chunking, before content decoding:
    /// compressed bytes when responses were gzip-encoded). Completed requests only.
    pub bytes: u64,
    /// Body bytes after content decoding (gunzipped; = `bytes` when nothing was
    /// gzip-encoded). Absent in summaries written before it existed (reads as 0).
    #[serde(default)]
    pub bytes_decoded: u64,
    /// Run length: start to the last page's end (s).
    pub duration_s: f64,
    /// Arrival mode.
    pub mode: String,
    /// Pages per error kind of their first error.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Pages per status of their HTML response ("0" = none).
    pub status: BTreeMap<String, u64>,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The configuration run.
    pub config: LoadConfig,
    /// One record per page, by start time.
    pub pages: Vec<PageRecord>,
    /// The summary.
    pub summary: Summary,
}

impl Report {
    pub(crate) fn new(config: LoadConfig, mut pages: Vec<PageRecord>, elapsed: Duration) -> Self {
        pages.sort_by(|a, b| {
            a.start_ms
                .total_cmp(&b.start_ms)
                .then(a.browser.cmp(&b.browser))
        });
        let mut errors_by_kind = BTreeMap::new();
        let mut status = BTreeMap::new();
        let (mut requests, mut request_errors, mut bytes, mut errors) = (0u64, 0u64, 0u64, 0u64);
        let mut bytes_decoded = 0u64;
        for p in &pages {
            requests += u64::from(p.requests - p.failed_requests);
            request_errors += u64::from(p.failed_requests);
            bytes += p.bytes;
            bytes_decoded += p.bytes_decoded;
            if let Some(k) = p.error_kind {
                errors += 1;
                *errors_by_kind.entry(k.name().to_string()).or_insert(0) += 1;
            }
            *status.entry(p.status.to_string()).or_insert(0) += 1;
        }
        let secs = elapsed.as_secs_f64();
        let summary = Summary {
            pages: pages.len() as u64,
            errors,
            t1: Stats::of(pages.iter().filter_map(|p| p.t1_ms)),
            t2: Stats::of(pages.iter().filter_map(|p| p.t2_ms)),
            t1_first: Stats::of(pages.iter().filter_map(|p| p.t1_first_ms)),
            requests_per_s: if secs > 0.0 {
                requests as f64 / secs
            } else {
                0.0
            },
            requests,
            request_errors,
            bytes,
            bytes_decoded,
            duration_s: secs,
            mode: config.arrival.name().to_string(),
            errors_by_kind,
            status,
        };
        Report {
            config,
            pages,
            summary,
        }
    }

    /// `pages.csv` as text (see [`crate::pages`]).
    pub fn pages_csv(&self) -> String {
        let rows: Vec<PageRow> = self.pages.iter().map(PageRow::from).collect();
        crate::pages::write_csv(&rows)
    }

    /// Writes `pages.csv`, `html.csv`, `summary.json` and `config.json` into `dir` (created
    /// if missing).
    pub fn write_dir(&self, dir: &Path) -> Result<(), LoadError> {
        let w = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|e| LoadError::Write(p.display().to_string(), e))
        };
        std::fs::create_dir_all(dir).map_err(|e| LoadError::Write(dir.display().to_string(), e))?;
        w("pages.csv", self.pages_csv())?;
        w("html.csv", html_csv(&self.pages))?;
        w(
            "summary.json",
            serde_json::to_string_pretty(&self.summary).expect("summary serializes") + "\n",
        )?;
        w(
            "config.json",
            serde_json::to_string_pretty(&self.config).expect("config serializes") + "\n",
        )?;
        Ok(())
    }

    /// A readable table of the summary.
    pub fn table(&self) -> String {
        let s = &self.summary;
        let c = &self.config;
        let mut o = String::new();
        let units = if matches!(c.arrival, crate::Arrival::Rate { .. }) {
            "requests"
        } else {
            "pages"
        };
        let _ = writeln!(
            o,
            "mode {}, {} {} ({} with errors), {} requests ({} failed), {:.1} req/s, {:.2} MB in {:.2} s",
            s.mode,
            s.pages,
            units,
            s.errors,
            s.requests,
            s.request_errors,
            s.requests_per_s,
            s.bytes as f64 / 1e6,
            s.duration_s
        );
        if s.bytes_decoded != s.bytes {
            let _ = writeln!(
                o,
                "content decoded: {:.2} MB from {:.2} MB received ({}: {:.2}x)",
                s.bytes_decoded as f64 / 1e6,
                s.bytes as f64 / 1e6,
                c.accept_encoding.name(),
                s.bytes_decoded as f64 / (s.bytes.max(1)) as f64
            );
        }
        let _ = writeln!(
            o,
            "{:<9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            "ms", "min", "mean", "median", "p90", "p99", "max", "range", "n"
        );
        let f = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
        for (name, st) in [("t1 first", &s.t1_first), ("t1", &s.t1), ("t2", &s.t2)] {
            let _ = writeln!(
                o,
                "{:<9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
                name,
                f(st.min_ms),
                f(st.mean_ms),
                f(st.median_ms),
                f(st.p90_ms),
                f(st.p99_ms),
                f(st.max_ms),
                f(st.range_ms),
                st.count
            );
        }
        if !s.errors_by_kind.is_empty() {
            let kinds: Vec<String> = s
                .errors_by_kind
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(o, "errors: {}", kinds.join(", "));
            if let Some(first) = self.pages.iter().find_map(|p| p.error.as_deref()) {
                let _ = writeln!(o, "first error: {first}");
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_csv_has_a_line_per_page_whose_html_arrived() {
        let mut kept = PageRecord::new(3, 1500.0);
        kept.html = Some(HtmlTiming {
            start_unix_us: 1_795_801_181_682_558.0,
            begin_ms: 0.25,
            connect_ms: None,
            connected_ms: None,
            sent_ms: 0.5,
            first_ms: 40.125,
            done_ms: 41.0,
        });
        let mut fresh = PageRecord::new(4, 1540.0);
        fresh.html = Some(HtmlTiming {
            connect_ms: Some(0.3),
            connected_ms: Some(0.9),
            ..kept.html.clone().unwrap()
        });
        let failed = PageRecord::new(5, 1580.0);
        let text = html_csv(&[kept, failed, fresh]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HTML_HEADER);
        assert_eq!(
            lines[1],
            "3,1500.000,1795801181682558,0.250,,,0.500,40.125,41.000"
        );
        assert_eq!(
            lines[2],
            "4,1540.000,1795801181682558,0.250,0.300,0.900,0.500,40.125,41.000"
        );
        assert_eq!(lines.len(), 3, "the failed page has no line: {text}");
    }

    #[test]
    fn stats_exact_and_percentiles() {
        let s = Stats::of((1..=100).map(|i| i as f64));
        assert_eq!(s.min_ms, Some(1.0));
        assert_eq!(s.max_ms, Some(100.0));
        assert_eq!(s.mean_ms, Some(50.5));
        assert_eq!(s.range_ms, Some(99.0));
        let med = s.median_ms.unwrap();
        assert!((49.9..=50.1).contains(&med), "{med}");
        let p99 = s.p99_ms.unwrap();
        assert!((98.9..=99.1).contains(&p99), "{p99}");
        assert_eq!(Stats::of(std::iter::empty()).count, 0);
        assert_eq!(Stats::of(std::iter::empty()).mean_ms, None);
    }
}

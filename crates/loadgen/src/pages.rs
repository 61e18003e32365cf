//! `pages.csv`, typed: one [`PageRow`] per page (per request in `rate` mode), the writer that
//! `triage load --out` uses and the reader the lab uses, so both sides share one record.
//!
//! Columns: `browser,start,t1_first_ms,t1_ms,t2_ms,bytes,status,error`. Times are ms with
//! three decimals, empty when unknown; `status` is empty when no response came; `error` is
//! quoted as RFC 4180 says when it needs it. The reader finds columns by header name (`start`
//! may also be called `start_ms`), so files with extra columns still read.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// One row of `pages.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageRow {
    /// Browser index (connection index in `rate` mode).
    pub browser: usize,
    /// Start of the page request (scheduled start in the open-loop modes), ms since the run
    /// start; NaN when a file does not say.
    pub start_ms: f64,
    /// Until the first byte of the HTML arrived.
    pub t1_first_ms: Option<f64>,
    /// Until the whole HTML arrived (seed 001's t1).
    pub t1_ms: Option<f64>,
    /// Until all embedded objects arrived (seed 001's t2); `None` if any request failed.
    pub t2_ms: Option<f64>,
    /// Body bytes received (compressed if gzip-encoded).
    pub bytes: u64,
    /// HTTP status of the HTML (0: none).
    pub status: u16,
    /// Why the page failed (empty if it did not).
    pub error: String,
}

impl PageRow {
    /// Whether the page was fetched completely without error.
    pub fn ok(&self) -> bool {
        self.error.is_empty() && self.t1_ms.is_some() && self.t2_ms.is_some()
    }
}

/// The header line of `pages.csv`.
pub const HEADER: &str = "browser,start,t1_first_ms,t1_ms,t2_ms,bytes,status,error";

/// Quote a CSV field if it needs it (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Split one CSV record (RFC 4180 quoting).
pub fn split_csv_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `pages.csv` as text: the header, then one line per row.
pub fn write_csv<'a>(rows: impl IntoIterator<Item = &'a PageRow>) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    for p in rows {
        let status = if p.status == 0 {
            String::new()
        } else {
            p.status.to_string()
        };
        let _ = writeln!(
            s,
            "{},{:.3},{},{},{},{},{},{}",
            p.browser,
            p.start_ms,
            opt(p.t1_first_ms),
            opt(p.t1_ms),
            opt(p.t2_ms),
            p.bytes,
            status,
            csv_field(&p.error)
        );
    }
    s
}

/// Read `pages.csv` (see the module docs). Errors name the line and the column.
pub fn read_csv(text: &str) -> Result<Vec<PageRow>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| "pages.csv is empty (no header)".to_string())?;
    let cols = split_csv_line(header);
    let idx = |names: &[&str]| cols.iter().position(|c| names.contains(&c.trim()));
    let need = |names: &[&str]| {
        idx(names)
            .ok_or_else(|| format!("pages.csv: no column `{}` in header `{header}`", names[0]))
    };
    let c_browser = need(&["browser"])?;
    let c_t1 = need(&["t1_ms"])?;
    let c_t2 = need(&["t2_ms"])?;
    let c_start = idx(&["start", "start_ms"]);
    let c_first = idx(&["t1_first_ms"]);
    let c_bytes = idx(&["bytes"]);
    let c_status = idx(&["status"]);
    let c_error = idx(&["error"]);
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let f = split_csv_line(line);
        let get = |c: Option<usize>| c.and_then(|c| f.get(c)).map(|s| s.trim()).unwrap_or("");
        let num = |c: Option<usize>| get(c).parse::<f64>().ok().filter(|x| x.is_finite());
        let browser = get(Some(c_browser)).parse::<usize>().map_err(|_| {
            format!(
                "pages.csv line {}: bad browser `{}`",
                n + 2,
                get(Some(c_browser))
            )
        })?;
        rows.push(PageRow {
            browser,
            start_ms: num(c_start).unwrap_or(f64::NAN),
            t1_first_ms: num(c_first),
            t1_ms: num(Some(c_t1)),
            t2_ms: num(Some(c_t2)),
            bytes: get(c_bytes).parse().unwrap_or(0),
            status: get(c_status).parse().unwrap_or(0),
            error: get(c_error).to_owned(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(browser: usize, t1: Option<f64>, error: &str) -> PageRow {
        PageRow {
            browser,
            start_ms: 12.5,
            t1_first_ms: t1.map(|t| t / 2.0),
            t1_ms: t1,
            t2_ms: t1.map(|t| t * 3.0),
            bytes: 4096,
            status: if t1.is_some() { 200 } else { 0 },
            error: error.to_owned(),
        }
    }

    #[test]
    fn written_rows_read_back() {
        let rows = vec![
            row(0, Some(10.0), ""),
            row(3, None, "connect: refused, \"twice\""),
        ];
        let text = write_csv(&rows);
        assert!(text.starts_with(HEADER));
        assert_eq!(read_csv(&text).unwrap(), rows);
        assert!(rows[0].ok() && !rows[1].ok());
    }

    #[test]
    fn columns_are_found_by_name_and_bad_rows_named() {
        let text = "t2_ms,browser,t1_ms,start_ms,extra\n30,2,10,1.5,x\n";
        let r = read_csv(text).unwrap();
        assert_eq!(
            (r[0].browser, r[0].t1_ms, r[0].start_ms),
            (2, Some(10.0), 1.5)
        );
        assert_eq!(r[0].status, 0);
        let e = read_csv("browser,t1_ms\n1,2\n").unwrap_err();
        assert!(e.contains("t2_ms"), "{e}");
        let e = read_csv("browser,t1_ms,t2_ms\nx,1,2\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("`x`"), "{e}");
        assert!(read_csv("").unwrap_err().contains("empty"));
    }

    #[test]
    fn quoting() {
        assert_eq!(csv_field("a"), "a");
        assert_eq!(csv_field("a, \"b\""), "\"a, \"\"b\"\"\"");
        assert_eq!(
            split_csv_line("1,\"a, \"\"b\"\"\",c"),
            vec!["1", "a, \"b\"", "c"]
        );
    }
}

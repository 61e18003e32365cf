//! The `trace` arrival mode's file format: one page request per line,
//!
//! ```text
//! # comment lines and blank lines are ignored
//! <ms offset> <url> [browser]
//! 0      /index.html
//! 12.5   /b3/index.html 3
//! 250    http://10.0.0.2:8080/other.html
//! ```
//!
//! `ms offset` is milliseconds since the run start (a non-negative decimal); `url` is absolute
//! (`http://...`) or a path starting with `/`, resolved against the URL given on the command
//! line (its `{browser}`/`{page}` placeholders are expanded with the entry's browser, page 0);
//! `browser` (optional, default 0) names the emulated browser whose connections the page uses
//! and goes to the `browser` column of `pages.csv`. Lines need not be sorted; they are replayed
//! in offset order (ties keep file order).

use url::Url;

use crate::url_pattern::{expand_url, parse_http_url};

/// One line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEntry {
    /// Offset from the run start, in nanoseconds.
    pub offset_ns: u64,
    /// The URL as written (absolute or a `/path`).
    pub url: String,
    /// Browser index.
    pub browser: usize,
    /// 1-based line number in the file (for messages).
    pub line: usize,
}

/// Parses trace text; the error names the line and what is wrong with it.
pub fn parse_trace(text: &str) -> Result<Vec<TraceEntry>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut f = l.split_whitespace();
        let off = f.next().unwrap_or_default();
        let ms: f64 = off
            .parse()
            .map_err(|_| format!("line {line}: offset {off:?} is not a number of milliseconds"))?;
        if !(0.0..1e12).contains(&ms) {
            return Err(format!("line {line}: offset {off:?} must be >= 0 ms"));
        }
        let url = f
            .next()
            .ok_or_else(|| format!("line {line}: missing URL after the offset"))?
            .to_string();
        let browser = match f.next() {
            None => 0,
            Some(b) => b
                .parse()
                .map_err(|_| format!("line {line}: browser {b:?} is not a non-negative integer"))?,
        };
        if let Some(x) = f.next() {
            return Err(format!("line {line}: unexpected extra field {x:?}"));
        }
        out.push(TraceEntry {
            offset_ns: (ms * 1e6).round() as u64,
            url,
            browser,
            line,
        });
    }
    out.sort_by_key(|e| e.offset_ns);
    Ok(out)
}

/// Resolves a trace URL against the run's URL pattern (browser 0, page 0 for the base).
pub fn resolve(url: &str, base_pattern: &str) -> Result<Url, String> {
    resolve_for(url, base_pattern, 0)
}

/// Resolves a trace URL for `browser`.
pub fn resolve_for(url: &str, base_pattern: &str, browser: usize) -> Result<Url, String> {
    if url.starts_with('/') {
        let base = expand_url(base_pattern, browser, 0).map_err(|e| e.to_string())?;
        base.join(url)
            .map_err(|e| format!("cannot resolve {url:?} against {base}: {e}"))
    } else {
        parse_http_url(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sorts_and_names_bad_lines() {
        let t = "# hi\n\n100 /a.html 2\n0.5 http://h:81/b.html\n";
        let e = parse_trace(t).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].offset_ns, 500_000);
        assert_eq!(e[0].browser, 0);
        assert_eq!(e[1].url, "/a.html");
        assert_eq!(e[1].browser, 2);
        assert_eq!(e[1].line, 3);
        assert!(parse_trace("x /a").unwrap_err().contains("line 1"));
        assert!(parse_trace("1").unwrap_err().contains("missing URL"));
        assert!(parse_trace("1 /a b").unwrap_err().contains("browser"));
        assert!(parse_trace("-1 /a").is_err());
        let u = resolve("/x/y.html", "http://h:9/b{browser}/i.html").unwrap();
        assert_eq!(u.as_str(), "http://h:9/x/y.html");
        assert!(resolve("ftp://h/x", "http://h/").is_err());
    }
}

//! The one reader of access logs in the Combined Log Format (and its older Common form), as
//! nginx, Apache httpd, HAProxy's `option httplog`-style exports, `triage serve` and `triage
//! front` write them:
//!
//! ```text
//! 10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326 "http://x/" "Mozilla/4.08"
//! ```
//!
//! Used by `triage capacity` (request rates per time bucket) and by trace replay (the targets
//! to request). A malformed line is never guessed at: [`parse_log`] skips it and counts it, with
//! the first few reasons, so the caller can say how many it skipped.

/// One access-log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClfRecord {
    /// The client address (`%h`), as written.
    pub host: String,
    /// The authenticated user (`%u`); `None` for `-`.
    pub user: Option<String>,
    /// When the request was received (`%t`), in seconds since the Unix epoch (UTC).
    pub time_s: i64,
    /// The request line (`%r`) unescaped, as the client sent it (may be garbage for a 400).
    pub request: String,
    /// The request line's method, when it has the form `METHOD TARGET [PROTOCOL]`.
    pub method: Option<String>,
    /// The request line's target (path and query, or absolute form).
    pub target: Option<String>,
    /// The final status (`%>s`).
    pub status: u16,
    /// Body bytes sent (`%b`); `None` for `-`.
    pub bytes: Option<u64>,
    /// The `Referer` header (Combined form only); `None` for `-` or absent.
    pub referer: Option<String>,
    /// The `User-Agent` header (Combined form only); `None` for `-` or absent.
    pub user_agent: Option<String>,
}

/// A whole log read: the records in file order and what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClfLog {
    /// Lines that parsed, in file order.
    pub records: Vec<ClfRecord>,
    /// How many non-empty lines did not parse.
    pub malformed: usize,
    /// The first few malformed lines: (1-based line number, reason), for the error message.
    pub malformed_examples: Vec<(usize, String)>,
}

/// How many malformed lines [`parse_log`] keeps as examples.
const EXAMPLES: usize = 5;

/// Reads every line of `text`; empty lines are ignored, malformed ones counted.
pub fn parse_log(text: &str) -> ClfLog {
    let mut log = ClfLog::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(r) => log.records.push(r),
            Err(e) => {
                log.malformed += 1;
                if log.malformed_examples.len() < EXAMPLES {
                    log.malformed_examples.push((i + 1, e));
                }
            }
        }
    }
    log
}

/// Parses one line; the error names the field that is wrong.
pub fn parse_line(line: &str) -> Result<ClfRecord, String> {
    let mut rest = line.trim_end_matches(['\r', '\n']);
    let host = token(&mut rest).ok_or("no client address")?;
    let _ident = token(&mut rest).ok_or("no ident field")?;
    let user = token(&mut rest).ok_or("no user field")?;
    rest = rest.trim_start();
    let rest_after_bracket = rest
        .strip_prefix('[')
        .ok_or("no [time] field after the user")?;
    let close = rest_after_bracket.find(']').ok_or("unterminated [time]")?;
    let time_s = parse_time(&rest_after_bracket[..close])?;
    rest = &rest_after_bracket[close + 1..];
    let request = quoted(&mut rest).ok_or("no quoted request line")?;
    let status: u16 = token(&mut rest)
        .ok_or("no status")?
        .parse()
        .map_err(|_| "status is not a number".to_string())?;
    if !(100..=999).contains(&status) {
        return Err(format!("status {status} is not a 3-digit code"));
    }
    let bytes = match token(&mut rest).ok_or("no bytes field")? {
        "-" => None,
        b => Some(
            b.parse()
                .map_err(|_| format!("bytes field `{b}` is not a number"))?,
        ),
    };
    let referer = optional_quoted(&mut rest)?;
    let user_agent = optional_quoted(&mut rest)?;
    let mut parts = request.split(' ').filter(|p| !p.is_empty());
    let (method, target) = match (parts.next(), parts.next()) {
        (Some(m), Some(t)) if m.bytes().all(|b| b.is_ascii_uppercase()) => {
            (Some(m.to_string()), Some(t.to_string()))
        }
        _ => (None, None),
    };
    Ok(ClfRecord {
        host: host.to_string(),
        user: dash_none(user),
        time_s,
        request,
        method,
        target,
        status,
        bytes,
        referer: referer.filter(|r| r != "-"),
        user_agent: user_agent.filter(|a| a != "-"),
    })
}

fn dash_none(s: &str) -> Option<String> {
    (s != "-").then(|| s.to_string())
}

/// The next space-separated token.
fn token<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let s = rest.trim_start();
    if s.is_empty() {
        return None;
    }
    let end = s.find(' ').unwrap_or(s.len());
    *rest = &s[end..];
    Some(&s[..end])
}

/// A `"..."` field with `\"` and `\\` escapes (and nginx's `\xHH`), unescaped.
fn quoted(rest: &mut &str) -> Option<String> {
    let s = rest.trim_start().strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                *rest = &s[i + 1..];
                return Some(out);
            }
            '\\' => match chars.next()? {
                (_, 'x') => {
                    let h: String = [chars.next()?.1, chars.next()?.1].iter().collect();
                    let b = u8::from_str_radix(&h, 16).ok()?;
                    out.push(if b.is_ascii() { b as char } else { '?' });
                }
                (_, e) => out.push(e),
            },
            c => out.push(c),
        }
    }
    None
}

/// A quoted field that may be absent (the Common form stops after the bytes).
fn optional_quoted(rest: &mut &str) -> Result<Option<String>, String> {
    if rest.trim().is_empty() {
        return Ok(None);
    }
    quoted(rest)
        .map(Some)
        .ok_or_else(|| "a referer or user-agent field is not quoted".to_string())
}

/// `10/Oct/2000:13:55:36 -0700` to seconds since the epoch (UTC).
fn parse_time(s: &str) -> Result<i64, String> {
    let bad = || format!("time `{s}` is not dd/Mon/yyyy:hh:mm:ss +zzzz");
    let (stamp, zone) = s.split_once(' ').ok_or_else(bad)?;
    let mut f = stamp.split(['/', ':']);
    let mut next = || f.next().ok_or_else(bad);
    let day: i64 = next()?.parse().map_err(|_| bad())?;
    let month = match next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return Err(bad()),
    };
    let year: i64 = next()?.parse().map_err(|_| bad())?;
    let hour: i64 = next()?.parse().map_err(|_| bad())?;
    let min: i64 = next()?.parse().map_err(|_| bad())?;
    let sec: i64 = next()?.parse().map_err(|_| bad())?;
    if !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return Err(bad());
    }
    let zone = zone.as_bytes();
    if zone.len() != 5 || !(zone[0] == b'+' || zone[0] == b'-') {
        return Err(bad());
    }
    let digits = std::str::from_utf8(&zone[1..]).map_err(|_| bad())?;
    let hhmm: i64 = digits.parse().map_err(|_| bad())?;
    let offset = (hhmm / 100 * 3600 + hhmm % 100 * 60) * if zone[0] == b'-' { -1 } else { 1 };
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec;
    Ok(local - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apache_combined_example() {
        let r = parse_line(
            r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#,
        )
        .unwrap();
        assert_eq!(r.host, "127.0.0.1");
        assert_eq!(r.user.as_deref(), Some("frank"));
        // 2000-10-10 20:55:36 UTC.
        assert_eq!(r.time_s, 971_211_336);
        assert_eq!(r.method.as_deref(), Some("GET"));
        assert_eq!(r.target.as_deref(), Some("/apache_pb.gif"));
        assert_eq!(r.status, 200);
        assert_eq!(r.bytes, Some(2326));
        assert_eq!(
            r.referer.as_deref(),
            Some("http://www.example.com/start.html")
        );
        assert_eq!(
            r.user_agent.as_deref(),
            Some("Mozilla/4.08 [en] (Win98; I ;Nav)")
        );
    }

    #[test]
    fn triage_serves_own_line_reads_back() {
        // The form crates/server/src/logs.rs writes (escaped quote in the request line).
        let r = parse_line(
            "10.0.0.1 - - [10/Oct/2000:20:55:36 +0000] \"GET /a\\\"b HTTP/1.1\" 200 - \"-\" \"curl/8\"",
        )
        .unwrap();
        assert_eq!(r.time_s, 971_211_336);
        assert_eq!(r.target.as_deref(), Some("/a\"b"));
        assert_eq!(r.bytes, None);
        assert_eq!(r.referer, None);
        assert_eq!(r.user, None);
    }

    #[test]
    fn common_form_and_garbage_request_lines_parse() {
        let r = parse_line(r#"::1 - - [01/Jan/1970:00:00:00 +0000] "-" 400 0"#).unwrap();
        assert_eq!(r.time_s, 0);
        assert_eq!(r.method, None);
        assert_eq!(r.user_agent, None);
        let r = parse_line(
            r#"1.2.3.4 - - [29/Feb/2024:23:59:59 +0100] "\x16\x03\x01" 400 157 "-" "-""#,
        )
        .unwrap();
        assert_eq!(r.time_s, 1_709_251_199 - 3600);
        assert_eq!(r.target, None);
    }

    #[test]
    fn malformed_lines_are_counted_with_reasons_never_guessed() {
        let text = "\
1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 5 \"-\" \"-\"
not a log line at all

1.2.3.4 - - [10/Foo/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 5
1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 2x0 5
1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1 200 5
";
        let log = parse_log(text);
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.malformed, 4);
        let lines: Vec<usize> = log.malformed_examples.iter().map(|e| e.0).collect();
        assert_eq!(lines, vec![2, 4, 5, 6]);
        assert!(log.malformed_examples[1].1.contains("dd/Mon/yyyy"));
        assert!(log.malformed_examples[2].1.contains("status"));
    }
}

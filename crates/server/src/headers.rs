//! Request-header logic, pure: byte ranges (RFC 9110 §14), conditional requests (ETag /
//! Last-Modified), `Accept-Encoding: gzip`, RFC 9218 `Priority: u=N`, and the content class of
//! a MIME type.

use std::time::SystemTime;

use policy::ContentClass;

/// Outcome of a `Range` header against a representation of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeReq {
    /// No (usable) range: send the whole representation.
    Full,
    /// One satisfiable range, inclusive bounds.
    Partial(u64, u64),
    /// Syntactically valid but no byte can be served: 416.
    Unsatisfiable,
}

/// Parse a `Range` value. Invalid syntax, other units and multiple ranges give `Full` (the
/// header may be ignored per RFC 9110).
pub fn parse_range(value: &str, len: u64) -> RangeReq {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeReq::Full;
    };
    if spec.contains(',') {
        return RangeReq::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeReq::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        // Suffix range: the last n bytes.
        let Ok(n) = b.parse::<u64>() else {
            return RangeReq::Full;
        };
        if n == 0 || len == 0 {
            return RangeReq::Unsatisfiable;
        }
        return RangeReq::Partial(len.saturating_sub(n), len - 1);
    }
    let Ok(start) = a.parse::<u64>() else {
        return RangeReq::Full;
    };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e,
            _ => return RangeReq::Full,
        }
    };
    if start >= len {
        return RangeReq::Unsatisfiable;
    }
    RangeReq::Partial(start, end.min(len - 1))
}

fn strip_weak(tag: &str) -> &str {
    tag.trim().strip_prefix("W/").unwrap_or(tag.trim())
}

/// `If-None-Match` against `etag` (weak comparison).
pub fn none_match(header: &str, etag: &str) -> bool {
    let mine = strip_weak(etag);
    header
        .split(',')
        .any(|t| t.trim() == "*" || strip_weak(t) == mine)
}

/// `If-Modified-Since`: true when the resource was not modified after the date.
pub fn not_modified_since(header: &str, mtime: SystemTime) -> bool {
    let Ok(since) = httpdate::parse_http_date(header.trim()) else {
        return false;
    };
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    };
    secs(mtime) <= secs(since)
}

/// `If-Range`: whether the range may be honoured (strong ETag match or exact date).
pub fn if_range_ok(header: &str, etag: &str, last_modified: &str) -> bool {
    let h = header.trim();
    if h.starts_with('"') {
        h == etag
    } else if h.starts_with("W/") {
        false
    } else {
        h == last_modified
    }
}

/// Whether `Accept-Encoding` accepts gzip (with a non-zero q).
pub fn accepts_gzip(header: &str) -> bool {
    header.split(',').any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if !(coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip")) {
            return false;
        }
        for p in parts {
            if let Some(q) = p.trim().strip_prefix("q=") {
                return q.trim().parse::<f32>().map(|q| q > 0.0).unwrap_or(false);
            }
        }
        true
    })
}

/// RFC 9218 urgency from a `Priority` header (`u=0..7`).
pub fn urgency(header: &str) -> Option<u8> {
    header.split(',').find_map(|p| {
        let v = p.trim().strip_prefix("u=")?;
        v.trim().parse::<u8>().ok().filter(|u| *u <= 7)
    })
}

/// Coarse content class of a MIME type.
pub fn content_class(mime: &str) -> ContentClass {
    // Byte scans, not `split`: this runs for every request.
    let b = mime.as_bytes();
    let end = b.iter().position(|&c| c == b';').unwrap_or(b.len());
    let essence = mime[..end].trim();
    let (top, sub) = match essence.bytes().position(|c| c == b'/') {
        Some(at) => (&essence[..at], &essence[at + 1..]),
        None => (essence, ""),
    };
    match top {
        "text" => ContentClass::Text,
        "image" | "video" | "audio" | "font" => ContentClass::Media,
        "application" => match sub {
            "javascript" | "json" | "xhtml+xml" | "xml" | "ecmascript" => ContentClass::Text,
            "octet-stream" | "zip" | "gzip" | "pdf" | "wasm" => ContentClass::Media,
            _ => ContentClass::Unknown,
        },
        _ => ContentClass::Unknown,
    }
}

/// Whether `mime` matches one of `types` (`type/sub` or `type/*`).
pub fn mime_matches(mime: &str, types: &[String]) -> bool {
    let essence = mime.split(';').next().unwrap_or("").trim();
    types.iter().any(|t| {
        t.strip_suffix("/*").map_or_else(
            || t.eq_ignore_ascii_case(essence),
            |top| {
                essence
                    .split_once('/')
                    .is_some_and(|(a, _)| a.eq_ignore_ascii_case(top))
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), RangeReq::Partial(0, 9));
        assert_eq!(parse_range("bytes=90-", 100), RangeReq::Partial(90, 99));
        assert_eq!(parse_range("bytes=-10", 100), RangeReq::Partial(90, 99));
        assert_eq!(parse_range("bytes=-500", 100), RangeReq::Partial(0, 99));
        assert_eq!(parse_range("bytes=50-500", 100), RangeReq::Partial(50, 99));
        assert_eq!(parse_range("bytes=100-", 100), RangeReq::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), RangeReq::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-0", 0), RangeReq::Unsatisfiable);
        assert_eq!(parse_range("bytes=9-1", 100), RangeReq::Full);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), RangeReq::Full);
        assert_eq!(parse_range("items=0-1", 100), RangeReq::Full);
        assert_eq!(parse_range("bytes=x-", 100), RangeReq::Full);
    }

    #[test]
    fn conditionals() {
        assert!(none_match("\"a\", \"b\"", "\"b\""));
        assert!(none_match("W/\"b\"", "\"b\""));
        assert!(none_match("*", "\"b\""));
        assert!(!none_match("\"c\"", "\"b\""));
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let d = httpdate::fmt_http_date(t);
        assert!(not_modified_since(&d, t + Duration::from_millis(500)));
        assert!(!not_modified_since(&d, t + Duration::from_secs(1)));
        assert!(!not_modified_since("garbage", t));
        assert!(if_range_ok("\"x\"", "\"x\"", &d));
        assert!(!if_range_ok("W/\"x\"", "\"x\"", &d));
        assert!(if_range_ok(&d, "\"x\"", &d));
    }

    #[test]
    fn encodings_and_priority() {
        assert!(accepts_gzip("gzip, deflate, br"));
        assert!(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
        assert_eq!(urgency("u=1, i"), Some(1));
        assert_eq!(urgency("i"), None);
        assert_eq!(urgency("u=9"), None);
    }

    #[test]
    fn classes() {
        assert_eq!(
            content_class("text/html; charset=utf-8"),
            ContentClass::Text
        );
        assert_eq!(content_class("application/javascript"), ContentClass::Text);
        assert_eq!(content_class("image/png"), ContentClass::Media);
        assert_eq!(content_class("application/x-foo"), ContentClass::Unknown);
        assert_eq!(content_class(" image/svg+xml ;x=1"), ContentClass::Media);
        assert_eq!(content_class("text"), ContentClass::Text);
        assert_eq!(content_class(""), ContentClass::Unknown);
        let t = vec!["text/*".to_string(), "image/svg+xml".to_string()];
        assert!(mime_matches("text/css", &t));
        assert!(mime_matches("image/svg+xml", &t));
        assert!(!mime_matches("image/png", &t));
    }
}

//! Parsing what a script prints before its body (RFC 3875 §6): the header block, its end, and
//! which of the three response kinds it is.
//!
//! - **document**: `Content-Type` (required unless the status is 204 or 304), optional
//!   `Status: NNN reason` (default 200), other header fields passed on;
//! - **local redirect**: `Location: /abs-path[?query]` and no `Status` (or 200): the server
//!   answers the request as if it had been a GET for that path (other fields are ignored);
//! - **client redirect**: `Location` with anything else (an absolute URI, or any location with
//!   a 3xx `Status`): sent to the client, status 302 unless `Status` says otherwise.
//!
//! Malformed output (a line without `:`, a bad field name or value, an obsolete folded line,
//! a bad or repeated `Status`/`Location`/`Content-Type`, a bad `Content-Length`, no
//! `Content-Type` and no `Location`) is refused with a reason; the caller answers 502.
//! Hop-by-hop fields (`Connection`, `Keep-Alive`, `Transfer-Encoding`, `TE`, `Trailer`,
//! `Upgrade`, `Proxy-Connection`) are dropped: the server frames the response itself.

use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, StatusCode};

/// Where the header block ends: `(header_len, body_start)`, where `buf[..header_len]` holds
/// the field lines and `buf[body_start..]` is the start of the body. Lines may end with LF or
/// CRLF.
pub fn header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut line_start = 0;
    while let Some(off) = buf[line_start..].iter().position(|&b| b == b'\n') {
        let nl = line_start + off;
        let line = &buf[line_start..nl];
        if line.is_empty() || line == b"\r" {
            return Some((line_start, nl + 1));
        }
        line_start = nl + 1;
    }
    None
}

/// What the header block says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A document (or a client redirect, which is a document with `Location`).
    Document {
        /// From `Status`, or 302 for a client redirect, else 200.
        status: StatusCode,
        /// The headers to send to the client.
        headers: HeaderMap,
        /// From the script's `Content-Length`, enforced by the relay.
        content_length: Option<u64>,
    },
    /// Answer with the resource at this local path (and query).
    LocalRedirect(String),
}

/// Parse the header block (`buf[..header_len]` from [`header_end`]). `Err` holds the reason.
pub fn parse(block: &[u8]) -> Result<Parsed, String> {
    let mut status: Option<StatusCode> = None;
    let mut location: Option<HeaderValue> = None;
    let mut ctype: Option<HeaderValue> = None;
    let mut content_length = None;
    let mut headers = HeaderMap::new();
    for (n, raw) in block.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        let ln = n + 1;
        if line[0] == b' ' || line[0] == b'\t' {
            return Err(format!("line {ln}: folded header line"));
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(format!(
                "line {ln}: not a header field: {:?}",
                String::from_utf8_lossy(&line[..line.len().min(60)])
            ));
        };
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| {
            format!(
                "line {ln}: bad field name {:?}",
                String::from_utf8_lossy(&line[..colon.min(60)])
            )
        })?;
        let value = trim(&line[colon + 1..]);
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| format!("line {ln}: bad value for {name}"))?;
        let dup = |what: &str| Err(format!("line {ln}: repeated {what}"));
        match name.as_str() {
            "status" => {
                if status.is_some() {
                    return dup("Status");
                }
                status = Some(parse_status(value.as_bytes()).ok_or_else(|| {
                    format!(
                        "line {ln}: bad Status {:?}",
                        String::from_utf8_lossy(value.as_bytes())
                    )
                })?);
            }
            "location" => {
                if location.is_some() {
                    return dup("Location");
                }
                if value.is_empty() {
                    return Err(format!("line {ln}: empty Location"));
                }
                location = Some(value);
            }
            "content-type" => {
                if ctype.is_some() {
                    return dup("Content-Type");
                }
                ctype = Some(value);
            }
            "content-length" => {
                if content_length.is_some() {
                    return dup("Content-Length");
                }
                let s = std::str::from_utf8(value.as_bytes()).unwrap_or("");
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("line {ln}: bad Content-Length {s:?}"));
                }
                content_length = Some(
                    s.parse::<u64>()
                        .map_err(|_| format!("line {ln}: bad Content-Length {s:?}"))?,
                );
            }
            "connection" | "keep-alive" | "transfer-encoding" | "te" | "trailer" | "upgrade"
            | "proxy-connection" => {
                tracing::debug!("cgi: dropping hop-by-hop field {name} from script output");
            }
            _ => {
                headers.append(name, value);
            }
        }
    }
    if let Some(loc) = &location {
        let b = loc.as_bytes();
        let local = b.first() == Some(&b'/') && b.get(1) != Some(&b'/');
        if local && status.is_none_or(|s| s == StatusCode::OK) {
            if b.contains(&b'#') {
                return Err("local redirect Location holds a fragment".into());
            }
            let s = std::str::from_utf8(b).map_err(|_| "Location is not ASCII".to_string())?;
            return Ok(Parsed::LocalRedirect(s.to_owned()));
        }
    }
    let status = match (status, &location) {
        (Some(s), _) => s,
        (None, Some(_)) => StatusCode::FOUND,
        (None, None) => StatusCode::OK,
    };
    match (&ctype, &location) {
        (Some(ct), _) => {
            headers.insert(CONTENT_TYPE, ct.clone());
        }
        (None, Some(_)) => {}
        (None, None) if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED => {}
        (None, None) => return Err("no Content-Type (and no Location)".into()),
    }
    if let Some(loc) = location {
        headers.insert(LOCATION, loc);
    }
    if let Some(n) = content_length {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
    }
    Ok(Parsed::Document {
        status,
        headers,
        content_length,
    })
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

/// `NNN reason-phrase` (the phrase is optional); 200..=599 only, as a final status.
fn parse_status(v: &[u8]) -> Option<StatusCode> {
    if v.len() < 3 || !v[..3].iter().all(u8::is_ascii_digit) {
        return None;
    }
    if v.len() > 3 && v[3] != b' ' {
        return None;
    }
    let code = StatusCode::from_bytes(&v[..3]).ok()?;
    (200..=599).contains(&code.as_u16()).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(block: &str) -> (u16, HeaderMap, Option<u64>) {
        match parse(block.as_bytes()).unwrap() {
            Parsed::Document {
                status,
                headers,
                content_length,
            } => (status.as_u16(), headers, content_length),
            p => panic!("not a document: {p:?}"),
        }
    }

    #[test]
    fn finds_the_end_of_the_header_block() {
        assert_eq!(header_end(b"A: b\n\nbody"), Some((5, 6)));
        assert_eq!(header_end(b"A: b\r\n\r\nbody"), Some((6, 8)));
        assert_eq!(header_end(b"A: b\r\n\nbody"), Some((6, 7)));
        assert_eq!(header_end(b"\nbody"), Some((0, 1)));
        assert_eq!(header_end(b"A: b\r\nC: d"), None);
        assert_eq!(header_end(b"A: b\n"), None);
    }

    #[test]
    fn document_responses() {
        let (s, h, cl) = doc("Content-Type: text/html\r\nX-A:  1 \r\nSet-Cookie: a\nSet-Cookie: b");
        assert_eq!(s, 200);
        assert_eq!(h["content-type"], "text/html");
        assert_eq!(h["x-a"], "1");
        assert_eq!(h.get_all("set-cookie").iter().count(), 2);
        assert_eq!(cl, None);
        let (s, _, cl) = doc("Status: 404 Not Found\nContent-type: text/plain\nContent-Length: 12");
        assert_eq!((s, cl), (404, Some(12)));
        let (s, h, _) = doc("Status: 204");
        assert_eq!(s, 204);
        assert!(h.get("content-type").is_none());
        let (_, h, _) = doc("Content-Type: a/b\nConnection: close\nTransfer-Encoding: chunked");
        assert!(h.get("connection").is_none() && h.get("transfer-encoding").is_none());
    }

    #[test]
    fn redirects() {
        assert_eq!(
            parse(b"Location: /x/y?z=1").unwrap(),
            Parsed::LocalRedirect("/x/y?z=1".into())
        );
        assert_eq!(
            parse(b"Status: 200 OK\nLocation: /x").unwrap(),
            Parsed::LocalRedirect("/x".into())
        );
        let (s, h, _) = doc("Location: http://example.org/");
        assert_eq!(s, 302);
        assert_eq!(h["location"], "http://example.org/");
        let (s, h, _) = doc("Status: 301 Moved\nLocation: /elsewhere\nContent-Type: text/html");
        assert_eq!(s, 301);
        assert_eq!(h["location"], "/elsewhere");
        // Network-path reference: not local.
        let (s, _, _) = doc("Location: //evil.example/");
        assert_eq!(s, 302);
    }

    #[test]
    fn malformed_output_is_refused_with_a_reason() {
        for (block, why) in [
            ("hello world", "not a header field"),
            ("Content-Type: a/b\n continued", "folded"),
            ("Status: abc\nContent-Type: a/b", "bad Status"),
            ("Status: 99 x\nContent-Type: a/b", "bad Status"),
            ("Status: 100 Continue\nContent-Type: a/b", "bad Status"),
            ("Status: 2000\nContent-Type: a/b", "bad Status"),
            (
                "Status: 200\nStatus: 201\nContent-Type: a/b",
                "repeated Status",
            ),
            (
                "Content-Type: a/b\nContent-Type: c/d",
                "repeated Content-Type",
            ),
            (
                "Content-Type: a/b\nContent-Length: -1",
                "bad Content-Length",
            ),
            (
                "Content-Type: a/b\nContent-Length: 1x",
                "bad Content-Length",
            ),
            ("X-A: b", "no Content-Type"),
            ("", "no Content-Type"),
            ("Bad Name: x\nContent-Type: a/b", "bad field name"),
            ("Location: /a#frag", "fragment"),
            ("Location: ", "empty Location"),
        ] {
            let err = parse(block.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{block:?}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Some((h, b)) = header_end(&v) {
                proptest::prop_assert!(h < b && b <= v.len());
            }
            let _ = parse(&v);
        }
    }
}

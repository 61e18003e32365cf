//! What a parsed request head must satisfy before it is routed, pure (RFC 9112 and what nginx
//! answers to the same bytes):
//! - **Transfer-Encoding**: only `chunked` alone is implemented; any other coding, or a list
//!   (`gzip, chunked`, `identity, chunked`, `chunked, chunked`), is 501; the header twice, or
//!   on an HTTP/1.0 request, or beside a `Content-Length`, is 400.
//! - **Host**: an HTTP/1.1 request needs exactly one (400 without, 400 for two); its value must
//!   be a host name or address literal with an optional port: no whitespace, `/`, `\`, `..`,
//!   `@` or control bytes (400).
//! - **Absolute form** (`GET http://b.test/x`): the target's authority names the virtual host
//!   and wins over `Host` (RFC 9112 §3.2.2); userinfo in it (`http://u@b.test/`) is 400.

use http::{header, HeaderMap, StatusCode, Uri, Version};

/// Why a request is refused before routing: the status and a short reason for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// 400 or 501.
    pub status: StatusCode,
    /// What was wrong.
    pub why: &'static str,
}

fn refuse(status: StatusCode, why: &'static str) -> Refusal {
    Refusal { status, why }
}

/// The bytes a reg-name or IPv4 address may hold (unreserved, sub-delims, `%`), by byte value.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
            );
        b += 1;
    }
    t
};

/// Whether `h` is a usable `Host` value (or authority): a reg-name, IPv4 address or bracketed
/// IPv6 literal, optionally followed by `:port`, with no `..` anywhere.
pub fn valid_host(h: &str) -> bool {
    let b = h.as_bytes();
    if b.is_empty() || b.len() > 255 {
        return false;
    }
    // One pass over the bytes, by table: `str::contains("..")` alone builds a substring
    // searcher (about 400 instructions, more than the whole check).
    let port_ok = |p: &[u8]| p.len() <= 5 && p.iter().all(u8::is_ascii_digit);
    if b[0] == b'[' {
        let Some(close) = memchr::memchr(b']', b) else {
            return false;
        };
        let lit = &b[1..close];
        let after = &b[close + 1..];
        let lit_ok = !lit.is_empty()
            && lit
                .iter()
                .all(|&c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
            && !lit.windows(2).any(|w| w[0] == b'.' && w[1] == b'.');
        return lit_ok
            && match after {
                [] => true,
                [b':', p @ ..] => port_ok(p),
                _ => false,
            };
    }
    let mut prev = 0u8;
    for (i, &c) in b.iter().enumerate() {
        if c == b':' {
            return i > 0 && port_ok(&b[i + 1..]);
        }
        if !NAME_BYTE[c as usize] || (c == b'.' && prev == b'.') {
            return false;
        }
        prev = c;
    }
    true
}

/// Check the `Transfer-Encoding` of a request: `Ok` for none or exactly `chunked`.
pub fn check_transfer_encoding(version: Version, headers: &HeaderMap) -> Result<(), Refusal> {
    let mut values = headers.get_all(header::TRANSFER_ENCODING).iter();
    let Some(first) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "Transfer-Encoding sent twice",
        ));
    }
    if headers.contains_key(header::CONTENT_LENGTH) {
        // Request smuggling's classic: which framing does the next hop believe?
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "Content-Length and Transfer-Encoding together",
        ));
    }
    if version == Version::HTTP_10 {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    let v = first.to_str().unwrap_or("");
    if v.trim().eq_ignore_ascii_case("chunked") {
        Ok(())
    } else {
        Err(refuse(
            StatusCode::NOT_IMPLEMENTED,
            "a transfer coding other than chunked alone",
        ))
    }
}

/// The host a request names, checked: the authority of an absolute-form target, else the one
/// `Host` header (`None` for an HTTP/1.0 request without one).
pub fn request_host<'a>(
    version: Version,
    uri: &'a Uri,
    headers: &'a HeaderMap,
) -> Result<Option<&'a str>, Refusal> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(refuse(StatusCode::BAD_REQUEST, "two Host headers"));
    }
    let host = match host {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s) if valid_host(s) => Some(s),
            _ => return Err(refuse(StatusCode::BAD_REQUEST, "malformed Host header")),
        },
    };
    if let Some(a) = uri.authority() {
        if a.as_str().contains('@') {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "userinfo in the request target",
            ));
        }
        if !valid_host(a.as_str()) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "malformed authority in the request target",
            ));
        }
        return Ok(Some(a.as_str()));
    }
    if host.is_none() && version != Version::HTTP_10 && version != Version::HTTP_09 {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "an HTTP/1.1 request without Host",
        ));
    }
    Ok(host)
}

/// Every check of this module on one request head: the host it names, or why it is refused.
pub fn admit<'a>(
    version: Version,
    uri: &'a Uri,
    headers: &'a HeaderMap,
) -> Result<Option<&'a str>, Refusal> {
    check_transfer_encoding(version, headers)?;
    request_host(version, uri, headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn head(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn status(
        version: Version,
        target: &str,
        pairs: &[(&str, &str)],
    ) -> Result<Option<String>, u16> {
        let uri: Uri = target.parse().unwrap();
        let h = head(pairs);
        admit(version, &uri, &h)
            .map(|o| o.map(str::to_owned))
            .map_err(|r| r.status.as_u16())
    }

    const V11: Version = Version::HTTP_11;

    #[test]
    fn host_values() {
        for ok in [
            "a.test",
            "a.test:8080",
            "127.0.0.1",
            "[::1]",
            "[::1]:80",
            "xn--bcher-kva.ch",
            "a.test.",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in [
            "", "a b", "a/b", "..", "a..b", "a\\b", "u@a", "a:x", "[::1", "[zz]", "a\tb",
            "a:123456", ":80", "[::1]x", "[::1]:8x", "[1..2]", "a:1:2",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    #[test]
    fn host_header_rules() {
        assert_eq!(
            status(V11, "/", &[("host", "a.test")]),
            Ok(Some("a.test".into()))
        );
        assert_eq!(status(V11, "/", &[]), Err(400), "HTTP/1.1 without Host");
        assert_eq!(
            status(Version::HTTP_10, "/", &[]),
            Ok(None),
            "HTTP/1.0 may omit it"
        );
        assert_eq!(
            status(V11, "/", &[("host", "a"), ("host", "evil.example")]),
            Err(400)
        );
        assert_eq!(status(V11, "/", &[("host", "a b")]), Err(400));
        assert_eq!(status(V11, "/", &[("host", "a/b")]), Err(400));
        assert_eq!(status(V11, "/", &[("host", "..")]), Err(400));
    }

    #[test]
    fn the_absolute_form_names_the_host() {
        assert_eq!(
            status(V11, "http://b.test/x", &[("host", "localhost")]),
            Ok(Some("b.test".into()))
        );
        assert_eq!(
            status(V11, "http://b.test:81/x", &[]),
            Ok(Some("b.test:81".into()))
        );
        assert_eq!(
            status(V11, "http://u@b.test/x", &[("host", "b.test")]),
            Err(400)
        );
        assert_eq!(
            status(V11, "http://u:p@b.test/x", &[("host", "b.test")]),
            Err(400)
        );
    }

    #[test]
    fn transfer_codings() {
        let te = |v: &str| status(V11, "/", &[("host", "a"), ("transfer-encoding", v)]);
        assert!(te("chunked").is_ok());
        assert!(te("Chunked").is_ok());
        assert_eq!(te("gzip, chunked"), Err(501));
        assert_eq!(te("identity, chunked"), Err(501));
        assert_eq!(te("chunked, chunked"), Err(501));
        assert_eq!(te("gzip"), Err(501));
        assert_eq!(
            status(
                V11,
                "/",
                &[
                    ("host", "a"),
                    ("transfer-encoding", "chunked"),
                    ("transfer-encoding", "chunked")
                ]
            ),
            Err(400)
        );
        assert_eq!(
            status(Version::HTTP_10, "/", &[("transfer-encoding", "chunked")]),
            Err(400)
        );
        assert_eq!(
            status(
                V11,
                "/",
                &[
                    ("host", "a"),
                    ("content-length", "4"),
                    ("transfer-encoding", "chunked")
                ]
            ),
            Err(400)
        );
    }
}

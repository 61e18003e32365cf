//! Request and response heads: what the relay needs to know of one (its framing, whether the
//! connection stays open, `Expect: 100-continue`, the back end's disk queue) and the head
//! written on to the other side, once, into a reused buffer. Hop-by-hop headers
//! (`Connection`, `Keep-Alive`, `Proxy-Connection`) are the relay's own on each side; a
//! client's `X-Triage-Forward` is dropped and the front end's added; a back end's
//! `X-Triage-Disk` is read and dropped. Pure: no I/O.

use super::framing::Framing;
use crate::shared::{DISK_HEADER, FORWARD_HEADER};

/// Most header lines in a head.
pub const MAX_HEADERS: usize = 96;

/// Why a head is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadHead(pub &'static str);

/// What the relay reads from a request's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestMeta {
    /// How its body is delimited.
    pub framing: Framing,
    /// HTTP/1.0 (minor version 0).
    pub http10: bool,
    /// The client keeps the connection open after this request.
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before sending its body.
    pub expect_continue: bool,
    /// `HEAD`: the response has no body whatever its headers say.
    pub head: bool,
    /// GET, HEAD, PUT, DELETE, OPTIONS or TRACE: may be tried again elsewhere.
    pub idempotent: bool,
}

/// What the relay reads from a response's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseMeta {
    /// How its body is delimited.
    pub framing: Framing,
    /// The back end keeps the connection open after this response.
    pub keep_alive: bool,
    /// `X-Triage-Disk`: the back end's disk queue.
    pub disk: Option<u32>,
}

fn is(name: &str, lower: &str) -> bool {
    name.eq_ignore_ascii_case(lower)
}

fn hop_by_hop(name: &str) -> bool {
    is(name, "connection") || is(name, "keep-alive") || is(name, "proxy-connection")
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(|t| t.trim_ascii())
}

/// What the length headers and `Connection` of a head say.
struct Common {
    length: Option<u64>,
    chunked: bool,
    other_coding: bool,
    close: bool,
    keep_alive: bool,
}

fn common(headers: &[httparse::Header<'_>]) -> Result<Common, BadHead> {
    let mut c = Common {
        length: None,
        chunked: false,
        other_coding: false,
        close: false,
        keep_alive: false,
    };
    for h in headers {
        if is(h.name, "content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(BadHead("bad Content-Length"))?;
            if c.length.is_some_and(|l| l != v) {
                return Err(BadHead("conflicting Content-Length"));
            }
            c.length = Some(v);
        } else if is(h.name, "transfer-encoding") {
            for t in tokens(h.value).filter(|t| !t.is_empty()) {
                // Chunked must be the last coding; anything after it is another coding.
                if t.eq_ignore_ascii_case(b"chunked") && !c.chunked {
                    c.chunked = true;
                    c.other_coding = false;
                } else {
                    c.other_coding = true;
                }
            }
        } else if is(h.name, "connection") {
            for t in tokens(h.value) {
                c.close |= t.eq_ignore_ascii_case(b"close");
                c.keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    Ok(c)
}

/// Read a parsed request head.
pub fn request_meta(req: &httparse::Request<'_, '_>) -> Result<RequestMeta, BadHead> {
    let method = req.method.ok_or(BadHead("no method"))?;
    let http10 = req.version == Some(0);
    let c = common(req.headers)?;
    let framing = match (c.chunked || c.other_coding, c.length) {
        (true, Some(_)) => return Err(BadHead("both Transfer-Encoding and Content-Length")),
        (true, None) if c.other_coding => return Err(BadHead("unknown Transfer-Encoding")),
        (true, None) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::None,
    };
    let expect = req.headers.iter().find(|h| is(h.name, "expect"));
    Ok(RequestMeta {
        framing,
        http10,
        keep_alive: if http10 { c.keep_alive } else { !c.close },
        expect_continue: expect.is_some_and(|h| h.value.eq_ignore_ascii_case(b"100-continue")),
        head: method == "HEAD",
        idempotent: matches!(
            method,
            "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
        ),
    })
}

/// Read a parsed response head to a request whose meta is `req`.
pub fn response_meta(
    resp: &httparse::Response<'_, '_>,
    req: &RequestMeta,
) -> Result<ResponseMeta, BadHead> {
    let code = resp.code.ok_or(BadHead("no status"))?;
    let c = common(resp.headers)?;
    let framing = if req.head || (100..200).contains(&code) || code == 204 || code == 304 {
        Framing::None
    } else if c.chunked && !c.other_coding {
        Framing::Chunked
    } else if c.chunked || c.other_coding {
        Framing::Close
    } else {
        c.length.map_or(Framing::Close, Framing::Length)
    };
    let http10 = resp.version == Some(0);
    let disk = resp
        .headers
        .iter()
        .find(|h| is(h.name, DISK_HEADER))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .and_then(|v| v.trim().parse().ok());
    Ok(ResponseMeta {
        framing,
        keep_alive: framing != Framing::Close && if http10 { c.keep_alive } else { !c.close },
        disk,
    })
}

fn header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Write the request head sent to a back end into `out` (cleared first), all but its end
/// ([`end_request`]): the request line as the client sent it, its headers but the hop-by-hop
/// ones, `Expect` (the front end answers it) and `X-Triage-Forward`, and `Connection:
/// keep-alive` for HTTP/1.0 (so that the back-end connection may be pooled).
pub fn write_request(out: &mut Vec<u8>, req: &httparse::Request<'_, '_>, meta: &RequestMeta) {
    out.clear();
    out.extend_from_slice(req.method.unwrap_or("GET").as_bytes());
    out.push(b' ');
    out.extend_from_slice(req.path.unwrap_or("/").as_bytes());
    out.extend_from_slice(if meta.http10 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    for h in req.headers.iter() {
        if hop_by_hop(h.name) || is(h.name, FORWARD_HEADER) || is(h.name, "expect") {
            continue;
        }
        header(out, h.name.as_bytes(), h.value);
    }
    if meta.http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
}

/// End the request head that [`write_request`] left `base` bytes long (again at each try):
/// `X-Triage-Forward: forward_to` when forwarding, and the empty line.
pub fn end_request(out: &mut Vec<u8>, base: usize, forward_to: Option<&str>) {
    out.truncate(base);
    if let Some(to) = forward_to {
        header(out, FORWARD_HEADER.as_bytes(), to.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Append the response head sent to the client to `out` (after the request head, which a
/// retry sends again, is kept there): the status line,
/// the back end's headers but the hop-by-hop ones and `X-Triage-Disk`, then `Connection:
/// close` when the front end closes the client's connection after it, or `Connection:
/// keep-alive` to an HTTP/1.0 client whose connection stays open.
pub fn write_response(
    out: &mut Vec<u8>,
    resp: &httparse::Response<'_, '_>,
    close: bool,
    client_http10: bool,
) {
    out.extend_from_slice(if resp.version == Some(0) {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    let code = resp.code.unwrap_or(502);
    out.extend_from_slice(&[
        b'0' + (code / 100 % 10) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
        b' ',
    ]);
    out.extend_from_slice(resp.reason.unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in resp.headers.iter() {
        if hop_by_hop(h.name) || is(h.name, DISK_HEADER) {
            continue;
        }
        header(out, h.name.as_bytes(), h.value);
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if client_http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The front end's own answer with `code` (an error: empty body, the connection closed).
pub fn error_response(code: u16) -> Vec<u8> {
    let reason = match code {
        400 => "Bad Request",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req_meta(wire: &[u8]) -> Result<RequestMeta, BadHead> {
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Request::new(&mut h);
        assert!(r.parse(wire).unwrap().is_complete());
        request_meta(&r)
    }

    fn resp_meta(wire: &[u8], req: &RequestMeta) -> ResponseMeta {
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut h);
        assert!(r.parse(wire).unwrap().is_complete());
        response_meta(&r, req).unwrap()
    }

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n";

    #[test]
    fn request_framing_and_keep_alive() {
        let g = req_meta(GET).unwrap();
        assert_eq!(
            (g.framing, g.keep_alive, g.idempotent),
            (Framing::None, true, true)
        );
        let p = req_meta(b"POST /a HTTP/1.1\r\nContent-Length: 12\r\nConnection: close\r\n\r\n")
            .unwrap();
        assert_eq!(
            (p.framing, p.keep_alive, p.idempotent),
            (Framing::Length(12), false, false)
        );
        let c = req_meta(
            b"PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
        )
        .unwrap();
        assert_eq!((c.framing, c.expect_continue), (Framing::Chunked, true));
        let old = req_meta(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(old.http10 && !old.keep_alive);
        let old = req_meta(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap();
        assert!(old.keep_alive);
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        for bad in [
            &b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
        ] {
            assert!(req_meta(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // The same length twice is one length.
        let same = req_meta(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(same.unwrap().framing, Framing::Length(2));
    }

    #[test]
    fn response_framing_follows_the_request_and_status() {
        let get = req_meta(GET).unwrap();
        let head = req_meta(b"HEAD /a HTTP/1.1\r\n\r\n").unwrap();
        let len = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX-Triage-Disk: 3\r\n\r\n";
        let m = resp_meta(len, &get);
        assert_eq!(
            (m.framing, m.keep_alive, m.disk),
            (Framing::Length(7), true, Some(3))
        );
        assert_eq!(resp_meta(len, &head).framing, Framing::None);
        for none in [
            &b"HTTP/1.1 204 No Content\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
        ] {
            assert_eq!(resp_meta(none, &get).framing, Framing::None);
        }
        let chunked = resp_meta(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            &get,
        );
        assert_eq!(
            (chunked.framing, chunked.keep_alive),
            (Framing::Chunked, true)
        );
        let close = resp_meta(b"HTTP/1.1 200 OK\r\n\r\n", &get);
        assert_eq!((close.framing, close.keep_alive), (Framing::Close, false));
        let old = resp_meta(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", &get);
        assert!(!old.keep_alive);
        let bye = resp_meta(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n",
            &get,
        );
        assert!(!bye.keep_alive);
    }

    #[test]
    fn heads_are_rewritten_once() {
        let wire = b"GET /a?b HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Triage-Forward: 10.0.0.1:1\r\nExpect: 100-continue\r\nUser-Agent: u\r\n\r\n";
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Request::new(&mut h);
        r.parse(wire).unwrap();
        let meta = request_meta(&r).unwrap();
        let mut out = Vec::new();
        write_request(&mut out, &r, &meta);
        let base = out.len();
        end_request(&mut out, base, None);
        end_request(&mut out, base, Some("127.0.0.1:8082"));
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: t\r\nUser-Agent: u\r\nx-triage-forward: 127.0.0.1:8082\r\n\r\n"
        );
        let wire = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nKeep-Alive: timeout=5\r\nX-Triage-Disk: 2\r\n\r\n";
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut h);
        r.parse(wire).unwrap();
        let request = out.clone();
        write_response(&mut out, &r, true, false);
        assert_eq!(&out[..request.len()], &request[..], "the request is kept");
        assert_eq!(
            String::from_utf8(out[request.len()..].to_vec()).unwrap(),
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        out.clear();
        write_response(&mut out, &r, false, true);
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("Connection: keep-alive\r\n\r\n"));
    }
}

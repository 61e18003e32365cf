//! One request on a connection: check its head ([`crate::admission`]: Host, transfer coding,
//! absolute form; refused with 400/501 and `Connection: close`), pick the site by the host it
//! names, hand the request to CGI when its path
//! is under one of the site's script directories and to the static files otherwise, and attach
//! the completion record (metrics, access log, connection idle) to the response.
//!
//! Both handlers produce their bodies through `body::ServeBody::gated` with a `ChunkSource`,
//! so every CPU burst passes the gate; the site's resource container rides in every burst's
//! hints.

use http::{header, Request, Response};
use hyper::body::Incoming;

use crate::body::{Completion, ServeBody};
use crate::ctx::{Conn, Ctx};
use crate::logs::AccessRecord;

/// Handle one request on a connection (marked started by the connection, `Conn::request_started`,
/// when its head was parsed).
pub async fn dispatch(ctx: &Ctx, conn: &Conn, req: Request<Incoming>) -> Response<ServeBody> {
    let access = ctx
        .access_log()
        .map(|_| Box::new(access_record(conn, &req)));
    let site = match crate::admission::admit(req.version(), req.uri(), req.headers()) {
        Ok(host) => ctx.sites().pick(host),
        Err(refusal) => {
            tracing::debug!(status = refusal.status.as_u16(), "refused: {}", refusal.why);
            let mut resp = crate::static_file::simple(refusal.status);
            // The body (if any) is not read: the connection cannot be reused.
            resp.headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            let status = resp.status().as_u16();
            return resp.map(|b| {
                b.with_completion(Completion::new(ctx.clone(), conn.clone(), status, access))
            });
        }
    };
    let resp = match site.cgi_for(req.uri().path()) {
        // Boxed: a CGI request's future is large, and every request's future would be as large
        // (the connection's service boxes it, a copy of its whole size per request).
        Some(cgi) => Box::pin(crate::cgi_route::serve(ctx, conn, site, cgi, req)).await,
        None => crate::static_file::serve(ctx, conn, site, req).await,
    };
    let status = resp.status().as_u16();
    resp.map(|b| b.with_completion(Completion::new(ctx.clone(), conn.clone(), status, access)))
}

/// `METHOD TARGET VERSION` for the access log, in one allocation of the size it needs (a
/// `format!` grows its string two or three times for a usual request line: docs/results-log.md).
fn request_line<B>(req: &Request<B>) -> String {
    use std::fmt::Write;
    let uri = req.uri();
    let target = uri.path_and_query().map_or(1, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.scheme_str().map_or(0, |s| s.len() + 3);
    let method = req.method().as_str();
    let mut line = String::with_capacity(method.len() + target + 11);
    let _ = write!(line, "{method} {uri} {:?}", req.version());
    line
}

fn access_record(conn: &Conn, req: &Request<Incoming>) -> AccessRecord {
    let h = |n: header::HeaderName| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    AccessRecord {
        remote: conn.remote().ip(),
        time: std::time::SystemTime::now(),
        request_line: request_line(req),
        referer: h(header::REFERER),
        user_agent: h(header::USER_AGENT),
    }
}

#[cfg(test)]
mod tests {
    use super::request_line;
    use http::{Method, Request, Version};

    #[test]
    fn the_request_line_is_what_format_wrote_in_the_room_reserved_for_it() {
        for (method, target, version) in [
            (Method::GET, "/file.html", Version::HTTP_11),
            (Method::GET, "/a/b?x=1&y=%20", Version::HTTP_10),
            (Method::GET, "http://example.com:8080/p?q", Version::HTTP_11),
            (Method::OPTIONS, "*", Version::HTTP_11),
            (Method::CONNECT, "example.com:443", Version::HTTP_11),
            (
                Method::from_bytes(b"PROPFIND").unwrap(),
                "/",
                Version::HTTP_2,
            ),
        ] {
            let req = Request::builder()
                .method(method.clone())
                .uri(target)
                .version(version)
                .body(())
                .unwrap();
            let line = request_line(&req);
            assert_eq!(
                line,
                format!("{} {} {:?}", req.method(), req.uri(), req.version())
            );
            // Reserved once: a string that grew would have at least doubled.
            assert!(
                line.capacity() <= line.len() + 11,
                "{line:?} {}",
                line.capacity()
            );
        }
    }
}

//! One request on a connection: pick the site by `Host`, hand the request to CGI when its path
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

/// Handle one request on a connection.
pub async fn dispatch(ctx: &Ctx, conn: &Conn, req: Request<Incoming>) -> Response<ServeBody> {
    conn.request_started(ctx.now());
    let access = ctx
        .access_log()
        .map(|_| Box::new(access_record(conn, &req)));
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host());
    let site = ctx.sites().pick(host);
    let resp = match site.cgi_for(req.uri().path()) {
        Some(cgi) => crate::cgi_route::serve(ctx, conn, site, cgi, req).await,
        None => crate::static_file::serve(ctx, conn, site, req).await,
    };
    let status = resp.status().as_u16();
    resp.map(|b| b.with_completion(Completion::new(ctx.clone(), conn.clone(), status, access)))
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
        request_line: format!("{} {} {:?}", req.method(), req.uri(), req.version()),
        referer: h(header::REFERER),
        user_agent: h(header::USER_AGENT),
    }
}

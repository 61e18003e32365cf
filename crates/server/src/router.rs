//! Virtual hosts and routes. A request picks its [`Site`] by `Host` (case-insensitive, port
//! ignored; unknown hosts get the first site), then the [`Route`] with the longest matching
//! path prefix, whose [`Handler`] produces the response.
//!
//! Extension point: new handler kinds (CGI) are new [`Handler`] variants dispatched in
//! [`dispatch`]; a site's resource container is [`Site::container`], passed to the policy in
//! `Hints::container` for every burst. Any handler produces its body through
//! `body::ServeBody::gated` with a `ChunkSource`, so its CPU bursts pass the gate.

use std::sync::Arc;

use http::{header, Request, Response};
use hyper::body::Incoming;

use crate::body::{Completion, ServeBody};
use crate::logs::AccessRecord;
use crate::server::{ConnState, Shared};
use crate::store::Store;

/// What serves a route.
#[derive(Debug)]
#[non_exhaustive]
pub enum Handler {
    /// Files from the site's store.
    Static,
}

/// A path prefix and its handler.
#[derive(Debug)]
pub struct Route {
    pub prefix: String,
    pub handler: Handler,
}

/// One virtual host.
#[derive(Debug)]
pub struct Site {
    pub name: String,
    pub aliases: Vec<String>,
    pub store: Store,
    pub index: Vec<String>,
    /// Resource container charged for this site's work (0 = root).
    pub container: u32,
    /// Longest prefix wins; a request no route matches is served by [`Handler::Static`].
    pub routes: Vec<Route>,
    /// CGI script directories, checked before the routes (see `cgi`).
    pub cgi: Option<Arc<crate::cgi::Cgi>>,
}

impl Site {
    /// A site serving `store` statically.
    pub fn new(name: impl Into<String>, store: Store, index: Vec<String>) -> Self {
        Self {
            name: name.into(),
            aliases: Vec::new(),
            store,
            index,
            container: 0,
            routes: vec![Route {
                prefix: "/".into(),
                handler: Handler::Static,
            }],
            cgi: None,
        }
    }

    /// The handler for `path`.
    pub fn handler(&self, path: &str) -> &Handler {
        self.routes
            .iter()
            .filter(|r| path.starts_with(&r.prefix))
            .max_by_key(|r| r.prefix.len())
            .map(|r| &r.handler)
            .unwrap_or(&Handler::Static)
    }

    fn answers(&self, host: &str) -> bool {
        self.name.eq_ignore_ascii_case(host)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(host))
    }
}

/// All sites; the first is the default.
#[derive(Debug)]
pub struct Sites(pub Vec<Arc<Site>>);

impl Sites {
    /// The site for a `Host` value.
    pub fn pick(&self, host: Option<&str>) -> &Arc<Site> {
        if self.0.len() > 1 {
            if let Some(h) = host {
                let h = strip_port(h);
                if let Some(s) = self.0.iter().find(|s| s.answers(h)) {
                    return s;
                }
            }
        }
        &self.0[0]
    }
}

fn strip_port(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().unwrap_or(rest);
    }
    match h.rsplit_once(':') {
        Some((a, p)) if p.bytes().all(|b| b.is_ascii_digit()) => a,
        _ => h,
    }
}

/// Handle one request on a connection: pick the site and handler, run it, and attach the
/// completion record to the response.
pub async fn dispatch(
    shared: &Arc<Shared>,
    conn: &Arc<ConnState>,
    req: Request<Incoming>,
) -> Response<ServeBody> {
    conn.request_started(shared.gate.now());
    let access = shared
        .access_log
        .as_ref()
        .map(|_| Box::new(access_record(conn, &req)));
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host());
    let site = shared.sites.pick(host).clone();
    let resp = match site
        .cgi
        .as_ref()
        .filter(|c| c.handles_path(req.uri().path()))
    {
        Some(cgi) => crate::cgi::glue::serve(shared, conn, &site, cgi, req).await,
        None => match site.handler(req.uri().path()) {
            Handler::Static => crate::static_file::serve(shared, conn, &site, req).await,
        },
    };
    let status = resp.status().as_u16();
    resp.map(|b| {
        b.with_completion(Completion::new(
            shared.clone(),
            conn.clone(),
            status,
            access,
        ))
    })
}

fn access_record(conn: &ConnState, req: &Request<Incoming>) -> AccessRecord {
    let h = |n: header::HeaderName| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    AccessRecord {
        remote: conn.remote.ip(),
        time: std::time::SystemTime::now(),
        request_line: format!("{} {} {:?}", req.method(), req.uri(), req.version()),
        referer: h(header::REFERER),
        user_agent: h(header::USER_AGENT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_ignored() {
        assert_eq!(strip_port("a.test:8080"), "a.test");
        assert_eq!(strip_port("a.test"), "a.test");
        assert_eq!(strip_port("[::1]:80"), "::1");
    }
}

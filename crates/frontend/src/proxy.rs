//! The proxy: pingora's `ProxyHttp` callbacks, driving the [`Dispatcher`] for every request
//! (pingora calls `upstream_peer` for each request, also each request of a kept-alive client
//! connection, and pools back-end connections per back end).
//!
//! Per request, the context ([`ReqCtx`]) holds the request's [`Load`] on its back ends and its
//! admission, both released when the context is dropped, whatever happens to the request.
//! Per client connection, the back end it is pinned to ([`ConnState`]) rides from one request
//! to the next through pingora's connection context (`pin` and `forward` mechanisms).
//!
//! Failures: a request that cannot connect to its back end, or is reset before any byte of the
//! response reached the client, takes that back end out ([`Backends::request_failed`]) and,
//! when idempotent, is tried on another (at most `retries` more times); a back end that goes
//! silent gets 504 (not retried: it may still be working), one that answers garbage 502. A
//! client's `X-Triage-Forward` header is always removed: only the front end asks back ends to
//! forward.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use async_trait::async_trait;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_error::{Error, ErrorSource, ErrorType, Result};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, ProxyWarnLogContext, Session};
use policy::dispatch::{target_id, Target};

use crate::access_log::Record;
use crate::admission::Admitted;
use crate::backends::Load;
use crate::config::Mechanism;
use crate::dispatcher::Choice;
use crate::shared::Live;
pub use crate::shared::{ConnState, Shared, DISK_HEADER, FORWARD_HEADER};

/// One request's state across pingora's callbacks.
#[derive(Debug)]
pub struct ReqCtx {
    _live: Live,
    target: Target,
    start: Instant,
    arrived: SystemTime,
    choice: Option<Choice>,
    load: Option<Load>,
    admitted: Option<Admitted>,
    conn: ConnState,
    tries: usize,
}

/// The `ProxyHttp` of the front end.
#[derive(Debug, Clone)]
pub struct FrontProxy(pub Arc<Shared>);

impl FrontProxy {
    fn may_retry(&self, session: &Session, ctx: &ReqCtx) -> bool {
        session.req_header().method.is_idempotent()
            && !session.as_ref().retry_buffer_truncated()
            && session.response_written().is_none()
            && ctx.tries <= self.0.cfg.retries
    }
}

fn client_ip(session: &Session) -> Option<std::net::IpAddr> {
    session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a: &SocketAddr| a.ip())
}

#[async_trait]
impl ProxyHttp for FrontProxy {
    type CTX = ReqCtx;

    fn init_downstream_modules(&self, _modules: &mut pingora_core::modules::http::HttpModules) {
        // None: pingora's default adds a (disabled) response compression module, whose
        // context is built for every request and called for every body chunk; the front end
        // relays bodies as the back end sent them.
    }

    fn new_ctx(&self) -> ReqCtx {
        ReqCtx {
            _live: Live::new(self.0.clone()),
            target: 0,
            start: Instant::now(),
            arrived: SystemTime::now(),
            choice: None,
            load: None,
            admitted: None,
            conn: ConnState::default(),
            tries: 0,
        }
    }

    async fn early_request_filter(&self, session: &mut Session, ctx: &mut ReqCtx) -> Result<()> {
        ctx.target = target_id(session.req_header().uri.path());
        let keepalive = self.0.cfg.keepalive_timeout.as_secs().max(1);
        session.set_keepalive(Some(keepalive));
        Ok(())
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut ReqCtx,
    ) -> Result<Box<HttpPeer>> {
        let s = &self.0;
        if ctx.admitted.is_none() {
            if let Some(a) = &s.admission {
                let waiting = &s.counters.admission_waiting;
                waiting.fetch_add(1, Relaxed);
                ctx.admitted = Some(a.enter(|| s.admission_bound()).await);
                waiting.fetch_sub(1, Relaxed);
            }
        }
        // A failed try's load is released before the next choice sees the loads.
        ctx.load = None;
        ctx.tries += 1;
        let Some(choice) = s.choose(ctx.target, &mut ctx.conn) else {
            // After a failed try, the failure is the answer (502); before any, 503.
            if ctx.tries > 1 {
                s.counters.bad_gateway.fetch_add(1, Relaxed);
                return Err(Error::explain(
                    ErrorType::HTTPStatus(502),
                    "the back end failed and no other is up",
                ));
            }
            s.counters.no_backend.fetch_add(1, Relaxed);
            return Err(Error::explain(
                ErrorType::HTTPStatus(503),
                "no back end is up",
            ));
        };
        ctx.load = Some(Load::on(choice.via.clone(), choice.forward_to.clone()));
        let cfg = &s.cfg;
        let mut peer = HttpPeer::new(choice.via.addr, false, String::new());
        peer.options.connection_timeout = Some(cfg.connect_timeout);
        peer.options.read_timeout = Some(cfg.response_timeout);
        peer.options.write_timeout = Some(cfg.response_timeout);
        peer.options.idle_timeout = Some(cfg.pool_idle_timeout);
        ctx.choice = Some(choice);
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        req: &mut RequestHeader,
        ctx: &mut ReqCtx,
    ) -> Result<()> {
        // Only the front end asks back ends to forward.
        req.remove_header(FORWARD_HEADER);
        if let Some(to) = ctx.choice.as_ref().and_then(|c| c.forward_to.as_ref()) {
            req.insert_header(FORWARD_HEADER, to.addr.to_string())?;
            self.0.counters.forwarded.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut ReqCtx,
    ) -> Result<()> {
        if let Some(c) = &ctx.choice {
            c.via.responses.fetch_add(1, Relaxed);
            let disk = resp
                .headers
                .get(DISK_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u32>().ok());
            if let Some(q) = disk {
                c.via.report_disk(q);
            }
        }
        resp.remove_header(DISK_HEADER);
        Ok(())
    }

    fn fail_to_connect(
        &self,
        session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut ReqCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(c) = &ctx.choice {
            self.0.backends.request_failed(&c.via);
        }
        let retry = self.may_retry(session, ctx);
        if retry {
            self.0.counters.retries.fetch_add(1, Relaxed);
        }
        e.set_retry(retry);
        e
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut ReqCtx,
        client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        // Only the back end's side: a client that leaves says nothing about the back end, and
        // its request is not tried again.
        let reset = *e.esource() == ErrorSource::Upstream
            && matches!(
                e.etype(),
                ErrorType::ConnectionClosed | ErrorType::ReadError | ErrorType::WriteError
            );
        let retry = reset && self.may_retry(session, ctx);
        if retry {
            // A pooled connection the back end closed while idle says nothing of the back
            // end; a fresh one reset does.
            if !client_reused {
                if let Some(c) = &ctx.choice {
                    self.0.backends.request_failed(&c.via);
                }
            }
            self.0.counters.retries.fetch_add(1, Relaxed);
        }
        e.set_retry(retry);
        e
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &ReqCtx, e: &Error) -> bool {
        // A client that left is counted (`triage_front_aborted_total`), not an error here.
        *e.esource() == ErrorSource::Downstream
            && matches!(
                e.etype(),
                ErrorType::ConnectionClosed | ErrorType::ReadError | ErrorType::WriteError
            )
    }

    fn suppress_proxy_warn_log(
        &self,
        _session: &Session,
        _ctx: &ReqCtx,
        _error: &Error,
        _context: ProxyWarnLogContext,
    ) -> bool {
        // Retries are counted in /metrics (triage_front_retries_total).
        true
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        _ctx: &mut ReqCtx,
    ) -> FailToProxy {
        let c = &self.0.counters;
        let code = match (e.etype(), e.esource()) {
            (ErrorType::HTTPStatus(code), _) => *code,
            (
                ErrorType::ReadTimedout | ErrorType::WriteTimedout | ErrorType::ConnectTimedout,
                ErrorSource::Upstream,
            ) => {
                c.timeouts.fetch_add(1, Relaxed);
                504
            }
            (_, ErrorSource::Upstream) => {
                c.bad_gateway.fetch_add(1, Relaxed);
                502
            }
            (
                ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed,
                ErrorSource::Downstream,
            ) => 0,
            (_, ErrorSource::Downstream) => 400,
            _ => 500,
        };
        if code > 0 && session.response_written().is_none() {
            let _ = session.respond_error(code).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut ReqCtx) {
        let status = session
            .response_written()
            .map(|r| r.status.as_u16())
            .unwrap_or(0);
        let s = &self.0;
        s.counters.answered(status, ctx.start.elapsed());
        if let Some(log) = &s.access_log {
            let h = |n: &str| {
                session
                    .req_header()
                    .headers
                    .get(n)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned()
            };
            let req = session.req_header();
            log.write(Record {
                remote: client_ip(session),
                time: ctx.arrived,
                request_line: format!("{} {} {:?}", req.method, req.uri, req.version),
                status,
                bytes: session.body_bytes_sent() as u64,
                referer: h("referer"),
                user_agent: h("user-agent"),
                backend: ctx.choice.as_ref().map(|c| c.via.addr),
            });
        }
        ctx.load = None;
        ctx.admitted = None;
    }

    fn persist_connection_context(
        &self,
        _session: &Session,
        ctx: &ReqCtx,
    ) -> Option<Box<dyn Any + Send + Sync>> {
        (self.0.cfg.mechanism != Mechanism::Relay)
            .then(|| Box::new(ctx.conn.clone()) as Box<dyn Any + Send + Sync>)
    }

    fn on_connection_reuse(
        &self,
        _session: &mut Session,
        ctx: &mut ReqCtx,
        prev: Box<dyn Any + Send + Sync>,
    ) {
        if let Ok(c) = prev.downcast::<ConnState>() {
            ctx.conn = *c;
        }
    }
}

//! CGI inside the server: the gate's bursts around a CGI request, and local redirects.
//!
//! A CGI request is one worker (the connection's) going through:
//! 1. a burst (holding a slot): [`Cgi::prepare`] finds the script and checks the request;
//! 2. a wait: the script is started and the worker waits on its pipe for the header block;
//! 3. the body: [`CgiRelay`] as the gated body's chunk source, so every read from the
//!    pipe is a wait and every chunk relayed is a burst holding a slot ([`Gated`]).
//!
//! The policy is told nothing about content before the script's `Content-Type` is known (POS
//! must work on opaque handlers); once it is, the relay's bursts carry its content class.
//! A local redirect (RFC 3875 §6.2.2) is answered by dispatching a GET for the new path on the
//! same site: to CGI again (at most [`MAX_LOCAL_REDIRECTS`] times) or to the static files.

use std::io;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body::Body;
use policy::{ContentClass, Hints};

use crate::body::{ChunkSource, Gated, ServeBody};
use crate::cgi::peer::PeerWatch;
use crate::cgi::{Cgi, CgiRelay, Outcome, Prepared, Reply};
use crate::ctx::{Conn, Ctx};
use crate::site::Site;

/// Local redirects followed for one request before answering 500.
pub const MAX_LOCAL_REDIRECTS: usize = 10;

impl ChunkSource for CgiRelay {
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        CgiRelay::poll_input(self, cx)
    }
    fn produce(&mut self) -> io::Result<Option<Bytes>> {
        CgiRelay::produce(self)
    }
    fn remaining(&self) -> Option<u64> {
        CgiRelay::remaining(self)
    }
}

fn hints_for(site: &Site, class: ContentClass, req_urgency: Option<u8>) -> Hints {
    Hints {
        class,
        urgency: req_urgency,
        container: site.container,
    }
}

/// Serve a request for a path under one of `site`'s script directories.
pub async fn serve<B>(
    ctx: &Ctx,
    conn: &Conn,
    site: &Site,
    cgi: &Cgi,
    req: Request<B>,
) -> Response<ServeBody>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display + Send,
{
    let urgency = req
        .headers()
        .get("priority")
        .and_then(|v| v.to_str().ok())
        .and_then(crate::headers::urgency);
    let head = req.method() == http::Method::HEAD;
    let host = req.headers().get(header::HOST).cloned();
    let info = crate::cgi::Conn {
        local: conn.local(),
        remote: conn.remote(),
    };
    let asked = crate::cgi::timing::Stamp::now();
    let permit = ctx
        .gate()
        .acquire(
            conn.worker(),
            hints_for(site, ContentClass::Unknown, urgency),
        )
        .await;
    let prepared = with_raise(cgi.prepare(req, info), ctx, conn, cgi, asked);
    drop(permit);
    let mut peer = PeerWatch::new(conn.fd())
        .map_err(|e| tracing::debug!("cgi: cannot watch the connection: {e}"))
        .ok();
    let mut outcome = match prepared {
        Ok(p) => match run_watched(cgi, p, &mut peer).await {
            Some(o) => o,
            None => return gone(),
        },
        Err(o) => *o,
    };
    for _ in 0..MAX_LOCAL_REDIRECTS {
        let loc = match outcome {
            Outcome::Response(r) => return respond(ctx, conn, site, r, urgency, head, peer),
            Outcome::LocalRedirect(loc) => loc,
        };
        let mut b = Request::builder()
            .method(http::Method::GET)
            .uri(loc.as_str());
        if let Some(h) = &host {
            b = b.header(header::HOST, h.clone());
        }
        let Ok(next) = b.body(http_body_util::Empty::<Bytes>::new()) else {
            tracing::warn!(location = %loc, "cgi: bad local redirect location");
            return crate::static_file::simple(StatusCode::BAD_GATEWAY);
        };
        let path = next.uri().path().to_owned();
        let is_cgi = crate::resolve::resolve(&path)
            .map(|r| cgi.handles(&r.segment_vecs()))
            .unwrap_or(false);
        if !is_cgi {
            return crate::static_file::serve(ctx, conn, site, next).await;
        }
        let asked = crate::cgi::timing::Stamp::now();
        let permit = ctx
            .gate()
            .acquire(
                conn.worker(),
                hints_for(site, ContentClass::Unknown, urgency),
            )
            .await;
        let prepared = with_raise(cgi.prepare(next, info), ctx, conn, cgi, asked);
        drop(permit);
        outcome = match prepared {
            Ok(p) => match run_watched(cgi, p, &mut peer).await {
                Some(o) => o,
                None => return gone(),
            },
            Err(o) => *o,
        };
    }
    tracing::warn!("cgi: more than {MAX_LOCAL_REDIRECTS} local redirects");
    crate::static_file::simple(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The CGI lever's decision at the start of a script, read during the burst that prepares it
/// (the worker holds its slot): start it raised when the policy marks the worker (POS:
/// predicted to serve text). Only the mark is read; the rule is the policy's. Also records
/// when the request asked the gate (`asked`) and was granted (now), for its timing.
fn with_raise<B>(
    p: Result<Prepared<B>, Box<Outcome>>,
    ctx: &Ctx,
    conn: &Conn,
    cgi: &Cgi,
    asked: crate::cgi::timing::Stamp,
) -> Result<Prepared<B>, Box<Outcome>> {
    p.map(|mut p| {
        p.set_gate(asked, crate::cgi::timing::Stamp::now());
        if cgi.lever().is_some() {
            p.set_raise(ctx.gate().marked(conn.worker()));
        }
        p
    })
}

/// A script's output relayed by a worker's bursts, restoring the script (the CGI lever) at
/// the first burst that finds the worker without the policy's mark: the script shows the
/// image behaviour through its worker (output in pieces while it computes: run/wait changes,
/// POS's characteristic 2).
struct LeveredRelay {
    /// The relay.
    relay: CgiRelay,
    /// Whose mark is read.
    ctx: Ctx,
    /// The worker relaying the output.
    worker: policy::WorkerId,
}

impl LeveredRelay {
    /// Restore the script if its worker has lost the mark.
    fn check(&mut self) {
        if self.relay.script_raised() && !self.ctx.gate().marked(self.worker) {
            self.relay.lower_script();
        }
    }
}

impl ChunkSource for LeveredRelay {
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Right after a burst: a demotion at its end (the change that reached RW) restores
        // the script now, not one band later.
        self.check();
        self.relay.poll_input(cx)
    }
    fn produce(&mut self) -> io::Result<Option<Bytes>> {
        // In a burst: the worker holds its slot, its mark is as the policy left it.
        self.check();
        self.relay.produce()
    }
    fn remaining(&self) -> Option<u64> {
        self.relay.remaining()
    }
}

/// [`Cgi::run`], abandoned (the script killed) if the client goes away first: `None`.
async fn run_watched<B>(cgi: &Cgi, p: Prepared<B>, peer: &mut Option<PeerWatch>) -> Option<Outcome>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display + Send,
{
    let run = cgi.run(p);
    match peer {
        None => Some(run.await),
        Some(w) => {
            tokio::pin!(run);
            tokio::select! {
                o = &mut run => Some(o),
                _ = w.closed() => None,
            }
        }
    }
}

/// What the log and the counters record for a request whose client went away before its
/// answer (nginx's 499 "client closed request"; never sent, nobody is there to read it).
pub const CLIENT_CLOSED: u16 = 499;

/// The answer to a request whose client is gone (nobody reads it; hyper closes).
fn gone() -> Response<ServeBody> {
    let status = StatusCode::from_u16(CLIENT_CLOSED).expect("a valid status code");
    let mut r = crate::static_file::simple(status);
    r.headers_mut()
        .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    r
}

fn respond(
    ctx: &Ctx,
    conn: &Conn,
    site: &Site,
    r: Response<Reply>,
    urgency: Option<u8>,
    head: bool,
    peer: Option<PeerWatch>,
) -> Response<ServeBody> {
    let (parts, reply) = r.into_parts();
    let body = match reply {
        Reply::Bytes(b) => ServeBody::once(b),
        // HEAD: no body is sent; the script is ended.
        Reply::Relay(relay) if head => {
            relay.discard();
            ServeBody::empty()
        }
        Reply::Relay(mut relay) => {
            if let Some(w) = peer {
                relay.watch_peer(w);
            }
            let class = parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(crate::headers::content_class)
                .unwrap_or_default();
            let source: Box<dyn ChunkSource> = if relay.script_raised() {
                Box::new(LeveredRelay {
                    relay: *relay,
                    ctx: ctx.clone(),
                    worker: conn.worker(),
                })
            } else {
                relay
            };
            let gated = Gated::new(
                ctx.clone(),
                conn.worker(),
                hints_for(site, class, urgency),
                source,
                None,
            );
            ServeBody::gated(None, gated)
        }
    };
    Response::from_parts(parts, body)
}

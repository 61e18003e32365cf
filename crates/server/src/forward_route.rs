//! Relaying a forwarded request (see [`crate::forward`]): when a static request asks, with its
//! `X-Triage-Forward` header, to be served by a peer that caches the target, fetch it there
//! and relay the peer's status, end-to-end headers and body, one gate burst per chunk as any
//! body. The relayed response names the peer in `X-Triage-Forwarded-From`, and (with an
//! emulated disk) this server's own disk queue in `X-Triage-Disk`. When the peer cannot be
//! reached or does not answer in time, or the header is not honoured, the request is served
//! here as usual.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use policy::Hints;

use crate::body::{ChunkSource, Gated, ServeBody};
use crate::ctx::{Conn, Ctx};
use crate::forward::{hop_by_hop, Ask, Lease, FORWARDED_FROM_HEADER};
use crate::headers;
use crate::site::Site;

/// The response header carrying a back end's disk queue (reads waiting or in service) when it
/// answers, for the front end's extended LARD.
pub const DISK_HEADER: &str = "x-triage-disk";

/// The response header saying whether the body came from the back end's cache (`hit`) or its
/// disk (`miss`).
pub const CACHE_HEADER: &str = "x-triage-cache";

/// The peer `req` asks to be served by, if it asks and may.
pub fn wanted<B>(conn: &Conn, site: &Site, req: &Request<B>) -> Option<SocketAddr> {
    let fwd = site.forward.as_ref()?;
    match fwd.ask(conn.remote().ip(), req.method(), req.headers())? {
        Ask::Peer(p) => Some(p),
        Ask::Refused => {
            tracing::debug!("X-Triage-Forward not honoured");
            None
        }
    }
}

/// Fetch `req` from `peer` and relay the answer; `None` if that failed before the peer's
/// response head (the caller serves the request).
pub async fn relay<B>(
    ctx: &Ctx,
    conn: &Conn,
    site: &Site,
    peer: SocketAddr,
    req: &Request<B>,
) -> Option<Response<ServeBody>> {
    let fwd = site.forward.as_ref()?;
    let (resp, lease) = match fwd.fetch(peer, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "forwarding failed; serving here");
            return None;
        }
    };
    let (parts, body) = resp.into_parts();
    let mime = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let hints = Hints {
        class: headers::content_class(mime),
        urgency: None,
        container: site.container,
    };
    let mut out = Response::new(ServeBody::empty());
    *out.status_mut() = parts.status;
    for (k, v) in &parts.headers {
        if !hop_by_hop(k) {
            out.headers_mut().append(k.clone(), v.clone());
        }
    }
    if let Ok(v) = HeaderValue::from_str(&peer.to_string()) {
        out.headers_mut().insert(FORWARDED_FROM_HEADER, v);
    }
    if let Some(disk) = site.store.dir().and_then(|d| d.disk()) {
        out.headers_mut()
            .insert(DISK_HEADER, HeaderValue::from(disk.queued()));
    }
    let source = PeerBody {
        body,
        lease: Some(lease),
        next: None,
        done: false,
    };
    let gated = Gated::new(ctx.clone(), conn.worker(), hints, Box::new(source), None);
    *out.body_mut() = ServeBody::gated(None, gated);
    Some(out)
}

/// The peer's body, frame by frame: read without a slot, handed on under one.
struct PeerBody {
    body: Incoming,
    /// Back to the pool once the body has been read to its end.
    lease: Option<Lease>,
    next: Option<Bytes>,
    done: bool,
}

impl PeerBody {
    fn end(&mut self) {
        self.done = true;
        if let Some(l) = self.lease.take() {
            l.release();
        }
    }
}

impl ChunkSource for PeerBody {
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.next.is_none() && !self.done {
            match std::task::ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            self.next = Some(data);
                        }
                    }
                    // The last bytes of a body of known length: the connection is free now
                    // (the client side may stop polling once it has them all).
                    if self.body.is_end_stream() {
                        self.end();
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
                None => self.end(),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn produce(&mut self) -> io::Result<Option<Bytes>> {
        Ok(self.next.take())
    }

    fn remaining(&self) -> Option<u64> {
        (self.done && self.next.is_none()).then_some(0)
    }
}

//! Back-end forwarding (seed 004's P-HTTP mechanism): a cluster front end that has pinned a
//! client's persistent connection to this back end can ask it to fetch a target from another
//! back end that caches it, by naming that back end in the request's `X-Triage-Forward`
//! header. This server then sends the request to that peer over pooled HTTP/1.1 connections
//! and relays the response.
//!
//! The header is honoured only from the addresses in `[forward] from` (the front end) and
//! only for the peers in `[forward] peers`, so that no client can make the server fetch from
//! anywhere; otherwise the request is served here as if the header were absent (and counted
//! as refused). Only `GET` and `HEAD` are forwarded. The request to the peer carries no
//! `X-Triage-Forward`, so a request is forwarded at most once.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Deserialize;

/// The request header that names the back end to fetch from (`host:port`).
pub const FORWARD_HEADER: &str = "x-triage-forward";

/// The response header a forwarded response carries: the back end that served it.
pub const FORWARDED_FROM_HEADER: &str = "x-triage-forwarded-from";

/// `[forward]`: who may ask this server to forward, and to whom.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ForwardConfig {
    /// Addresses whose `X-Triage-Forward` is honoured (the front end's).
    pub from: Vec<IpAddr>,
    /// Back ends this server may fetch from (`host:port`).
    pub peers: Vec<SocketAddr>,
    /// Longest wait for a peer's connection and response head; past it the request is served
    /// here.
    #[serde(with = "units::serde::duration")]
    pub timeout: Duration,
    /// Idle connections kept per peer.
    pub pool: usize,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        Self {
            from: Vec::new(),
            peers: Vec::new(),
            timeout: Duration::from_secs(10),
            pool: 64,
        }
    }
}

impl ForwardConfig {
    /// Whether forwarding is possible at all (someone may ask, and there is a peer).
    pub fn enabled(&self) -> bool {
        !self.from.is_empty() && !self.peers.is_empty()
    }
}

/// What a request's `X-Triage-Forward` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Fetch from this peer.
    Peer(SocketAddr),
    /// The header is there but not honoured (unknown sender or peer, bad value, a method
    /// other than GET and HEAD): serve here.
    Refused,
}

/// Counters of the forwarding.
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// Responses relayed from a peer.
    pub forwarded: AtomicU64,
    /// Forwards that failed before the peer's response head (served here instead).
    pub fallbacks: AtomicU64,
    /// Headers not honoured.
    pub refused: AtomicU64,
    /// Requests sent on a pooled connection.
    pub reused: AtomicU64,
}

/// The forwarding of one server: its rules, its connection pools and counters.
#[derive(Debug)]
pub struct Forwarder {
    cfg: ForwardConfig,
    pools: Mutex<HashMap<SocketAddr, Vec<SendRequest<Empty<Bytes>>>>>,
    stats: ForwardStats,
}

/// A connection to a peer while its response is read; back to the pool with
/// [`Lease::release`] once the whole body has been read, closed if dropped before.
pub struct Lease {
    fwd: Arc<Forwarder>,
    peer: SocketAddr,
    sender: Option<SendRequest<Empty<Bytes>>>,
}

impl Lease {
    /// The response was read to its end: the connection may carry another request.
    pub fn release(mut self) {
        if let Some(s) = self.sender.take() {
            self.fwd.put_back(self.peer, s);
        }
    }
}

impl Forwarder {
    /// Forwarding with `cfg`'s rules; `None` when it is off.
    pub fn new(cfg: &ForwardConfig) -> Option<Arc<Self>> {
        cfg.enabled().then(|| {
            Arc::new(Self {
                cfg: cfg.clone(),
                pools: Mutex::new(HashMap::new()),
                stats: ForwardStats::default(),
            })
        })
    }

    /// Counters.
    pub fn stats(&self) -> &ForwardStats {
        &self.stats
    }

    /// What a request from `remote` with `method` and `headers` asks for: `None` without the
    /// header.
    pub fn ask(&self, remote: IpAddr, method: &Method, headers: &HeaderMap) -> Option<Ask> {
        let v = headers.get(FORWARD_HEADER)?;
        let peer = v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<SocketAddr>().ok());
        let ok = matches!(*method, Method::GET | Method::HEAD)
            && self.cfg.from.contains(&remote)
            && peer.is_some_and(|p| self.cfg.peers.contains(&p));
        match peer {
            Some(p) if ok => Some(Ask::Peer(p)),
            _ => {
                self.stats.refused.fetch_add(1, Relaxed);
                Some(Ask::Refused)
            }
        }
    }

    /// A pooled connection to `peer` that is ready for a request, if any.
    async fn take(&self, peer: SocketAddr) -> Option<SendRequest<Empty<Bytes>>> {
        loop {
            let mut s = {
                let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
                pools.get_mut(&peer)?.pop()?
            };
            // A connection whose response was just read may still be settling; one the peer
            // closed fails here and is dropped.
            if !s.is_closed() && s.ready().await.is_ok() {
                return Some(s);
            }
        }
    }

    fn put_back(&self, peer: SocketAddr, s: SendRequest<Empty<Bytes>>) {
        if s.is_closed() {
            return;
        }
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let pool = pools.entry(peer).or_default();
        if pool.len() < self.cfg.pool {
            pool.push(s);
        }
    }

    async fn connect(peer: SocketAddr) -> io::Result<SendRequest<Empty<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(peer).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Send `req`'s method, target and end-to-end headers to `peer` (a pooled connection, or
    /// a new one) and wait for the response head, at most `[forward] timeout`. On an error
    /// the fallback is counted: the caller serves the request itself.
    pub async fn fetch<B>(
        self: &Arc<Self>,
        peer: SocketAddr,
        req: &Request<B>,
    ) -> io::Result<(Response<Incoming>, Lease)> {
        let r = tokio::time::timeout(self.cfg.timeout, self.fetch_inner(peer, req)).await;
        let r = r.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no response head in time",
            ))
        });
        match &r {
            Ok(_) => self.stats.forwarded.fetch_add(1, Relaxed),
            Err(_) => self.stats.fallbacks.fetch_add(1, Relaxed),
        };
        r
    }

    async fn fetch_inner<B>(
        self: &Arc<Self>,
        peer: SocketAddr,
        req: &Request<B>,
    ) -> io::Result<(Response<Incoming>, Lease)> {
        let mut out = Request::builder()
            .method(req.method().clone())
            .uri(req.uri().path_and_query().map_or("/", |p| p.as_str()))
            .body(Empty::<Bytes>::new())
            .map_err(io::Error::other)?;
        for (k, v) in req.headers() {
            if !hop_by_hop(k) && k != FORWARD_HEADER {
                out.headers_mut().append(k.clone(), v.clone());
            }
        }
        // A pooled connection the peer closed while idle fails at once: then try a new one.
        if let Some(mut s) = self.take(peer).await {
            if let Ok(resp) = s.send_request(clone_request(&out)).await {
                self.stats.reused.fetch_add(1, Relaxed);
                return Ok((resp, self.lease(peer, s)));
            }
        }
        let mut s = Self::connect(peer).await?;
        let resp = s.send_request(out).await.map_err(io::Error::other)?;
        Ok((resp, self.lease(peer, s)))
    }

    fn lease(self: &Arc<Self>, peer: SocketAddr, s: SendRequest<Empty<Bytes>>) -> Lease {
        Lease {
            fwd: self.clone(),
            peer,
            sender: Some(s),
        }
    }
}

fn clone_request(r: &Request<Empty<Bytes>>) -> Request<Empty<Bytes>> {
    let mut c = Request::new(Empty::new());
    *c.method_mut() = r.method().clone();
    *c.uri_mut() = r.uri().clone();
    *c.headers_mut() = r.headers().clone();
    c
}

/// Whether `h` is a hop-by-hop header (RFC 9110 §7.6.1), which a relay does not pass on.
pub fn hop_by_hop(h: &HeaderName) -> bool {
    matches!(
        h.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fwd() -> Arc<Forwarder> {
        Forwarder::new(&ForwardConfig {
            from: vec!["127.0.0.1".parse().unwrap()],
            peers: vec!["127.0.0.1:9001".parse().unwrap()],
            ..ForwardConfig::default()
        })
        .unwrap()
    }

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(FORWARD_HEADER, v.parse().unwrap());
        h
    }

    #[test]
    fn honoured_only_from_the_front_end_and_to_a_peer() {
        let f = fwd();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.9".parse().unwrap();
        let get = Method::GET;
        assert_eq!(f.ask(lo, &get, &HeaderMap::new()), None);
        assert_eq!(
            f.ask(lo, &get, &headers("127.0.0.1:9001")),
            Some(Ask::Peer("127.0.0.1:9001".parse().unwrap()))
        );
        assert_eq!(
            f.ask(other, &get, &headers("127.0.0.1:9001")),
            Some(Ask::Refused)
        );
        assert_eq!(
            f.ask(lo, &get, &headers("127.0.0.1:9002")),
            Some(Ask::Refused)
        );
        assert_eq!(f.ask(lo, &get, &headers("nonsense")), Some(Ask::Refused));
        assert_eq!(
            f.ask(lo, &Method::POST, &headers("127.0.0.1:9001")),
            Some(Ask::Refused)
        );
        assert_eq!(f.stats().refused.load(Relaxed), 4);
    }

    #[test]
    fn off_without_senders_or_peers() {
        assert!(Forwarder::new(&ForwardConfig::default()).is_none());
    }

    #[tokio::test]
    async fn a_dead_peer_is_a_fallback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = l.local_addr().unwrap();
        drop(l);
        let f = Forwarder::new(&ForwardConfig {
            from: vec!["127.0.0.1".parse().unwrap()],
            peers: vec![peer],
            ..ForwardConfig::default()
        })
        .unwrap();
        let req = Request::get("/x").body(()).unwrap();
        assert!(f.fetch(peer, &req).await.is_err());
        assert_eq!(f.stats().fallbacks.load(Relaxed), 1);
    }
}

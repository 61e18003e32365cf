//! The lean relay engine (`engine = "relay"`): the front end's own HTTP/1.1 relay on tokio,
//! driving the same [`Shared`] state as the pingora engine (dispatcher, back ends and their
//! health, admission, access log, counters, the `relay`/`pin`/`forward` mechanisms).
//!
//! Modules, leaves first: [`framing`] (where a body ends), [`head`] (reading and rewriting
//! heads), [`pool`] (idle back-end connections), [`client`] (one client connection's
//! requests). [`serve`] accepts connections until the front end stops.

pub mod client;
pub mod framing;
pub mod head;
pub mod pool;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::shared::Shared;

/// Accept client connections on `listener` and serve each in a task of its own until `stop`
/// turns true (or its sender goes). Connections then close between requests; the caller
/// waits for the requests in flight (`front::drain`).
pub async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "the relay cannot use its listener");
            return;
        }
    };
    let pool = Arc::new(pool::Pool::new(
        shared.cfg.pool_size,
        shared.cfg.pool_idle_timeout,
    ));
    while !*stop.borrow() {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, peer)) => {
                    let _ = s.set_nodelay(true);
                    let conn = client::Conn::new(shared.clone(), pool.clone(), s, peer, stop.clone());
                    tokio::spawn(conn.serve());
                }
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to close.
                    tracing::warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            r = stop.changed() => if r.is_err() { return },
        }
    }
}

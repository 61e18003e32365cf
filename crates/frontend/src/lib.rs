//! # frontend: `triage front`, the LARD cluster front end on pingora
//!
//! A reverse proxy that sends each request to the back end chosen by a `policy::dispatch`
//! policy (WRR, LARD, LARD/R, extended LARD, bounded-load consistent hashing: the objects the
//! simulator drives), with seed 004's mechanisms for persistent connections (per-request
//! relay, per-connection pinning, back-end forwarding), health checks, retries of idempotent
//! requests that failed before any response byte, admission, an access log and `/metrics`.
//! Two engines relay the bytes (`engine`): pingora (`pingora-proxy`: its HTTP sessions and
//! back-end connection pool) and the front end's own lean relay ([`relay`]: `httparse` heads,
//! bodies copied through by their framing, a pool of idle connections without a task each);
//! health checks are `pingora-load-balancing`'s; the decisions and the load they read are the
//! front end's own, the same for both engines ([`shared`]).
//!
//! Modules, leaves first (each uses only modules above it):
//! - [`config`], [`overrides`]: the TOML configuration and the flags laid over it;
//! - [`emit`]: the equivalent HAProxy, nginx or Envoy configuration;
//! - [`backends`]: the table of back ends (up or down, requests in flight, reports);
//! - [`dispatcher`]: the policy behind a mutex, fed from the table;
//! - [`admission`], [`access_log`], [`cpu`]: admission bound, access log, the runtime's CPU;
//! - [`metrics`]: counters, the snapshot and its Prometheus text;
//! - [`health`]: pingora's load balancer running discovery and health checks for the table;
//! - [`shared`]: what both engines share: the state, the mechanisms' choice, the in-flight count;
//! - [`proxy`]: the pingora engine, pingora's `ProxyHttp` callbacks;
//! - [`relay`]: the relay engine (framing, heads, the pool, a client connection);
//! - [`admin`]: the admin listener;
//! - [`front`]: [`Front::start`], [`Front::stop`], [`Front::metrics`].
//!
//! ```no_run
//! let cfg = frontend::FrontConfig {
//!     listen: "127.0.0.1:0".parse().unwrap(),
//!     backends: vec!["127.0.0.1:8081".parse().unwrap()],
//!     policy: "lard".into(),
//!     ..Default::default()
//! };
//! let front = frontend::Front::start(cfg).unwrap();
//! println!("serving on {}", front.addr());
//! println!("{} requests", front.metrics().requests);
//! front.stop();
//! ```

#![warn(missing_docs)]

pub mod access_log;
pub mod admin;
pub mod admission;
pub mod backends;
pub mod config;
pub mod cpu;
pub mod dispatcher;
pub mod emit;
pub mod front;
pub mod health;
pub mod metrics;
pub mod overrides;
pub mod proxy;
pub mod relay;
pub mod shared;

pub use config::{Admission, Engine, FrontConfig, Mechanism};
pub use front::{Front, FrontError};
pub use metrics::FrontMetrics;
pub use overrides::Overrides;

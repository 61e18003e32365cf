//! # server: the HTTP/1.1 server whose CPU work passes through the policy-ordered gate
//!
//! `triage serve` is this crate behind clap. Modules, leaves first (each uses only modules
//! above it in this list; the gate itself is the `gate` crate):
//! - [`headers`], [`admission`], [`request_line`], [`resolve`], [`body_cache`], [`disk`], [`store`], [`logs`], [`demo`],
//!   [`fields`]: pure request-header logic, the checks a request head must pass before
//!   routing, safe path resolution, the bounded body cache (LRU,
//!   GreedyDual-Size), the emulated disk, the files of a site, the log writers, the built-in
//!   demo site, struct field names for config checks;
//! - [`forward`]: back-end forwarding's rules and connection pools (a cluster front end asks a
//!   back end to fetch a target from a peer that caches it);
//! - [`cgi`]: CGI/1.1 (RFC 3875) scripts run in per-request cgroups;
//! - [`containers`]: resource containers (seed 003) mirrored in cgroups and in the gate;
//!   [`budget`]: a capped container's cap as one budget for the server's work and its
//!   processes, split every period;
//! - [`config`], [`overrides`]: the TOML configuration and the flags laid over it;
//! - [`site`]: virtual hosts; [`metrics`]: counters and the Prometheus text;
//!   [`cluster_metrics`]: the Prometheus text of the body caches, the disk and forwarding;
//! - [`ctx`]: what connections and requests share ([`ctx::Ctx`], [`ctx::Conn`]);
//! - [`reclaim`]: the open connections, and closing idle ones at `max_conns`;
//! - [`body`]: response bodies produced chunk by chunk, one gate burst per chunk;
//! - [`forward_route`]: relaying a forwarded request's answer from the peer;
//! - [`static_file`], [`cgi_route`]: the two ways a request is answered;
//! - [`router`]: picks the site and the handler; [`conn`]: one connection; [`admin`]: the
//!   admin listener; [`accept`]: the accept loop, and the serving threads (one runtime, one
//!   `SO_REUSEPORT` listener and one gate lane each) of a server with several threads;
//! - [`server`]: binding, the accept loop, background tasks, graceful shutdown.

#![warn(missing_docs)]

pub mod accept;
pub mod admin;
pub mod admission;
pub mod body;
pub mod body_cache;
pub mod budget;
pub mod cgi;
pub mod cgi_route;
pub mod cluster_metrics;
pub mod config;
pub mod conn;
pub mod containers;
pub mod ctx;
pub mod demo;
pub mod disk;
pub mod fields;
pub mod forward;
pub mod forward_route;
pub mod headers;
pub mod logs;
pub mod metrics;
pub mod near_cache;
pub mod overrides;
pub mod reclaim;
pub mod request_line;
pub mod resolve;
pub mod router;
pub mod server;
pub mod site;
pub mod static_file;
pub mod store;

pub use config::Config;
pub use ctx::Ctx;
pub use overrides::Overrides;
pub use server::{runtime, Server, ServerError};

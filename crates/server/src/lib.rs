//! `server`: the HTTP/1.1 server whose CPU work passes through the policy-ordered gate.
//!
//! - [`config`]: TOML file and CLI-overridable settings.
//! - [`gate`]: N CPU slots and the policy-ordered ready queue; worker identity (prefork pool).
//! - [`server`]: accept loop, connections, timeouts, admin `/metrics`, graceful shutdown.
//! - [`router`]: virtual hosts, routes, the [`router::Handler`] enum (extension point for CGI).
//! - [`static_file`], [`store`], [`resolve`], [`headers`]: static files, safely.
//! - [`body`]: bodies produced chunk by chunk, one gate burst per chunk (optional gzip).
//! - [`metrics`], [`logs`]: Prometheus text, PL/LRQ samples, worker log, access log.
//! - [`demo`]: the built-in demo site.

pub mod body;
pub mod cgi;
pub mod config;
pub mod containers;
pub mod demo;
pub mod gate;
pub mod headers;
pub mod logs;
pub mod metrics;
pub mod resolve;
pub mod router;
pub mod server;
pub mod static_file;
pub mod store;

pub use config::Config;
pub use server::{runtime, Server, ServerError};

//! CGI/1.1 (RFC 3875): running scripts from per-site script directories, each request in its
//! own child container (cgroup) of its site's CGI container, its output relayed through the
//! gate like any other work.
//!
//! Behaviour (reference: docs/cgi.md):
//! - **Where**: `[site.cgi] dirs = [{ url = "/cgi-bin", dir = "cgi-bin" }]` maps a URL prefix
//!   to a directory. The request path is decoded and checked by [`crate::resolve::resolve`]
//!   (`..`, encoded `/`, NUL and control bytes refused: 403); below the prefix, segments are
//!   walked on disk until a regular file (the script) is found, the rest is `PATH_INFO`.
//!   Hidden names (leading `.`) are 404, a script whose real path (symlinks resolved) leaves
//!   the directory is 403, a file without an exec bit is 403, a directory is 403.
//! - **nph- scripts are refused** (501): the server owns the status line and the framing of
//!   every response (hyper), so a script cannot write them itself.
//! - **How**: the file is executed directly (`execve` on the file: the kernel reads its `#!`
//!   line; no shell, so no metacharacter in a name or query is ever interpreted; no command
//!   line arguments, the RFC's "indexed query" form is not used), in the script's directory,
//!   with exactly the meta-variables of [`env`](mod@env) as environment, the request body on stdin
//!   (`CONTENT_LENGTH` always set when there is a body; a chunked request body is spooled to
//!   an unnamed temporary file first, up to `max_request_body`, to know its length: [`spool`]),
//!   stderr logged (at most 8 KiB per request).
//!   The script leads its own session and process group (`setsid` between fork and exec).
//! - **Container**: with a site container configured ([`Cgi::set_container`]), each request
//!   gets `<site cgi container>/req-<n>`; the child is created inside it by
//!   `clone3(CLONE_INTO_CGROUP)` on cgroup v2, or writes itself into it between fork and exec
//!   on v1 ([`spawn`]). The request cgroup is removed when the script ends (its CPU time is
//!   added to [`CgiStats::cpu_ns`]). Without permission or controller the script runs without
//!   a cgroup of its own and a warning is logged once.
//! - **Output**: the header block is parsed by [`parse`] (`Status`, `Location` local and client
//!   redirects, `Content-Type`); malformed output or a script that ends before its headers is
//!   answered 502 with the reason logged. A local redirect is returned as
//!   [`Outcome::LocalRedirect`] for the server to re-dispatch as a GET.
//! - **Limits**: `timeout` from the start of the script: before the headers 504, after them
//!   the body is cut; `max_output` body bytes: cut there, the script killed; both logged.
//!   When the client goes away (the response future or body is dropped) the script's process
//!   group is killed (`killpg(SIGKILL)`) and its cgroup removed.
//! - **Leftovers**: with or without cgroups, nothing a script starts outlives its request or
//!   the server, also after a crash: see [`orphans`] (the `TRIAGE_CGI` mark in every script's
//!   environment, the server as child subreaper, the run recorded in `cgi_state`).

//!
//! Modules, leaves first: [`config`] (`[site.cgi]`), [`env`](mod@env) (meta-variables), [`parse`] (the
//! header block), [`script`] (script directories), [`peer`] (watching the client's socket), [`spawn`] (starting a script in its
//! cgroup), [`orphans`] (no script process outlives its request or the server), [`spool`] (chunked request bodies), [`timing`] (where a request's time goes), [`stats`], [`lever`] (scripts of marked workers start raised), [`relay`] (the body), [`outcome`], [`handler`] ([`Cgi`]), [`metrics`].

pub mod config;
pub mod env;
pub mod handler;
pub mod lever;
pub mod metrics;
pub mod orphans;
pub mod outcome;
pub mod parse;
pub mod peer;
pub mod relay;
pub mod script;
pub mod spawn;
pub mod spool;
pub mod stats;
pub mod timing;

pub use config::{CgiConfig, CgiDirConfig, CgiError};
pub use handler::{
    cgroup_root, default_container, Cgi, Conn, Prepared, SiteInfo, CPU_PERIOD, MAX_HEADER_BLOCK,
    MAX_STDERR_LOG,
};
pub use lever::{Raised, ScriptLever};
pub use metrics::render_metrics;
pub use outcome::{Outcome, Reply};
pub use relay::CgiRelay;
pub use spawn::Placed;
pub use stats::CgiStats;

//! What a peer serves and how: the site ([`PeerSite`]), on-the-fly compression ([`Gzip`]),
//! Apache's prefork pool ([`Prefork`]), and the pieces both configuration writers share.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Debian's Apache module directory.
pub const APACHE_MODULES: &str = "/usr/lib/apache2/modules";

/// On-the-fly compression settings, identical for every server of a lab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gzip {
    /// zlib level 1..9.
    pub level: u32,
    /// Content types compressed (text/html is always among them).
    pub types: Vec<String>,
}

/// What a peer serves and where.
#[derive(Debug, Clone)]
pub struct PeerSite {
    /// Document root.
    pub root: PathBuf,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// On-the-fly compression, if any.
    pub gzip: Option<Gzip>,
    /// Keep-alive timeout (seconds).
    pub keepalive_s: u32,
    /// Extra configuration text (nginx: inside `server {}`; Apache: top level).
    pub extra: String,
}

/// Apache prefork pool sizes (enough idle children that no browser waits for a fork).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prefork {
    /// `StartServers`.
    pub start: usize,
    /// `MinSpareServers`.
    pub min_spare: usize,
    /// `MaxSpareServers`.
    pub max_spare: usize,
    /// `ServerLimit` and `MaxRequestWorkers`.
    pub max_workers: usize,
}

impl Default for Prefork {
    fn default() -> Self {
        Prefork {
            start: 16,
            min_spare: 8,
            max_spare: 32,
            max_workers: 64,
        }
    }
}

impl Prefork {
    /// A pool with a child ready for each of `conns` connections the load can hold open at
    /// once, plus [`Prefork::default`]'s spares (never smaller than the default). prefork
    /// serves one connection per child and keeps it through the keep-alive timeout; with fewer
    /// children than connections the rest wait in the listen backlog until the parent forks
    /// more (one, two, four... per second), and the last browsers of a burst wait whole
    /// seconds for their HTML.
    pub fn for_connections(conns: usize) -> Self {
        let d = Prefork::default();
        let start = d.start.max(conns + d.min_spare);
        Prefork {
            start,
            min_spare: d.min_spare,
            max_spare: d.max_spare.max(start),
            max_workers: d.max_workers.max(2 * start),
        }
    }
}

pub(super) const MIME: &[(&str, &str)] = &[
    ("text/html", "html htm"),
    ("text/css", "css"),
    ("text/plain", "txt"),
    ("application/javascript", "js"),
    ("application/json", "json"),
    ("image/bmp", "bmp"),
    ("image/jpeg", "jpg jpeg"),
    ("image/png", "png"),
    ("image/gif", "gif"),
];

/// A path quoted for a configuration file.
pub(super) fn q(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

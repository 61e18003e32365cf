//! The lab's error type: every failure names what failed (a command, a file, a peer).

use std::path::PathBuf;

/// What can go wrong while setting up, running or reporting a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Ctrl-C (SIGINT) or SIGTERM arrived; everything created so far was removed.
    #[error("interrupted by a signal; the testbed was cleaned up")]
    Interrupted,
    /// A file or directory operation failed.
    #[error("{what} `{path}`: {source}")]
    Io {
        /// What was attempted (`reading`, `creating`...).
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A helper command (`ip`, `tc`, `nginx -t`, ...) failed.
    #[error("command `{cmd}` failed: {msg}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status and stderr.
        msg: String,
    },
    /// A process the lab started (server, peer, load generator) misbehaved.
    #[error("{name}: {msg}")]
    Process {
        /// The process (or step of a run).
        name: String,
        /// What happened.
        msg: String,
    },
    /// The kernel interface (cgroups, /proc) refused.
    #[error("os: {0}")]
    Os(String),
    /// The results of a run could not be read or written.
    #[error("results: {0}")]
    Results(String),
    /// The experiment was configured inconsistently.
    #[error("configuration: {0}")]
    Config(String),
}

impl LabError {
    /// An [`LabError::Io`] for `path`.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LabError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// Result with [`LabError`].
pub type Result<T, E = LabError> = std::result::Result<T, E>;

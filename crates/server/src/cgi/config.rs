//! `[site.cgi]`: a site's CGI settings as the configuration file writes them.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// One script directory: URL prefix and directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgiDirConfig {
    /// URL path prefix, e.g. `/cgi-bin`.
    pub url: String,
    /// Directory holding the scripts (relative paths: to the working directory).
    pub dir: PathBuf,
}

/// `[site.cgi]`: a site's CGI settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgiConfig {
    /// The script directories.
    pub dirs: Vec<CgiDirConfig>,
    /// Longest a script may run (`"30s"`).
    #[serde(default = "default_timeout", with = "units::serde::duration")]
    pub timeout: Duration,
    /// Most body bytes a script may output (`"16MiB"`, or bytes).
    #[serde(default = "default_max_output", with = "units::serde::size")]
    pub max_output: u64,
    /// Largest request body passed to a script.
    #[serde(default = "default_max_body", with = "units::serde::size")]
    pub max_request_body: u64,
    /// Run each request in its own cgroup (a child of the site's CGI container).
    #[serde(default = "yes")]
    pub cgroups: bool,
    /// The site's CGI container, relative to the server's cgroup tree (default
    /// `site-<name>/cgi`). Sites may share one (then their scripts time-share it).
    #[serde(default)]
    pub container: Option<String>,
    /// Cap of the CGI container, in CPUs (`0.3` = 30% of one CPU; children included).
    #[serde(default)]
    pub cpu_max: Option<f64>,
    /// Weight of the CGI container among its siblings, 1..=10000 (100 = default): its share of
    /// the CPU when they compete, all of it when they do not (a reservation in seed 000's
    /// sense).
    #[serde(default)]
    pub weight: Option<u32>,
    /// Most scripts of this site's CGI container running at once; further requests wait in
    /// the server, in arrival order, for up to `timeout` (then 503). Sites sharing a
    /// container share its places (and must give the same number). None = no limit. Fewer
    /// scripts interleaved on the CPU means less switching and cache refilling per request.
    #[serde(default)]
    pub max_running: Option<usize>,
    /// Scheduler slice asked for by every script of the site (`"30ms"`; 0.1 ms to 100 ms):
    /// `sched_setattr` with `sched_runtime` under `SCHED_OTHER` in the child before exec (EEVDF
    /// custom slice, Linux 6.12+; older kernels ignore it). A CPU-bound script with a slice as
    /// long as its burst runs to the end of it instead of being interleaved with the other
    /// runnable scripts every few milliseconds; its weight (its share of the CPU) is unchanged.
    /// None = the kernel's default slice.
    #[serde(default, with = "units::serde::opt_duration")]
    pub slice: Option<Duration>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}
fn default_max_output() -> u64 {
    16 << 20
}
fn default_max_body() -> u64 {
    16 << 20
}
fn yes() -> bool {
    true
}

impl CgiConfig {
    /// One directory, default limits.
    pub fn new(url: &str, dir: impl Into<PathBuf>) -> Self {
        Self {
            dirs: vec![CgiDirConfig {
                url: url.to_owned(),
                dir: dir.into(),
            }],
            timeout: default_timeout(),
            max_output: default_max_output(),
            max_request_body: default_max_body(),
            cgroups: true,
            container: None,
            cpu_max: None,
            weight: None,
            max_running: None,
            slice: None,
        }
    }
}

/// A CGI configuration that cannot be used, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("cgi: `{key}`: {msg}")]
pub struct CgiError {
    /// The key (`cgi.timeout`, `cgi.dirs[0].url`, ...).
    pub key: String,
    /// What is wrong with its value.
    pub msg: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_follow_units() {
        let c: CgiConfig = toml::from_str(
            "dirs = []\ntimeout = \"2s\"\nmax_output = \"1MiB\"\nmax_request_body = 1000\n",
        )
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!((c.max_output, c.max_request_body), (1 << 20, 1000));
        let e = toml::from_str::<CgiConfig>("dirs = []\ntimeout = 30000\n").unwrap_err();
        assert!(e.to_string().contains("30000ms"), "{e}");
    }

    #[test]
    fn slice_is_read_from_the_site_table() {
        let c: CgiConfig =
            toml::from_str("dirs = [{ url = \"/cgi-bin\", dir = \"/x\" }]\nslice = \"30ms\"\n")
                .unwrap();
        assert_eq!(c.slice, Some(Duration::from_millis(30)));
        let e = toml::from_str::<CgiConfig>("dirs = []\nslice = 500\n").unwrap_err();
        assert!(
            e.to_string().contains("500ms"),
            "a duration needs its unit: {e}"
        );
        let c: CgiConfig = toml::from_str("dirs = []\n").unwrap();
        assert_eq!(c.slice, None);
    }
}

//! Peer servers measured beside triage on the same site, testbed and load: nginx (one worker
//! process, as triage gets one CPU) and Apache httpd with mpm_prefork (the paper's Apache was a
//! pre-forking server). Each gets its own temporary prefix (config, pid file, logs, temp
//! paths) and its own address, so labs can run in parallel and leave nothing behind.
//!
//! [`nginx_conf`] and [`apache_conf`] are pure functions (tested); [`Peer::prepare`] writes
//! the config and returns the command line; [`validate`] runs the real binary's config check
//! (`nginx -t`, `apache2 -t`). Other labs extend a peer with [`PeerSite::extra`] (inserted
//! into nginx's `server {}` block / Apache's top level), e.g. CGI; the benchmarks run nginx as
//! one process with many connections ([`NginxTuning`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::process::{run_cmd, which};

mod apache;
mod haproxy;
mod lighttpd;
mod nginx;
mod php_fpm;
mod site;

pub use apache::{apache_access_log, apache_conf, APACHE_ACCESS_FORMAT};
pub use haproxy::{haproxy_proxy_conf, haproxy_source_policy, nginx_proxy_conf};
pub use lighttpd::{has_handler, lighttpd_conf, EventHandler, LighttpdTuning};
pub use nginx::{nginx_conf, NginxTuning, NGINX_ACCESS_FORMAT, NGINX_ACCESS_LOG};
pub use php_fpm::{
    nginx_fastcgi, php_fpm_conf, php_ini, FpmPool, ACCESS_FORMAT, ACCESS_LOG, IMAGE_SCRIPT,
    PAGE_SCRIPT, PHP_DIR,
};
pub use site::{Gzip, PeerSite, Prefork, APACHE_MODULES};

/// A peer server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// nginx, one worker process.
    Nginx,
    /// Apache httpd with mpm_prefork.
    Apache,
    /// lighttpd, one process, on the readiness interface [`PeerTuning::lighttpd`] names.
    Lighttpd,
    /// HAProxy, a load balancer (the cluster lab's peer; it serves no site of its own).
    Haproxy,
    /// php-fpm (Debian's `php-fpm8.2`, a static pool) behind nginx: PHP scripts produce the
    /// page and the images ([`php_fpm`]'s routing; the lab writes the scripts).
    #[serde(rename = "php-fpm")]
    PhpFpm,
}

/// How a peer's processes are set up (beyond what it serves).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerTuning {
    /// Apache's prefork pool.
    pub prefork: Prefork,
    /// nginx's process setup.
    pub nginx: NginxTuning,
    /// lighttpd's process setup (its event handler).
    pub lighttpd: LighttpdTuning,
    /// The peer's binary, when not the one on `PATH`.
    pub program: Option<PathBuf>,
}

/// A peer ready to start: its command line and config.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Which peer.
    pub peer: Peer,
    /// Its binary.
    pub program: PathBuf,
    /// Its arguments (configuration file, prefix, foreground).
    pub args: Vec<OsString>,
    /// The configuration file written.
    pub conf: PathBuf,
    /// The peer's directory (prefix, logs, pid file).
    pub dir: PathBuf,
    /// A second process in front of this one, started after it (php-fpm's nginx). The
    /// first is the one a `+pos` daemon follows; the front listens on the site's address.
    pub front: Option<Box<Prepared>>,
    /// A path the server creates once it accepts requests (php-fpm's socket): its front is
    /// started after it appears.
    pub ready_path: Option<PathBuf>,
}

impl Peer {
    /// Name used in variants and reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::Apache => "apache",
            Peer::Lighttpd => "lighttpd",
            Peer::Haproxy => "haproxy",
            Peer::PhpFpm => "php-fpm",
        }
    }

    /// The installed binary, if any.
    pub fn binary(self) -> Option<PathBuf> {
        match self {
            Peer::Nginx => which("nginx"),
            Peer::Apache => which("apache2").or_else(|| which("httpd")),
            Peer::Lighttpd => which("lighttpd"),
            Peer::Haproxy => which("haproxy"),
            Peer::PhpFpm => which("php-fpm8.2").or_else(|| which("php-fpm")),
        }
    }

    /// Why this peer cannot be measured here, if it cannot.
    pub fn unavailable(self) -> Option<String> {
        match self.binary() {
            None => Some(format!(
                "{} is not installed (scripts/deps.sh installs it); measuring the rest",
                self.name()
            )),
            Some(_) if self == Peer::Apache && !Path::new(APACHE_MODULES).join("mod_mpm_prefork.so").exists() => {
                Some(format!(
                    "apache2 found but {APACHE_MODULES}/mod_mpm_prefork.so is missing; measuring the rest"
                ))
            }
            Some(_) if self == Peer::PhpFpm => Peer::Nginx
                .unavailable()
                .map(|why| format!("php-fpm runs behind nginx, and {why}")),
            Some(_) => None,
        }
    }

    /// Write the configuration under `dir` (created) and return the command line.
    pub fn prepare(self, dir: &Path, site: &PeerSite, prefork: &Prefork) -> Result<Prepared> {
        let tuning = PeerTuning {
            prefork: *prefork,
            ..PeerTuning::default()
        };
        self.prepare_tuned(dir, site, &tuning)
    }

    /// [`Peer::prepare`] with the process setup given in full.
    pub fn prepare_tuned(
        self,
        dir: &Path,
        site: &PeerSite,
        tuning: &PeerTuning,
    ) -> Result<Prepared> {
        let program = match &tuning.program {
            Some(p) => p.clone(),
            None => self.binary().ok_or_else(|| LabError::Process {
                name: self.name().into(),
                msg: "not installed".into(),
            })?,
        };
        let prefork = &tuning.prefork;
        std::fs::create_dir_all(dir).map_err(|e| LabError::io("creating", dir, e))?;
        let root = nix::unistd::geteuid().is_root();
        let (conf, text, args): (PathBuf, String, Vec<OsString>) = match self {
            Peer::Nginx => {
                for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                    let d = dir.join("tmp").join(t);
                    std::fs::create_dir_all(&d).map_err(|e| LabError::io("creating", &d, e))?;
                }
                let conf = dir.join("nginx.conf");
                let text = nginx_conf(dir, site, &tuning.nginx, root);
                let args = vec![
                    "-p".into(),
                    dir.as_os_str().to_owned(),
                    "-c".into(),
                    conf.as_os_str().to_owned(),
                    "-e".into(),
                    dir.join("error.log").into_os_string(),
                ];
                (conf, text, args)
            }
            Peer::Apache => {
                let conf = dir.join("httpd.conf");
                let text = apache_conf(dir, site, prefork, root);
                let args = vec![
                    "-d".into(),
                    dir.as_os_str().to_owned(),
                    "-f".into(),
                    conf.as_os_str().to_owned(),
                    "-DFOREGROUND".into(),
                ];
                (conf, text, args)
            }
            Peer::Lighttpd => {
                let conf = dir.join("lighttpd.conf");
                let text = lighttpd_conf(dir, site, &tuning.lighttpd);
                let args = vec!["-D".into(), "-f".into(), conf.as_os_str().to_owned()];
                (conf, text, args)
            }
            Peer::Haproxy => {
                return Err(LabError::Config(
                    "HAProxy serves no site: the cluster lab writes its configuration \
                     (peers::haproxy_proxy_conf)"
                        .into(),
                ))
            }
            Peer::PhpFpm => return prepare_php_fpm(program, dir, site, tuning, root),
        };
        std::fs::write(&conf, text).map_err(|e| LabError::io("writing", &conf, e))?;
        Ok(Prepared {
            peer: self,
            program,
            args,
            conf,
            dir: dir.to_path_buf(),
            front: None,
            ready_path: None,
        })
    }
}

/// php-fpm (`program`) with its pool and `php.ini` under `dir`, and nginx in front of it
/// under `dir/nginx` serving `site` with seed 001's page routed to the pool. The pool has as
/// many children as Apache's prefork starts (`tuning.prefork.start`).
fn prepare_php_fpm(
    program: PathBuf,
    dir: &Path,
    site: &PeerSite,
    tuning: &PeerTuning,
    root: bool,
) -> Result<Prepared> {
    let conf = dir.join("php-fpm.conf");
    let pool = FpmPool {
        children: tuning.prefork.start,
    };
    std::fs::write(&conf, php_fpm_conf(dir, &pool, root))
        .map_err(|e| LabError::io("writing", &conf, e))?;
    let ini = dir.join("php.ini");
    std::fs::write(&ini, php_ini()).map_err(|e| LabError::io("writing", &ini, e))?;
    let mut front_site = site.clone();
    front_site.extra = format!(
        "{}{}",
        nginx_fastcgi(&site.root, &dir.join(php_fpm::SOCKET)),
        site.extra
    );
    let front_tuning = PeerTuning {
        program: None,
        ..tuning.clone()
    };
    let front = Peer::Nginx.prepare_tuned(&dir.join("nginx"), &front_site, &front_tuning)?;
    Ok(Prepared {
        peer: Peer::PhpFpm,
        program,
        args: vec![
            "--nodaemonize".into(),
            "--fpm-config".into(),
            conf.as_os_str().to_owned(),
            "-c".into(),
            ini.into_os_string(),
        ],
        conf,
        dir: dir.to_path_buf(),
        front: Some(Box::new(front)),
        ready_path: Some(dir.join(php_fpm::SOCKET)),
    })
}

/// Check a prepared configuration with the real binary (`nginx -t`, `apache2 -t`).
pub fn validate(p: &Prepared) -> Result<()> {
    let prog = p.program.to_string_lossy().into_owned();
    let dir = p.dir.to_string_lossy().into_owned();
    let conf = p.conf.to_string_lossy().into_owned();
    match p.peer {
        Peer::Nginx => {
            let err = p.dir.join("error.log").to_string_lossy().into_owned();
            run_cmd(&prog, &["-t", "-q", "-p", &dir, "-c", &conf, "-e", &err])?;
        }
        Peer::Apache => {
            run_cmd(&prog, &["-t", "-d", &dir, "-f", &conf])?;
        }
        Peer::Lighttpd => {
            run_cmd(&prog, &["-tt", "-f", &conf])?;
        }
        Peer::Haproxy => {
            run_cmd(&prog, &["-c", "-q", "-f", &conf])?;
        }
        Peer::PhpFpm => {
            run_cmd(&prog, &["--test", "--fpm-config", &conf])?;
        }
    }
    if let Some(f) = &p.front {
        validate(f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn site(root: &Path) -> PeerSite {
        PeerSite {
            root: root.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            gzip: Some(Gzip {
                level: 6,
                types: vec!["text/html".into(), "image/bmp".into()],
            }),
            keepalive_s: 5,
            extra: String::new(),
        }
    }

    fn check_with_real_binary(peer: Peer) {
        if let Some(why) = peer.unavailable() {
            eprintln!("SKIP {}_config_passes_its_own_check: {why}", peer.name());
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("site");
        std::fs::create_dir_all(&root).unwrap();
        let mut s = site(&root);
        s.listen = "127.0.0.1:1".parse().unwrap(); // -t does not bind
        let p = peer
            .prepare(&d.path().join(peer.name()), &s, &Prefork::default())
            .unwrap();
        validate(&p).unwrap_or_else(|e| panic!("{}: {e}", peer.name()));
        // A broken config is refused, with the binary's message.
        std::fs::write(&p.conf, "this is not a config;\n").unwrap();
        let e = validate(&p).unwrap_err().to_string();
        assert!(e.contains(&p.program.to_string_lossy().into_owned()), "{e}");
    }

    #[test]
    fn nginx_config_passes_its_own_check() {
        check_with_real_binary(Peer::Nginx);
    }

    #[test]
    fn apache_config_passes_its_own_check() {
        check_with_real_binary(Peer::Apache);
    }

    #[test]
    fn apache_with_an_access_log_passes_its_own_check() {
        if let Some(why) = Peer::Apache.unavailable() {
            eprintln!("SKIP apache_with_an_access_log_passes_its_own_check: {why}");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let mut s = site(d.path());
        s.listen = "127.0.0.1:1".parse().unwrap();
        s.extra = apache_access_log(&d.path().join("access.log"));
        assert!(s.extra.contains("%{usec}t %D") && s.extra.contains("CustomLog"));
        let p = Peer::Apache
            .prepare(&d.path().join("apache"), &s, &Prefork::default())
            .unwrap();
        validate(&p).unwrap();
    }

    #[test]
    fn php_fpm_config_passes_its_own_check() {
        check_with_real_binary(Peer::PhpFpm);
    }

    #[test]
    fn lighttpd_config_passes_its_own_check() {
        check_with_real_binary(Peer::Lighttpd);
    }

    /// `GET path` with `Accept-Encoding: gzip` over HTTP/1.1 (nginx compresses nothing older):
    /// the response head and its body, de-chunked.
    fn get_gzip(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(String, Vec<u8>)> {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))?;
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        )?;
        let mut raw = Vec::new();
        c.read_to_end(&mut raw)?;
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| std::io::Error::other("no end of head"))?;
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        let mut body = raw[end + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            let (mut out, mut rest) = (Vec::new(), &body[..]);
            loop {
                let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
                let size = std::str::from_utf8(&rest[..nl])
                    .unwrap()
                    .split(';')
                    .next()
                    .unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
                rest = &rest[nl + 2 + n + 2..];
            }
            body = out;
        }
        Ok((head, body))
    }

    #[test]
    fn nginx_and_lighttpd_compress_the_events_labs_page_on_every_request() {
        use std::io::Read;
        for peer in [Peer::Nginx, Peer::Lighttpd] {
            if let Some(why) = peer.unavailable() {
                eprintln!("SKIP {} compresses the page: {why}", peer.name());
                continue;
            }
            let d = tempfile::tempdir().unwrap();
            let root = d.path().join("site");
            std::fs::create_dir_all(&root).unwrap();
            let page = crate::events::run::gzip_page(64 * 1024, 2);
            std::fs::write(root.join("page.html"), &page).unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut s = site(&root);
            s.listen = format!("127.0.0.1:{port}").parse().unwrap();
            s.gzip = Some(Gzip {
                level: 6,
                types: vec!["text/html".into()],
            });
            let tuning = PeerTuning {
                nginx: NginxTuning {
                    master_process: false,
                    ..NginxTuning::default()
                },
                ..PeerTuning::default()
            };
            let p = peer
                .prepare_tuned(&d.path().join(peer.name()), &s, &tuning)
                .unwrap();
            validate(&p).unwrap();
            let mut child = crate::process::Launch::new(peer.name(), &p.program)
                .args(&p.args)
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // Twice: each response compressed (no cached copy served in its place is told
            // apart here; the lab's CPU per request is what shows that).
            for i in 0..2 {
                let (head, body) = loop {
                    match get_gzip(s.listen, "/page.html") {
                        Ok(r) => break r,
                        Err(e) if std::time::Instant::now() > deadline => {
                            panic!("{}: {e}", peer.name())
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
                    }
                };
                assert!(
                    head.contains("content-encoding: gzip"),
                    "{} response {i}: {head}",
                    peer.name()
                );
                assert!(
                    body.len() < page.len() / 3,
                    "{}: {} bytes",
                    peer.name(),
                    body.len()
                );
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_end(&mut out)
                    .unwrap();
                assert!(out == page, "{}: the page gunzips to itself", peer.name());
            }
            child.stop(std::time::Duration::from_secs(5));
        }
    }

    #[test]
    fn lighttpd_serves_on_both_handlers_and_logs_combined_format() {
        if let Some(why) = Peer::Lighttpd.unavailable() {
            eprintln!("SKIP lighttpd_serves_on_both_handlers_and_logs_combined_format: {why}");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("site");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.html"), "hello").unwrap();
        for h in [EventHandler::Epoll, EventHandler::Poll] {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut s = site(&root);
            s.gzip = None;
            s.listen = format!("127.0.0.1:{port}").parse().unwrap();
            let dir = d.path().join(h.v_name());
            let log = dir.join("access.log");
            let tuning = PeerTuning {
                lighttpd: LighttpdTuning {
                    event_handler: h,
                    access_log: Some(log.clone()),
                    ..LighttpdTuning::default()
                },
                ..PeerTuning::default()
            };
            let p = Peer::Lighttpd.prepare_tuned(&dir, &s, &tuning).unwrap();
            validate(&p).unwrap();
            let mut child = crate::process::Launch::new("lighttpd", &p.program)
                .args(&p.args)
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let body = loop {
                match crate::testbed::http_get(
                    s.listen,
                    "/a.html",
                    std::time::Duration::from_secs(2),
                ) {
                    Ok(b) => break b,
                    Err(e) if std::time::Instant::now() > deadline => panic!("{h:?}: {e}"),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
                }
            };
            assert_eq!(body, "hello");
            child.stop(std::time::Duration::from_secs(5));
            let text = std::fs::read_to_string(&log).unwrap();
            let rec = loadgen::clf::parse_line(text.lines().next().unwrap()).unwrap();
            assert_eq!((rec.status, rec.target.as_deref()), (200, Some("/a.html")));
        }
    }
}

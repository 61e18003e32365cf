//! CGI/1.1 end to end: real scripts (bash, Python, Perl from `tests/cgi-bin/`, copied to a temp
//! dir with the exec bit set) behind a real server on an ephemeral loopback port, spoken to
//! over raw TCP so that tests can send chunked bodies, read partial responses and hang up.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use server::cgi::{CgiConfig, CgiStats};
use server::config::{Config, SiteConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use harness::Running;

/// The server under test: the real `server::Server` with one site whose CGI is configured.
mod harness {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use server::cgi::{CgiConfig, CgiStats};
    use server::config::{Config, SiteConfig};

    pub struct Running {
        pub addr: SocketAddr,
        pub admin: SocketAddr,
        pub ctx: server::Ctx,
        pub stats: Arc<CgiStats>,
        /// Every site's CGI counters, in configuration order (`stats` is the first's).
        pub all_stats: Vec<Arc<CgiStats>>,
        /// The site's CGI container, when cgroups are in use.
        pub container: Option<os::Cgroup>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Running {
        fn drop(&mut self) {
            if let Some(s) = self.stop.take() {
                let _ = s.send(());
            }
            self.task.abort();
        }
    }

    impl Running {
        pub async fn start(root: &Path, cfg: CgiConfig) -> Running {
            let config = Config {
                listen: "127.0.0.1:0".parse().unwrap(),
                admin: Some("127.0.0.1:0".parse().unwrap()),
                sites: vec![SiteConfig {
                    name: "site.test".into(),
                    aliases: Vec::new(),
                    root: root.to_owned(),
                    index: None,
                    cgi: Some(cfg),
                }],
                shutdown_timeout: Duration::from_secs(1),
                ..Config::default()
            };
            Self::start_config(config).await
        }

        /// A server for `config` (its first site must have CGI).
        pub async fn start_config(config: Config) -> Running {
            let server = server::Server::bind(config).await.expect("server starts");
            let addr = server.local_addr();
            let admin = server.admin_addr().expect("admin listener");
            let ctx = server.ctx().clone();
            let all_stats: Vec<_> = ctx
                .sites()
                .iter()
                .filter_map(|s| s.cgi.as_ref().map(|c| c.stats().clone()))
                .collect();
            let cgi = ctx
                .sites()
                .iter()
                .next()
                .and_then(|s| s.cgi.as_ref())
                .expect("the site has CGI");
            let stats = cgi.stats().clone();
            let container = cgi.container().cloned();
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let _ = server
                    .run(async {
                        let _ = rx.await;
                    })
                    .await;
            });
            Running {
                addr,
                admin,
                ctx,
                stats,
                all_stats,
                container,
                stop: Some(tx),
                task,
            }
        }
    }
}

const SCRIPTS: &[&str] = &[
    "env.sh",
    "echo.py",
    "status.pl",
    "malformed.sh",
    "sleep.sh",
    "flood.py",
    "cgroup.sh",
];

/// A site: document root with one file, a cgi-bin with the test scripts (exec bit set).
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("www");
        let bin = dir.path().join("cgi-bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(root.join("index.html"), "<p>static</p>\n").unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cgi-bin");
        for s in SCRIPTS {
            let to = bin.join(s);
            std::fs::copy(src.join(s), &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { dir }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("www")
    }
    fn bin(&self) -> PathBuf {
        self.dir.path().join("cgi-bin")
    }
    fn cfg(&self) -> CgiConfig {
        CgiConfig::new("/cgi-bin", self.bin())
    }
    /// Add a script under `name` with the contents of test script `from` and `mode`.
    fn add(&self, name: &str, from: &str, mode: u32) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cgi-bin");
        let to = self.bin().join(name);
        std::fs::copy(src.join(from), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).unwrap();
        to
    }
}

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The body arrived whole (length reached or final chunk seen).
    complete: bool,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// `NAME=value` line of an env.sh response.
    fn var(&self, name: &str) -> Option<String> {
        let t = self.text();
        let prefix = format!("{name}=");
        t.lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
    }
}

fn parse_resp(raw: &[u8]) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(a, b)| (a.trim().to_owned(), b.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let (body, complete) = if chunked {
        let mut body = Vec::new();
        let mut i = 0;
        let mut complete = false;
        while let Some(nl) = rest[i..].windows(2).position(|w| w == b"\r\n") {
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[i..i + nl]).unwrap().trim(), 16)
                    .unwrap();
            i += nl + 2;
            if size == 0 {
                complete = true;
                break;
            }
            if rest.len() < i + size {
                body.extend_from_slice(&rest[i..]);
                break;
            }
            body.extend_from_slice(&rest[i..i + size]);
            i += size + 2;
        }
        (body, complete)
    } else {
        let cl = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse::<usize>().unwrap());
        match cl {
            Some(n) => (rest[..rest.len().min(n)].to_vec(), rest.len() >= n),
            None => (rest.to_vec(), true),
        }
    };
    Resp {
        status,
        headers,
        body,
        complete,
    }
}

/// Send `raw` (a whole request, `Connection: close`) and read until the server closes.
async fn exchange(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let mut read_error = None;
    let r = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf).await {
                Ok(0) => break,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(r.is_ok(), "response not finished in 20 s");
    let request_line = String::from_utf8_lossy(raw.split(|&b| b == b'\r').next().unwrap_or(raw));
    assert!(
        out.windows(4).any(|w| w == b"\r\n\r\n"),
        "no response head for {request_line:?}: {} bytes, read error {read_error:?}",
        out.len()
    );
    parse_resp(&out)
}

async fn get(addr: SocketAddr, target: &str) -> Resp {
    get_with(addr, target, "").await
}

async fn get_with(addr: SocketAddr, target: &str, extra_headers: &str) -> Resp {
    let req = format!(
        "GET {target} HTTP/1.1\r\nHost: site.test\r\n{extra_headers}Connection: close\r\n\r\n"
    );
    exchange(addr, req.as_bytes()).await
}

/// Whether `pid` has ended (gone, or a zombie waiting for its reaper).
fn dead(pid: i32) -> bool {
    os::task::ended(pid)
}

async fn wait_dead(pids: &[i32], within: Duration) {
    let t = Instant::now();
    while t.elapsed() < within {
        if pids.iter().all(|&p| dead(p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let alive: Vec<_> = pids.iter().filter(|&&p| !dead(p)).collect();
    panic!("processes {alive:?} still alive after {within:?}");
}

/// Live (non-zombie) processes whose working directory is `dir` (scripts run in theirs).
fn processes_in(dir: &Path) -> Vec<i32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    os::task::pids()
        .unwrap()
        .into_iter()
        .filter(|&pid| os::task::cwd(pid).is_ok_and(|c| c == dir) && !dead(pid))
        .collect()
}

/// Pids a sleep.sh/flood.py run recorded in `pids-<tag>`.
async fn recorded_pids(site: &Site, tag: &str) -> Vec<i32> {
    let p = site.bin().join(format!("pids-{tag}"));
    let t = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&p) {
            return s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{} never written",
            p.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn count(stats: &Arc<CgiStats>, f: impl Fn(&CgiStats) -> &std::sync::atomic::AtomicU64) -> u64 {
    f(stats).load(std::sync::atomic::Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_variables_reach_the_script() {
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;
    let r = get_with(
        srv.addr,
        "/cgi-bin/env.sh/extra/p%20ath?a=1&b=%20;$(id)",
        "X-Test-Header: yes\r\nX-Test-Header: again\r\nProxy: http://evil.example:1/\r\nAuthorization: Basic eDp5\r\n",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let port = srv.addr.port().to_string();
    let root = std::fs::canonicalize(site.root()).unwrap();
    let script = std::fs::canonicalize(site.bin().join("env.sh")).unwrap();
    for (k, v) in [
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_NAME", "site.test"),
        ("SERVER_PORT", port.as_str()),
        ("REQUEST_METHOD", "GET"),
        ("SCRIPT_NAME", "/cgi-bin/env.sh"),
        ("PATH_INFO", "/extra/p ath"),
        ("QUERY_STRING", "a=1&b=%20;$(id)"),
        (
            "REQUEST_URI",
            "/cgi-bin/env.sh/extra/p%20ath?a=1&b=%20;$(id)",
        ),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("HTTP_X_TEST_HEADER", "yes, again"),
        ("HTTP_HOST", "site.test"),
    ] {
        assert_eq!(r.var(k).as_deref(), Some(v), "{k} in\n{}", r.text());
    }
    assert_eq!(r.var("SCRIPT_FILENAME"), Some(script.display().to_string()));
    assert_eq!(
        r.var("PATH_TRANSLATED"),
        Some(format!("{}/extra/p ath", root.display()))
    );
    assert!(r.var("SERVER_SOFTWARE").unwrap().starts_with("triage"));
    assert!(r.var("REMOTE_PORT").unwrap().parse::<u16>().is_ok());
    assert!(r.var("DOCUMENT_ROOT").is_some());
    // Not passed: credentials, the httpoxy header, the server's own environment.
    assert_eq!(r.var("HTTP_AUTHORIZATION"), None);
    assert_eq!(r.var("HTTP_PROXY"), None);
    assert_eq!(r.var("CONTENT_LENGTH"), None);
    assert!(
        !r.text().lines().any(|l| l.starts_with("CARGO")),
        "server environment leaked:\n{}",
        r.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_body_reaches_stdin_streamed_and_chunked() {
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;
    // 300 KB: more than a pipe buffer, so stdin and stdout must flow at the same time.
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut req = format!(
        "POST /cgi-bin/echo.py HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-test\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let r = exchange(srv.addr, &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-length"), Some("300000"));
    assert!(r.complete);
    assert!(r.body == body, "echoed body differs");

    // Chunked request: the server reads it first to set CONTENT_LENGTH.
    let mut req = b"POST /cgi-bin/env.sh HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
                    Content-Type: text/plain\r\nConnection: close\r\n\r\n"
        .to_vec();
    for part in ["hello ", "chunked ", "world"] {
        req.extend_from_slice(format!("{:x}\r\n{part}\r\n", part.len()).as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = exchange(srv.addr, &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.var("CONTENT_LENGTH").as_deref(), Some("19"));
    assert_eq!(r.var("CONTENT_TYPE").as_deref(), Some("text/plain"));
    assert_eq!(r.var("REQUEST_METHOD").as_deref(), Some("POST"));
    assert_eq!(r.var("BODY").as_deref(), Some("hello chunked world"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_limit_is_413() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.max_request_body = 1000;
    let srv = Running::start(&site.root(), cfg).await;
    let mut req = b"POST /cgi-bin/echo.py HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n".to_vec();
    req.extend_from_slice(&[b'a'; 2000]);
    assert_eq!(exchange(srv.addr, &req).await.status, 413);
    let mut req = b"POST /cgi-bin/echo.py HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"200\r\n");
        req.extend_from_slice(&[b'a'; 512]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(exchange(srv.addr, &req).await.status, 413);
    assert_eq!(count(&srv.stats, |s| &s.started), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_location_and_content_type() {
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;
    let r = get(srv.addr, "/cgi-bin/status.pl?notfound").await;
    assert_eq!((r.status, r.text().as_str()), (404, "nothing here\n"));
    let r = get(srv.addr, "/cgi-bin/status.pl?client").await;
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://example.org/elsewhere"));
    let r = get(srv.addr, "/cgi-bin/status.pl?moved").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/new"));
    assert_eq!(r.header("content-type"), Some("text/html"));
    let r = get(srv.addr, "/cgi-bin/status.pl?json").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-script"), Some("perl"));
    let cookies: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .collect();
    assert_eq!(cookies.len(), 2);
    assert_eq!(r.text(), "{\"ok\":true}\n");
    let r = get(srv.addr, "/cgi-bin/status.pl?nocontent").await;
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    let r = get(srv.addr, "/cgi-bin/status.pl?length").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("5"));
    assert_eq!(r.text(), "hello");
    // Local redirect: the server answers with the other script, as a GET, new query.
    let r = get(srv.addr, "/cgi-bin/status.pl?local").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.var("SCRIPT_NAME").as_deref(), Some("/cgi-bin/env.sh"));
    assert_eq!(r.var("PATH_INFO").as_deref(), Some("/via-local"));
    assert_eq!(r.var("QUERY_STRING").as_deref(), Some("from=local"));
    assert_eq!(r.var("REQUEST_METHOD").as_deref(), Some("GET"));
    // A local redirect loop ends.
    let r = get(srv.addr, "/cgi-bin/status.pl?loop").await;
    assert_eq!(r.status, 500);
    // A declared length the script does not honour: the body is cut short, not padded.
    let r = get(srv.addr, "/cgi-bin/status.pl?short").await;
    assert_eq!(r.status, 200);
    assert!(!r.complete, "a short body must not look complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_output_is_502() {
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;
    for q in [
        "garbage",
        "nothing",
        "fail",
        "noctype",
        "badstatus",
        "unterminated",
    ] {
        let r = get(srv.addr, &format!("/cgi-bin/malformed.sh?{q}")).await;
        assert_eq!(r.status, 502, "{q}: {}", r.text());
    }
    assert_eq!(count(&srv.stats, |s| &s.malformed), 6);
    assert_eq!(get(srv.addr, "/cgi-bin/malformed.sh?ok").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_before_headers_is_504_and_kills_the_group() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.timeout = Duration::from_millis(1500);
    let srv = Running::start(&site.root(), cfg).await;
    let t = Instant::now();
    let r = get(srv.addr, "/cgi-bin/sleep.sh?tag=t504").await;
    assert_eq!(r.status, 504);
    assert!(
        t.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let pids = recorded_pids(&site, "t504").await;
    wait_dead(&pids, Duration::from_secs(5)).await;
    assert_eq!(count(&srv.stats, |s| &s.timeouts), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_after_headers_truncates_and_kills() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.timeout = Duration::from_millis(1500);
    let srv = Running::start(&site.root(), cfg).await;
    let r = get(srv.addr, "/cgi-bin/sleep.sh?mode=headers&tag=tbody").await;
    assert_eq!(r.status, 200);
    assert!(!r.complete, "a timed-out body must not look complete");
    let pids = recorded_pids(&site, "tbody").await;
    assert!(r.text().starts_with(&format!("{} {}", pids[0], pids[1])));
    wait_dead(&pids, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_limit_truncates_and_kills() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.max_output = 100_000;
    let srv = Running::start(&site.root(), cfg).await;
    let r = get(srv.addr, "/cgi-bin/flood.py?tag=flood").await;
    assert_eq!(r.status, 200);
    assert!(!r.complete, "a truncated body must not look complete");
    assert!(r.body.len() <= 100_000, "{} bytes", r.body.len());
    assert!(r.body.len() >= 50_000, "{} bytes", r.body.len());
    assert!(r.body.iter().all(|&b| b == b'x'));
    let pids = recorded_pids(&site, "flood").await;
    wait_dead(&pids, Duration::from_secs(5)).await;
    assert_eq!(count(&srv.stats, |s| &s.output_limited), 1);
}

/// Wait until `f` holds (an event the server signals through its counters), at most 10 s.
async fn until(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_queues_scripts_until_a_place_frees() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.max_running = Some(1);
    let srv = Running::start(&site.root(), cfg).await;
    // A holds the one place: its headers are out, its script waits.
    let mut a = TcpStream::connect(srv.addr).await.unwrap();
    a.write_all(b"GET /cgi-bin/sleep.sh?mode=headers&tag=qa HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .await
        .unwrap();
    let pids = recorded_pids(&site, "qa").await;
    // B must wait: no second script starts while A runs.
    let addr = srv.addr;
    let b = tokio::spawn(async move { get(addr, "/cgi-bin/env.sh").await });
    until("B waits for a place", || {
        count(&srv.stats, |s| &s.waiting) == 1
    })
    .await;
    assert_eq!(count(&srv.stats, |s| &s.started), 1);
    let m = get(srv.admin, "/metrics").await.text();
    assert!(
        m.contains("triage_cgi_waiting{site=\"site.test\"} 1"),
        "{m}"
    );
    // A's client goes away: its group is killed and reaped, and B gets the place.
    drop(a);
    wait_dead(&pids, Duration::from_secs(5)).await;
    let r = b.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(count(&srv.stats, |s| &s.started), 2);
    assert_eq!(count(&srv.stats, |s| &s.queued), 1);
    assert_eq!(count(&srv.stats, |s| &s.waiting), 0);
    assert_eq!(count(&srv.stats, |s| &s.queue_timeouts), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_waits_at_most_the_timeout_then_503() {
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.max_running = Some(1);
    cfg.timeout = Duration::from_millis(1500);
    let srv = Running::start(&site.root(), cfg).await;
    let addr = srv.addr;
    // A runs until its timeout (T); B waits for it and then runs until 2T; C waits behind B
    // (the queue is in arrival order) and gives up at about T after it came.
    let a = tokio::spawn(async move { get(addr, "/cgi-bin/sleep.sh?tag=wa").await });
    let _ = recorded_pids(&site, "wa").await;
    let b = tokio::spawn(async move { get(addr, "/cgi-bin/sleep.sh?tag=wb").await });
    until("B waits", || count(&srv.stats, |s| &s.waiting) == 1).await;
    let c = tokio::spawn(async move { get(addr, "/cgi-bin/env.sh").await });
    until("C waits", || count(&srv.stats, |s| &s.waiting) == 2).await;
    let c = c.await.unwrap();
    assert_eq!(c.status, 503, "{}", c.text());
    assert_eq!(a.await.unwrap().status, 504);
    assert_eq!(b.await.unwrap().status, 504);
    assert_eq!(count(&srv.stats, |s| &s.queued), 2);
    assert_eq!(count(&srv.stats, |s| &s.queue_timeouts), 1);
    assert_eq!(count(&srv.stats, |s| &s.started), 2, "C never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_gone_kills_the_process_group() {
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;

    // While relaying the body.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /cgi-bin/sleep.sh?mode=headers&tag=gone1 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("headers in time")
            .unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let pids = recorded_pids(&site, "gone1").await;
    assert!(pids.iter().all(|&p| !dead(p)));
    drop(s);
    wait_dead(&pids, Duration::from_secs(5)).await;

    // Before the headers.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        b"GET /cgi-bin/sleep.sh?tag=gone2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let pids = recorded_pids(&site, "gone2").await;
    assert!(pids.iter().all(|&p| !dead(p)));
    drop(s);
    wait_dead(&pids, Duration::from_secs(5)).await;
    // Hanging up right after sending: the end of the stream arrives with the request.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /cgi-bin/sleep.sh?tag=gone3 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    drop(s);
    // The script may be killed before it records its pids: look for any process still
    // working in the script directory instead.
    let t = Instant::now();
    loop {
        let left = processes_in(&site.bin());
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first two were counted; the third only if hyper dispatched it before seeing the end
    // of the stream (it may not start the script at all).
    let t = Instant::now();
    while count(&srv.stats, |s| &s.client_gone) < 2 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let gone = count(&srv.stats, |s| &s.client_gone);
    let started = count(&srv.stats, |s| &s.started);
    assert!(
        gone >= 2 && gone == started,
        "gone {gone}, started {started}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shell_is_involved() {
    let site = Site::new();
    let name = "a;touch pwned1;$(touch pwned2)`touch pwned3`.sh";
    site.add(name, "env.sh", 0o755);
    let srv = Running::start(&site.root(), site.cfg()).await;
    let enc: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'.' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let r = get(
        srv.addr,
        &format!("/cgi-bin/{enc}?x=;touch%20pwned4;$(touch%20pwned5)|sh"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.var("SCRIPT_NAME"), Some(format!("/cgi-bin/{name}")));
    assert_eq!(
        r.var("QUERY_STRING").as_deref(),
        Some("x=;touch%20pwned4;$(touch%20pwned5)|sh")
    );
    for d in [site.bin(), site.root(), site.dir.path().to_path_buf()] {
        for i in 1..=5 {
            assert!(
                !d.join(format!("pwned{i}")).exists(),
                "a shell ran in {}",
                d.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_into_and_out_of_script_dirs_are_refused() {
    let site = Site::new();
    // A script outside the cgi dir, reachable only by traversal or a symlink.
    let outside = site.dir.path().join("secret.sh");
    std::fs::copy(site.bin().join("env.sh"), &outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&outside, site.bin().join("link.sh")).unwrap();
    site.add("noexec.sh", "env.sh", 0o644);
    site.add(".hidden.sh", "env.sh", 0o755);
    site.add("nph-raw.sh", "env.sh", 0o755);
    std::fs::create_dir(site.bin().join("sub")).unwrap();
    site.add("sub/inner.sh", "env.sh", 0o755);
    let srv = Running::start(&site.root(), site.cfg()).await;
    for (target, want) in [
        ("/cgi-bin/../secret.sh", 403),
        ("/cgi-bin/%2e%2e/secret.sh", 403),
        ("/cgi-bin/sub/..%2f..%2fsecret.sh", 403),
        ("/cgi-bin/sub%2f..%2f..%2fsecret.sh", 403),
        ("/cgi-bin/..%5csecret.sh", 403),
        ("/cgi-bin/env.sh%00.txt", 403),
        ("/cgi-bin/link.sh", 403),
        ("/cgi-bin/noexec.sh", 403),
        ("/cgi-bin/.hidden.sh", 404),
        ("/cgi-bin/nph-raw.sh", 501),
        ("/cgi-bin/missing.sh", 404),
        ("/cgi-bin/", 403),
        ("/cgi-bin/sub", 403),
        // Into the script dir from elsewhere: refused before anything runs.
        ("/www/../cgi-bin/env.sh", 403),
        ("/x/%2e%2e/cgi-bin/env.sh", 403),
    ] {
        let r = get(srv.addr, target).await;
        assert_eq!(r.status, want, "{target}: {}", r.text());
        assert!(
            r.var("GATEWAY_INTERFACE").is_none(),
            "{target} ran a script"
        );
        assert!(
            !r.text().contains("#!/usr/bin/env"),
            "{target} leaked a script"
        );
    }
    assert_eq!(count(&srv.stats, |s| &s.started), 0);
    // Scripts in subdirectories and encoded prefixes do run, as scripts.
    let r = get(srv.addr, "/cgi-bin/sub/inner.sh/x").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.var("SCRIPT_NAME").as_deref(),
        Some("/cgi-bin/sub/inner.sh")
    );
    assert_eq!(r.var("PATH_INFO").as_deref(), Some("/x"));
    let r = get(srv.addr, "/cgi%2Dbin/env.sh").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.var("GATEWAY_INTERFACE").as_deref(), Some("CGI/1.1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_failures_are_reported() {
    let site = Site::new();
    std::fs::write(site.bin().join("noshebang.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(
        site.bin().join("noshebang.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(
        site.bin().join("badinterp.sh"),
        "#!/nonexistent/interpreter\n",
    )
    .unwrap();
    std::fs::set_permissions(
        site.bin().join("badinterp.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let srv = Running::start(&site.root(), site.cfg()).await;
    assert_eq!(get(srv.addr, "/cgi-bin/noshebang.sh").await.status, 500);
    assert_eq!(get(srv.addr, "/cgi-bin/badinterp.sh").await.status, 500);
    assert_eq!(count(&srv.stats, |s| &s.spawn_failed), 2);
}

fn skip(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
}

/// Whether this test can use cgroups (root, a usable cpu controller); prints why not.
fn cgroups_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "not root");
        return false;
    }
    if let Err(e) = os::probe() {
        skip(test, &format!("no usable cgroups: {e}"));
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_runs_in_its_own_cgroup() {
    if !cgroups_or_skip("each_request_runs_in_its_own_cgroup") {
        return;
    }
    let site = Site::new();
    let srv = Running::start(&site.root(), site.cfg()).await;
    let site_cgi = srv
        .container
        .clone()
        .expect("as root with cgroups, the site has a CGI container");
    let v1 = !site_cgi.path().join("cgroup.controllers").exists();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = get(srv.addr, "/cgi-bin/cgroup.sh").await;
        assert_eq!(r.status, 200, "{}", r.text());
        // The line of the hierarchy that has the cpu controller (v1) or the unified one (v2).
        let line = r
            .text()
            .lines()
            .find(|l| {
                let ctl = l.split(':').nth(1).unwrap_or("");
                if v1 {
                    ctl.split(',').any(|c| c == "cpu")
                } else {
                    ctl.is_empty()
                }
            })
            .unwrap_or_else(|| panic!("no cpu line in {}", r.text()))
            .to_owned();
        // The path relative to the hierarchy's mount point: a `req-N` whose parent is the
        // site's CGI container.
        let path = line.splitn(3, ':').nth(2).unwrap().to_owned();
        let p = Path::new(path.trim_start_matches('/'));
        assert!(
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("req-"))
                && p.parent().is_some_and(|d| site_cgi.path().ends_with(d)),
            "{path} is not a req- cgroup below {}",
            site_cgi.path().display()
        );
        seen.push(path);
    }
    seen.dedup();
    assert_eq!(seen.len(), 3, "each request gets its own cgroup: {seen:?}");
    assert_eq!(count(&srv.stats, |s| &s.in_cgroup), 3);
    // The request cgroups are removed when their scripts end.
    let t = Instant::now();
    loop {
        let left: Vec<_> = std::fs::read_dir(site_cgi.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("req-"))
            .map(|e| e.file_name())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_output_passes_the_gate_chunk_by_chunk() {
    // Without streaks (`streak_slice = "0s"`) every chunk read from the pipe is its own burst;
    // with them (the default) a burst may go on with the chunks already waiting in the pipe,
    // within its 1 ms slice, so the count is lower but the output still passes the gate.
    let site = Site::new();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        sites: vec![SiteConfig {
            name: "site.test".into(),
            aliases: Vec::new(),
            root: site.root(),
            index: None,
            cgi: Some(site.cfg()),
        }],
        shutdown_timeout: Duration::from_secs(1),
        streak_slice: Duration::ZERO,
        ..Config::default()
    };
    let srv = Running::start_config(config).await;
    let body = vec![b'z'; 300_000];
    let mut req = format!(
        "POST /cgi-bin/echo.py HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let before = srv.ctx.gate().counters().bursts;
    let r = exchange(srv.addr, &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 300_000);
    let bursts = srv.ctx.gate().counters().bursts - before;
    // One burst to prepare, then one per chunk read from the pipe (at most 16 KiB each).
    assert!(bursts > 300_000 / 16_384, "only {bursts} bursts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_limits_and_metrics() {
    if !cgroups_or_skip("container_limits_and_metrics") {
        return;
    }
    let site = Site::new();
    let mut cfg = site.cfg();
    cfg.container = Some("shared/cgi".into());
    cfg.cpu_max = Some(0.25);
    cfg.weight = Some(50);
    let srv = Running::start(&site.root(), cfg).await;
    let cg = srv.container.clone().expect("container");
    assert!(cg.path().ends_with("shared/cgi"), "{}", cg.path().display());
    let (cap, period) = cg.cpu_max().unwrap();
    assert!((cap.unwrap() - 0.25).abs() < 1e-3, "{cap:?}");
    assert_eq!(period, server::cgi::CPU_PERIOD);
    assert_eq!(get(srv.addr, "/cgi-bin/env.sh").await.status, 200);
    let m = get(srv.admin, "/metrics").await.text();
    assert!(
        m.contains("triage_cgi_total{site=\"site.test\",outcome=\"started\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("triage_cgi_cpu_seconds_total{site=\"site.test\"}"),
        "{m}"
    );
}

#[test]
fn bad_limits_are_errors_naming_their_key() {
    let site = Site::new();
    let info = server::cgi::SiteInfo {
        document_root: site.root(),
        server_name: "site.test".into(),
        server_software: "triage".into(),
    };
    type Set = fn(&mut CgiConfig);
    let cases: [(&str, Set); 6] = [
        ("cgi.max_running", |c| c.max_running = Some(0)),
        ("cgi.timeout", |c| c.timeout = Duration::ZERO),
        ("cgi.weight", |c| c.weight = Some(0)),
        ("cgi.cpu_max", |c| c.cpu_max = Some(-1.0)),
        ("cgi.slice", |c| c.slice = Some(Duration::from_micros(50))),
        ("cgi.slice", |c| c.slice = Some(Duration::from_millis(101))),
    ];
    for (key, set) in cases {
        let mut cfg = site.cfg();
        set(&mut cfg);
        let e = server::cgi::Cgi::new(&cfg, info.clone()).expect_err(key);
        assert_eq!(e.key, key, "{e:?}");
    }
    let mut cfg = site.cfg();
    cfg.max_running = Some(1);
    cfg.slice = Some(Duration::from_millis(100));
    assert!(server::cgi::Cgi::new(&cfg, info).is_ok());
}

/// Two sites whose scripts share one CGI container, each with `max_running`.
fn two_sites(site: &Site, a: usize, b: usize) -> Config {
    let one = |name: &str, n: usize| {
        let mut c = site.cfg();
        c.container = Some("qshared/cgi".into());
        c.max_running = Some(n);
        SiteConfig {
            name: name.into(),
            aliases: Vec::new(),
            root: site.root(),
            index: None,
            cgi: Some(c),
        }
    };
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        sites: vec![one("a.test", a), one("b.test", b)],
        shutdown_timeout: Duration::from_secs(1),
        ..Config::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_sharing_a_container_share_its_places() {
    if !cgroups_or_skip("sites_sharing_a_container_share_its_places") {
        return;
    }
    let site = Site::new();
    // Different limits on one container: refused, naming the key.
    let e = match server::Server::bind(two_sites(&site, 1, 2)).await {
        Ok(_) => panic!("two limits on one container were accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("cgi.max_running") && e.contains("qshared/cgi"),
        "{e}"
    );

    let srv = Running::start_config(two_sites(&site, 1, 1)).await;
    let (addr, stats) = (srv.addr, srv.all_stats.clone());
    // Site a holds the container's one place; site b's request waits for it.
    let mut a = TcpStream::connect(addr).await.unwrap();
    a.write_all(b"GET /cgi-bin/sleep.sh?mode=headers&tag=sa HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .await
        .unwrap();
    let pids = recorded_pids(&site, "sa").await;
    let b = tokio::spawn(async move {
        exchange(
            addr,
            b"GET /cgi-bin/env.sh HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n",
        )
        .await
    });
    until("site b waits", || count(&stats[1], |s| &s.waiting) == 1).await;
    assert_eq!(count(&stats[1], |s| &s.started), 0);
    drop(a);
    wait_dead(&pids, Duration::from_secs(5)).await;
    let r = b.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(count(&stats[1], |s| &s.started), 1);
}

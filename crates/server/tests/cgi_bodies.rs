//! CGI bodies in both directions, against the real server on loopback: chunked request bodies
//! held open by their clients cost the server little memory (spooled, not buffered), and a
//! script whose background child keeps its stdout open still ends its response when it exits.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::*;
use server::cgi::CgiConfig;
use server::config::SiteConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn script_site(scripts: &[(&str, &str)]) -> (tempfile::TempDir, server::Config) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("www");
    let bin = t.path().join("cgi-bin");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    for (name, text) in scripts {
        let p = bin.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut cgi = CgiConfig::new("/cgi-bin", bin);
    cgi.cgroups = false;
    cgi.timeout = Duration::from_secs(20);
    cgi.max_request_body = 64 << 20;
    let mut cfg = config(None);
    cfg.threads = Some(2);
    cfg.sites = vec![SiteConfig {
        name: "site.test".into(),
        aliases: vec![],
        root,
        index: None,
        cgi: Some(cgi),
    }];
    (t, cfg)
}

fn rss_kib() -> u64 {
    os::procfs::rss_kib(std::process::id() as i32).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_chunked_bodies_are_spooled_not_buffered() {
    const BODIES: usize = 20;
    const EACH: usize = 15 << 20;
    let (_t, cfg) = script_site(&[(
        "sink.sh",
        "#!/bin/sh\nn=$(wc -c)\nprintf 'Content-Type: text/plain\\n\\n%s %s\\n' \"$n\" \"$CONTENT_LENGTH\"\n",
    )]);
    let s = start(cfg).await;
    // Warm up (runtime threads, buffers) before the baseline.
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"POST /cgi-bin/sink.sh HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    let body =
        |out: &[u8]| String::from_utf8(parse(out, false).expect("a response").0.body).unwrap();
    assert_eq!(body(&out), "5 5\n");
    let before = rss_kib();

    let chunk = vec![b'x'; 1 << 20];
    let mut held = Vec::new();
    for _ in 0..BODIES {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(b"POST /cgi-bin/sink.sh HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n").await.unwrap();
        for _ in 0..EACH / chunk.len() {
            c.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await
                .unwrap();
            c.write_all(&chunk).await.unwrap();
            c.write_all(b"\r\n").await.unwrap();
        }
        held.push(c);
    }
    // Every body has been read by the server (the writes above went through): now measure.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = rss_kib();
    let per_body = during.saturating_sub(before) / BODIES as u64;
    eprintln!("RSS {before} KiB before, {during} KiB with {BODIES} held bodies of {EACH} B: {per_body} KiB each");
    assert!(per_body <= 2048, "{per_body} KiB per held chunked body");
    // The bodies still reach their scripts whole.
    for mut c in held.drain(..2) {
        c.write_all(b"0\r\n\r\n").await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), c.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(body(&out), format!("{EACH} {EACH}\n"));
    }
    drop(held);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_holding_stdout_does_not_hold_the_response() {
    let (t, cfg) = script_site(&[
        (
            "bg.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello\\n'\nsleep 30 &\necho $! > bg.pid\nexit 0\n",
        ),
        (
            "bg-cl.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\nContent-Length: 6\\n\\nhello\\n'\nsleep 30 &\nexit 0\n",
        ),
    ]);
    let s = start(cfg).await;
    for path in ["/cgi-bin/bg.sh", "/cgi-bin/bg-cl.sh"] {
        let t0 = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(10), get(s.addr, path, ""))
            .await
            .expect("answered");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hello\n");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{path}: {:?} (the CGI timeout is 20 s)",
            t0.elapsed()
        );
    }
    // The background child was killed with the script's group, and reaped: no zombie is left
    // under the server (its subreaper).
    let pid: i32 = std::fs::read_to_string(t.path().join("cgi-bin/bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let t0 = Instant::now();
    while os::procfs::exists(pid) && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !os::procfs::exists(pid),
        "process {pid} is still there (a zombie?)"
    );
    s.stop().await;
}

/// Whether process `pid` is gone or a zombie, within `limit`.
async fn gone_within(pid: i32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if os::task::ended(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Kills `pids` when dropped (a failed test leaves nothing running): only processes that
/// carry the mark of a script.
struct KillOnDrop(Vec<i32>);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &p in &self.0 {
            if os::reaper::env_value(p, server::cgi::orphans::MARK).is_some() {
                os::reaper::kill(p);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_left_the_process_group_does_not_outlive_its_request() {
    let (t, mut cfg) = script_site(&[
        (
            "daemon.sh",
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > daemon.sh.pid\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n",
        ),
        (
            "daemon-slow.sh",
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > daemon-slow.sh.pid\nprintf 'Content-Type: text/plain\\n\\nok\\n'\nsleep 60\n",
        ),
    ]);
    cfg.sites[0].cgi.as_mut().unwrap().timeout = Duration::from_secs(1);
    let s = start(cfg).await;
    for path in ["/cgi-bin/daemon.sh", "/cgi-bin/daemon-slow.sh"] {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut out)).await;
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        let name = path.rsplit('/').next().unwrap();
        let pid_file = t.path().join("cgi-bin").join(format!("{name}.pid"));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _guard = KillOnDrop(vec![pid]);
        assert!(
            gone_within(pid, Duration::from_secs(5)).await,
            "{path}: the setsid daemon {pid} survived its request"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_body_is_logged_499() {
    let (t, mut cfg) = script_site(&[(
        "slow.sh",
        "#!/bin/sh\ncat > /dev/null\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n",
    )]);
    let log = t.path().join("access.log");
    cfg.access_log = Some(log.clone());
    let s = start(cfg).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"POST /cgi-bin/slow.sh HTTP/1.1\r\nHost: site.test\r\nContent-Length: 100000\r\n\r\npartial")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(c);
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"POST /cgi-bin/slow.sh HTTP/1.1\" 499 "),
        "{text}"
    );
    assert!(!text.contains(" 503 "), "{text}");
}

//! HTTP features against the real server on port 0: files, HEAD, index, redirects, keep-alive,
//! conditional GET, ranges, percent-decoding, MIME types, virtual hosts, the demo site, gzip,
//! large chunked bodies, access log, connection limit and /metrics.

mod common;

use std::io::Read;
use std::time::Duration;

use common::*;
use server::config::SiteConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn site() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    std::fs::write(p.join("index.html"), "<h1>home</h1>").unwrap();
    std::fs::write(p.join("page.html"), "<p>page</p>".repeat(100)).unwrap();
    std::fs::write(p.join("style.css"), "body{}").unwrap();
    std::fs::write(p.join("pic.png"), vec![7u8; 5000]).unwrap();
    std::fs::write(p.join("a b.txt"), "spaced").unwrap();
    std::fs::create_dir(p.join("sub")).unwrap();
    std::fs::write(p.join("sub/index.html"), "sub home").unwrap();
    std::fs::create_dir(p.join("empty")).unwrap();
    let big: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(p.join("big.bin"), big).unwrap();
    t
}

#[tokio::test]
async fn serves_a_file_with_validators() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    let r = get(s.addr, "/page.html", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.h("content-type"), Some("text/html"));
    assert_eq!(r.body, "<p>page</p>".repeat(100).as_bytes());
    assert_eq!(r.h("content-length"), Some("1100"));
    assert!(r.h("etag").unwrap().starts_with('"'));
    assert!(r.h("last-modified").unwrap().ends_with("GMT"));
    assert_eq!(r.h("accept-ranges"), Some("bytes"));
    s.stop().await;
}

#[tokio::test]
async fn head_sends_headers_only() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    let buf = raw_bytes(
        s.addr,
        b"HEAD /page.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("content-length: 1100"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\n"), "HEAD must have no body: {text}");
    s.stop().await;
}

#[tokio::test]
async fn index_files_and_directory_redirect() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    assert_eq!(get(s.addr, "/", "").await.body, b"<h1>home</h1>");
    let r = get(s.addr, "/sub?x=1", "").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.h("location"), Some("/sub/?x=1"));
    assert_eq!(get(s.addr, "/sub/", "").await.body, b"sub home");
    assert_eq!(get(s.addr, "/empty/", "").await.status, 403);
    assert_eq!(get(s.addr, "/missing.html", "").await.status, 404);
    let r = raw(
        s.addr,
        b"POST /page.html HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.h("allow"), Some("GET, HEAD"));
    s.stop().await;
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let t = site();
    let mut cfg = config(Some(t.path()));
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    let mut buf = Vec::new();
    for i in 0..3 {
        c.write_all(b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        loop {
            let mut tmp = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut tmp))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "connection closed after {i} responses");
            buf.extend_from_slice(&tmp[..n]);
            if let Some((r, used)) = parse(&buf, false) {
                assert_eq!(r.status, 200);
                assert_eq!(r.body, b"body{}");
                assert_eq!(r.h("content-type"), Some("text/css"));
                buf.drain(..used);
                break;
            }
        }
    }
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_connections_accepted_total"), Some(1.0));
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn conditional_get() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    let r = get(s.addr, "/page.html", "").await;
    let etag = r.h("etag").unwrap().to_owned();
    let lm = r.h("last-modified").unwrap().to_owned();
    let r = get(s.addr, "/page.html", &format!("If-None-Match: {etag}\r\n")).await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.h("etag"), Some(etag.as_str()));
    let r = get(s.addr, "/page.html", "If-None-Match: \"other\"\r\n").await;
    assert_eq!(r.status, 200);
    let r = get(
        s.addr,
        "/page.html",
        &format!("If-Modified-Since: {lm}\r\n"),
    )
    .await;
    assert_eq!(r.status, 304);
    let r = get(
        s.addr,
        "/page.html",
        "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

#[tokio::test]
async fn byte_ranges() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    let full = std::fs::read(t.path().join("big.bin")).unwrap();
    let r = get(s.addr, "/big.bin", "Range: bytes=10-19\r\n").await;
    assert_eq!(r.status, 206);
    assert_eq!(r.h("content-range"), Some("bytes 10-19/400000"));
    assert_eq!(r.body, &full[10..20]);
    let r = get(s.addr, "/big.bin", "Range: bytes=-5\r\n").await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &full[full.len() - 5..]);
    // A range spanning many chunks.
    let r = get(s.addr, "/big.bin", "Range: bytes=1000-99999\r\n").await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &full[1000..100_000]);
    let r = get(s.addr, "/big.bin", "Range: bytes=400000-\r\n").await;
    assert_eq!(r.status, 416);
    assert_eq!(r.h("content-range"), Some("bytes */400000"));
    let r = get(
        s.addr,
        "/big.bin",
        "Range: bytes=0-1\r\nIf-Range: \"stale\"\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 400_000);
    s.stop().await;
}

#[tokio::test]
async fn percent_decoding_and_mime_types() {
    let t = site();
    let s = start(config(Some(t.path()))).await;
    let r = get(s.addr, "/a%20b.txt", "").await;
    assert_eq!((r.status, r.body.as_slice()), (200, &b"spaced"[..]));
    assert_eq!(r.h("content-type"), Some("text/plain"));
    assert_eq!(
        get(s.addr, "/pic.png", "").await.h("content-type"),
        Some("image/png")
    );
    assert_eq!(get(s.addr, "/%70age.html", "").await.status, 200);
    s.stop().await;
}

#[tokio::test]
async fn virtual_hosts_by_host_header() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("index.html"), "site a").unwrap();
    std::fs::write(b.path().join("index.html"), "site b").unwrap();
    let mut cfg = config(None);
    cfg.sites = vec![
        SiteConfig {
            name: "a.test".into(),
            aliases: vec![],
            root: a.path().to_owned(),
            index: None,
            cgi: None,
        },
        SiteConfig {
            name: "b.test".into(),
            aliases: vec!["www.b.test".into()],
            root: b.path().to_owned(),
            index: None,
            cgi: None,
        },
    ];
    let s = start(cfg).await;
    let req = |host: &str| format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    assert_eq!(raw(s.addr, req("a.test").as_bytes()).await.body, b"site a");
    assert_eq!(
        raw(s.addr, req("B.TEST:8080").as_bytes()).await.body,
        b"site b"
    );
    assert_eq!(
        raw(s.addr, req("www.b.test").as_bytes()).await.body,
        b"site b"
    );
    assert_eq!(raw(s.addr, req("other").as_bytes()).await.body, b"site a");
    s.stop().await;
}

#[tokio::test]
async fn demo_site_without_root() {
    let s = start(config(None)).await;
    let r = get(s.addr, "/", "").await;
    assert_eq!(r.status, 200);
    let html = String::from_utf8(r.body).unwrap();
    let imgs: Vec<&str> = html
        .split("src=\"")
        .skip(1)
        .map(|x| x.split('"').next().unwrap())
        .collect();
    assert!(imgs.len() >= 4, "{html}");
    for i in imgs {
        let r = get(s.addr, i, "").await;
        assert_eq!(r.status, 200, "{i}");
        assert!(r.h("content-type").unwrap().starts_with("image/"), "{i}");
        assert!(!r.body.is_empty());
    }
    s.stop().await;
}

#[tokio::test]
async fn gzip_on_the_fly() {
    let t = site();
    let mut cfg = config(Some(t.path()));
    cfg.gzip.enabled = true;
    cfg.gzip.level = 1;
    cfg.gzip.types = vec!["text/html".into(), "application/octet-stream".into()];
    cfg.chunk = 4096;
    let s = start(cfg).await;
    for path in ["/page.html", "/big.bin"] {
        let want = std::fs::read(t.path().join(&path[1..])).unwrap();
        let r = get(s.addr, path, "Accept-Encoding: gzip, br\r\n").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.h("content-encoding"), Some("gzip"), "{path}");
        assert_eq!(r.h("vary"), Some("Accept-Encoding"));
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(r.body.as_slice())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, want, "{path}");
        // Without gzip: the identity representation, which varies by Accept-Encoding too
        // (the second from the entry's cached head).
        for _ in 0..2 {
            let plain = get(s.addr, path, "").await;
            assert_eq!(plain.h("content-encoding"), None);
            assert_eq!(plain.h("vary"), Some("Accept-Encoding"), "{path}");
            assert_eq!(plain.h("accept-ranges"), Some("bytes"), "{path}");
            assert_eq!(plain.body, want);
        }
    }
    // Ranges are served from the identity representation.
    let r = get(
        s.addr,
        "/big.bin",
        "Accept-Encoding: gzip\r\nRange: bytes=0-3\r\n",
    )
    .await;
    assert_eq!((r.status, r.h("content-encoding")), (206, None));
    // Types not listed are not compressed.
    let r = get(s.addr, "/style.css", "Accept-Encoding: gzip\r\n").await;
    assert_eq!(r.h("content-encoding"), None);
    assert_eq!(r.h("vary"), None);
    s.stop().await;
}

#[tokio::test]
async fn large_file_arrives_whole_in_chunks() {
    let t = site();
    let mut cfg = config(Some(t.path()));
    cfg.cache_max_file = 0; // read with pread chunk by chunk
    cfg.chunk = 10_000;
    cfg.sndbuf = Some(8192);
    let s = start(cfg).await;
    let r = get(s.addr, "/big.bin", "Priority: u=5\r\n").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, std::fs::read(t.path().join("big.bin")).unwrap());
    s.stop().await;
}

#[tokio::test]
async fn access_log_in_combined_format() {
    let t = site();
    let log = t.path().join("access.log");
    let mut cfg = config(Some(t.path()));
    cfg.access_log = Some(log.clone());
    let s = start(cfg).await;
    get(
        s.addr,
        "/style.css",
        "User-Agent: tester/1\r\nReferer: http://r/\r\n",
    )
    .await;
    get(s.addr, "/nope", "").await;
    s.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{text}");
    assert!(
        lines[0].ends_with("\"GET /style.css HTTP/1.1\" 200 6 \"http://r/\" \"tester/1\""),
        "{text}"
    );
    assert!(lines[1].contains("\"GET /nope HTTP/1.1\" 404 "), "{text}");
}

#[tokio::test]
async fn connection_limit_answers_503_when_no_connection_is_idle() {
    let t = site();
    let mut cfg = config(Some(t.path()));
    cfg.max_conns = 2;
    cfg.sndbuf = Some(4096);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        socket2::SockRef::from(&c)
            .set_recv_buffer_size(4096)
            .unwrap();
        // A response the client does not read keeps each connection busy (not idle, so not
        // reclaimable).
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut tmp = [0u8; 1024];
        let n = c.read(&mut tmp).await.unwrap();
        assert!(n > 0);
        held.push(c);
    }
    let r = raw(s.addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(r.status, 503);
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_connections_refused_total"), Some(1.0));
    drop(held);
    // Once they are gone the server accepts again.
    let mut ok = false;
    for _ in 0..500 {
        if get(s.addr, "/style.css", "").await.status == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok);
    s.stop().await;
}

#[tokio::test]
async fn metrics_show_pl_lrq_slp_rw() {
    let t = site();
    let mut cfg = config(Some(t.path()));
    cfg.policy.name = "pos".into();
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    for _ in 0..3 {
        assert_eq!(get(s.addr, "/page.html", "").await.status, 200);
    }
    assert_eq!(get(s.addr, "/missing", "").await.status, 404);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let m = metrics(s.admin.unwrap()).await;
    for name in [
        "triage_pl",
        "triage_lrq",
        "triage_pl_samples_total",
        "triage_pl_busy_sum",
        "triage_lrq_sum",
        "triage_slp_seconds",
        "triage_rw",
        "triage_policy_promotions_total",
        "triage_policy_demotions_total",
        "triage_policy_starvation_rescues_total",
    ] {
        assert!(
            m.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name} missing:\n{m}"
        );
    }
    assert!(metric(&m, "triage_pl_samples_total").unwrap() >= 1.0);
    assert_eq!(metric(&m, "triage_rw"), Some(3.0));
    assert!(m.contains("triage_requests_total{status=\"200\"} 3"), "{m}");
    assert!(m.contains("triage_requests_total{status=\"404\"} 1"), "{m}");
    assert!(
        m.contains("triage_response_bytes_total{status=\"200\"} 3300"),
        "{m}"
    );
    assert!(m.contains("policy=\"pos\""));
    let r = get(s.admin.unwrap(), "/samples", "").await;
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["slots"], 1);
    assert!(!v["samples"].as_array().unwrap().is_empty());
    s.stop().await;
}

//! The load generator against real servers on 127.0.0.1 (port 0): page structure and request
//! counts, t1 <= t2, unique URLs, K parallel connections, keep-alive vs close, arrival modes,
//! the slow-link throttle, coordinated-omission correction in `rate` mode, and every error path
//! (refused, DNS, malformed, reset, truncated, timeout, run cut-off, HTTP status).

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{page_site, raw, read_head, serve, Site};
use loadgen::{Arrival, ConnMode, LoadConfig, RandomDist, Report, ThinkDist};
use tokio::io::AsyncWriteExt;

fn closed(url: String, pages: u64) -> LoadConfig {
    let mut c = LoadConfig::new(url);
    c.arrival = Arrival::Closed {
        think: Duration::ZERO,
        think_dist: ThinkDist::Fixed,
    };
    c.duration = None;
    c.max_pages = Some(pages);
    c.timeout = Duration::from_secs(5);
    c
}

fn assert_t1_le_t2(r: &Report) {
    for p in &r.pages {
        if let (Some(f), Some(t1)) = (p.t1_first_ms, p.t1_ms) {
            assert!(f <= t1, "t1_first {f} > t1 {t1}: {p:?}");
        }
        if let (Some(t1), Some(t2)) = (p.t1_ms, p.t2_ms) {
            assert!(t1 <= t2, "t1 {t1} > t2 {t2}: {p:?}");
        }
        assert!(p.t2_ms.is_none() || p.t1_ms.is_some(), "{p:?}");
    }
}

#[tokio::test]
async fn page_with_k_images_makes_k_plus_1_requests() {
    // 5 images + stylesheet + script = 7 objects (a repeated image and a data: URI are not
    // fetched again / at all), so 8 requests per page.
    let srv = serve(page_site(5, 3000)).await;
    let mut cfg = closed(srv.url("/index.html"), 3);
    cfg.parallel = 3;
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(r.summary.pages, 3);
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_eq!(srv.requests(), 3 * 8);
    assert_eq!(r.summary.requests, 3 * 8);
    let html_len = common::page_html(5).len() as u64;
    let obj_len = 5 * 3000 + "body{color:black}".len() as u64 + "var x = 1;".len() as u64;
    for p in &r.pages {
        assert_eq!(p.requests, 8);
        assert_eq!(p.bytes, html_len + obj_len);
        assert_eq!(p.status, 200);
    }
    assert_t1_le_t2(&r);
    // Keep-alive: one browser never holds more than K connections.
    assert!(srv.connections() <= 3, "{} connections", srv.connections());
    let paths = srv.paths();
    assert!(!paths.iter().any(|p| p.contains("data:")), "{paths:?}");
    assert_eq!(paths.iter().filter(|p| p.as_str() == "/i0.gif").count(), 3);
}

#[tokio::test]
async fn objects_use_up_to_k_parallel_connections() {
    let site = page_site(8, 100).delay(".gif", Duration::from_millis(60));
    let srv = serve(site).await;
    let mut cfg = closed(srv.url("/index.html"), 1);
    cfg.parallel = 3;
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_eq!(srv.seen.peak_in_flight.load(Ordering::SeqCst), 3);
    // 8 delayed images over 3 connections take at least 3 rounds of 60 ms after the HTML.
    let p = &r.pages[0];
    assert!(p.t2_ms.unwrap() - p.t1_ms.unwrap() >= 170.0, "{p:?}");
}

#[tokio::test]
async fn close_mode_opens_one_connection_per_request() {
    let srv = serve(page_site(4, 500)).await;
    let mut cfg = closed(srv.url("/index.html"), 2);
    cfg.conn_mode = ConnMode::Close;
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_eq!(srv.requests(), 2 * 7);
    assert_eq!(srv.connections(), 2 * 7);
}

#[tokio::test]
async fn plain_fetches_only_the_url() {
    let srv = serve(page_site(4, 500)).await;
    let mut cfg = closed(srv.url("/index.html"), 5);
    cfg.plain = true;
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(srv.requests(), 5);
    assert_eq!(srv.connections(), 1);
    assert!(r
        .pages
        .iter()
        .all(|p| p.t1_ms == p.t2_ms && p.requests == 1));
}

#[tokio::test]
async fn burst_mode_unique_urls_per_browser() {
    let srv = serve(page_site(2, 200)).await;
    let mut cfg = LoadConfig::new(srv.url("/b{browser}/index.html"));
    cfg.browsers = 3;
    cfg.arrival = Arrival::Burst {
        interval: Duration::from_millis(200),
    };
    cfg.duration = Some(Duration::from_millis(500));
    let r = loadgen::run(cfg).await.unwrap();
    // Bursts at 0, 200 and 400 ms, 3 browsers each.
    assert_eq!(r.summary.pages, 9, "{}", r.table());
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_t1_le_t2(&r);
    let starts: Vec<f64> = r.pages.iter().map(|p| p.start_ms).collect();
    assert_eq!(
        starts,
        vec![0.0, 0.0, 0.0, 200.0, 200.0, 200.0, 400.0, 400.0, 400.0]
    );
    let paths = srv.paths();
    for b in 0..3 {
        assert_eq!(
            paths
                .iter()
                .filter(|p| p.starts_with(&format!("/b{b}/")))
                .count(),
            3 * 5,
            "{paths:?}"
        );
    }
    assert!(paths.contains(&"/b2/i1.gif".to_string()));
}

#[tokio::test]
async fn random_mode_is_seeded_and_t1_le_t2() {
    let srv = serve(page_site(3, 1000)).await;
    let run = |seed| {
        let mut cfg = LoadConfig::new(srv.url("/b{browser}/index.html"));
        cfg.browsers = 4;
        cfg.arrival = Arrival::Random {
            interval: Duration::from_millis(150),
            dist: RandomDist::Uniform,
        };
        cfg.duration = Some(Duration::from_millis(450));
        cfg.seed = seed;
        loadgen::run(cfg)
    };
    let a = run(5).await.unwrap();
    let b = run(5).await.unwrap();
    let c = run(6).await.unwrap();
    assert_eq!(a.summary.pages, 12);
    assert_eq!(a.summary.errors, 0, "{}", a.table());
    assert_t1_le_t2(&a);
    assert_t1_le_t2(&c);
    let starts = |r: &Report| -> Vec<(u32, f64)> {
        r.pages.iter().map(|p| (p.browser, p.start_ms)).collect()
    };
    assert_eq!(starts(&a), starts(&b));
    assert_ne!(starts(&a), starts(&c));
}

#[tokio::test]
async fn trace_mode_replays_offsets_urls_and_browsers() {
    let srv = serve(page_site(1, 100).file("/other.html", "<p>x</p>", "text/html")).await;
    let text = format!(
        "# offsets in ms\n0 /index.html 2\n120 {} 0\n60 /b1/other.html 1\n",
        srv.url("/other.html")
    );
    let mut cfg = LoadConfig::new(srv.url("/"));
    cfg.arrival = Arrival::Trace {
        source: "inline".into(),
        entries: loadgen::parse_trace(&text).unwrap(),
    };
    cfg.duration = None;
    let r = loadgen::run(cfg).await.unwrap();
    let rows: Vec<(u32, f64, u32)> = r
        .pages
        .iter()
        .map(|p| (p.browser, p.start_ms, p.requests))
        .collect();
    assert_eq!(rows, vec![(2, 0.0, 4), (1, 60.0, 1), (0, 120.0, 1)]);
    assert_eq!(r.summary.errors, 0, "{}", r.table());
}

#[tokio::test]
async fn throttle_holds_the_rate() {
    // 300 KB at 200 KB/s: about 1.5 s.
    let body = vec![b'z'; 300_000];
    let srv = serve(Site::new().file("/big", body, "application/octet-stream")).await;
    let mut cfg = closed(srv.url("/big"), 1);
    cfg.plain = true;
    cfg.throttle_bps = Some(200_000.0);
    let r = loadgen::run(cfg).await.unwrap();
    let p = &r.pages[0];
    assert_eq!(p.bytes, 300_000, "{p:?}");
    let secs = p.t1_ms.unwrap() / 1e3;
    let rate = 300_000.0 / secs;
    assert!(
        (180_000.0..=220_000.0).contains(&rate),
        "measured {rate:.0} B/s over {secs:.3} s, configured 200000"
    );
}

#[tokio::test]
async fn throttle_saves_no_credit_while_the_link_is_idle() {
    // Two 100 KB responses at 200 KB/s on one keep-alive connection, 300 ms apart: the second
    // takes as long as the first (a pause on a real link does not make it faster later).
    let srv = serve(Site::new().file("/m", vec![b'm'; 100_000], "application/octet-stream")).await;
    let mut cfg = closed(srv.url("/m"), 2);
    cfg.plain = true;
    cfg.throttle_bps = Some(200_000.0);
    cfg.arrival = Arrival::Closed {
        think: Duration::from_millis(300),
        think_dist: ThinkDist::Fixed,
    };
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(srv.connections(), 1);
    for p in &r.pages {
        let t = p.t1_ms.unwrap();
        assert!(t >= 480.0, "100 KB at 200 KB/s took {t:.1} ms: {p:?}");
    }
}

/// Serves 400 KB with a 16 KiB send buffer to one throttled client (400 KB/s, about 1 s) and
/// returns when the server's write finished as a fraction of the client's whole fetch.
async fn server_write_fraction(rcvbuf: Option<usize>) -> f64 {
    let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
    let tx = std::sync::Mutex::new(Some(tx));
    let addr = raw(move |mut s| {
        let tx = tx.lock().unwrap().take();
        async move {
            let sock = socket2::SockRef::from(&s);
            sock.set_send_buffer_size(16 * 1024).unwrap();
            if !read_head(&mut s).await {
                return;
            }
            let head = "HTTP/1.1 200 OK\r\nContent-Length: 400000\r\n\r\n";
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&vec![b'y'; 400_000]).await;
            if let Some(tx) = tx {
                let _ = tx.send(Instant::now());
            }
        }
    })
    .await;
    let mut cfg = closed(format!("http://{addr}/"), 1);
    cfg.plain = true;
    cfg.throttle_bps = Some(400_000.0);
    cfg.rcvbuf = rcvbuf;
    let t0 = Instant::now();
    let r = loadgen::run(cfg).await.unwrap();
    let total = t0.elapsed().as_secs_f64();
    let wrote = rx.await.unwrap().duration_since(t0).as_secs_f64();
    assert_eq!(r.pages[0].bytes, 400_000, "{}", r.table());
    wrote / total
}

#[tokio::test]
async fn throttle_makes_the_server_send_block() {
    // With the default small receive buffer of a throttled connection the server's write can
    // only finish near the end of the transfer (a slow link pushes back); with a receive
    // buffer as large as the body it finishes at once (so this test can fail).
    let small = server_write_fraction(None).await;
    assert!(
        small >= 0.7,
        "server's write finished at {small:.2} of the transfer: the client did not push back"
    );
    let large = server_write_fraction(Some(1 << 20)).await;
    assert!(large < 0.5, "large rcvbuf: write finished at {large:.2}");
}

#[tokio::test]
async fn rate_mode_counts_queueing_behind_a_stall_from_the_schedule() {
    // 100 requests at 100/s on one connection; the 10th stalls 500 ms. About 50 requests are
    // scheduled during the stall and wait behind it: a generator with coordinated omission
    // would report one slow request; this one must report all of them.
    let srv = serve(
        Site::new()
            .file("/x", "ok", "text/plain")
            .stall_nth(10, Duration::from_millis(500)),
    )
    .await;
    let mut cfg = LoadConfig::new(srv.url("/x"));
    cfg.arrival = Arrival::Rate {
        rate: 100.0,
        connections: 1,
    };
    cfg.duration = None;
    cfg.max_pages = Some(100);
    let r = loadgen::run(cfg).await.unwrap();
    assert_eq!(r.summary.pages, 100);
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_eq!(srv.requests(), 100);
    let slow = r.pages.iter().filter(|p| p.t1_ms.unwrap() >= 250.0).count();
    assert!(slow >= 20, "only {slow} requests >= 250 ms\n{}", r.table());
    let t1 = &r.summary.t1;
    assert!(t1.max_ms.unwrap() >= 490.0, "{}", r.table());
    assert!(t1.p90_ms.unwrap() >= 250.0, "{}", r.table());
    assert!(t1.p99_ms.unwrap() >= 400.0, "{}", r.table());
    // Scheduled starts are exactly 10 ms apart, whatever happened.
    assert_eq!(r.pages[57].start_ms, 570.0);
}

#[tokio::test]
async fn refused_port_is_counted() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = loadgen::run(closed(format!("http://127.0.0.1:{port}/"), 3))
        .await
        .unwrap();
    assert_eq!(r.summary.pages, 3);
    assert_eq!(r.summary.errors, 3);
    assert_eq!(r.summary.errors_by_kind.get("refused"), Some(&3));
    assert!(r
        .pages
        .iter()
        .all(|p| p.t1_ms.is_none() && p.t2_ms.is_none()));
    assert_eq!(r.summary.t1.count, 0);
    assert!(r.summary.t1.mean_ms.is_none());
}

#[tokio::test]
async fn dns_failure_is_counted() {
    let r = loadgen::run(closed("http://no-such-host.invalid:8080/".into(), 2))
        .await
        .unwrap();
    assert_eq!(
        r.summary.errors_by_kind.get("dns"),
        Some(&2),
        "{}",
        r.table()
    );
}

#[tokio::test]
async fn malformed_response_is_counted() {
    let addr = raw(|mut s| async move {
        if read_head(&mut s).await {
            let _ = s.write_all(b"HTTX/9 banana\r\n\r\n").await;
        }
    })
    .await;
    let r = loadgen::run(closed(format!("http://{addr}/"), 2))
        .await
        .unwrap();
    assert_eq!(
        r.summary.errors_by_kind.get("malformed"),
        Some(&2),
        "{}",
        r.table()
    );
}

#[tokio::test]
async fn bad_chunked_framing_is_malformed() {
    let addr = raw(|mut s| async move {
        if read_head(&mut s).await {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n")
                .await;
        }
    })
    .await;
    let r = loadgen::run(closed(format!("http://{addr}/"), 1))
        .await
        .unwrap();
    assert_eq!(r.summary.errors_by_kind.get("malformed"), Some(&1));
}

#[tokio::test]
async fn reset_mid_body_is_counted() {
    let addr = raw(|mut s| async move {
        if read_head(&mut s).await {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                .await;
            let _ = s.write_all(&[b'a'; 1000]).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            drop(s);
        }
    })
    .await;
    let r = loadgen::run(closed(format!("http://{addr}/"), 2))
        .await
        .unwrap();
    assert_eq!(r.summary.errors, 2);
    assert_eq!(
        r.summary.errors_by_kind.get("reset"),
        Some(&2),
        "{}",
        r.table()
    );
    assert!(r.pages.iter().all(|p| p.t1_first_ms.is_none()));
}

#[tokio::test]
async fn close_mid_body_is_truncated() {
    let addr = raw(|mut s| async move {
        if read_head(&mut s).await {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\nshort")
                .await;
        }
    })
    .await;
    let r = loadgen::run(closed(format!("http://{addr}/"), 1))
        .await
        .unwrap();
    assert_eq!(r.summary.errors_by_kind.get("truncated"), Some(&1));
}

#[tokio::test]
async fn silent_server_times_out() {
    let addr = raw(|mut s| async move {
        read_head(&mut s).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let mut cfg = closed(format!("http://{addr}/"), 2);
    cfg.timeout = Duration::from_millis(200);
    let t0 = Instant::now();
    let r = loadgen::run(cfg).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(r.summary.errors_by_kind.get("timeout"), Some(&2));
}

#[tokio::test]
async fn run_end_cuts_stalled_pages_as_unfinished() {
    let srv = serve(page_site(2, 100).delay(".gif", Duration::from_secs(30))).await;
    let mut cfg = LoadConfig::new(srv.url("/index.html"));
    cfg.browsers = 2;
    cfg.arrival = Arrival::Burst {
        interval: Duration::from_secs(10),
    };
    cfg.duration = Some(Duration::from_millis(100));
    cfg.drain = Some(Duration::from_millis(300));
    let t0 = Instant::now();
    let r = loadgen::run(cfg).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(r.summary.pages, 2);
    assert_eq!(r.summary.errors_by_kind.get("unfinished"), Some(&2));
    // The HTML arrived: t1 is known, t2 is not.
    assert!(r
        .pages
        .iter()
        .all(|p| p.t1_ms.is_some() && p.t2_ms.is_none()));
}

#[tokio::test]
async fn error_statuses_are_page_errors() {
    let srv = serve(
        page_site(2, 100)
            .status("/i1.gif", 404)
            .status("/gone.html", 503),
    )
    .await;
    let r = loadgen::run(closed(srv.url("/index.html"), 1))
        .await
        .unwrap();
    let p = &r.pages[0];
    assert_eq!(p.status, 200);
    assert!(p.t2_ms.is_some());
    assert!(p.error.as_deref().unwrap().contains("404"), "{p:?}");
    let r = loadgen::run(closed(srv.url("/gone.html"), 1))
        .await
        .unwrap();
    assert_eq!(r.pages[0].status, 503);
    assert_eq!(r.summary.status.get("503"), Some(&1));
    assert_eq!(r.summary.errors_by_kind.get("status"), Some(&1));
}

#[tokio::test]
async fn chunked_and_close_delimited_bodies_and_stale_keepalive() {
    // The HTML comes chunked (with a chunk extension and a trailer) on a connection that the
    // server then closes without saying so: the client pools it, its reuse fails before any
    // byte, and the request is retried once on a fresh connection. The objects come as
    // HTTP/1.0 bodies delimited by the close of the connection.
    const HTML: &[u8] = b"<html><img src=\"/a.gif\"><img src=\"/b.gif\"></html>";
    let addr = raw(|mut s| async move {
        let Some(path) = common::read_request(&mut s).await else {
            return;
        };
        if path == "/index.html" {
            let mut resp = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                Transfer-Encoding: chunked\r\n\r\n"
                .to_vec();
            for part in HTML.chunks(7) {
                resp.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
                resp.extend_from_slice(part);
                resp.extend_from_slice(b"\r\n");
            }
            resp.extend_from_slice(b"0\r\nX-Trailer: 1\r\n\r\n");
            // In 5-byte pieces, so that every state of the decoder meets partial input.
            let _ = s.set_nodelay(true);
            for piece in resp.chunks(5) {
                let _ = s.write_all(piece).await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        } else {
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n0123456789").await;
        }
    })
    .await;
    let mut cfg = closed(format!("http://{addr}/index.html"), 1);
    cfg.parallel = 1;
    let r = loadgen::run(cfg).await.unwrap();
    let p = &r.pages[0];
    assert_eq!(p.error, None, "{}", r.table());
    assert_eq!(p.requests, 3);
    assert_eq!(p.bytes, HTML.len() as u64 + 20);
    assert!(p.t2_ms.is_some());
}

#[tokio::test]
async fn report_files_have_the_documented_shape() {
    let srv = serve(page_site(2, 100)).await;
    let r = loadgen::run(closed(srv.url("/index.html"), 2))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    r.write_dir(dir.path()).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("pages.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("browser,start,t1_first_ms,t1_ms,t2_ms,bytes,status,error")
    );
    assert_eq!(lines.count(), 2);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(v["pages"], 2);
    assert_eq!(v["errors"], 0);
    for t in ["t1", "t2"] {
        for k in [
            "min_ms",
            "max_ms",
            "mean_ms",
            "median_ms",
            "p90_ms",
            "p99_ms",
            "range_ms",
        ] {
            assert!(v[t][k].is_f64(), "{t}.{k} missing: {v}");
        }
    }
    assert!(v["requests_per_s"].as_f64().unwrap() > 0.0);
    let back: loadgen::Summary = serde_json::from_value(v).unwrap();
    assert_eq!(back.pages, r.summary.pages);
    assert_eq!(back.t2.count, r.summary.t2.count);
    let (a, b) = (back.t1.mean_ms.unwrap(), r.summary.t1.mean_ms.unwrap());
    assert!((a - b).abs() < 1e-9, "{a} vs {b}");
}

#[tokio::test]
async fn rate_mode_expands_page_per_request() {
    let srv = serve(Site::new()).await;
    let mut cfg = LoadConfig::new(srv.url("/c{browser}/r{page}"));
    cfg.arrival = Arrival::Rate {
        rate: 1000.0,
        connections: 2,
    };
    cfg.duration = None;
    cfg.max_pages = Some(6);
    let r = loadgen::run(cfg).await.unwrap();
    let mut paths = srv.paths();
    paths.sort();
    assert_eq!(
        paths,
        ["/c0/r0", "/c0/r1", "/c0/r2", "/c1/r0", "/c1/r1", "/c1/r2"]
    );
    // Everything 404s: counted as status errors, with latencies.
    assert_eq!(r.summary.errors_by_kind.get("status"), Some(&6));
    assert_eq!(r.summary.t1.count, 6);
}

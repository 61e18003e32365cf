//! The gate seen from outside: the worker log of `--policy pos --pfs-log` has run/wait cycles
//! that grow with the size of the file served (one burst per 16 KiB chunk, the first burst
//! 4 KiB by default); `--gate off` serves without any burst; several clients on one slot queue
//! and all complete.

mod common;

use std::collections::HashMap;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn counts(log: &str) -> HashMap<u64, (usize, usize, usize)> {
    let mut m: HashMap<u64, (usize, usize, usize)> = HashMap::new();
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect(line);
        let w = v["worker"].as_u64().unwrap();
        assert!(v["t_ns"].is_u64(), "{line}");
        let e = m.entry(w).or_default();
        match v["state"].as_str().unwrap() {
            "run" => e.0 += 1,
            "wait" => e.1 += 1,
            "ready" => e.2 += 1,
            s => panic!("bad state {s}"),
        }
    }
    m
}

/// (runs, waits) of the worker that served a 4 KB file and of the one that served a 400 KB
/// file, with `first_chunk` as given.
async fn small_and_large_bursts(first_chunk: Option<u64>) -> ((usize, usize), (usize, usize)) {
    bursts_of_two_files(first_chunk, false).await
}

/// [`small_and_large_bursts`], the 400 KB image compressed on the fly if `gzip`.
async fn bursts_of_two_files(
    first_chunk: Option<u64>,
    gzip: bool,
) -> ((usize, usize), (usize, usize)) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("small.html"), vec![b'x'; 4_000]).unwrap();
    std::fs::write(t.path().join("large.bmp"), vec![7u8; 400_000]).unwrap();
    let log = t.path().join("pfs.jsonl");
    let mut cfg = config(Some(t.path()));
    // One burst per chunk, as these tests count them: streaks off (a streak carries the
    // chunks ready at once within its slice; docs/server.md, "Streaks").
    cfg.streak_slice = std::time::Duration::ZERO;
    cfg.policy.name = "pos".into();
    cfg.pfs_log = Some(log.clone());
    cfg.first_chunk = first_chunk;
    cfg.workers = 0; // only the workers the two connections create
    if gzip {
        cfg.gzip.enabled = true;
        cfg.gzip.types = vec!["image/bmp".into()];
    }
    let s = start(cfg).await;
    // The small file on a keep-alive connection that stays open, so the large file is served
    // by another worker.
    let mut a = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    a.write_all(b"GET /small.html HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    loop {
        let mut tmp = [0u8; 8192];
        let n = a.read(&mut tmp).await.unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&tmp[..n]);
        if let Some((r, _)) = parse(&buf, false) {
            assert_eq!(r.body.len(), 4_000);
            break;
        }
    }
    let ae = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    let large = get(s.addr, "/large.bmp", ae).await;
    let body = if gzip {
        let mut out = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(large.body.as_slice()),
            &mut out,
        )
        .unwrap();
        out
    } else {
        large.body
    };
    assert_eq!(body, vec![7u8; 400_000]);
    drop(a);
    s.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let c = counts(&text);
    let mut runs: Vec<(usize, usize)> =
        c.values().filter(|v| v.0 > 0).map(|v| (v.0, v.1)).collect();
    runs.sort();
    assert_eq!(runs.len(), 2, "{c:?}");
    (runs[0], runs[1])
}

#[tokio::test]
async fn pfs_log_cycles_grow_with_file_size() {
    let (small, large) = small_and_large_bursts(Some(16 * 1024)).await;
    // 4 KB: one burst (head + the whole body). 400 KB in 16 KiB chunks: 25 chunks, the first
    // produced with the head.
    assert!(small.0 <= 2, "{small:?}");
    assert!(large.0 >= 25, "{large:?}");
    // Every run is followed by a wait.
    assert!(
        large.1 >= large.0 && small.1 >= small.0,
        "{small:?} {large:?}"
    );
}

#[tokio::test]
async fn the_first_burst_is_short_by_default() {
    // Default first burst: 4 KiB. The 4 KB file still fits in it; the 400 KB file takes one
    // burst more than with a 16 KiB first burst (4 KiB, then 16 KiB chunks).
    let (small, large) = small_and_large_bursts(None).await;
    let (small16, large16) = small_and_large_bursts(Some(16 * 1024)).await;
    assert_eq!(small.0, small16.0, "{small:?} {small16:?}");
    assert!(small.0 <= 2, "{small:?}");
    assert_eq!(large.0, large16.0 + 1, "{large:?} {large16:?}");
}

#[tokio::test]
async fn a_response_that_fits_in_one_chunk_is_one_burst_whatever_the_first_chunk() {
    // A 1 KiB first burst would cut the 4 KB page in four bursts; it fits in one 16 KiB chunk,
    // so it stays one burst, while the 400 KB file's first burst is cut (one burst more).
    let (small, large) = small_and_large_bursts(Some(1024)).await;
    let (small16, large16) = small_and_large_bursts(Some(16 * 1024)).await;
    assert_eq!(small.0, small16.0, "{small:?} {small16:?}");
    assert_eq!(large.0, large16.0 + 1, "{large:?} {large16:?}");
}

#[tokio::test]
async fn a_compressed_response_is_compressed_in_its_body_bursts_only() {
    // The head's burst of a response compressed on the fly compresses nothing (the compressor's
    // state is taken in the burst that uses it): the first chunk does not change its bursts,
    // where it adds one to the plain response's (above).
    let (_, gz1) = bursts_of_two_files(Some(1024), true).await;
    let (_, gz16) = bursts_of_two_files(Some(16 * 1024), true).await;
    assert_eq!(gz1.0, gz16.0, "{gz1:?} {gz16:?}");
    // The head, then 25 chunks of 16 KiB.
    assert_eq!(gz16.0, 26, "{gz16:?}");
}

#[tokio::test]
async fn gate_off_serves_without_bursts() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f.txt"), "hello").unwrap();
    let mut cfg = config(Some(t.path()));
    // One burst per chunk, as these tests count them: streaks off (a streak carries the
    // chunks ready at once within its slice; docs/server.md, "Streaks").
    cfg.streak_slice = std::time::Duration::ZERO;
    cfg.gate = false;
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    assert_eq!(get(s.addr, "/f.txt", "").await.body, b"hello");
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_bursts_total"), Some(0.0));
    assert!(m.contains("gate=\"off\""));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_share_one_slot() {
    let t = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    std::fs::write(t.path().join("img.bmp"), &data).unwrap();
    let mut cfg = config(Some(t.path()));
    // One burst per chunk, as these tests count them: streaks off (a streak carries the
    // chunks ready at once within its slice; docs/server.md, "Streaks").
    cfg.streak_slice = std::time::Duration::ZERO;
    cfg.policy.name = "pos".into();
    cfg.threads = Some(2);
    cfg.chunk = 4096;
    cfg.gzip.enabled = true;
    cfg.gzip.level = 9;
    cfg.gzip.types = vec!["image/bmp".into()];
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let addr = s.addr;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move { get(addr, "/img.bmp", "Accept-Encoding: gzip\r\n").await })
        })
        .collect();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200);
        let mut out = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(r.body.as_slice()),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, data);
    }
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_pl"), Some(0.0));
    assert_eq!(metric(&m, "triage_lrq"), Some(0.0));
    assert!(metric(&m, "triage_bursts_total").unwrap() >= 8.0 * 70.0);
    s.stop().await;
}

//! End to end: `triage capacity sample` records a real `triage serve`'s CPU while a client
//! sends it requests at rising rates, and `triage capacity` reads the server's own access log
//! and those samples: every request logged is accounted for, the buckets follow the rates
//! sent, and bad input (malformed lines, clocks that do not overlap, too few buckets) is a
//! clear message, never a silent figure. `triage lab events` at a tiny scale writes the
//! summary keys the issue names (needs root and cgroups: skipped with a reason otherwise).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

fn serve(root: &std::path::Path, log: &std::path::Path) -> (Child, String) {
    spawn_printing_address(
        Command::new(BIN)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--slots",
                "1",
                "--threads",
                "1",
            ])
            .arg("--root")
            .arg(root)
            .arg("--access-log")
            .arg(log)
            .stderr(Stdio::null()),
    )
}

/// One keep-alive connection sending `rate` requests/s for `secs` seconds; returns how many
/// were answered 200.
fn send_at(addr: &str, rate: u64, secs: u64) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let start = Instant::now();
    let mut ok = 0;
    for i in 0..rate * secs {
        let at = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(d) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        s.write_all(b"GET /a.html HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        // The body is 100 bytes: read until the head and all of it are there.
        loop {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "server closed");
            got.extend_from_slice(&buf[..n]);
            if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                if got.len() >= p + 4 + 100 {
                    break;
                }
            }
        }
        if got.starts_with(b"HTTP/1.1 200") {
            ok += 1;
        }
    }
    ok
}

fn capacity(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("capacity")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn capacity_reads_a_real_triage_log_and_its_cpu_samples() {
    let tmp = TempDir::new("capacity");
    let root = tmp.0.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), [b'x'; 100]).unwrap();
    let log = tmp.0.join("access.log");
    let (srv, addr) = serve(&root, &log);
    let cpu = tmp.0.join("cpu.csv");
    let pid = srv.0.id().to_string();
    let sampler = Child(
        Command::new(BIN)
            .args([
                "capacity",
                "sample",
                "--pid",
                &pid,
                "--cpus",
                "1",
                "--interval",
                "1s",
            ])
            .args(["--duration", "10s", "--out"])
            .arg(&cpu)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Rising rates, 2 s each, after the first sample (the sampler starts, then samples at
    // the next whole second).
    std::thread::sleep(Duration::from_millis(2500));
    let mut sent = 0;
    for rate in [50, 150, 300] {
        sent += send_at(&addr, rate, 2);
    }
    let mut sampler = sampler;
    let st = sampler.0.wait().unwrap();
    assert!(st.success(), "sampler: {st}");
    // Stopped as a service manager stops it (SIGTERM): the access log's last lines are written
    // on the way out (a SIGKILL would lose the last linger's lines).
    let mut srv = srv;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(srv.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(srv.0.wait().unwrap().success(), "serve stops on SIGTERM");
    let logged = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert_eq!(logged, sent, "every answered request is logged");

    let o = capacity(&[
        "--log",
        log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--bucket",
        "1s",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let buckets = a["buckets"].as_array().unwrap();
    assert!(buckets.len() >= 5, "{a}");
    let used = a["requests_used"].as_u64().unwrap();
    let outside = a["requests_outside"].as_u64().unwrap();
    assert_eq!(used + outside, sent, "{a}");
    assert!(
        used * 10 >= sent * 8,
        "most requests fall in whole buckets: {a}"
    );
    // The busiest bucket saw the last rate, the quietest the first (or none).
    let busiest = a["busiest_rps"].as_f64().unwrap();
    assert!((200.0..=450.0).contains(&busiest), "{a}");
    for b in buckets {
        let (u, k, i) = (
            b["user_pct"].as_f64().unwrap(),
            b["kernel_pct"].as_f64().unwrap(),
            b["idle_pct"].as_f64().unwrap(),
        );
        assert!(
            u >= 0.0 && k >= 0.0 && (u + k + i - 100.0).abs() < 1e-6,
            "{b}"
        );
    }
    assert_eq!(a["malformed_lines"], 0);
    assert!(a["all"]["idle"]["r"].is_number(), "{a}");

    // Text form: the tables and the prediction or the reason there is none.
    let o = capacity(&[
        "--log",
        log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--bucket",
        "1s",
        "--low-rate-cut",
        "100",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains("Linear regressions") && text.contains("at or above 100 requests/s"),
        "{text}"
    );
    assert!(text.contains("predicted peak rate"), "{text}");

    // The same log by the steps of its rate ladder (50, 150, 300 req/s, 2 s each, not on
    // whole seconds): one bucket per rate at least, every request accounted for.
    let o = capacity(&[
        "--log",
        log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--steps",
        "1s",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(a["steps"], true, "{a}");
    assert!(a["buckets"].as_array().unwrap().len() >= 3, "{a}");
    let used = a["requests_used"].as_u64().unwrap();
    assert_eq!(used + a["requests_outside"].as_u64().unwrap(), sent, "{a}");
    let busiest = a["busiest_rps"].as_f64().unwrap();
    assert!((200.0..=450.0).contains(&busiest), "{a}");
    let o = capacity(&[
        "--log", "x", "--cpu", "y", "--steps", "1s", "--bucket", "1m",
    ]);
    assert!(
        !o.status.success(),
        "--steps and --bucket exclude each other"
    );

    // Malformed lines: counted, skipped, reported.
    let mut bad = std::fs::read_to_string(&log).unwrap();
    bad.push_str("not a log line\n\"GET / HTTP/1.1\" 200\n");
    let bad_log = tmp.0.join("bad.log");
    std::fs::write(&bad_log, &bad).unwrap();
    let o = capacity(&[
        "--log",
        bad_log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--bucket",
        "1s",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains(&format!("note: 2 of {} log lines", sent + 2)),
        "{text}"
    );

    // A log from another day: the clocks do not overlap.
    let shifted: String = bad
        .lines()
        .map(|l| l.replace("/20", "/19"))
        .collect::<Vec<_>>()
        .join("\n");
    let old_log = tmp.0.join("old.log");
    std::fs::write(&old_log, shifted).unwrap();
    let o = capacity(&[
        "--log",
        old_log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--bucket",
        "1s",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("do not overlap"), "{err}");

    // Buckets wider than the recording: too few for a fit.
    let o = capacity(&[
        "--log",
        log.to_str().unwrap(),
        "--cpu",
        cpu.to_str().unwrap(),
        "--bucket",
        "15m",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bucket(s)") && err.contains("smaller --bucket"),
        "{err}"
    );
    // A bucket that is not whole seconds is a usage error.
    let o = capacity(&["--log", "x", "--cpu", "y", "--bucket", "1500ms"]);
    assert_eq!(o.status.code(), Some(2));
    let help = capacity(&["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("X-intercept"));
}

#[test]
fn lab_events_tiny_writes_the_summary_keys() {
    if let Some(why) = cannot_run_cgroup_lab() {
        eprintln!("SKIP lab_events_tiny_writes_the_summary_keys: {why}");
        return;
    }
    let have = |b: &str| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(b).exists()))
            .unwrap_or(false)
    };
    if !have("wrk") {
        eprintln!("SKIP lab_events_tiny_writes_the_summary_keys: wrk is not installed");
        return;
    }
    let tmp = TempDir::new("labevents");
    let out = tmp.0.join("res");
    let (pid, _stdout) = run_lab_to_success(
        Command::new(BIN)
            .args([
                "lab",
                "events",
                "--cold",
                "0,200",
                "--rates",
                "3",
                "--window",
                "1s",
                "--reps",
                "1",
                "--pairs",
                "2",
                "--pairs-quota",
                "20%",
                "--probes",
                "1",
                "--servers",
                "triage,lighttpd-poll",
                "--out",
            ])
            .arg(&out)
            .current_dir(&tmp.0),
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["lab"], "events");
    for k in [
        "triage_cpu_per_req_ratio_max",
        "poll_cpu_per_req_ratio_max",
        "capacity_error_pct_max",
        "capacity_error_pct_max_vs_overload",
        "capacity_error_pct_max_vs_sustained",
        "capacity_error_pct_max_vs_cpu_out",
        "rss_per_idle_conn_kib",
        "idle_conns_held",
    ] {
        assert!(s.get(k).is_some(), "{k} missing");
    }
    assert_eq!(s["idle_conns_held"], 200, "{}", s["notes"]);
    // The capacity runs on the gzip page with no quota, compressed by every server; the pairs
    // on the 1 KiB file, here on a quota (`--pairs-quota 20%`: put on and taken off around
    // them). Said in summary.json.
    assert_eq!(s["params"]["page"], "gzip");
    assert!(s["params"]["quota"].is_null() && s["params"]["pairs_quota"].is_number());
    let said = s["page_and_budget"].as_str().unwrap();
    assert!(
        said.contains("no quota")
            && said.contains("pairs on /file.html (1024 bytes), on a 20% quota"),
        "{said}"
    );
    for m in s["points"].as_array().unwrap() {
        if m["step"] == "rate" {
            assert_eq!(m["page"], "gzip");
            let (wire, decoded) = (
                m["body_bytes_per_req"].as_f64().unwrap(),
                m["decoded_bytes_per_req"].as_f64().unwrap(),
            );
            assert!(
                decoded > 2.0 * wire,
                "{} sent it uncompressed: {m}",
                m["server"]
            );
        }
        if m["step"] == "pairs" {
            assert_eq!(
                (m["page"].as_str(), m["quota_pct"].as_f64()),
                (Some("small"), Some(20.0))
            );
        }
    }
    assert!(s["triage_cpu_per_req_ratio_max"].as_f64().unwrap() > 0.0);
    let lighttpd = have("lighttpd");
    assert_eq!(
        s["poll_cpu_per_req_ratio_max"].is_number(),
        lighttpd,
        "{}",
        s["skipped"]
    );
    // One fit per server and cold count, each with its r and a comparison with the tool.
    let fits = s["fits"].as_array().unwrap();
    assert_eq!(fits.len(), if lighttpd { 4 } else { 2 }, "{fits:?}");
    for f in fits {
        assert!(f["all"]["idle"]["r"].is_number(), "{f}");
        // The saturation search ran its probe; the overload run's reading is beside it.
        assert_eq!(f["probes"], 1, "{f}");
        assert!(f["overload_rps"].as_f64().unwrap() > 0.0, "{f}");
        // Measured where the CPU ran out (`--saturation cpu`, the default): the overload run
        // ran out, so the split has a run above it; with one below, the bracket's midpoint
        // is the measured saturation.
        assert_eq!(f["measured_by"], "cpu", "{f}");
        assert!(f["cpu_out_bracket"][1].is_number(), "{f}");
        // Without a run below it (every run ran out) there is no measured saturation, and
        // the row says why rather than giving the overload run's rate in its place.
        assert_eq!(f["measured_rps"], f["cpu_out_rps"], "{f}");
        match f["cpu_out_rps"].as_f64() {
            Some(c) => assert!(c > 0.0 && f["not_bracketed"].is_null(), "{f}"),
            None => assert!(
                f["not_bracketed"]
                    .as_str()
                    .is_some_and(|w| w.contains("ran out of CPU")),
                "{f}"
            ),
        }
        // The tool fitted its own buckets, or said why it could not.
        assert!(
            f["tool_buckets"].is_number() || f["tool_error"].is_string(),
            "{f}"
        );
    }
    let raw = std::fs::read_to_string(out.join("raw.csv")).unwrap();
    // Per server: 2 cold counts x (saturation, overload, 3 rates, 1 probe), and the pairs at
    // 200.
    assert_eq!(raw.lines().count(), 1 + fits.len() / 2 * 13, "{raw}");
    assert!(raw.lines().any(|l| l.contains(",probe,")), "{raw}");
    // The client side measured its own CPU in every run but the pairs, and ran real-time
    // (`--client-sched fifo`, the default; this test runs as root).
    let head: Vec<&str> = raw.lines().next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    for l in raw.lines().skip(1).filter(|l| !l.contains(",pairs,")) {
        let f: Vec<&str> = l.split(',').collect();
        assert!(
            f[col("client_cpu_pct")].parse::<f64>().unwrap() > 0.0,
            "{l}"
        );
        assert_eq!(f[col("client_fifo")], "true", "{l}");
    }
    // Every run, the pairs included, says how much of the server's CPU went to other tasks.
    for l in raw.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let others: f64 = f[col("server_cpu_others_pct")].parse().unwrap();
        assert!((-100.0..=100.0).contains(&others), "{l}");
    }
    assert!(s["server_cpu_others_pct_max"].is_number(), "{s}");
    // Beside each measured saturation, the run above it that failed says which criterion.
    for f in fits {
        if let Some(n) = f["next_failure"].as_object() {
            assert!(n["failed_on"].is_string(), "{f}");
        }
    }
    // The pairs against the twin give the ratio at 200 cold connections.
    let cpr = s["cpu_per_req"].as_array().unwrap();
    assert!(
        cpr.iter()
            .any(|c| c["server"] == "triage" && c["pairs"] == 2),
        "{cpr:?}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Fig. 9") && html.contains("Table 4") && html.contains("Table 5"));
    assert!(out.join("logs").read_dir().unwrap().count() >= 1);
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

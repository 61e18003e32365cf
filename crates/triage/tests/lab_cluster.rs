//! End to end: `triage lab cluster` on two back ends, a tiny trace and 1 s windows runs the
//! real binary (triage serve back ends, triage front, HAProxy and nginx when installed, wrk)
//! and writes a complete results directory: the summary's keys, the agreement check with the
//! simulator, the failover run with no failed request, nothing left running. And `--log`: the
//! access log `triage front --access-log` wrote under real traffic reads back with the one
//! Combined Log Format parser and replays in the lab, its successful GETs in order.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::*;

fn installed(name: &str) -> bool {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/sbin".into());
    dirs.iter().any(|d| d.join(name).exists())
}

#[test]
fn lab_cluster_small_writes_complete_results() {
    if !installed("wrk") {
        eprintln!("SKIP lab_cluster_small_writes_complete_results: wrk is not installed");
        return;
    }
    let tmp = TempDir::new("labcluster");
    let out = tmp.0.join("res");
    let (pid, stdout) = run_lab_to_success(
        Command::new(BIN)
            .args([
                "lab",
                "cluster",
                "--nodes",
                "2",
                "--reps",
                "1",
                "--window",
                "1s",
                "--warmup",
                "1s",
                "--working-set",
                "3MiB",
                "--max-file",
                "64KiB",
                "--conns",
                "16",
                "--disk-scale",
                "0.1",
                "--only",
                "wrr,lard,haproxy-uri,nginx-hash",
                "--hit-tolerance",
                "0.5",
                "--balance-tolerance",
                "2",
                "--out",
            ])
            .arg(&out)
            .current_dir(&tmp.0),
    );
    assert!(stdout.contains("report: "), "{stdout}");

    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["lab"], "cluster");
    for k in [
        "lard_wrr_ratio",
        "ext_lard_pconn_gain_pct",
        "triage_vs_haproxy_best",
        "front_cpu_per_req_vs_haproxy",
        "failover_failed_requests",
        "failover_failed_how",
        "variants",
    ] {
        assert!(s.get(k).is_some(), "summary.json lacks {k}: {s}");
    }
    let ratio = finite(&s["lard_wrr_ratio"], "lard_wrr_ratio");
    assert!(ratio > 0.0);
    // A back end killed mid-window costs no request.
    assert_eq!(
        s["failover_failed_requests"], 0,
        "{}: {}",
        s["failover_failed_how"], s["points"]
    );
    let names: Vec<&str> = s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"wrr") && names.contains(&"lard"),
        "{names:?}"
    );
    let skipped = s["skipped"].as_array().unwrap();
    for (peer, variant) in [("haproxy", "haproxy-uri"), ("nginx", "nginx-hash")] {
        let measured = names.contains(&variant);
        let said = skipped
            .iter()
            .any(|x| x.as_str().unwrap().starts_with(variant));
        assert!(measured || said, "{variant} neither measured nor skipped");
        if installed(peer) {
            assert!(
                measured,
                "{peer} is installed and {variant} was not measured"
            );
        }
    }
    for v in s["variants"].as_array().unwrap() {
        assert!(finite(&v["rps"], "rps") > 0.0, "{v}");
        let hit = finite(&v["hit_ratio"], "hit_ratio");
        assert!((0.0..=1.0).contains(&hit), "{v}");
        finite(&v["front_cpu_us_per_req"], "front_cpu_us_per_req");
    }
    // The simulator ran on the same requests for triage's relaying points, and agreed within
    // the (loose, for 1 s windows) tolerances given.
    let check = &s["sim_check"];
    assert_eq!(check["ok"], true, "{check}");
    let rows = check["rows"].as_array().unwrap();
    assert!(rows.len() >= 4, "{check}"); // wrr, lard: headline, fits, close
    for r in rows {
        let h = finite(&r["sim_hit_ratio"], "sim_hit_ratio");
        assert!((0.0..=1.0).contains(&h));
        finite(&r["sim_balance"], "sim_balance");
    }
    // LARD partitions the targets: its hit ratio is above WRR's.
    let hit = |n: &str| {
        s["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == n)
            .map(|v| v["hit_ratio"].as_f64().unwrap())
            .unwrap()
    };
    assert!(
        hit("lard") > hit("wrr"),
        "lard {} wrr {}",
        hit("lard"),
        hit("wrr")
    );
    let raw = std::fs::read_to_string(out.join("raw.csv")).unwrap();
    assert!(raw.starts_with("variant,role,nodes"));
    assert!(raw.lines().count() >= 8, "{raw}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Agreement with the simulator"));
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

/// A child process killed and reaped when dropped.
/// Start `triage ARGS` and return it with the address it prints after `http://` on its first
/// line.
fn start_printing_address(args: &[&str]) -> (Child, String) {
    spawn_printing_address(Command::new(BIN).args(args).stderr(Stdio::null()))
}

/// GET `path` on a kept-alive connection; the status and the body's length.
fn get_kept_alive(s: &mut TcpStream, buf: &mut Vec<u8>, path: &str) -> (u16, usize) {
    // One write (a request split in two waits for the delayed ACK of the first part).
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nUser-Agent: replay-test/1\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let r = lab::util::read_response(s, buf).expect("a response from the front end");
    (r.status, r.content_length.unwrap_or(0))
}

#[test]
fn the_front_end_s_access_log_reads_back_and_replays_in_the_lab() {
    if !installed("wrk") {
        eprintln!("SKIP the_front_end_s_access_log_reads_back_and_replays_in_the_lab: wrk is not installed");
        return;
    }
    let tmp = TempDir::new("labclusterlog");
    let site = tmp.0.join("site");
    std::fs::create_dir_all(&site).unwrap();
    const FILES: usize = 30;
    let size = |i: usize| 500 + 731 * i;
    for i in 0..FILES {
        std::fs::write(site.join(format!("f{i}.bin")), vec![b'x'; size(i)]).unwrap();
    }
    let site_s = site.to_str().unwrap();
    let (_backend, backend) = start_printing_address(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "1",
        "--root",
        site_s,
    ]);
    let log = tmp.0.join("front-access.log");
    let log_s = log.to_str().unwrap();
    let (mut front, front_addr) = start_printing_address(&[
        "front",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "1",
        "--policy",
        "lard",
        "--backend",
        &backend,
        "--access-log",
        log_s,
    ]);

    // Skewed, seeded traffic: 1000 GETs of the site's files, and 10 of missing ones.
    let mut s = TcpStream::connect(&front_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut x: u64 = 7;
    let mut sent = Vec::new();
    for k in 0..1010 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 33) as usize;
        let path = if k % 101 == 100 {
            format!("/missing-{k}.bin")
        } else {
            // The smaller numbers more often.
            format!("/f{}.bin", (r % FILES) * ((r >> 8) % FILES) / FILES)
        };
        let (status, len) = get_kept_alive(&mut s, &mut buf, &path);
        if path.starts_with("/missing") {
            assert_eq!(status, 404, "{path}");
        } else {
            assert_eq!(status, 200, "{path}");
            sent.push((path, len));
        }
    }
    drop(s);
    // SIGTERM: the front end stops and closes its log.
    let pid = nix::unistd::Pid::from_raw(front.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(front.0.wait().unwrap().success());

    // The log reads back with the one parser: every line, in order, with the sizes sent and
    // the back end appended.
    let text = std::fs::read_to_string(&log).unwrap();
    let parsed = loadgen::clf::parse_log(&text);
    assert_eq!(parsed.malformed, 0, "{:?}", parsed.malformed_examples);
    assert_eq!(parsed.records.len(), 1010);
    let ok: Vec<_> = parsed.records.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), sent.len());
    for (r, (path, len)) in ok.iter().zip(&sent) {
        assert_eq!(r.method.as_deref(), Some("GET"));
        assert_eq!(r.target.as_deref(), Some(path.as_str()));
        assert_eq!(r.bytes, Some(*len as u64), "{path}");
        assert_eq!(r.user_agent.as_deref(), Some("replay-test/1"));
        assert_eq!(r.host, "127.0.0.1");
    }
    assert!(
        text.lines().all(|l| l.ends_with(&format!("\"{backend}\""))),
        "{text}"
    );

    // The lab replays it: its successful GETs are the trace, the 404s are left out.
    let mut distinct: Vec<&(String, usize)> = sent.iter().collect();
    distinct.sort();
    distinct.dedup();
    let working_set: usize = distinct.iter().map(|(_, l)| l).sum();
    let out = tmp.0.join("res");
    let (lab_pid, stdout) = run_lab_to_success(
        Command::new(BIN)
            .args([
                "lab",
                "cluster",
                "--log",
                log_s,
                "--nodes",
                "1",
                "--reps",
                "1",
                "--window",
                "1s",
                "--warmup",
                "1s",
                "--conns",
                "2",
                "--disk-scale",
                "1",
                "--only",
                "lard",
                "--hit-tolerance",
                "0.5",
                "--balance-tolerance",
                "2",
                "--out",
            ])
            .arg(&out)
            .current_dir(&tmp.0),
    );
    assert!(stdout.contains("report: "), "{stdout}");
    let sum: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let w = &sum["workload"];
    assert_eq!(w["kind"], "log", "{w}");
    assert_eq!(w["requests"], sent.len(), "{w}");
    assert_eq!(w["files"], distinct.len(), "{w}");
    assert_eq!(w["skipped_lines"], 10, "{w}");
    assert_eq!(w["working_set"], working_set, "{w}");
    let lard = sum["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "lard")
        .unwrap();
    assert!(finite(&lard["rps"], "rps") > 0.0, "{lard}");
    assert!(leftovers(lab_pid).is_empty(), "{:?}", leftovers(lab_pid));
}

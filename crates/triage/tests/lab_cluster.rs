//! End to end: `triage lab cluster` on two back ends, a tiny trace and 1 s windows runs the
//! real binary (triage serve back ends, triage front, HAProxy and nginx when installed, wrk)
//! and writes a complete results directory: the summary's keys, the agreement check with the
//! simulator, the failover run with no failed request, nothing left running.

use std::process::Command;

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
        "variants",
    ] {
        assert!(s.get(k).is_some(), "summary.json lacks {k}: {s}");
    }
    let ratio = finite(&s["lard_wrr_ratio"], "lard_wrr_ratio");
    assert!(ratio > 0.0);
    // A back end killed mid-window costs no request.
    assert_eq!(s["failover_failed_requests"], 0, "{}", s["points"]);
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

//! End to end: `triage lab containers --seconds-scale tiny` runs the real binary (triage with
//! per-request cgroups under a 30% cap, Apache httpd with mod_cgi, wrk, CGI burners) for a few
//! seconds and writes a complete, well-formed results directory, leaving no cgroup or network
//! namespace behind. Needs root (cgroups, namespaces): skipped with a printed reason otherwise.

use std::process::Command;

mod common;
use common::*;

/// Why the lab cannot run here, if it cannot.
fn cannot_run() -> Option<String> {
    if let Some(why) = cannot_run_cgroup_lab() {
        return Some(why);
    }
    let wrk = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("wrk").exists()))
        .unwrap_or(false);
    if !wrk {
        return Some("wrk is not installed (scripts/deps.sh installs it)".into());
    }
    None
}

#[test]
fn lab_containers_tiny_writes_complete_results() {
    if let Some(why) = cannot_run() {
        eprintln!("SKIP lab_containers_tiny_writes_complete_results: {why}");
        return;
    }
    let tmp = TempDir::new("labcontainers");
    let out = tmp.0.join("res");
    let (pid, stdout) = run_lab_to_success(
        Command::new(BIN)
            .args(["lab", "containers", "--seconds-scale", "tiny", "--out"])
            .arg(&out)
            .current_dir(&tmp.0),
    );
    assert_eq!(
        stdout.lines().last().unwrap_or(""),
        format!("report: {}", out.join("report.html").display()),
        "{stdout}"
    );

    // raw.csv: header and one row per point, the counts of the tiny scale.
    let raw = std::fs::read_to_string(out.join("raw.csv")).unwrap();
    let mut lines = raw.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..3], &["variant", "rep", "cgi"]);
    assert!(header.contains(&"static_rps") && header.contains(&"cgi_share_pct"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let cap30: Vec<_> = rows.iter().filter(|r| r[0] == "triage-cap30").collect();
    assert_eq!(cap30.len(), 3, "{raw}");
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?}");
    }

    // summary.json: the headline numbers and every point's numbers are finite.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["lab"], "containers");
    let err = finite(&s["cap_error_pp"], "cap_error_pp");
    assert!(err >= 0.0);
    let spread = finite(&s["static_spread_pct_cap30"], "static_spread_pct_cap30");
    assert!((0.0..=100.0).contains(&spread));
    assert!(s.get("testbed").is_some() && s.get("paper").is_some());
    let points = s["points"].as_array().unwrap();
    assert!(points.len() >= 3);
    for p in points {
        for k in [
            "static_rps",
            "cgi_share_pct",
            "server_share_pct",
            "window_s",
            "static_per_server_cpu_ms",
        ] {
            finite(&p[k], k);
        }
        // Static requests were served at every point.
        assert!(p["static_rps"].as_f64().unwrap() > 0.0, "{p}");
        // No script of an earlier point runs on into a point without CGI (a capped script
        // still between fork and exec once went unnoticed and burned through the next point).
        if p["cgi"] == 0 {
            let share = finite(&p["cgi_share_pct"], "cgi_share_pct");
            assert!(share < 3.0, "CGI ran during a point without CGI: {p}");
        }
    }
    assert!(s.get("static_spread_pct_cap30_blocked").is_some());
    // Under load the capped container's measured share is a share (0..100 %).
    for p in points
        .iter()
        .filter(|p| p["variant"] == "triage-cap30" && p["cgi"] != 0)
    {
        let share = finite(&p["cgi_share_pct"], "cgi_share_pct");
        assert!((0.0..=100.0).contains(&share), "{p}");
        finite(&p["cgi_share_metrics_pct"], "cgi_share_metrics_pct");
    }
    // The capped variant ran beside its reference twin (own cgroup, same quota), which served
    // static requests in every window with its one CGI request under the same cap; the spread
    // reads the ratio to it.
    for p in points.iter().filter(|p| p["variant"] == "triage-cap30") {
        assert_eq!(p["twin_cgi"], 1, "{p}");
        assert!(
            finite(&p["twin_static_rps"], "twin_static_rps") > 0.0,
            "{p}"
        );
        let tw = finite(&p["twin_cgi_share_pct"], "twin_cgi_share_pct");
        assert!(tw > 3.0 && tw < 60.0, "twin's CGI share {tw}: {p}");
    }
    assert!(points
        .iter()
        .filter(|p| p["variant"] == "apache")
        .all(|p| p["twin_cgi"].is_null()));
    assert_eq!(s["spread_basis"], "vs_twin");
    finite(
        &s["static_spread_pct_cap30_raw"],
        "static_spread_pct_cap30_raw",
    );
    let goals = s["goals"].as_array().unwrap();
    assert_eq!(goals.len(), 2, "{goals:?}");
    let skipped = s["skipped"].as_array().unwrap();
    assert!(
        points.iter().any(|p| p["variant"] == "apache")
            || skipped
                .iter()
                .any(|x| x.as_str().unwrap().starts_with("apache")),
        "apache neither measured nor skipped with a reason"
    );

    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Fig. 12") && html.contains("Fig. 13"));
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

//! End to end: `triage lab reservations --seconds-scale tiny` runs the real binary (triage with
//! two sites whose CGI containers are weighted 50/49, Apache httpd with two virtual hosts,
//! closed-loop CGI clients) for a few seconds and writes a complete, well-formed results
//! directory, leaving no cgroup or network namespace behind. Needs root: skipped with a printed
//! reason otherwise.

use std::process::Command;

mod common;
use common::*;

#[test]
fn lab_reservations_tiny_writes_complete_results() {
    if let Some(why) = cannot_run_cgroup_lab() {
        eprintln!("SKIP lab_reservations_tiny_writes_complete_results: {why}");
        return;
    }
    let tmp = TempDir::new("labreservations");
    let out = tmp.0.join("res");
    let (pid, stdout) = run_lab_to_success(
        Command::new(BIN)
            .args(["lab", "reservations", "--seconds-scale", "tiny", "--out"])
            .arg(&out)
            .current_dir(&tmp.0),
    );
    assert_eq!(
        stdout.lines().last().unwrap_or(""),
        format!("report: {}", out.join("report.html").display()),
        "{stdout}"
    );

    // raw.csv: three rows (site-a, site-b and the reference twin's site-a) per point.
    let raw = std::fs::read_to_string(out.join("raw.csv")).unwrap();
    let mut lines = raw.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..5],
        &["variant", "rep", "seq", "competitors", "site"]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let res50: Vec<_> = rows.iter().filter(|r| r[0] == "triage-res50").collect();
    assert_eq!(res50.len(), 6, "{raw}");
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?}");
    }
    // The twin served the site of interest in every window, beside every variant.
    for r in rows.iter().filter(|r| r[4] == "twin-site-a") {
        let completed: u64 = r[6].parse().unwrap();
        assert!(completed > 0, "the twin served nothing: {r:?}");
    }
    assert_eq!(
        rows.iter().filter(|r| r[4] == "twin-site-a").count() * 3,
        rows.len(),
        "{raw}"
    );

    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["lab"], "reservations");
    let kept = finite(&s["reserved_kept_pct"], "reserved_kept_pct");
    assert!(kept > 0.0);
    assert_eq!(s["kept_basis"], "vs_twin");
    assert!(finite(&s["reserved_kept_pct_raw"], "reserved_kept_pct_raw") > 0.0);
    // The drift-corrected figures beside it (tiny scale: 4 competitors, then a point alone).
    assert!(finite(&s["reserved_kept_pct_paired"], "reserved_kept_pct_paired") > 0.0);
    assert!(finite(&s["reserved_cpu_kept_pct"], "reserved_cpu_kept_pct") > 0.0);
    assert_eq!(s["params"]["seed"], 1);
    finite(&s["cgi_cpu_ms_per_request"], "cgi_cpu_ms_per_request");
    let skipped = s["skipped"].as_array().unwrap();
    let apache_skipped = skipped
        .iter()
        .any(|x| x.as_str().unwrap().starts_with("apache"));
    if !apache_skipped {
        finite(&s["apache_kept_pct"], "apache_kept_pct");
    }
    let points = s["points"].as_array().unwrap();
    assert!(points.len() >= 2);
    for p in points {
        finite(&p["window_s"], "window_s");
        // The site of interest always completes requests and has response times.
        assert!(finite(&p["a"]["rps"], "a.rps") > 0.0, "{p}");
        finite(&p["a"]["mean_ms"], "a.mean_ms");
        if p["competitors"] != 0 {
            assert!(finite(&p["b"]["rps"], "b.rps") > 0.0, "{p}");
        }
    }
    // With separate weighted containers both sites' CPU is measured.
    for p in points
        .iter()
        .filter(|p| p["variant"] == "triage-res50" && p["competitors"] != 0)
    {
        let a = finite(&p["a_cpu_pct"], "a_cpu_pct");
        let b = finite(&p["b_cpu_pct"], "b_cpu_pct");
        assert!(a > 0.0 && b > 0.0 && a + b <= 105.0, "{p}");
        // The server process's own CPU is measured apart from the scripts'.
        let srv = finite(&p["server_cpu_pct"], "server_cpu_pct");
        let side = finite(&p["side_cpu_pct"], "side_cpu_pct");
        assert!(srv > 0.0 && srv < side && side <= 105.0, "{p}");
        assert_eq!(
            p["seq"], 0,
            "4 competitors come first, then the point alone: {p}"
        );
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Fig. 4") && html.contains("Fig. 5"));
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

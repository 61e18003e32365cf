//! End to end: `triage lab pos` runs the real binary (server, load generator, nginx, Apache)
//! for a seconds-long experiment 1 and writes a complete, well-formed results directory; and a
//! lab interrupted with SIGINT leaves nothing behind. As root the testbed uses network
//! namespaces and cgroups; otherwise it falls back to loopback with client-side throttling and
//! says so (the test prints that note).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

/// `triage lab pos --exp 1 --quick` at the tiny scale, one repetition, `extra` arguments, its
/// results in `out`, run from `dir`.
fn tiny_exp1(out: &std::path::Path, dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "lab",
        "pos",
        "--exp",
        "1",
        "--quick",
        "--seconds-scale",
        "tiny",
        "--reps",
        "1",
    ])
    .args(extra)
    .arg("--out")
    .arg(out)
    .current_dir(dir);
    c
}

/// The `goal` lines of a lab's summary.
fn goal_lines(s: &serde_json::Value) -> Vec<&str> {
    s["goals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["goal"].as_str().unwrap())
        .collect()
}

#[test]
fn lab_pos_exp1_tiny_writes_complete_results() {
    let tmp = TempDir::new("labpos");
    let out = tmp.0.join("res");
    if !is_root() {
        eprintln!(
            "note lab_pos_exp1_tiny_writes_complete_results: not root, the lab runs on loopback \
             with client-side throttling and no CPU quota"
        );
    }
    let (pid, stdout) = run_lab_to_success(&mut tiny_exp1(&out, &tmp.0, &[]));
    // The last line points at the report.
    let last = stdout.lines().last().unwrap_or("");
    assert_eq!(
        last,
        format!("report: {}", out.join("report.html").display()),
        "{stdout}"
    );
    assert!(
        stdout.contains("fifo") && stdout.contains("pos-rw1"),
        "{stdout}"
    );

    // raw.csv: header + one row per page, 13 columns, known variants.
    let raw = std::fs::read_to_string(out.join("raw.csv")).unwrap();
    let mut lines = raw.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("exp,variant,rep,browsers,browser,page,start_ms"),
        "{header}"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(!rows.is_empty());
    for r in &rows {
        assert!(r.len() >= 13, "{r:?}");
        assert_eq!(r[0], "1");
    }

    // summary.json: per variant name, t1, t2 (finite numbers), improvements against fifo.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["exp"], 1);
    assert!(s["load"].as_str().unwrap().contains("browsers"));
    assert!(s.get("quota").is_some() && s.get("testbed").is_some());
    let vs = s["variants"].as_array().unwrap();
    let names: Vec<&str> = vs.iter().map(|v| v["name"].as_str().unwrap()).collect();
    for n in ["fifo", "pos-rw1", "content"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let skipped = s["skipped"].as_array().unwrap();
    for peer in ["nginx", "apache"] {
        assert!(
            names.contains(&peer)
                || skipped
                    .iter()
                    .any(|x| x.as_str().unwrap().starts_with(peer)),
            "{peer} neither measured nor reported as skipped"
        );
    }
    let mut pages = 0;
    for v in vs {
        pages += v["pages"].as_u64().unwrap();
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
                let x = v[t][k].as_f64().unwrap_or(f64::NAN);
                assert!(
                    x.is_finite() && x >= 0.0,
                    "{} {t}.{k} = {}",
                    v["name"],
                    v[t][k]
                );
            }
        }
        for k in [
            "t1_mean_improvement_pct",
            "t1_median_improvement_pct",
            "t2_mean_improvement_pct",
            "pl",
            "lrq",
        ] {
            let x = v[k].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite(), "{} {k} = {}", v["name"], v[k]);
        }
        assert!(v["t1"]["min_ms"].as_f64() <= v["t1"]["max_ms"].as_f64());
        // Every improvement carries its 95% interval (issue 21), bootstrapped over bursts.
        for k in [
            "t1_mean_improvement",
            "t1_median_improvement",
            "t2_mean_improvement",
        ] {
            let ci = v[k]["ci95"].as_array();
            let ci = ci.unwrap_or_else(|| panic!("{} {k}.ci95 = {}", v["name"], v[k]));
            assert_eq!(ci.len(), 2, "{} {k}", v["name"]);
            let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
            assert!(lo <= hi, "{} {k} {lo} {hi}", v["name"]);
            assert_eq!(v[k]["resampled"], "bursts");
        }
    }
    assert_eq!(pages as usize, rows.len());
    let fifo = vs.iter().find(|v| v["name"] == "fifo").unwrap();
    assert_eq!(fifo["t1_mean_improvement_pct"].as_f64(), Some(0.0));

    // report.html: inline SVG figures and the paper's numbers.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("33.8"),
        "report lacks figures"
    );
    assert!(html.trim_end().ends_with("</html>"));

    if is_root() {
        assert_eq!(leftovers(pid), Vec::<String>::new());
    }
}

#[test]
fn lab_pos_cgi_site_tiny_compares_the_lever() {
    let tmp = TempDir::new("labposcgi");
    let out = tmp.0.join("res");
    let (pid, stdout) = run_lab_to_success(&mut tiny_exp1(&out, &tmp.0, &["--site", "cgi"]));
    assert!(stdout.contains("cgi site"), "{stdout}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["params"]["site_kind"], "cgi");
    let vs = s["variants"].as_array().unwrap();
    let names: Vec<&str> = vs.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "fifo",
            "pos-rw3",
            "pos-rw3-budget-tailyield-threads-back-program",
            "pos-rw3-nolever",
            "content"
        ]
    );
    for v in vs {
        assert_eq!(v["errors"], 0, "{}", v["name"]);
        for k in ["t1", "t2"] {
            let x = v[k]["mean_ms"].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{} {k}.mean_ms = {x}", v["name"]);
        }
        assert!(v["server_cpu_s"].as_f64().is_some(), "{}", v["name"]);
        let ci = v["t1_mean_improvement"]["ci95"].as_array().unwrap();
        assert_eq!(ci.len(), 2);
    }
    let goals = goal_lines(&s);
    assert!(
        goals
            .iter()
            .any(|g| g.contains("what the kernel lever adds")),
        "{goals:?}"
    );
    if is_root() {
        // The lever acted (scripts of marked workers started raised), and only with it.
        let gate = |n: &str| vs.iter().find(|v| v["name"] == n).unwrap()["gate"].clone();
        assert!(gate("pos-rw3")["scripts_raised"].as_f64().unwrap() > 0.0);
        assert_eq!(
            gate("pos-rw3-nolever")["scripts_raised"].as_f64(),
            Some(0.0)
        );
        assert_eq!(leftovers(pid), Vec::<String>::new());
        // No journal of raised scripts is left behind by a server that is gone.
        let stale = os::lever::journal::stale(std::path::Path::new(os::lever::STATE_DIR));
        assert!(stale.is_empty(), "{stale:?}");
    }
}

/// nginx + php-fpm with and without `triage pos attach` (issue 16), at the tiny scale: the
/// daemon follows the php-fpm master and its pool, reports itself, and leaves nothing raised;
/// the SCHED_FIFO reference runs on a real-time budget granted for it and is reported apart.
#[test]
fn lab_pos_php_fpm_tiny_with_and_without_attach() {
    if !is_root() {
        eprintln!(
            "SKIP lab_pos_php_fpm_tiny_with_and_without_attach: needs root (the daemon's BPF \
             logger and lever, netns, cgroups)"
        );
        return;
    }
    for bin in ["php-fpm8.2", "nginx"] {
        if lab::process::which(bin).is_none() {
            eprintln!(
                "SKIP lab_pos_php_fpm_tiny_with_and_without_attach: {bin} is not installed \
                 (scripts/deps.sh)"
            );
            return;
        }
    }
    let tmp = TempDir::new("labposphp");
    let out = tmp.0.join("res");
    let (pid, _) = run_lab_to_success(&mut tiny_exp1(
        &out,
        &tmp.0,
        &["--variants", "php-fpm,php-fpm+pos,php-fpm+pos-fifo"],
    ));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(s["params"]["php_cpu_ms"][1].as_f64().unwrap() > 0.0);
    // An attach lab's run is in issue 16's budget, a 100 ms quota period, and the kernel
    // applied it (the server side's cpu.stat: its sampled time over its periods).
    assert_eq!(s["params"]["period_ms"].as_f64(), Some(100.0));
    let vs = s["variants"].as_array().unwrap();
    for v in vs {
        let seen = finite(&v["quota_period_seen_ms"], "quota_period_seen_ms");
        assert!((seen - 100.0).abs() < 20.0, "{}: {seen} ms", v["name"]);
    }
    let names: Vec<&str> = vs.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["php-fpm", "php-fpm+pos", "php-fpm+pos-fifo"]);
    for v in vs {
        assert_eq!(v["errors"], 0, "{}", v["name"]);
        assert_eq!(v["server"], "peer");
        assert_eq!(v["peer"], "php-fpm");
        for k in ["t1", "t2"] {
            finite(&v[k]["mean_ms"], k);
        }
        assert!(finite(&v["server_cpu_s"], "server_cpu_s") > 0.0);
    }
    let pos = &vs[1];
    // The daemon followed the pool (the master and its children, from the BPF logger or the
    // poller) and answered at the end of the load.
    let d = &pos["daemon"];
    assert!(finite(&d["events"], "events") > 0.0, "{d}");
    assert!(finite(&d["cpu_s"], "cpu_s") >= 0.0);
    assert_eq!(pos["vs_baseline"]["baseline"], "php-fpm");
    // Marking accuracy from php-fpm's access log: every request of the run is an episode.
    let m = &pos["marking"];
    assert_eq!(
        m["episodes"].as_u64(),
        pos["pages"].as_u64().map(|p| p * 5),
        "a page is 1 HTML + 4 images: {m}"
    );
    assert_eq!(m["text"].as_u64(), pos["pages"].as_u64(), "{m}");
    assert!(m["marked"].as_u64().unwrap() <= m["episodes"].as_u64().unwrap());
    assert!(pos["vs_baseline"]["t1_mean_improvement"]["value"].is_number());
    let goals = goal_lines(&s);
    assert!(
        goals
            .iter()
            .any(|g| g.starts_with("php-fpm + triage pos attach")),
        "{goals:?}"
    );
    // The real-time reference: granted real-time time (the raises took), labelled, and no
    // goal of its own.
    let fifo = &vs[2];
    assert_eq!(fifo["realtime_reference"], true);
    assert!(vs[1].get("realtime_reference").is_none());
    assert!(
        finite(&fifo["daemon"]["raises"], "raises") > 0.0,
        "{}",
        fifo["daemon"]
    );
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("php-fpm+pos-fifo is a reference on a second, real-time")),
        "{notes:?}"
    );
    assert!(
        !goals.iter().any(|g| g.contains("SCHED_FIFO")),
        "the reference is not a goal: {goals:?}"
    );
    assert_eq!(leftovers(pid), Vec::<String>::new());
    // Nothing left raised: no journal of a daemon that is gone, no php-fpm of the lab's.
    let stale = os::lever::journal::stale(std::path::Path::new(os::lever::STATE_DIR));
    assert!(stale.is_empty(), "{stale:?}");
    let mark = format!("triage-lab-pos1-{pid}-");
    let stray: Vec<String> = os::procfs::pids()
        .into_iter()
        .filter_map(|p| os::procfs::cmdline(p).filter(|cmd| cmd.contains(&mark)))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
fn lab_pos_interrupted_leaves_nothing_behind() {
    if !is_root() {
        eprintln!("SKIP lab_pos_interrupted_leaves_nothing_behind: needs root (netns, cgroups)");
        return;
    }
    let tmp = TempDir::new("labint");
    let mut child = Command::new(BIN)
        .args([
            "lab",
            "pos",
            "--exp",
            "1",
            "--seconds-scale",
            "tiny",
            "--no-peers",
        ])
        .arg("--out")
        .arg(tmp.0.join("res"))
        .current_dir(&tmp.0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the testbed exists (its namespace appears), then interrupt mid-run.
    let end = Instant::now() + Duration::from_secs(20);
    while leftovers(pid).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!leftovers(pid).is_empty(), "the lab built no testbed");
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::SIGINT,
    )
    .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "lab did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success());
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(leftovers(pid), Vec::<String>::new());
    // No process of the lab's is left (server, hog, load generator): they all name the lab's
    // work directory (`triage-lab-pos1-<pid>-...`) on their command lines.
    let mark = format!("triage-lab-pos1-{pid}-");
    let stray: Vec<String> = os::procfs::pids()
        .into_iter()
        .filter_map(|p| os::procfs::cmdline(p).filter(|cmd| cmd.contains(&mark)))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

//! Issue 21: `triage sim pos` at its defaults reproduces seed 001's experiments 1-3 within the
//! goals, and the reading of "randomly at the same time" (a short window of random clicks,
//! bursts under 20 s apart) is what makes exp 2 and exp 3 differ as in the paper. Every run is
//! seeded (seed 1, 5 trials): the numbers are deterministic, the bounds are the goals.

use sim::pos::{run, ExpResult, PosConfig, PosResult};
use sim::web::WebConfig;

fn exp(exp: u8, base: WebConfig) -> PosResult {
    let cfg = PosConfig {
        exp,
        rw: vec![3, 6, 9],
        rw_auto: false,
        context: false,
        base,
        ..PosConfig::default()
    };
    run(&cfg, &|_: &str| {}).unwrap()
}

/// Mean t1 improvement (fraction) of `pos RW=rw`.
fn impr(e: &ExpResult, rw: u32) -> f64 {
    e.variants
        .iter()
        .find(|v| v.label == format!("pos RW={rw}"))
        .unwrap()
        .t1_mean_impr
}

#[test]
fn exp1_is_within_ten_points_of_the_paper_and_rw3_is_best() {
    let r = exp(1, WebConfig::default());
    let e = &r.runs[0];
    let (a, b, c) = (impr(e, 3), impr(e, 6), impr(e, 9));
    eprintln!("exp 1: RW=3 {a} RW=6 {b} RW=9 {c} (paper 0.338 0.213 0.266)");
    assert!((a - 0.338).abs() <= 0.10, "RW=3 {a}");
    assert!(a > b && a > c, "{a} {b} {c}");
    // Fig. 3(b): images pay for it a little.
    let t2 = e.variants[1].t2_mean_impr;
    assert!((-0.10..0.0).contains(&t2), "t2 {t2}");
    // The JSON the checks read: runs[].variants[] with label and t1_mean_impr as a fraction.
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["runs"][0]["variants"][0]["label"], "timesharing");
    assert_eq!(v["runs"][0]["variants"][1]["label"], "pos RW=3");
    assert_eq!(
        v["runs"][0]["variants"][1]["t1_mean_impr"].as_f64(),
        Some(a)
    );
    assert!(r.figures.iter().any(|f| f.figure == "Fig. 3(a)"));
}

#[test]
fn exp3_is_within_ten_points_of_the_paper_and_exp2_shows_nothing() {
    let e3 = exp(3, WebConfig::default());
    let e = &e3.runs[0];
    let (a, b, c) = (impr(e, 3), impr(e, 6), impr(e, 9));
    eprintln!("exp 3: RW=3 {a} RW=6 {b} RW=9 {c} (paper 0.222 0.179 0.067)");
    assert!((a - 0.222).abs() <= 0.10, "RW=3 {a}");
    assert!(a > b && a > c, "{a} {b} {c}");
    assert!(e.window_s == Some(0.5) && e.interval_s == 10.0, "{e:?}");
    // Exp 2: the same arrivals, SLP fixed at 20 s; the bursts come back within 10 s, so no
    // process waited longer than SLP and POS marks nothing (the paper: no consistent
    // improvement).
    let e2 = exp(2, WebConfig::default());
    for rw in [3, 6, 9] {
        assert!(impr(&e2.runs[0], rw).abs() < 0.01, "exp 2 RW={rw}");
    }
}

#[test]
fn exp3_without_the_window_reading_cannot_tell_the_policies_apart() {
    // The earlier reading: each browser at a uniform moment of the whole interval.
    let e3 = exp(
        3,
        WebConfig {
            random_window: None,
            ..WebConfig::default()
        },
    );
    let a = impr(&e3.runs[0], 3);
    assert!(a.abs() < 0.05, "RW=3 {a}");
}

#[test]
fn exp4_pl_and_lrq_grow_with_the_browsers_as_fig6() {
    let cfg = PosConfig {
        exp: 4,
        trials: 2,
        rw: vec![3],
        rw_auto: false,
        context: false,
        ..PosConfig::default()
    };
    let r = run(&cfg, &|_: &str| {}).unwrap();
    let x = r.exp4.unwrap();
    assert_eq!(x.browsers, vec![3, 6, 9, 12]);
    for w in x.pl_ratio.windows(2).chain(x.lrq_ratio.windows(2)) {
        assert!(w[1] > w[0], "{:?} {:?}", x.pl_ratio, x.lrq_ratio);
    }
    // LRQ grows faster than PL (the paper: 8 against 5.44 at 12 browsers).
    assert!(x.lrq_ratio[3] > x.pl_ratio[3]);
    assert!(r.figures.iter().any(|f| f.figure == "Fig. 7"));
}

/// Why exp 4 does not fall as Fig. 7 (issue 21): at 3 browsers the paper's +65.7 % is more than
/// the share of t1 an HTML request spends waiting for the CPU (ready queue and interrupts), the
/// only time POS's reordering acts on, and more than `content` (which knows the HTML requests)
/// gains; the report says so. The bound's parts are consistent: no policy beats the floor (a
/// browser alone), POS's best does not beat the oracle, and the CPU-wait share rises with the
/// browsers, which is why POS's gain rises too.
#[test]
fn exp4_reports_why_three_browsers_cannot_reach_fig7() {
    let cfg = PosConfig {
        exp: 4,
        rw: vec![3, 6, 9],
        rw_auto: false,
        context: true,
        ..PosConfig::default()
    };
    let r = run(&cfg, &|_: &str| {}).unwrap();
    let x = r.exp4.as_ref().unwrap();
    eprintln!(
        "exp 4: best {:?} content {:?} cpu wait {:?} floor {:?} alone {}",
        x.best_impr, x.content_impr, x.cpu_wait_share, x.floor_impr, x.t1_alone
    );
    assert!(x.t1_alone > 0.0);
    for i in 0..x.browsers.len() {
        let content = x.content_impr[i].unwrap();
        assert!(x.t1_alone < x.mean_t1_timesharing[i], "{i}");
        assert!(
            x.best_impr[i] <= content + 0.02,
            "POS beats the oracle at {i}"
        );
        assert!(
            content < x.floor_impr[i],
            "the oracle beats the floor at {i}"
        );
        assert!((0.0..1.0).contains(&x.cpu_wait_share[i]), "{i}");
    }
    // 3 browsers: the paper's +65.7 % is above the CPU-wait share, the oracle and even the
    // floor (every HTML request as fast as a lone browser's), and the note says so; at 6
    // browsers its +44.4 % is above the CPU-wait share.
    assert!(x.cpu_wait_share[0] < 0.657 && x.content_impr[0].unwrap() < 0.657 / 2.0);
    assert!(x.floor_impr[0] < 0.657, "floor {}", x.floor_impr[0]);
    let note = |b: &str, says: &str| {
        r.notes
            .iter()
            .any(|n| n.starts_with(&format!("Fig. 7 bound, {b} browsers")) && n.contains(says))
    };
    assert!(note("3", "above the floor"), "{:?}", r.notes);
    assert!(x.cpu_wait_share[1] < 0.444 && note("6", "out of POS's reach"));
    // The CPU-wait share rises with the overlap, and POS's gain with it (Fig. 7 falls).
    assert!(x.cpu_wait_share[3] > x.cpu_wait_share[0] + 0.1);
    assert!(x.burst_lrq[3] > 2.0 * x.burst_lrq[0]);
    assert!(x.best_impr[3] > x.best_impr[0]);
    assert!(r
        .figures
        .iter()
        .any(|f| f.figure == "Fig. 7" && f.what.starts_with("bound: CPU wait")));
    // The JSON carries the bound beside the unchanged `runs[].variants[]`.
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    for k in ["floor_impr", "cpu_wait_share", "content_impr", "burst_lrq"] {
        assert_eq!(v["exp4"][k].as_array().map(Vec::len), Some(4), "{k}");
    }
    assert!(v["exp4"]["t1_alone"].as_f64().unwrap() > 0.0);
    assert_eq!(v["runs"][0]["variants"][0]["label"], "timesharing");
}

/// What does make the model's exp 4 gain fall with the browsers: clicks so close together
/// (a 100 ms window instead of the calibrated 500 ms) that the HTML requests meet each other
/// at the FIFO disk, which no ready-queue order shortens. From 6 browsers on the best gain
/// falls (seed 1: +18.4 / +14.9 / +9.1 %) while the HTML requests' disk wait grows; 3 browsers
/// still offer little to reorder.
#[test]
fn exp4_falls_from_six_browsers_when_the_html_requests_meet_at_the_disk() {
    let cfg = PosConfig {
        exp: 4,
        rw: vec![3, 6, 9],
        rw_auto: false,
        context: false,
        base: WebConfig {
            random_window: Some(100 * policy::MS),
            ..WebConfig::default()
        },
        ..PosConfig::default()
    };
    let r = run(&cfg, &|_: &str| {}).unwrap();
    let x = r.exp4.as_ref().unwrap();
    eprintln!("exp 4, 100 ms window: best {:?}", x.best_impr);
    assert!(
        x.best_impr[1] > x.best_impr[2] && x.best_impr[2] > x.best_impr[3],
        "{:?}",
        x.best_impr
    );
    assert!(x.best_impr[0] < x.best_impr[1], "{:?}", x.best_impr);
    let disk: Vec<f64> = r.runs.iter().map(|e| e.variants[0].t1_parts.disk).collect();
    assert!(disk.windows(2).all(|w| w[1] > w[0]), "{disk:?}");
    assert!(disk[3] > 3.0 * disk[0], "{disk:?}");
}

/// Exp 4 per client machine (issue 21, `--arrivals machines`): seed 001 §4.3 varies the number
/// of client machines, three browsers each, and three Navigators on one client CPU start
/// their loads one after the other; machines start independently (the same 500 ms window,
/// the same 100 ms per page start as exp 1's spread). Under this reading exp 1 and exp 3 stay
/// within their goals, RW = 3 best, but exp 4 still does not fall from 3 browsers: one
/// machine's pages leave little ready-queue wait to remove (`content`, which knows the HTML
/// requests, gains less than exp 3's lower goal of 12.2 %), so a gain that falls from 3 to 9
/// browsers is incompatible with exp 3 in range.
#[test]
fn per_machine_arrivals_keep_exp1_and_exp3_but_three_browsers_leave_little_to_reorder() {
    use sim::web::Arrivals;
    let machines = |exp: u8, context: bool| {
        run(
            &PosConfig {
                exp,
                rw: vec![3, 6, 9],
                rw_auto: false,
                context,
                random_arrivals: Arrivals::Machines,
                ..PosConfig::default()
            },
            &|_: &str| {},
        )
        .unwrap()
    };
    for (exp, paper) in [(1, 0.338), (3, 0.222)] {
        let r = machines(exp, false);
        let e = &r.runs[0];
        let (a, b, c) = (impr(e, 3), impr(e, 6), impr(e, 9));
        eprintln!("exp {exp} per machine: RW=3 {a} RW=6 {b} RW=9 {c}");
        assert!((a - paper).abs() <= 0.10, "exp {exp} RW=3 {a}");
        assert!(a > b && a > c, "exp {exp}: {a} {b} {c}");
    }
    let r = machines(4, true);
    let x = r.exp4.as_ref().unwrap();
    eprintln!(
        "exp 4 per machine: best {:?} content {:?} html meets html {:?}",
        x.best_impr, x.content_impr, x.html_meets_html
    );
    let content3 = x.content_impr[0].unwrap();
    assert!(x.best_impr[0] <= content3 + 0.02, "{:?}", x.best_impr);
    assert!(content3 < 0.222 - 0.10, "content at 3 browsers {content3}");
    // One machine's HTML requests almost never meet each other (its pages start 100 ms apart);
    // more machines make them meet more and more (both marked, no order between them).
    let m = &x.html_meets_html;
    assert!(m[0] < 0.1 && m.windows(2).all(|w| w[1] > w[0]), "{m:?}");
    assert!(r
        .notes
        .iter()
        .any(|n| n.starts_with("HTML requests clicked while") && n.contains("2.2%")));
    // So Fig. 7's fall from 3 browsers is not there: 9 browsers (exp 3's setting) gain more.
    assert!(x.best_impr[2] > x.best_impr[0], "{:?}", x.best_impr);
    assert_eq!(r.runs[0].arrivals, Arrivals::Machines);
}

/// The one cost split tried that lifts one machine's gain: all of the network card's
/// programmed I/O in the writer's burst (`--nic dma --per-kib 440us`), where ready-queue order
/// acts on it. With machines spread over 2 s, three browsers then gain over 15 %, but
/// exp 1 leaves its goal (more than 10 points above 33.8 %): the paper's exp 1 gained less
/// than its 3-browser exp 4, this model's never does.
#[test]
fn pio_in_the_writer_lifts_three_browsers_but_pushes_exp1_out_of_range() {
    use sim::web::{Arrivals, CpuCosts};
    let base = WebConfig {
        costs: CpuCosts {
            nic_pio_per_kib: 0,
            per_kib: 440_000,
            ..CpuCosts::default()
        },
        random_window: Some(2 * policy::SEC),
        ..WebConfig::default()
    };
    let cfg = |exp: u8| PosConfig {
        exp,
        rw: vec![3, 6, 9],
        rw_auto: false,
        context: false,
        random_arrivals: Arrivals::Machines,
        base: base.clone(),
        ..PosConfig::default()
    };
    let e1 = run(&cfg(1), &|_: &str| {}).unwrap();
    let a = impr(&e1.runs[0], 3);
    let r = run(&cfg(4), &|_: &str| {}).unwrap();
    let x = r.exp4.as_ref().unwrap();
    eprintln!(
        "pio in process: exp 1 RW=3 {a}, exp 4 best {:?}",
        x.best_impr
    );
    assert!(a > 0.338 + 0.10, "exp 1 RW=3 {a}");
    assert!(x.best_impr[0] > 0.15, "{:?}", x.best_impr);
}

/// The 4.4BSD base (`--base bsd`, docs/sim.md "The 4.4BSD base"): wake-up preemption of
/// user-mode work and POS over the timesharing order (`posbsd`). Exp 1 and exp 3 stay within
/// their goals, but exp 4 still rises with the browsers: at 3 browsers the base leaves the
/// HTML requests' wait where it was (timesharing t1 within 3 % of the woken-first base's), so
/// POS has no more to remove there, and the time quantum never matters (no server burst lasts
/// 10 ms: the results are identical with a 10 ms and a 1 s quantum).
#[test]
fn bsd_base_keeps_exp1_and_exp3_but_exp4_still_rises() {
    use sim::pos::SchedBase;
    let with = |exp: u8, sched_base: SchedBase, quantum: policy::Nanos| {
        run(
            &PosConfig {
                exp,
                rw: vec![3, 6, 9],
                rw_auto: false,
                context: false,
                sched_base,
                base: WebConfig {
                    quantum,
                    ..WebConfig::default()
                },
                ..PosConfig::default()
            },
            &|_: &str| {},
        )
        .unwrap()
    };
    let q = 100 * policy::MS;
    for (exp, paper) in [(1, 0.338), (3, 0.222)] {
        let r = with(exp, SchedBase::Bsd, q);
        let e = &r.runs[0];
        assert_eq!(e.variants[1].policy, "posbsd");
        let (a, b, c) = (impr(e, 3), impr(e, 6), impr(e, 9));
        eprintln!("exp {exp} 4.4BSD base: RW=3 {a} RW=6 {b} RW=9 {c}");
        assert!((a - paper).abs() <= 0.10, "exp {exp} RW=3 {a}");
        assert!(a > b && a > c, "exp {exp}: {a} {b} {c}");
    }
    let bsd = with(4, SchedBase::Bsd, q);
    let x = bsd.exp4.as_ref().unwrap();
    let before = with(4, SchedBase::WokenFirst, q);
    let y = before.exp4.as_ref().unwrap();
    eprintln!(
        "exp 4 4.4BSD base: best {:?} t1 {:?} (woken-first t1 {:?})",
        x.best_impr, x.mean_t1_timesharing, y.mean_t1_timesharing
    );
    let (t_bsd, t_before) = (x.mean_t1_timesharing[0], y.mean_t1_timesharing[0]);
    assert!((t_bsd / t_before - 1.0).abs() < 0.03, "{t_bsd} {t_before}");
    assert!(x.best_impr[0] < 0.10, "3 browsers {:?}", x.best_impr);
    assert!(x.best_impr[3] > x.best_impr[0] + 0.10, "{:?}", x.best_impr);
    for quantum in [10 * policy::MS, policy::SEC] {
        let other = with(4, SchedBase::Bsd, quantum);
        let z = other.exp4.as_ref().unwrap();
        assert_eq!(z.mean_t1_timesharing, x.mean_t1_timesharing, "{quantum}");
        assert_eq!(z.best_impr, x.best_impr, "{quantum}");
    }
}

//! The same seed gives byte-identical JSON; another seed gives different JSON; the number of
//! threads never changes a result.

use sim::lard::{LardConfig, Workload};
use sim::pos::PosConfig;

fn pos_json(seed: u64, threads: usize) -> String {
    let cfg = PosConfig {
        exp: 3,
        seed,
        trials: 2,
        rw: vec![3, 9],
        threads,
        base: sim::web::WebConfig {
            rounds: 2,
            ..Default::default()
        },
        ..PosConfig::default()
    };
    serde_json::to_string_pretty(&sim::pos::run(&cfg, &|_: &str| {}).unwrap()).unwrap()
}

fn lard_json(seed: u64, threads: usize) -> String {
    let cfg = LardConfig {
        nodes: vec![1, 4],
        seed,
        requests: 6_000,
        working_set: 64 << 20,
        workloads: vec![Workload {
            name: "exceeds".into(),
            cache: 8 << 20,
        }],
        threads,
        ..LardConfig::default()
    };
    serde_json::to_string_pretty(&sim::lard::run(&cfg, &|_: &str| {}).unwrap()).unwrap()
}

#[test]
fn pos_same_seed_same_bytes_other_seed_other_bytes() {
    let a = pos_json(7, 2);
    let b = pos_json(7, 2);
    assert_eq!(a, b);
    assert_ne!(a, pos_json(8, 2));
    assert_eq!(a, pos_json(7, 1), "thread count changed the result");
}

#[test]
fn exp1_same_seed_same_bytes_other_seed_other_bytes() {
    let run = |seed| {
        let cfg = PosConfig {
            exp: 1,
            seed,
            trials: 1,
            rw: vec![3],
            rw_auto: false,
            context: false,
            ..PosConfig::default()
        };
        serde_json::to_string(&sim::pos::run(&cfg, &|_: &str| {}).unwrap()).unwrap()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn lard_same_seed_same_bytes_other_seed_other_bytes() {
    let a = lard_json(3, 2);
    assert_eq!(a, lard_json(3, 2));
    assert_ne!(a, lard_json(4, 2));
    assert_eq!(a, lard_json(3, 1), "thread count changed the result");
}

#[test]
fn per_machine_arrivals_same_seed_same_bytes_other_seed_other_bytes() {
    let run = |exp, seed, threads| {
        let cfg = PosConfig {
            exp,
            seed,
            trials: 2,
            rw: vec![3],
            rw_auto: false,
            context: false,
            exp4_browsers: vec![3, 6],
            random_arrivals: sim::web::Arrivals::Machines,
            threads,
            ..PosConfig::default()
        };
        serde_json::to_string(&sim::pos::run(&cfg, &|_: &str| {}).unwrap()).unwrap()
    };
    for exp in [1, 4] {
        let a = run(exp, 5, 2);
        assert_eq!(a, run(exp, 5, 2), "exp {exp}");
        assert_eq!(
            a,
            run(exp, 5, 1),
            "exp {exp}: thread count changed the result"
        );
        assert_ne!(a, run(exp, 6, 2), "exp {exp}");
    }
}

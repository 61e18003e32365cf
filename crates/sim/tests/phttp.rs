//! Persistent connections, mechanisms and the front end's CPU in the cluster model: seeded
//! runs whose outcomes follow from the model, each failing if its mechanism is removed.

use policy::dispatch::DispatchConfig;
use sim::cluster::{run, run_with, ClusterConfig, ClusterResult, ConnModel, Costs};
use sim::disk::DiskModel;
use sim::pconn::{FrontCosts, Mechanism};
use sim::trace::{Trace, TraceConfig};

fn trace(requests: usize, working_set: u64) -> Trace {
    Trace::generate(&TraceConfig {
        working_set,
        requests,
        max_size: 1 << 20,
        ..TraceConfig::default()
    })
    .unwrap()
}

fn cfg(nodes: usize, policy: &str, cache: u64) -> ClusterConfig {
    ClusterConfig {
        nodes,
        policy: policy.into(),
        dispatch: DispatchConfig::default(),
        cache,
        costs: Costs::default(),
        disk: DiskModel::default(),
        warmup: 0.25,
        prewarm: true,
    }
}

fn model(mechanism: Mechanism, front: FrontCosts) -> ConnModel {
    ConnModel {
        mechanism,
        per_conn: 6.0,
        seed: 1,
        front,
    }
}

fn go(t: &Trace, nodes: usize, policy: &str, cache: u64, m: Mechanism) -> ClusterResult {
    run_with(&cfg(nodes, policy, cache), &model(m, FrontCosts::none()), t).unwrap()
}

#[test]
fn one_request_per_connection_pinned_is_http_1_0() {
    // With one request per connection every mechanism that pins is the LARD paper's model:
    // same events, same numbers.
    let t = trace(20_000, 64 << 20);
    let close = run(&cfg(4, "lard", 8 << 20), &t).unwrap();
    for m in [Mechanism::Pin, Mechanism::Forward, Mechanism::Handoff] {
        let one = run_with(
            &cfg(4, "lard", 8 << 20),
            &ConnModel {
                per_conn: 1.0,
                ..model(m, FrontCosts::none())
            },
            &t,
        )
        .unwrap();
        assert_eq!(one.throughput, close.throughput, "{m:?}");
        assert_eq!(one.hit_ratio, close.hit_ratio, "{m:?}");
        assert_eq!(one.events, close.events, "{m:?}");
        assert_eq!(one.connections, 20_000);
    }
}

#[test]
fn forwarding_beats_no_mechanism_with_persistent_connections() {
    // Working set 8x one node's cache, 8 nodes: pinned, a connection's later requests land on
    // a node that does not cache them; forwarding fetches them from one that does.
    let t = trace(60_000, 64 << 20);
    let pin = go(&t, 8, "lard", 8 << 20, Mechanism::Pin);
    let fwd = go(&t, 8, "ext-lard", 8 << 20, Mechanism::Forward);
    assert!(fwd.forwarded_ratio > 0.05, "{fwd:?}");
    assert_eq!(pin.forwarded_ratio, 0.0);
    assert!(fwd.hit_ratio > pin.hit_ratio + 0.1, "{fwd:?} {pin:?}");
    assert!(
        fwd.throughput > 1.2 * pin.throughput,
        "ext-lard/forward {} vs lard/pin {}",
        fwd.throughput,
        pin.throughput
    );
    // Without a mechanism LARD loses against HTTP/1.0 (seed 004: up to 35%).
    let close = go(&t, 8, "lard", 8 << 20, Mechanism::Close);
    assert!(pin.throughput < 0.9 * close.throughput, "{pin:?} {close:?}");
}

#[test]
fn extended_lard_at_least_lard_above_one_cache() {
    // Both forward; LARD's default route forwards every request whose target it assigned
    // elsewhere, extended LARD reads locally while the disk is idle and replicates hot
    // targets.
    let t = trace(60_000, 64 << 20);
    let lard = go(&t, 8, "lard", 8 << 20, Mechanism::Forward);
    let ext = go(&t, 8, "ext-lard", 8 << 20, Mechanism::Forward);
    assert!(ext.throughput >= lard.throughput, "{ext:?} {lard:?}");
    // And with one request per connection extended LARD is LARD/R, not worse than LARD.
    let lard = go(&t, 8, "lard", 8 << 20, Mechanism::Close);
    let ext = go(&t, 8, "ext-lard", 8 << 20, Mechanism::Close);
    assert!(ext.throughput >= 0.95 * lard.throughput, "{ext:?} {lard:?}");
}

#[test]
fn the_front_end_saturates_where_its_utilisation_at_six_predicts() {
    // Caches hold the working set: the back ends are CPU-bound and the cluster's capacity is
    // linear in its size until the front end's CPU saturates.
    let t = trace(60_000, 32 << 20);
    // Three times seed 004's front end, so that it saturates within 20 back ends here.
    let f = FrontCosts::seed004();
    let front = FrontCosts {
        conn: 3 * f.conn,
        request: 3 * f.request,
        ..f
    };
    let sweep: Vec<(usize, ClusterResult)> = [2, 4, 6, 8, 10, 12, 14, 16, 20]
        .iter()
        .map(|&n| {
            let r = run_with(
                &cfg(n, "ext-lard", 1 << 30),
                &model(Mechanism::Forward, front),
                &t,
            )
            .unwrap();
            (n, r)
        })
        .collect();
    let at = |n: usize| &sweep.iter().find(|x| x.0 == n).unwrap().1;
    let predicted = 6.0 / at(6).front_util;
    let saturated = sweep
        .iter()
        .find(|x| x.1.front_util >= 0.95)
        .map(|x| x.0 as f64)
        .expect("the front end never saturated");
    assert!(
        (saturated - predicted).abs() <= 2.5,
        "saturated at {saturated}, predicted {predicted}"
    );
    // Past saturation, more back ends add no throughput.
    assert!(at(20).throughput < 1.1 * at(14).throughput);
    // Below it, throughput is about linear.
    assert!(at(4).throughput > 1.8 * at(2).throughput);
    // Without the front end's cost the same cluster keeps scaling.
    let free = run_with(
        &cfg(20, "ext-lard", 1 << 30),
        &model(Mechanism::Forward, FrontCosts::none()),
        &t,
    )
    .unwrap();
    assert!(free.throughput > 1.5 * at(20).throughput);
    assert_eq!(free.front_util, 0.0);
}

#[test]
fn a_relaying_front_end_is_bounded_by_its_per_byte_cost() {
    let t = trace(20_000, 32 << 20);
    let front = FrontCosts::seed004();
    let r = run_with(
        &cfg(8, "lard", 1 << 30),
        &model(Mechanism::Relay, front),
        &t,
    )
    .unwrap();
    let per_req_ns = front.relay_per_512 as f64 * t.mean_request_size() / 512.0;
    let bound = 1e9 / per_req_ns;
    assert!(r.front_util > 0.9, "{r:?}");
    assert!(r.throughput <= bound * 1.05, "{} > {bound}", r.throughput);
}

#[test]
fn a_thousand_and_twenty_four_nodes_run() {
    let t = trace(200_000, 2 << 30);
    let started = std::time::Instant::now();
    for m in [Mechanism::Close, Mechanism::Forward] {
        let r = run_with(
            &cfg(1024, "ext-lard", 32 << 20),
            &model(m, FrontCosts::seed004()),
            &t,
        )
        .unwrap();
        assert_eq!(r.measured, 150_000);
        assert!(r.throughput > 0.0 && r.front_util > 0.0 && r.front_util <= 1.0);
    }
    eprintln!(
        "1024 nodes, 2 runs of 200k requests: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

//! `triage front --emit haproxy|nginx|envoy`: the configuration of another engine that runs
//! the nearest policy it has to the front end's, on the same listen address, back ends,
//! timeouts and health checks, so a user can run it on the engine they already deploy.
//!
//! | triage | HAProxy | nginx | Envoy |
//! |---|---|---|---|
//! | `wrr` | `balance roundrobin` | round robin (the default) | `ROUND_ROBIN` |
//! | `chbl` | `balance uri` + `hash-type consistent` + `hash-balance-factor` | `hash $request_uri consistent` (no load bound) | `RING_HASH` + `hash_balance_factor` |
//! | `lard`, `lard-r`, `ext-lard` | none: emits the CHBL lines | none: emits the hash | none: emits the CHBL lines |
//!
//! LARD keeps a table of where each target went and moves a target only when its back end
//! passes T_high while another is below T_low (or reaches 2 T_high); no engine has such a
//! table, and bounded-load consistent hashing is the nearest: locality on the URI with a
//! hard bound on load. The text says so in a comment. Back-end forwarding exists in none of
//! them; pinning is nearest to HAProxy's `option prefer-last-server`.

use std::fmt::Write;

use crate::config::{FrontConfig, Mechanism};

/// An engine whose configuration can be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// HAProxy (2.x).
    Haproxy,
    /// nginx (open source).
    Nginx,
    /// Envoy (v3 API, static configuration).
    Envoy,
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "haproxy" => Ok(Engine::Haproxy),
            "nginx" => Ok(Engine::Nginx),
            "envoy" => Ok(Engine::Envoy),
            _ => Err(format!(
                "unknown engine `{s}` (known: haproxy, nginx, envoy)"
            )),
        }
    }
}

/// Whether `policy` hashes the URI in the emitted configuration, and the comment saying how
/// near it is.
fn mapping(cfg: &FrontConfig) -> (bool, String) {
    match cfg.policy.as_str() {
        "wrr" => (false, "weighted round robin: the same policy".into()),
        "chbl" => (
            true,
            "consistent hashing with bounded loads: the same policy".into(),
        ),
        p => (
            true,
            format!(
                "`{p}` has no equivalent here (it keeps a table of where each target went and \
                 moves a target only past T_high = {} while a back end is below T_low = {}); \
                 the nearest is consistent hashing of the URI with a load bound of {}x the mean",
                cfg.dispatch.t_high, cfg.dispatch.t_low, cfg.dispatch.bound
            ),
        ),
    }
}

fn ms(d: std::time::Duration) -> u128 {
    d.as_millis().max(1)
}

/// Whole seconds, rounded up, at least 1: nginx's `fail_timeout` takes no milliseconds
/// (`fail_timeout=500ms` is refused at start).
fn secs_up(d: std::time::Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

fn weight(cfg: &FrontConfig, i: usize) -> u32 {
    cfg.dispatch.weights.get(i).copied().unwrap_or(1)
}

/// The configuration text of `engine` for `cfg`.
pub fn emit(cfg: &FrontConfig, engine: Engine) -> String {
    match engine {
        Engine::Haproxy => haproxy(cfg),
        Engine::Nginx => nginx(cfg),
        Engine::Envoy => envoy(cfg),
    }
}

fn mechanism_note(cfg: &FrontConfig, o: &mut String, comment: &str) {
    let note = match cfg.mechanism {
        Mechanism::Relay => return,
        Mechanism::Pin => "mechanism `pin`: the nearest is keeping a client on its last server",
        Mechanism::Forward => {
            "mechanism `forward` (back-end forwarding) has no equivalent; requests are \
             distributed one by one"
        }
    };
    let _ = writeln!(o, "{comment} {note}");
}

fn haproxy(cfg: &FrontConfig) -> String {
    let (hash, note) = mapping(cfg);
    let mut o = String::new();
    let _ = writeln!(o, "# triage front --emit haproxy: policy {}", cfg.policy);
    let _ = writeln!(o, "# {note}");
    mechanism_note(cfg, &mut o, "#");
    // No maxconn: HAProxy derives it from the file-descriptor limit.
    let _ = writeln!(o, "global\n    log stderr format short local0 notice\n");
    let _ = writeln!(o, "defaults\n    mode http");
    let _ = writeln!(o, "    timeout connect {}ms", ms(cfg.connect_timeout));
    let _ = writeln!(o, "    timeout client {}ms", ms(cfg.keepalive_timeout));
    let _ = writeln!(o, "    timeout server {}ms", ms(cfg.response_timeout));
    let _ = writeln!(
        o,
        "    timeout http-keep-alive {}ms",
        ms(cfg.keepalive_timeout)
    );
    let _ = writeln!(o, "    retries {}\n    option redispatch", cfg.retries);
    if let Some(f) = &cfg.access_log {
        let _ = writeln!(o, "    # access log requested: {}", f.display());
        let _ = writeln!(o, "    option httplog");
    }
    let _ = writeln!(o, "\nfrontend triage\n    bind {}", cfg.listen);
    let _ = writeln!(o, "    default_backend triage_backends\n");
    let _ = writeln!(o, "backend triage_backends");
    if hash {
        let factor = (cfg.dispatch.bound * 100.0).round() as u32;
        let _ = writeln!(o, "    balance uri\n    hash-type consistent");
        let _ = writeln!(o, "    hash-balance-factor {factor}");
    } else {
        let _ = writeln!(o, "    balance roundrobin");
    }
    if cfg.mechanism == Mechanism::Pin {
        let _ = writeln!(o, "    option prefer-last-server");
    }
    // triage front (and nginx's `keepalive` pool) sends any request over an idle pooled
    // connection; HAProxy's default, `safe`, opens one for the first request of every client
    // connection.
    let _ = writeln!(
        o,
        "    # any request may use an idle pooled connection, as in triage front's pool"
    );
    let _ = writeln!(o, "    http-reuse always");
    if let Some(p) = &cfg.health.path {
        let _ = writeln!(
            o,
            "    option httpchk GET {p}\n    http-check expect status 200"
        );
    }
    let h = &cfg.health;
    let _ = writeln!(
        o,
        "    default-server check inter {}ms rise {} fall {}",
        ms(h.interval),
        h.rise,
        h.fall
    );
    for (i, b) in cfg.backends.iter().enumerate() {
        let _ = writeln!(o, "    server b{i} {b} weight {}", weight(cfg, i));
    }
    o
}

fn nginx(cfg: &FrontConfig) -> String {
    let (hash, note) = mapping(cfg);
    let mut o = String::new();
    let _ = writeln!(o, "# triage front --emit nginx: policy {}", cfg.policy);
    let _ = writeln!(o, "# {note}");
    if hash {
        let _ = writeln!(
            o,
            "# nginx's consistent hash has no load bound (HAProxy's and Envoy's do)"
        );
    }
    let _ = writeln!(
        o,
        "# open-source nginx has no active health checks: a back end is skipped for \
         fail_timeout after max_fails failed requests"
    );
    mechanism_note(cfg, &mut o, "#");
    let _ = writeln!(o, "events {{}}\nhttp {{");
    let _ = writeln!(o, "    upstream triage_backends {{");
    if hash {
        let _ = writeln!(o, "        hash $request_uri consistent;");
    }
    for (i, b) in cfg.backends.iter().enumerate() {
        let _ = writeln!(
            o,
            "        server {b} weight={} max_fails={} fail_timeout={}s;",
            weight(cfg, i),
            cfg.health.fall,
            secs_up(cfg.health.interval)
        );
    }
    let _ = writeln!(o, "        keepalive {};\n    }}", cfg.pool_size.max(1));
    let _ = writeln!(o, "    server {{\n        listen {};", cfg.listen);
    let _ = writeln!(
        o,
        "        keepalive_timeout {}ms;",
        ms(cfg.keepalive_timeout)
    );
    if let Some(f) = &cfg.access_log {
        let _ = writeln!(o, "        access_log {} combined;", f.display());
    }
    let _ = writeln!(o, "        location / {{");
    let _ = writeln!(o, "            proxy_pass http://triage_backends;");
    let _ = writeln!(o, "            proxy_http_version 1.1;");
    let _ = writeln!(o, "            proxy_set_header Connection \"\";");
    let _ = writeln!(
        o,
        "            proxy_connect_timeout {}ms;",
        ms(cfg.connect_timeout)
    );
    let _ = writeln!(
        o,
        "            proxy_read_timeout {}ms;",
        ms(cfg.response_timeout)
    );
    let _ = writeln!(o, "            proxy_next_upstream error;");
    let _ = writeln!(
        o,
        "            proxy_next_upstream_tries {};",
        cfg.retries + 1
    );
    let _ = writeln!(o, "        }}\n    }}\n}}");
    o
}

fn envoy(cfg: &FrontConfig) -> String {
    let (hash, note) = mapping(cfg);
    let mut o = String::new();
    let _ = writeln!(o, "# triage front --emit envoy: policy {}", cfg.policy);
    let _ = writeln!(o, "# {note}");
    mechanism_note(cfg, &mut o, "#");
    let l = cfg.listen;
    let _ = writeln!(o, "static_resources:\n  listeners:\n  - name: triage");
    let _ = writeln!(
        o,
        "    address: {{socket_address: {{address: \"{}\", port_value: {}}}}}",
        l.ip(),
        l.port()
    );
    let _ = writeln!(o, "    filter_chains:\n    - filters:");
    let _ = writeln!(
        o,
        "      - name: envoy.filters.network.http_connection_manager\n        typed_config:"
    );
    let _ = writeln!(o, "          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
    let _ = writeln!(o, "          stat_prefix: triage");
    let _ = writeln!(
        o,
        "          common_http_protocol_options: {{idle_timeout: {}s}}",
        cfg.keepalive_timeout.as_secs().max(1)
    );
    let _ = writeln!(o, "          route_config:\n            virtual_hosts:");
    let _ = writeln!(o, "            - name: all\n              domains: [\"*\"]");
    let _ = writeln!(
        o,
        "              routes:\n              - match: {{prefix: \"/\"}}\n                route:"
    );
    let _ = writeln!(o, "                  cluster: triage_backends");
    let _ = writeln!(
        o,
        "                  timeout: {}s",
        cfg.response_timeout.as_secs().max(1)
    );
    if hash {
        let _ = writeln!(
            o,
            "                  hash_policy: [{{header: {{header_name: \":path\"}}}}]"
        );
    }
    let _ = writeln!(
        o,
        "                  retry_policy: {{retry_on: \"connect-failure,reset\", num_retries: {}}}",
        cfg.retries
    );
    let _ = writeln!(
        o,
        "          http_filters:\n          - name: envoy.filters.http.router"
    );
    let _ = writeln!(o, "            typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}");
    let _ = writeln!(o, "  clusters:\n  - name: triage_backends");
    let _ = writeln!(
        o,
        "    connect_timeout: {}s\n    type: STATIC",
        cfg.connect_timeout.as_secs_f64()
    );
    if hash {
        let factor = (cfg.dispatch.bound * 100.0).round() as u32;
        let _ = writeln!(o, "    lb_policy: RING_HASH");
        let _ = writeln!(
            o,
            "    common_lb_config: {{consistent_hashing_lb_config: {{hash_balance_factor: {factor}}}}}"
        );
    } else {
        let _ = writeln!(o, "    lb_policy: ROUND_ROBIN");
    }
    let h = &cfg.health;
    let check = match &h.path {
        Some(p) => format!("http_health_check: {{path: \"{p}\"}}"),
        None => "tcp_health_check: {}".into(),
    };
    let _ = writeln!(
        o,
        "    health_checks: [{{timeout: {}s, interval: {}s, unhealthy_threshold: {}, healthy_threshold: {}, {check}}}]",
        h.timeout.as_secs_f64(),
        h.interval.as_secs_f64(),
        h.fall,
        h.rise
    );
    let _ = writeln!(
        o,
        "    load_assignment:\n      cluster_name: triage_backends\n      endpoints:\n      - lb_endpoints:"
    );
    for (i, b) in cfg.backends.iter().enumerate() {
        let _ = writeln!(
            o,
            "        - endpoint: {{address: {{socket_address: {{address: \"{}\", port_value: {}}}}}}}\n          load_balancing_weight: {}",
            b.ip(),
            b.port(),
            weight(cfg, i)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(policy: &str) -> FrontConfig {
        FrontConfig {
            backends: vec![
                "127.0.0.1:8081".parse().unwrap(),
                "127.0.0.1:8082".parse().unwrap(),
            ],
            policy: policy.into(),
            ..FrontConfig::default()
        }
    }

    #[test]
    fn chbl_is_the_same_policy_everywhere_it_exists() {
        let c = cfg("chbl");
        let h = emit(&c, Engine::Haproxy);
        for line in [
            "balance uri",
            "hash-type consistent",
            "hash-balance-factor 125",
            "server b1 127.0.0.1:8082 weight 1",
            "bind 127.0.0.1:8000",
            "default-server check inter 1000ms rise 2 fall 3",
            "http-reuse always",
        ] {
            assert!(h.contains(line), "{line}\n{h}");
        }
        let n = emit(&c, Engine::Nginx);
        assert!(n.contains("hash $request_uri consistent;"), "{n}");
        assert!(n.contains("server 127.0.0.1:8081 weight=1"), "{n}");
        // nginx takes whole seconds there (a health interval of 500ms once gave
        // `fail_timeout=500ms`, which nginx refuses at start).
        assert!(n.contains("max_fails=3 fail_timeout=1s;"), "{n}");
        let mut half = c.clone();
        half.health.interval = std::time::Duration::from_millis(1500);
        assert!(emit(&half, Engine::Nginx).contains("fail_timeout=2s;"));
        assert!(n.contains("no load bound"), "{n}");
        let e = emit(&c, Engine::Envoy);
        assert!(e.contains("lb_policy: RING_HASH"), "{e}");
        assert!(e.contains("hash_balance_factor: 125"), "{e}");
        assert!(e.contains("port_value: 8082"), "{e}");
    }

    #[test]
    fn wrr_is_round_robin() {
        let c = cfg("wrr");
        assert!(emit(&c, Engine::Haproxy).contains("balance roundrobin"));
        assert!(!emit(&c, Engine::Nginx).contains("hash $request_uri"));
        assert!(emit(&c, Engine::Envoy).contains("lb_policy: ROUND_ROBIN"));
    }

    #[test]
    fn lard_says_it_has_no_equivalent_and_emits_the_nearest() {
        let mut c = cfg("ext-lard");
        c.mechanism = Mechanism::Forward;
        for engine in [Engine::Haproxy, Engine::Nginx, Engine::Envoy] {
            let t = emit(&c, engine);
            assert!(t.contains("has no equivalent"), "{t}");
            assert!(t.contains("back-end forwarding"), "{t}");
        }
        assert!(emit(&c, Engine::Haproxy).contains("balance uri"));
    }

    #[test]
    fn engines_parse() {
        assert_eq!("envoy".parse::<Engine>(), Ok(Engine::Envoy));
        assert!("traefik".parse::<Engine>().is_err());
    }
}

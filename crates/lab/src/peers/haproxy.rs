//! The proxies measured beside `triage front` in the cluster lab: HAProxy and nginx as load
//! balancers. Their configurations start from `triage front --emit haproxy|nginx` (the same
//! listen address, back ends, timeouts, retries and health checks as the front end's) and
//! change only what a lab needs: one thread or process, no logging to disk, the balance
//! algorithm measured, everything under the run's directory. Pure functions (tested).

use std::path::Path;

use super::site::q;

/// The `balance` algorithms of HAProxy the lab measures, and the policy whose emitted
/// configuration each starts from: `roundrobin` (triage's `wrr`), `leastconn` (the same text,
/// the algorithm changed) and `uri` (triage's `chbl`: `balance uri`, `hash-type consistent`,
/// `hash-balance-factor 125`).
pub fn haproxy_source_policy(balance: &str) -> Option<&'static str> {
    match balance {
        "roundrobin" | "leastconn" => Some("wrr"),
        "uri" => Some("chbl"),
        _ => None,
    }
}

/// HAProxy's configuration from `emitted` (`triage front --emit haproxy`): one thread (as the
/// front end gets), and `balance` (`roundrobin`, `leastconn`, `uri`). An error names what the
/// emitted text lacks.
pub fn haproxy_proxy_conf(emitted: &str, balance: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut saw_global = false;
    let mut saw_balance = false;
    for line in emitted.lines() {
        let t = line.trim();
        if t.starts_with("balance ") {
            saw_balance = true;
            let want = if balance == "leastconn" {
                "balance leastconn".to_string()
            } else {
                t.to_string()
            };
            if balance == "uri" && t != "balance uri" || balance != "uri" && t == "balance uri" {
                return Err(format!(
                    "the emitted configuration says `{t}`, the lab wants `{balance}`"
                ));
            }
            out += &format!("    {want}\n");
            continue;
        }
        out += line;
        out.push('\n');
        if t == "global" {
            saw_global = true;
            out += "    nbthread 1\n    maxconn 8000\n";
        }
    }
    if !saw_global || !saw_balance {
        return Err("the emitted configuration has no `global` section or no `balance`".into());
    }
    Ok(out)
}

/// nginx's configuration from `emitted` (`triage front --emit nginx`, of `chbl` for `hash`
/// and `random2` alike): one process serving alone (its CPU time is all of nginx's), room for
/// the lab's connections, no access log, pid, error log and temporary files under `prefix`;
/// `mode` `hash` keeps `hash $request_uri consistent`, `random2` replaces it by `random two
/// least_conn`.
pub fn nginx_proxy_conf(emitted: &str, prefix: &Path, mode: &str) -> Result<String, String> {
    let mut head = String::new();
    head += "daemon off;\nmaster_process off;\nworker_processes 1;\n";
    head += "worker_rlimit_nofile 20000;\n";
    head += &format!("pid {};\n", q(&prefix.join("nginx.pid")));
    head += &format!("error_log {} warn;\n", q(&prefix.join("error.log")));
    head += "events { worker_connections 8192; }\n";
    let mut http = String::from("http {\n    access_log off;\n");
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        http += &format!("    {t}_temp_path {};\n", q(&prefix.join("tmp").join(t)));
    }
    let mut out = String::new();
    let (mut saw_events, mut saw_http, mut saw_hash) = (false, false, false);
    for line in emitted.lines() {
        let t = line.trim();
        if t == "events {}" {
            saw_events = true;
            out += &head;
        } else if t == "http {" {
            saw_http = true;
            out += &http;
        } else if t == "hash $request_uri consistent;" {
            saw_hash = true;
            out += match mode {
                "random2" => "        random two least_conn;\n",
                _ => "        hash $request_uri consistent;\n",
            };
        } else {
            out += line;
            out.push('\n');
        }
    }
    if !(saw_events && saw_http && saw_hash) {
        return Err(
            "the emitted nginx configuration lacks `events {}`, `http {` or the URI hash".into(),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAPROXY: &str = "# triage front --emit haproxy: policy wrr
global
    log stderr format short local0 notice

defaults
    mode http
frontend triage
    bind 127.0.0.1:8000
    default_backend triage_backends

backend triage_backends
    balance roundrobin
    default-server check inter 1000ms rise 2 fall 3
    server b0 127.0.0.1:8081 weight 1
";

    const NGINX: &str = "# triage front --emit nginx: policy chbl
events {}
http {
    upstream triage_backends {
        hash $request_uri consistent;
        server 127.0.0.1:8081 weight=1 max_fails=3 fail_timeout=1000ms;
        keepalive 1024;
    }
    server {
        listen 127.0.0.1:8000;
    }
}
";

    #[test]
    fn haproxy_gets_one_thread_and_the_algorithm() {
        let c = haproxy_proxy_conf(HAPROXY, "leastconn").unwrap();
        assert!(c.contains("global\n    nbthread 1\n"), "{c}");
        assert!(c.contains("    balance leastconn\n") && !c.contains("roundrobin\n    default"));
        assert!(c.contains("server b0 127.0.0.1:8081"));
        let c = haproxy_proxy_conf(HAPROXY, "roundrobin").unwrap();
        assert!(c.contains("    balance roundrobin\n"));
        assert!(haproxy_proxy_conf(HAPROXY, "uri").is_err());
        let uri = HAPROXY.replace("balance roundrobin", "balance uri");
        assert!(haproxy_proxy_conf(&uri, "uri").is_ok());
        assert!(haproxy_proxy_conf("backend x\n", "uri").is_err());
        assert_eq!(haproxy_source_policy("uri"), Some("chbl"));
        assert_eq!(haproxy_source_policy("leastconn"), Some("wrr"));
        assert_eq!(haproxy_source_policy("first"), None);
    }

    #[test]
    fn nginx_runs_alone_and_random_two_replaces_the_hash() {
        let c = nginx_proxy_conf(NGINX, Path::new("/p"), "hash").unwrap();
        assert!(c.contains("master_process off;") && c.contains("daemon off;"));
        assert!(c.contains("access_log off;") && c.contains("pid \"/p/nginx.pid\";"));
        assert!(c.contains("hash $request_uri consistent;"));
        assert!(!c.contains("events {}"));
        let c = nginx_proxy_conf(NGINX, Path::new("/p"), "random2").unwrap();
        assert!(c.contains("random two least_conn;") && !c.contains("hash $request_uri"));
        assert!(nginx_proxy_conf("http {\n}\n", Path::new("/p"), "hash").is_err());
    }
}

//! Health checks and discovery on pingora's load-balancing crate: a `LoadBalancer` whose
//! discovery is the front end's table of configured back ends and whose check (a TCP
//! connection, or `GET path` expecting 200, pingora's own checks) reports every result to
//! that table ([`Backends::checked`]), which applies `rise` and `fall`. The balancer's own
//! selection is never used: the dispatcher decides.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_http::RequestHeader;
use pingora_load_balancing::discovery::ServiceDiscovery;
use pingora_load_balancing::health_check::{HealthCheck, HttpHealthCheck, TcpHealthCheck};
use pingora_load_balancing::selection::RoundRobin;
use pingora_load_balancing::{Backend as LbBackend, Backends as LbBackends, LoadBalancer};

use crate::backends::Backends;
use crate::config::HealthConfig;

/// Discovery: the back ends in the configuration now.
struct Configured(Arc<Backends>);

#[async_trait]
impl ServiceDiscovery for Configured {
    async fn discover(&self) -> pingora_error::Result<(BTreeSet<LbBackend>, HashMap<u64, bool>)> {
        let set = self
            .0
            .configured()
            .into_iter()
            .filter_map(|a| LbBackend::new(&a.to_string()).ok())
            .collect();
        Ok((set, HashMap::new()))
    }
}

/// A pingora check whose every result goes to the table.
struct Reporting {
    inner: Box<dyn HealthCheck + Send + Sync>,
    table: Arc<Backends>,
}

#[async_trait]
impl HealthCheck for Reporting {
    async fn check(&self, target: &LbBackend) -> pingora_error::Result<()> {
        let r = self.inner.check(target).await;
        if let Some(b) = target.addr.as_inet().and_then(|a| self.table.by_addr(*a)) {
            self.table.checked(&b, r.is_ok());
        }
        r
    }

    fn health_threshold(&self, _success: bool) -> usize {
        // The table applies rise and fall.
        1
    }
}

fn check_for(cfg: &HealthConfig) -> Box<dyn HealthCheck + Send + Sync> {
    match &cfg.path {
        None => {
            let mut c = TcpHealthCheck::default();
            c.peer_template.options.connection_timeout = Some(cfg.timeout);
            Box::new(c)
        }
        Some(path) => {
            let mut c = HttpHealthCheck::new("localhost", false);
            c.peer_template.options.connection_timeout = Some(cfg.timeout);
            c.peer_template.options.read_timeout = Some(cfg.timeout);
            if let Ok(mut req) = RequestHeader::build("GET", path.as_bytes(), None) {
                let _ = req.append_header("Host", "localhost");
                c.req = req;
            }
            Box::new(c)
        }
    }
}

/// The balancer that runs discovery and checks for `table` every `cfg.interval`.
pub fn balancer(table: Arc<Backends>, cfg: &HealthConfig) -> LoadBalancer<RoundRobin> {
    let mut lb = LoadBalancer::<RoundRobin>::from_backends(LbBackends::new(Box::new(Configured(
        table.clone(),
    ))));
    lb.set_health_check(Box::new(Reporting {
        inner: check_for(cfg),
        table,
    }));
    lb.health_check_frequency = Some(cfg.interval);
    lb.update_frequency = Some(cfg.interval);
    lb.parallel_health_check = true;
    lb
}

/// Run `lb`'s discovery and checks until `shutdown` turns true.
pub async fn run(lb: Arc<LoadBalancer<RoundRobin>>, shutdown: ShutdownWatch) {
    lb.run(shutdown, None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn checks_take_a_dead_back_end_out_and_bring_it_back() {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (a, d) = (live.local_addr().unwrap(), dead.local_addr().unwrap());
        drop(dead);
        let table = Arc::new(Backends::new(&[a, d], 1, 1));
        let cfg = HealthConfig {
            interval: Duration::from_millis(20),
            timeout: Duration::from_millis(200),
            rise: 1,
            fall: 1,
            path: None,
        };
        let lb = Arc::new(balancer(table.clone(), &cfg));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run(lb, rx));
        let wait = |want: bool| {
            let b = table.get(1).unwrap();
            async move {
                for _ in 0..250 {
                    if b.is_up() == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                panic!("back end never became up = {want}");
            }
        };
        wait(false).await;
        assert!(table.get(0).unwrap().is_up());
        let back = std::net::TcpListener::bind(d).unwrap();
        wait(true).await;
        drop(back);
        tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        drop(live);
    }
}

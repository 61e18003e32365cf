//! The emulated network of a testbed: two network namespaces joined by a veth pair, each end
//! shaped by a `tbf` qdisc ([`NetnsPair`]); the counters of the server end's qdisc
//! ([`LinkCounters`]); and the removal of the namespaces a crashed earlier lab left behind.
//!
//! Namespaces, links and qdiscs are made with `ip` and `tc` (external commands: the honest
//! mechanism, as an administrator would); entering a namespace and setting its TCP congestion
//! control go through `os` (`os::netns`, `os::sysctl`).

use std::net::Ipv4Addr;

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::process::run_cmd;

/// Server address inside the server namespace.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Client address inside the client namespace.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Every namespace a lab creates is named `triage-lab-<pid>-<n>-{s,c}`.
pub const NETNS_PREFIX: &str = "triage-lab-";

/// The two namespaces and their veth; deleted on drop.
pub struct NetnsPair {
    /// Name of the server namespace.
    pub server: String,
    /// Name of the client namespace.
    pub client: String,
    /// The server end of the veth (its tbf shapes the link towards the browsers).
    pub server_dev: String,
    /// The server namespace, open.
    pub server_ns: os::netns::NetNs,
    /// The client namespace, open.
    pub client_ns: os::netns::NetNs,
}

impl NetnsPair {
    /// Create the pair for lab process `pid` (its `n`-th testbed): a veth at `rate_mbit` each
    /// way, and `tcp_cc` as the server namespace's TCP congestion control if given.
    pub fn create(pid: u32, n: u32, rate_mbit: f64, tcp_cc: Option<&str>) -> Result<NetnsPair> {
        let server = format!("{NETNS_PREFIX}{pid}-{n}-s");
        let client = format!("{NETNS_PREFIX}{pid}-{n}-c");
        let vs = format!("tl{pid}x{n}s");
        let vc = format!("tl{pid}x{n}c");
        run_cmd("ip", &["netns", "add", &server])?;
        // From here on, a failure drops the guard, which deletes what exists.
        let mut guard = PartialNetns {
            names: vec![server.clone()],
        };
        run_cmd("ip", &["netns", "add", &client])?;
        guard.names.push(client.clone());
        run_cmd(
            "ip",
            &[
                "link", "add", &vs, "netns", &server, "type", "veth", "peer", "name", &vc, "netns",
                &client,
            ],
        )?;
        let rate = format!("{}kbit", (rate_mbit * 1000.0).round() as u64);
        // tbf needs a bucket of at least rate/HZ; 16 KB or 10 ms of traffic, whichever is more.
        let burst = format!(
            "{}",
            ((rate_mbit * 1e6 / 8.0 / 100.0) as u64).max(16 * 1024)
        );
        for (ns, dev, ip) in [(&server, &vs, SERVER_IP), (&client, &vc, CLIENT_IP)] {
            run_cmd(
                "ip",
                &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev],
            )?;
            run_cmd("ip", &["-n", ns, "link", "set", dev, "up"])?;
            run_cmd("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            run_cmd(
                "tc",
                &[
                    "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst",
                    &burst, "latency", "50ms",
                ],
            )?;
        }
        let open =
            |name: &str| os::netns::NetNs::open(name).map_err(|e| LabError::Os(e.to_string()));
        let server_ns = open(&server)?;
        let client_ns = open(&client)?;
        if let Some(cc) = tcp_cc {
            // Per network namespace since Linux 4.15; an unknown name is an error here.
            os::sysctl::write_in(&server_ns, "net.ipv4.tcp_congestion_control", cc)
                .map_err(|e| LabError::Os(format!("in {server}: {e}")))?;
        }
        guard.names.clear();
        Ok(NetnsPair {
            server,
            client,
            server_dev: vs,
            server_ns,
            client_ns,
        })
    }

    /// The counters of the server side's tbf (`None` if `tc` fails).
    pub fn link_counters(&self) -> Option<LinkCounters> {
        let out = run_cmd(
            "tc",
            &[
                "-n",
                &self.server,
                "-s",
                "qdisc",
                "show",
                "dev",
                &self.server_dev,
            ],
        )
        .ok()?;
        LinkCounters::parse(&out)
    }
}

struct PartialNetns {
    names: Vec<String>,
}

impl Drop for PartialNetns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = run_cmd("ip", &["netns", "del", n]);
        }
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for n in [&self.server, &self.client] {
            if let Err(e) = run_cmd("ip", &["netns", "del", n]) {
                tracing::warn!("removing network namespace {n}: {e}");
            }
        }
    }
}

/// Network namespaces named by this module whose owner pid is gone (a crashed run).
pub fn stale_netns() -> Vec<String> {
    let Ok(out) = run_cmd("ip", &["netns", "list"]) else {
        return Vec::new();
    };
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(NETNS_PREFIX))
        .filter(|n| {
            let pid = n[NETNS_PREFIX.len()..].split('-').next().unwrap_or("");
            pid.parse::<i32>()
                .map(|p| !os::procfs::exists(p))
                .unwrap_or(false)
        })
        .map(str::to_owned)
        .collect()
}

/// Counters of the tbf qdisc on the server's end of the link (the direction the responses
/// take), as `tc -s qdisc` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped because the queue was full (tbf's `latency` worth of bytes).
    pub dropped: u64,
    /// Times a packet had to wait for tokens: the link was busy.
    pub overlimits: u64,
}

impl LinkCounters {
    /// From `tc -s qdisc show dev X`: the first `Sent N bytes M pkt (dropped D, overlimits O
    /// ...)` line.
    pub fn parse(tc: &str) -> Option<LinkCounters> {
        let line = tc.lines().find(|l| l.trim_start().starts_with("Sent "))?;
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
            .filter(|w| !w.is_empty())
            .collect();
        let after = |key: &str| -> Option<u64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i + 1)?.parse().ok()
        };
        let before = |key: &str| -> Option<u64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i.checked_sub(1)?)?.parse().ok()
        };
        Some(LinkCounters {
            sent_bytes: after("Sent")?,
            packets: before("pkt")?,
            dropped: after("dropped")?,
            overlimits: after("overlimits")?,
        })
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &LinkCounters) -> LinkCounters {
        LinkCounters {
            sent_bytes: self.sent_bytes.saturating_sub(earlier.sent_bytes),
            packets: self.packets.saturating_sub(earlier.packets),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            overlimits: self.overlimits.saturating_sub(earlier.overlimits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_counters_are_parsed_from_tc() {
        let tc = "qdisc tbf 1: root refcnt 3 rate 10Mbit burst 16Kb lat 50ms \n \
                  Sent 1957240 bytes 1402 pkt (dropped 7, overlimits 311 requeues 0) \n \
                  backlog 0b 0p requeues 0\n";
        let c = LinkCounters::parse(tc).unwrap();
        assert_eq!(
            c,
            LinkCounters {
                sent_bytes: 1_957_240,
                packets: 1402,
                dropped: 7,
                overlimits: 311
            }
        );
        let later = LinkCounters {
            sent_bytes: 2_000_000,
            packets: 1500,
            dropped: 7,
            overlimits: 400,
        };
        assert_eq!(later.since(&c).packets, 98);
        assert_eq!(later.since(&c).dropped, 0);
        assert_eq!(LinkCounters::parse("qdisc noqueue 0: root"), None);
    }
}

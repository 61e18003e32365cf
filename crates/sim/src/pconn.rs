//! Persistent connections (P-HTTP) and the front end's CPU for the cluster model
//! (`cluster`): how a trace's requests are grouped into client connections, which
//! mechanism distributes a connection's requests over the back ends (seed 004, Aron, Druschel,
//! Zwaenepoel, USENIX 1999), and what each mechanism costs the front end and the back ends.
//!
//! Leaf module: nothing here runs a simulation.

use policy::Nanos;
use rand::Rng;
use serde::Serialize;

use crate::SimError;

/// How the requests of a client connection reach the back ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// HTTP/1.0: one request per connection, each handed off to the node the policy picks
    /// (the LARD paper's model; the connection grouping is ignored).
    Close,
    /// Persistent connection handed off once (single TCP handoff, what a layer-4 front end or
    /// per-connection pinning gives): every request is served by the node its first request
    /// was assigned to. Seed 004's "LARD without a mechanism for HTTP/1.1".
    Pin,
    /// Back-end forwarding (seed 004's implemented mechanism): handed off once; each further
    /// request is [`policy::dispatch::Dispatch::route`]d: served at the connection's node, or
    /// fetched by that node from a node that caches the target and relayed to the client (the
    /// forwarding cost, `cluster::Costs::forward_per_512`).
    Forward,
    /// Multiple TCP handoff (seed 004's other mechanism; needs a kernel module, not in stock
    /// Linux): each request is assigned on its own and the connection migrates to its node,
    /// paying a handoff on the front end and a connection setup on the new node.
    Handoff,
    /// A relaying front end (an HTTP proxy: pingora, HAProxy, nginx): each request is assigned
    /// on its own and sent over a pooled front-to-back connection; every response byte crosses
    /// the front end ([`FrontCosts::relay_per_512`]).
    Relay,
}

impl Mechanism {
    /// Every mechanism, in table order.
    pub const ALL: [Mechanism; 5] = [
        Mechanism::Close,
        Mechanism::Pin,
        Mechanism::Forward,
        Mechanism::Handoff,
        Mechanism::Relay,
    ];

    /// Name in flags and tables.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Close => "close",
            Mechanism::Pin => "pin",
            Mechanism::Forward => "forward",
            Mechanism::Handoff => "handoff",
            Mechanism::Relay => "relay",
        }
    }

    /// Parse a name of [`Mechanism::name`].
    pub fn parse(s: &str) -> Result<Self, SimError> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                crate::param(
                    "mechanism",
                    format!("unknown mechanism `{s}` (known: close, pin, forward, handoff, relay)"),
                )
            })
    }

    /// Whether the policy is asked for every request (`true`) or for a connection's first one.
    pub fn per_request(self) -> bool {
        matches!(
            self,
            Mechanism::Close | Mechanism::Handoff | Mechanism::Relay
        )
    }
}

/// CPU the front end spends, on one FIFO CPU (the model's only shared resource besides the
/// back ends). All zero: the front end is not modelled (infinitely fast, as in the LARD
/// paper's simulations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FrontCosts {
    /// Per client connection accepted: TCP handshake, reading and parsing its first request,
    /// the policy decision and the handoff to a back end (or, relaying, the connection to keep).
    pub conn: Nanos,
    /// Per further request on a persistent connection: reading and parsing it, the decision,
    /// and (forwarding) tagging it for the connection's node. Also per migration (`handoff`:
    /// a further handoff costs `conn`).
    pub request: Nanos,
    /// Relaying front end only: per 512 bytes of response received from a back end and sent
    /// to the client.
    pub relay_per_512: Nanos,
}

impl FrontCosts {
    /// The front end of seed 004's prototype (a 300 MHz Pentium II like its back ends, TCP
    /// single handoff in a kernel module, tagging requests for back-end forwarding),
    /// **derived** from seed 004's figures: one Apache back end served 151 req/s on its trace
    /// (disk-bound, so WRR on six nodes is about 6 x 151 = 906 req/s), extended LARD with
    /// forwarding gave four times WRR (about 3,600 req/s on six nodes) with the front end's
    /// CPU about 60 % busy: 0.6 / 3,600 = about 167 µs of front-end CPU per request. Spread
    /// over a connection of 6 requests (our default) in a 3:1 ratio between the connection's
    /// handoff and each further request's tag (an **estimate**: a handoff is a connection setup
    /// plus a message to the back end, a tag is a parsed packet): 375 + 5 x 125 = 1,000 µs per
    /// 6 requests. Relaying costs the LARD paper's 40 µs per 512 B twice (receive from the back
    /// end, send to the client): an **estimate**.
    pub fn seed004() -> Self {
        Self {
            conn: 375_000,
            request: 125_000,
            relay_per_512: 80_000,
        }
    }

    /// No front-end cost: the front end is not modelled.
    pub fn none() -> Self {
        Self {
            conn: 0,
            request: 0,
            relay_per_512: 0,
        }
    }

    /// Whether any cost is set (the front end is then a queue in the model).
    pub fn modelled(&self) -> bool {
        self.conn > 0 || self.request > 0 || self.relay_per_512 > 0
    }
}

/// Group `requests` requests into connections of geometrically distributed lengths with mean
/// `mean` (at least 1; `mean == 1` gives one request per connection), seeded. The lengths sum
/// to `requests`; connection `c` holds the consecutive requests after those of `0..c`.
///
/// Consecutive requests of a Zipf trace are independent targets, as the embedded objects of
/// a page on one connection are different files (the reason a persistent connection's
/// requests belong on different nodes).
pub fn connection_lengths(requests: usize, mean: f64, seed: u64) -> Result<Vec<u32>, SimError> {
    if !(mean.is_finite() && (1.0..=1000.0).contains(&mean)) {
        return Err(crate::param(
            "per-conn",
            format!("mean requests per connection must be in 1..=1000 (got {mean})"),
        ));
    }
    let mut out = Vec::new();
    if mean <= 1.0 {
        out.resize(requests, 1);
        return Ok(out);
    }
    // Geometric on {1, 2, ...} with mean `mean`: success probability 1/mean.
    let p = 1.0 / mean;
    let mut rng = crate::rng(seed, 0xc0_0001);
    let mut left = requests;
    while left > 0 {
        let mut len = 1usize;
        while len < left && !rng.gen_bool(p) {
            len += 1;
        }
        out.push(len as u32);
        left -= len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_sum_to_the_trace_and_have_the_mean() {
        let l = connection_lengths(100_000, 6.0, 1).unwrap();
        assert_eq!(l.iter().map(|&x| x as usize).sum::<usize>(), 100_000);
        let mean = 100_000.0 / l.len() as f64;
        assert!((5.7..6.3).contains(&mean), "{mean}");
        assert!(l.iter().all(|&x| x >= 1));
        assert_eq!(l, connection_lengths(100_000, 6.0, 1).unwrap());
        assert_ne!(l, connection_lengths(100_000, 6.0, 2).unwrap());
        assert_eq!(connection_lengths(5, 1.0, 1).unwrap(), vec![1; 5]);
        assert!(connection_lengths(5, 0.5, 1).is_err());
    }

    #[test]
    fn mechanism_names_round_trip() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse(m.name()).unwrap(), m);
        }
        assert!(Mechanism::parse("splice").is_err());
        assert!(Mechanism::Relay.per_request() && !Mechanism::Forward.per_request());
    }
}

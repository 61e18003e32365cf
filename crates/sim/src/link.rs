//! A shared link of given bandwidth (the 10 Mb/s Ethernet of seed 001), packet by packet.
//!
//! Senders *offer* bytes on a flow (a TCP connection: what sits in its socket send buffer);
//! the link sends one packet at a time, of at most [`Link::mss`] payload bytes plus
//! [`Link::overhead`] bytes of headers and framing, each taking `wire bytes * 8 / bps`. Which
//! flow sends next:
//! - [`LinkMode::Fair`]: round robin over the flows that have bytes queued, one packet each
//!   (many TCP connections sharing a LAN get roughly equal shares);
//! - [`LinkMode::Fifo`]: in the order the bytes were offered.
//!
//! Not modelled: TCP windows, slow start, ACK traffic, collisions; propagation delay is 0.

use std::collections::VecDeque;

use policy::Nanos;
use serde::Serialize;

use crate::DetMap;

/// A flow (connection) on the link.
pub type FlowId = u64;

/// How the link shares its bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LinkMode {
    /// Round robin, one packet per backlogged connection in turn (as a NIC queue fed by
    /// several sockets).
    Fair,
    /// First come, first served by packet.
    Fifo,
}

impl std::str::FromStr for LinkMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fair" => Ok(Self::Fair),
            "fifo" => Ok(Self::Fifo),
            _ => Err(format!("unknown link mode `{s}` (known: fair, fifo)")),
        }
    }
}

/// The link. See the module docs.
#[derive(Debug, Clone)]
pub struct Link {
    bps: u64,
    mode: LinkMode,
    mss: u32,
    overhead: u32,
    queued: DetMap<FlowId, u64>,
    rr: VecDeque<FlowId>,
    fifo: VecDeque<(FlowId, u64)>,
    current: Option<(FlowId, u32)>,
    payload_sent: u64,
    wire_sent: u64,
    busy_ns: u64,
}

/// Ethernet: 1460 bytes of TCP payload per 1500-byte IP packet.
pub const ETHER_MSS: u32 = 1460;
/// TCP/IP headers (40) + Ethernet header and CRC (18) + preamble and inter-frame gap (20).
pub const ETHER_OVERHEAD: u32 = 78;

impl Link {
    /// A link of `bps` bits per second (at least 1).
    pub fn new(bps: u64, mode: LinkMode) -> Self {
        Self::with_framing(bps, mode, ETHER_MSS, ETHER_OVERHEAD)
    }

    /// A link with this MSS and per-packet overhead (bytes on the wire besides the payload).
    pub fn with_framing(bps: u64, mode: LinkMode, mss: u32, overhead: u32) -> Self {
        Self {
            bps: bps.max(1),
            mode,
            mss: mss.max(1),
            overhead,
            queued: DetMap::default(),
            rr: VecDeque::new(),
            fifo: VecDeque::new(),
            current: None,
            payload_sent: 0,
            wire_sent: 0,
            busy_ns: 0,
        }
    }

    /// Largest payload per packet.
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// Wire bytes per packet besides the payload.
    pub fn overhead(&self) -> u32 {
        self.overhead
    }

    /// Bandwidth, bits per second.
    pub fn bps(&self) -> u64 {
        self.bps
    }

    /// Bytes of `flow` not yet sent (the packet on the wire counts as sent).
    pub fn queued(&self, flow: FlowId) -> u64 {
        self.queued.get(&flow).copied().unwrap_or(0)
    }

    /// Payload bytes sent so far.
    pub fn payload_sent(&self) -> u64 {
        self.payload_sent
    }

    /// Bytes sent on the wire so far (payload + overhead).
    pub fn wire_sent(&self) -> u64 {
        self.wire_sent
    }

    /// Time spent sending so far.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    /// Time to send a packet of `payload` bytes.
    pub fn packet_time(&self, payload: u32) -> Nanos {
        let bits = u128::from(payload + self.overhead) * 8 * 1_000_000_000;
        bits.div_ceil(u128::from(self.bps)) as Nanos
    }

    /// Offer `bytes` more on `flow`. If the link was idle it starts a packet: returns when that
    /// packet will be done (schedule [`Link::complete`] then).
    pub fn offer(&mut self, flow: FlowId, bytes: u64, now: Nanos) -> Option<Nanos> {
        if bytes == 0 {
            return None;
        }
        let q = self.queued.entry(flow).or_insert(0);
        let was_empty = *q == 0;
        *q += bytes;
        match self.mode {
            LinkMode::Fair => {
                if was_empty {
                    self.rr.push_back(flow);
                }
            }
            LinkMode::Fifo => self.fifo.push_back((flow, bytes)),
        }
        if self.current.is_none() {
            self.start(now)
        } else {
            None
        }
    }

    fn start(&mut self, now: Nanos) -> Option<Nanos> {
        let (flow, payload) = match self.mode {
            LinkMode::Fair => {
                let flow = self.rr.pop_front()?;
                let q = self.queued.get(&flow).copied().unwrap_or(0);
                let p = q.min(u64::from(self.mss)) as u32;
                if q > u64::from(p) {
                    self.rr.push_back(flow);
                }
                (flow, p)
            }
            LinkMode::Fifo => {
                let (flow, seg) = self.fifo.front_mut()?;
                let flow = *flow;
                let p = (*seg).min(u64::from(self.mss)) as u32;
                *seg -= u64::from(p);
                if *seg == 0 {
                    self.fifo.pop_front();
                }
                (flow, p)
            }
        };
        if let Some(q) = self.queued.get_mut(&flow) {
            *q -= u64::from(payload);
            if *q == 0 {
                self.queued.remove(&flow);
            }
        }
        self.current = Some((flow, payload));
        let dt = self.packet_time(payload);
        self.busy_ns += dt;
        Some(now + dt)
    }

    /// The packet on the wire is done: returns its (flow, payload) and, if another packet
    /// started, when it will be done.
    pub fn complete(&mut self, now: Nanos) -> Option<((FlowId, u32), Option<Nanos>)> {
        let (flow, payload) = self.current.take()?;
        self.payload_sent += u64::from(payload);
        self.wire_sent += u64::from(payload + self.overhead);
        Some(((flow, payload), self.start(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::SEC;

    /// Drive the link until idle; returns per-flow delivery times of each packet.
    fn drain(link: &mut Link, first: Option<Nanos>) -> (Nanos, Vec<(FlowId, u32, Nanos)>) {
        let mut next = first;
        let mut out = Vec::new();
        let mut now = 0;
        while let Some(t) = next {
            now = t;
            let ((f, p), n) = link.complete(now).unwrap();
            out.push((f, p, now));
            next = n;
        }
        (now, out)
    }

    #[test]
    fn conserves_bandwidth() {
        for mode in [LinkMode::Fair, LinkMode::Fifo] {
            let mut l = Link::new(10_000_000, mode);
            let mut first = None;
            for f in 0..5u64 {
                first = first.or(l.offer(f, 100_000 + f * 777, 0));
            }
            let (end, pkts) = drain(&mut l, first);
            let payload: u64 = pkts.iter().map(|p| u64::from(p.1)).sum();
            assert_eq!(payload, (0..5).map(|f| 100_000 + f * 777).sum::<u64>());
            assert_eq!(l.payload_sent(), payload);
            // Always busy from 0 to `end`: wire bits / bandwidth = elapsed (1 ns rounding per
            // packet at most).
            let ideal = l.wire_sent() * 8 * SEC / 10_000_000;
            assert!(
                end >= ideal && end - ideal <= pkts.len() as u64,
                "{end} vs {ideal}"
            );
            assert_eq!(l.busy_ns(), end);
            // Payload rate below the raw rate by the framing overhead only.
            let goodput = payload as f64 * 8.0 / (end as f64 / 1e9);
            assert!((goodput / 10e6 - 1460.0 / 1538.0).abs() < 0.01, "{goodput}");
        }
    }

    #[test]
    fn fair_mode_alternates_backlogged_flows() {
        let mut l = Link::new(10_000_000, LinkMode::Fair);
        let first = l.offer(1, 14_600, 0);
        assert!(l.offer(2, 14_600, 0).is_none());
        let (_, pkts) = drain(&mut l, first);
        let flows: Vec<FlowId> = pkts.iter().map(|p| p.0).collect();
        // Flow 1's first packet was on the wire before flow 2 arrived; then strict rotation.
        assert_eq!(&flows[..7], &[1, 1, 2, 1, 2, 1, 2]);
        assert_eq!(flows.iter().filter(|&&f| f == 2).count(), 10);
    }

    #[test]
    fn fifo_mode_keeps_offer_order() {
        let mut l = Link::new(10_000_000, LinkMode::Fifo);
        let first = l.offer(1, 4_000, 0);
        l.offer(2, 3_000, 0);
        l.offer(1, 100, 0);
        let (_, pkts) = drain(&mut l, first);
        let got: Vec<(FlowId, u32)> = pkts.iter().map(|p| (p.0, p.1)).collect();
        assert_eq!(
            got,
            vec![
                (1, 1460),
                (1, 1460),
                (1, 1080),
                (2, 1460),
                (2, 1460),
                (2, 80),
                (1, 100)
            ]
        );
    }

    #[test]
    fn packet_time_at_10_mbps() {
        let l = Link::new(10_000_000, LinkMode::Fair);
        // A full frame: 1538 wire bytes = 12304 bits = 1.2304 ms.
        assert_eq!(l.packet_time(1460), 1_230_400);
    }
}

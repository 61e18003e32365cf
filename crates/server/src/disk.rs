//! An emulated disk: a body-cache miss waits as long as the LARD papers' disk would take to
//! read the file, one read at a time, so that a cluster whose working set is many times one
//! back end's cache can be emulated on one machine without real disks (or a page cache to
//! defeat).
//!
//! The cost model is the simulator's ([`sim::disk::DiskModel`], Pai et al., ASPLOS 1998,
//! §4.1): 28 ms for a file's first block (two positionings: metadata and data), 410 µs per
//! 4 KB transferred, and 14 ms more for every further 44 KB cluster; every time is multiplied
//! by `scale` (0.1 makes the disk ten times faster, to fit more back ends on one machine).
//! Reads are served first come, first served: each reserves the disk from the moment the read
//! before it ends (or now, if the disk is idle) for its service time, then the request sleeps
//! until its read is done. The reservations, not the timer wakeups, set the disk's throughput,
//! so tokio's 1 ms timer granularity delays a response by under a millisecond but never
//! lowers the disk's rate.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use sim::disk::DiskModel;
use tokio::time::Instant;

/// `[disk]`: whether a body-cache miss waits for an emulated disk, and its parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiskConfig {
    /// `off` (default) or `lard` (the LARD papers' model, below).
    pub model: DiskKind,
    /// Multiplies every time of the model (`0.1`: ten times faster).
    pub scale: f64,
    /// Latency of a file's first block (seeks and rotation).
    #[serde(with = "units::serde::duration")]
    pub first: Duration,
    /// Transfer time per `block` bytes.
    #[serde(with = "units::serde::duration")]
    pub per_block: Duration,
    /// Transfer unit.
    #[serde(with = "units::serde::size")]
    pub block: u64,
    /// Contiguous cluster: each further one costs `reposition`.
    #[serde(with = "units::serde::size")]
    pub cluster: u64,
    /// Latency of each further cluster.
    #[serde(with = "units::serde::duration")]
    pub reposition: Duration,
}

/// Which disk a miss waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    /// No emulated disk: a miss costs what reading the file costs.
    #[default]
    Off,
    /// The LARD papers' disk.
    Lard,
}

impl std::str::FromStr for DiskKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(DiskKind::Off),
            "lard" => Ok(DiskKind::Lard),
            _ => Err(format!("unknown disk `{s}` (known: off, lard)")),
        }
    }
}

impl Default for DiskConfig {
    fn default() -> Self {
        let m = DiskModel::default();
        Self {
            model: DiskKind::Off,
            scale: 1.0,
            first: Duration::from_nanos(m.first),
            per_block: Duration::from_nanos(m.per_block),
            block: m.block,
            cluster: m.cluster,
            reposition: Duration::from_nanos(m.reposition),
        }
    }
}

impl DiskConfig {
    /// What is wrong with the values, if anything (`(key, message)`).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err((
                "disk.scale",
                format!("{} is not a positive number", self.scale),
            ));
        }
        if self.block == 0 || self.cluster == 0 {
            return Err(("disk.block", "block and cluster must not be 0".into()));
        }
        Ok(())
    }

    /// The simulator's model with these parameters (unscaled).
    pub fn model(&self) -> DiskModel {
        let ns = |d: Duration| d.as_nanos() as u64;
        DiskModel {
            first: ns(self.first),
            per_block: ns(self.per_block),
            block: self.block,
            cluster: self.cluster,
            reposition: ns(self.reposition),
        }
    }

    /// The disk, if one is configured.
    pub fn build(&self) -> Option<EmulatedDisk> {
        (self.model == DiskKind::Lard).then(|| EmulatedDisk::new(self.model(), self.scale))
    }
}

/// One disk of a back end. See the module docs.
#[derive(Debug)]
pub struct EmulatedDisk {
    model: DiskModel,
    scale: f64,
    /// When the last reserved read ends.
    free_at: Mutex<Option<Instant>>,
    /// Reads waiting or in service.
    queued: AtomicU32,
    reads: AtomicU64,
    busy_ns: AtomicU64,
}

/// Counters of a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskStats {
    /// Reads done or under way.
    pub reads: u64,
    /// Service time of those reads, ns.
    pub busy_ns: u64,
    /// Reads waiting or in service now.
    pub queued: u32,
}

/// Keeps a read counted in the queue until it ends (or its request is dropped).
struct Queued<'a>(&'a AtomicU32);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl EmulatedDisk {
    /// A disk following `model` with every time multiplied by `scale`.
    pub fn new(model: DiskModel, scale: f64) -> Self {
        Self {
            model,
            scale,
            free_at: Mutex::new(None),
            queued: AtomicU32::new(0),
            reads: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
        }
    }

    /// Service time of reading a whole file of `size` bytes.
    pub fn read_time(&self, size: u64) -> Duration {
        Duration::from_nanos((self.model.file_time(size) as f64 * self.scale).round() as u64)
    }

    /// Reserve the disk for a read of `size` bytes after the reads already reserved: when it
    /// will be done.
    pub fn reserve(&self, size: u64, now: Instant) -> Instant {
        let t = self.read_time(size);
        self.reads.fetch_add(1, Relaxed);
        self.busy_ns.fetch_add(t.as_nanos() as u64, Relaxed);
        let mut free = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let start = free.map_or(now, |f| f.max(now));
        let done = start + t;
        *free = Some(done);
        done
    }

    /// Read `size` bytes: wait for the reads before this one, then for this one.
    pub async fn read(&self, size: u64) {
        self.queued.fetch_add(1, Relaxed);
        let _q = Queued(&self.queued);
        let done = self.reserve(size, Instant::now());
        tokio::time::sleep_until(done).await;
    }

    /// Reads waiting or in service.
    pub fn queued(&self) -> u32 {
        self.queued.load(Relaxed)
    }

    /// Counters.
    pub fn stats(&self) -> DiskStats {
        DiskStats {
            reads: self.reads.load(Relaxed),
            busy_ns: self.busy_ns.load(Relaxed),
            queued: self.queued(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(scale: f64) -> EmulatedDisk {
        DiskConfig {
            model: DiskKind::Lard,
            scale,
            ..DiskConfig::default()
        }
        .build()
        .unwrap()
    }

    #[test]
    fn times_are_the_simulators_scaled() {
        let d = disk(1.0);
        assert_eq!(d.read_time(4096), Duration::from_micros(28_410));
        let d = disk(0.1);
        assert_eq!(d.read_time(4096), Duration::from_micros(2_841));
        assert!(DiskConfig::default().build().is_none());
    }

    #[test]
    fn reads_are_served_one_at_a_time_in_order() {
        let d = disk(1.0);
        let t0 = Instant::now();
        let a = d.reserve(4096, t0);
        let b = d.reserve(4096, t0);
        assert_eq!(a - t0, Duration::from_micros(28_410));
        assert_eq!(b - t0, Duration::from_micros(2 * 28_410));
        // An idle disk starts a read at once.
        let later = b + Duration::from_secs(1);
        assert_eq!(
            d.reserve(4096, later) - later,
            Duration::from_micros(28_410)
        );
        assert_eq!(d.stats().reads, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_reads_queue_in_virtual_time() {
        let d = std::sync::Arc::new(disk(1.0));
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let d = d.clone();
            tasks.push(tokio::spawn(async move {
                d.read(8192).await;
                Instant::now()
            }));
        }
        tokio::task::yield_now().await;
        assert_eq!(d.queued(), 3);
        let mut ends = Vec::new();
        for t in tasks {
            ends.push(t.await.unwrap() - t0);
        }
        ends.sort();
        // The reads end back to back; each wakeup may come up to tokio's 1 ms tick late.
        let one = Duration::from_micros(28_000 + 2 * 410);
        for (k, end) in ends.iter().enumerate() {
            let due = one * (k as u32 + 1);
            assert!(
                *end >= due && *end <= due + Duration::from_millis(1),
                "{ends:?}"
            );
        }
        assert_eq!(d.queued(), 0);
    }

    #[test]
    fn bad_values_are_refused() {
        let c = DiskConfig {
            scale: 0.0,
            ..DiskConfig::default()
        };
        assert!(c.check().is_err());
        assert!("ssd".parse::<DiskKind>().is_err());
    }
}

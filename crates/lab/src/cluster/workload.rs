//! The lab's workload: a trace (file sizes and the file of every request) from the simulator's
//! seeded SURGE-like generator ([`sim::trace`], the very code `triage sim lard` runs) or from a
//! replayed access log, the site of files it names, and the list of request paths the client
//! replays.
//!
//! A log's successful GETs become the trace: each distinct target is one file of the largest
//! size the log gave it (`/c/N.bin`: the names a log holds are not safe file names; the order
//! and the sizes, which are what the policies and caches see, are kept).

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use sim::trace::{Trace, TraceConfig};

use crate::error::{LabError, Result};

/// A trace and where it came from.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Size of each file, bytes (file `i` is [`Workload::path`]`(i)`).
    pub sizes: Vec<u64>,
    /// The file of every request, in order.
    pub requests: Vec<u32>,
    /// Where it came from, said for the report.
    pub source: WorkloadInfo,
}

/// What the report says about the workload.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadInfo {
    /// `synthetic` or `log`.
    pub kind: String,
    /// The generator's parameters or the log's path.
    pub detail: String,
    /// Distinct files.
    pub files: usize,
    /// Requests in the trace.
    pub requests: usize,
    /// Total size of the files, bytes.
    pub working_set: u64,
    /// Mean size of a request, bytes.
    pub mean_request_bytes: f64,
    /// Log lines left out (malformed, not a GET, not 2xx, no size), 0 for a synthetic trace.
    pub skipped_lines: usize,
}

/// The URL path of file `i`.
pub fn path(kind_log: bool, i: usize) -> String {
    if kind_log {
        format!("/c/{i}.bin")
    } else {
        format!("/f/{i}.bin")
    }
}

impl Workload {
    /// The simulator's synthetic trace for `cfg`.
    pub fn synthetic(cfg: &TraceConfig) -> Result<Workload> {
        let t = Trace::generate(cfg).map_err(|e| LabError::Config(e.to_string()))?;
        let detail = format!(
            "sim::trace: Zipf {} popularity, lognormal body (mu {}, sigma {}) + Pareto tail \
             (p {}, k {} B, alpha {}) sizes cut at {} B, seed {}",
            cfg.zipf,
            cfg.body_mu,
            cfg.body_sigma,
            cfg.tail_prob,
            cfg.tail_k,
            cfg.tail_alpha,
            cfg.max_size,
            cfg.seed
        );
        Ok(Workload::new(t.sizes, t.requests, "synthetic", detail, 0))
    }

    /// The successful GETs of a Combined Log Format text (`name` for messages). Files larger
    /// than `max_file` are cut to it (the back ends' cache never holds larger ones).
    pub fn from_log(text: &str, name: &str, max_file: u64) -> Result<Workload> {
        let log = loadgen::clf::parse_log(text);
        let mut ids: std::collections::HashMap<String, u32> = Default::default();
        let mut sizes: Vec<u64> = Vec::new();
        let mut requests = Vec::new();
        let mut skipped = log.malformed;
        for r in &log.records {
            let (Some(m), Some(t), Some(b)) = (&r.method, &r.target, r.bytes) else {
                skipped += 1;
                continue;
            };
            if m != "GET" || !(200..300).contains(&r.status) || b == 0 {
                skipped += 1;
                continue;
            }
            let next = sizes.len() as u32;
            let id = *ids.entry(t.clone()).or_insert(next);
            if id == next {
                sizes.push(0);
            }
            let s = &mut sizes[id as usize];
            *s = (*s).max(b.min(max_file));
            requests.push(id);
        }
        if requests.is_empty() {
            let why = log
                .malformed_examples
                .first()
                .map(|(l, e)| format!("; line {l}: {e}"))
                .unwrap_or_default();
            return Err(LabError::Config(format!(
                "{name}: no successful GET with a size among {} lines ({} malformed){why}",
                log.records.len() + log.malformed,
                log.malformed
            )));
        }
        Ok(Workload::new(
            sizes,
            requests,
            "log",
            format!("{name} (Combined Log Format)"),
            skipped,
        ))
    }

    fn new(
        sizes: Vec<u64>,
        requests: Vec<u32>,
        kind: &str,
        detail: String,
        skipped: usize,
    ) -> Workload {
        let working_set = sizes.iter().sum();
        let mean = requests
            .iter()
            .map(|&f| sizes[f as usize] as f64)
            .sum::<f64>()
            / requests.len().max(1) as f64;
        Workload {
            source: WorkloadInfo {
                kind: kind.into(),
                detail,
                files: sizes.len(),
                requests: requests.len(),
                working_set,
                mean_request_bytes: mean,
                skipped_lines: skipped,
            },
            sizes,
            requests,
        }
    }

    /// Whether it came from a log.
    pub fn is_log(&self) -> bool {
        self.source.kind == "log"
    }

    /// The same trace for the simulator.
    pub fn trace(&self) -> Trace {
        Trace {
            sizes: self.sizes.clone(),
            requests: self.requests.clone(),
        }
    }

    /// The largest file, bytes.
    pub fn max_file(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// Write every file under `root` (created): deterministic bytes of the file's size.
    pub fn write_site(&self, root: &Path) -> Result<()> {
        let dir = root.join(if self.is_log() { "c" } else { "f" });
        std::fs::create_dir_all(&dir).map_err(|e| LabError::io("creating", &dir, e))?;
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        for (i, &size) in self.sizes.iter().enumerate() {
            let p = dir.join(format!("{i}.bin"));
            let mut f = std::fs::File::create(&p).map_err(|e| LabError::io("creating", &p, e))?;
            let mut left = size as usize;
            while left > 0 {
                let n = left.min(chunk.len());
                f.write_all(&chunk[..n])
                    .map_err(|e| LabError::io("writing", &p, e))?;
                left -= n;
            }
        }
        Ok(())
    }

    /// The request paths, one per line, in trace order (what the client replays).
    pub fn paths_text(&self) -> String {
        let mut s = String::with_capacity(self.requests.len() * 12);
        for &f in &self.requests {
            s += &path(self.is_log(), f as usize);
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_trace_is_the_simulators() {
        let cfg = TraceConfig {
            working_set: 2 << 20,
            requests: 1000,
            max_size: 64 << 10,
            ..TraceConfig::default()
        };
        let w = Workload::synthetic(&cfg).unwrap();
        let t = Trace::generate(&cfg).unwrap();
        assert_eq!((w.sizes.clone(), w.requests.clone()), (t.sizes, t.requests));
        assert_eq!(w.source.working_set, w.sizes.iter().sum::<u64>());
        assert!(w.max_file() <= 64 << 10);
        let d = tempfile::tempdir().unwrap();
        w.write_site(d.path()).unwrap();
        let f3 = std::fs::metadata(d.path().join("f/3.bin")).unwrap().len();
        assert_eq!(f3, w.sizes[3]);
        let paths = w.paths_text();
        assert_eq!(paths.lines().count(), 1000);
        assert_eq!(
            paths.lines().next().unwrap(),
            format!("/f/{}.bin", w.requests[0])
        );
    }

    #[test]
    fn a_log_keeps_successful_gets_in_order() {
        let line = |t: &str, st: u16, b: &str| {
            format!(
                "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET {t} HTTP/1.0\" {st} {b} \"-\" \"x\"\n"
            )
        };
        let mut text = String::new();
        text += &line("/a.gif", 200, "100");
        text += &line("/b?x=1", 200, "5000");
        text += &line("/a.gif", 200, "300");
        text += &line("/missing", 404, "10");
        text += &line("/c", 304, "-");
        text += "garbage\n";
        text +=
            "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"POST /p HTTP/1.0\" 200 9 \"-\" \"x\"\n";
        let w = Workload::from_log(&text, "t.log", 1000).unwrap();
        assert_eq!(w.requests, vec![0, 1, 0]);
        assert_eq!(w.sizes, vec![300, 1000]);
        assert_eq!(w.source.skipped_lines, 4);
        assert!(w.is_log());
        assert!(w.paths_text().starts_with("/c/0.bin\n/c/1.bin\n"));
        let e = Workload::from_log("nothing here\n", "t.log", 1000).unwrap_err();
        assert!(e.to_string().contains("t.log: no successful GET"), "{e}");
    }
}

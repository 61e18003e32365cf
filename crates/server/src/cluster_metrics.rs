//! The Prometheus text of what a back end of a cluster does: its content caches (per site,
//! with their eviction), its emulated disk and its back-end forwarding. Nothing is written for
//! the parts that are off (the demo site, no disk, no forwarding), so a plain server's
//! `/metrics` only gains the cache lines.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::site::Sites;

/// The lines for `sites` (the disk and forwarder are shared by the sites: written once).
pub fn render(sites: &Sites) -> String {
    let mut o = String::new();
    let dirs: Vec<_> = sites
        .iter()
        .filter_map(|s| s.store.dir().map(|d| (s.name.as_str(), d)))
        .collect();
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    if !dirs.is_empty() {
        type Pick = fn(&crate::body_cache::CacheStats) -> u64;
        let series: [(&str, &str, &str, Pick); 5] = [
            (
                "triage_cache_hits_total",
                "counter",
                "Content-cache lookups that found the body.",
                |s| s.hits,
            ),
            (
                "triage_cache_misses_total",
                "counter",
                "Content-cache lookups that read the file.",
                |s| s.misses,
            ),
            (
                "triage_cache_evictions_total",
                "counter",
                "Bodies dropped from the content cache to make room.",
                |s| s.evictions,
            ),
            (
                "triage_cache_bytes",
                "gauge",
                "Bytes held in the content cache.",
                |s| s.bytes,
            ),
            (
                "triage_cache_entries",
                "gauge",
                "Files held in the content cache.",
                |s| s.entries,
            ),
        ];
        for (name, kind, help, pick) in series {
            family(&mut o, name, kind, help);
            for (site, d) in &dirs {
                let _ = writeln!(
                    o,
                    "{name}{{site=\"{site}\",policy=\"{}\"}} {}",
                    eviction_name(d.eviction()),
                    pick(&d.cache_stats())
                );
            }
        }
    }
    if let Some(disk) = dirs.iter().find_map(|(_, d)| d.disk()) {
        let st = disk.stats();
        family(
            &mut o,
            "triage_disk_reads_total",
            "counter",
            "Reads of the emulated disk.",
        );
        let _ = writeln!(o, "triage_disk_reads_total {}", st.reads);
        family(
            &mut o,
            "triage_disk_busy_seconds_total",
            "counter",
            "Service time of the emulated disk's reads.",
        );
        let _ = writeln!(
            o,
            "triage_disk_busy_seconds_total {:.6}",
            st.busy_ns as f64 / 1e9
        );
        family(
            &mut o,
            "triage_disk_queue",
            "gauge",
            "Reads of the emulated disk waiting or in service.",
        );
        let _ = writeln!(o, "triage_disk_queue {}", st.queued);
    }
    if let Some(f) = sites.iter().find_map(|s| s.forward.as_ref()) {
        let st = f.stats();
        for (name, help, v) in [
            (
                "triage_forwarded_total",
                "Forwarded requests relayed from a peer.",
                &st.forwarded,
            ),
            (
                "triage_forward_fallbacks_total",
                "Forwarded requests served here because the peer failed.",
                &st.fallbacks,
            ),
            (
                "triage_forward_refused_total",
                "X-Triage-Forward headers not honoured.",
                &st.refused,
            ),
            (
                "triage_forward_reused_total",
                "Forwarded requests sent on a pooled connection.",
                &st.reused,
            ),
        ] {
            family(&mut o, name, "counter", help);
            let _ = writeln!(o, "{name} {}", v.load(Relaxed));
        }
    }
    o
}

fn eviction_name(e: crate::body_cache::Eviction) -> &'static str {
    use crate::body_cache::Eviction::*;
    match e {
        Clear => "clear",
        Lru => "lru",
        Gds => "gds",
    }
}

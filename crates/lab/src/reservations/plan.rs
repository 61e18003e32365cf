//! The plan of a `triage lab reservations` run: its parameters and variants ([`resolve`]) and
//! the order of its points ([`schedule`], [`sessions`]).

use std::time::Duration;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::opts::ReservationsOpts;
use crate::error::{LabError, Result};
use crate::harness::Session;
use crate::util::Scale;

/// The resolved parameters (in summary.json).
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// `--quick`.
    pub quick: bool,
    /// `--seconds-scale`.
    pub scale: Scale,
    /// Clients of the competing site per point.
    pub counts: Vec<usize>,
    /// Clients of the site of interest.
    pub clients: usize,
    /// Measurement window per point (s).
    pub window_s: f64,
    /// Load before the window (s).
    pub warmup_s: f64,
    /// Repetitions.
    pub reps: usize,
    /// Server-side CPU quota asked for (fraction of one CPU).
    pub quota: Option<f64>,
    /// CFS period of the quota (ms).
    pub period_ms: f64,
    /// `cgi.max_running` of the triage sites.
    pub max_running: Option<usize>,
    /// The CGI script, in words.
    pub cgi_script: &'static str,
    /// The variants measured.
    pub variants: Vec<String>,
    /// Seed of the order of the points.
    pub seed: u64,
    /// `cgi.slice` of the triage sites (ms; none = the kernel's default).
    pub cgi_slice_ms: Option<f64>,
    /// How the points of a repetition are ordered.
    pub order: &'static str,
    /// Whether a reference twin runs beside every variant (`--no-twin` leaves it out): a
    /// second triage serving the site of interest alone to `clients` clients, in its own
    /// cgroup with half the quota on the same CPU (see `run`).
    pub twin: bool,
}

/// The site of interest (a virtual host).
pub const SITE_A: &str = "site-a";
/// The competing site.
pub const SITE_B: &str = "site-b";

/// What a variant runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Sites' CGI containers with these weights.
    Weights(u32, u32),
    /// Both sites' CGI in one container.
    Shared,
    /// Apache httpd (prefork + mod_cgi, two virtual hosts): time-sharing.
    Apache,
}

/// A server configuration compared.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Its name in reports.
    pub name: String,
    /// What it runs.
    pub kind: Kind,
}

/// The parameters and variants of a run of `o`, checked.
pub fn resolve(o: &ReservationsOpts) -> Result<(Params, Vec<Variant>)> {
    let tiny = o.scale == Scale::Tiny;
    let counts = o.counts.clone().unwrap_or_else(|| {
        if tiny {
            vec![0, 4]
        } else if o.quick {
            vec![0, 10, 40]
        } else {
            vec![0, 1, 2, 5, 10, 20, 40]
        }
    });
    if counts.is_empty() || counts.iter().any(|&k| k > 200) {
        return Err(LabError::Config(format!(
            "--counts {counts:?}: give 1 to 200 competing clients per point (0 = none)"
        )));
    }
    if !counts.contains(&0) {
        return Err(LabError::Config(
            "--counts must include 0: the site of interest's throughput alone is the reference"
                .into(),
        ));
    }
    if o.clients == 0 || o.clients > 200 {
        return Err(LabError::Config(format!(
            "--clients {} must be in 1..=200",
            o.clients
        )));
    }
    if let Some(q) = o.quota.0 {
        if !(q > 0.0 && q <= 1.0) {
            return Err(LabError::Config(format!(
                "--quota {q}: the server side runs on one CPU, give a fraction in (0, 1]"
            )));
        }
    }
    let window = o.window.unwrap_or(if tiny {
        Duration::from_secs(2)
    } else if o.quick {
        // Two repetitions of 5 s (about 30 requests of the site each with competitors): one
        // 4 s window counted 26, so one request more or less moved a point by 4%.
        Duration::from_secs(5)
    } else {
        Duration::from_secs(10)
    });
    if window < Duration::from_secs(1) {
        return Err(LabError::Config(format!(
            "--window {window:?} is too short (at least 1s)"
        )));
    }
    let reps = o.reps.unwrap_or(if tiny {
        1
    } else if o.quick {
        2
    } else {
        3
    });
    if reps == 0 {
        return Err(LabError::Config("--reps must be at least 1".into()));
    }
    let mut variants = vec![Variant {
        name: "triage-res50".into(),
        kind: Kind::Weights(50, 49),
    }];
    if !tiny {
        variants.push(Variant {
            name: "triage-res99".into(),
            kind: Kind::Weights(99, 1),
        });
        variants.push(Variant {
            name: "triage-shared".into(),
            kind: Kind::Shared,
        });
    }
    if o.peers {
        variants.push(Variant {
            name: "apache".into(),
            kind: Kind::Apache,
        });
    }
    let warmup = if tiny {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(1)
    };
    Ok((
        Params {
            quick: o.quick,
            scale: o.scale,
            counts,
            clients: o.clients,
            window_s: window.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            reps,
            quota: o.quota.0,
            period_ms: o.period.as_secs_f64() * 1e3,
            max_running: o.max_running.0,
            cgi_script: "rand.pl (Perl: 500000 calls of rand(), a 1 KB reply)",
            variants: variants.iter().map(|v| v.name.clone()).collect(),
            seed: o.seed,
            cgi_slice_ms: o.cgi_slice.0.map(|d| d.as_secs_f64() * 1e3),
            order: ORDER,
            twin: o.twin,
        },
        variants,
    ))
}

/// How [`schedule`] orders a repetition (in summary.json).
const ORDER: &str = "per repetition and variant: the competitor counts >= 1 in a seeded random \
                     order, a point alone (0) after the first of every two, so each point with \
                     competitors is measured next to a point alone of the same server";

/// The order of the points of one repetition (of one variant): the competitor counts >= 1
/// shuffled with a generator seeded by `seed` and `rep`, in pairs with a point alone (0)
/// between the two of each pair (`x 0 y x 0 y ...`, an odd last one followed by a 0), so that
/// every count is measured directly before or after a point alone. Drift then hits the points
/// alone and under competition alike, and `summary::paired` can divide each point by its neighbour.
/// Counts given twice are measured twice.
pub fn schedule(counts: &[usize], rep: usize, seed: u64) -> Vec<usize> {
    let mut nz: Vec<usize> = counts.iter().copied().filter(|&n| n > 0).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ rep as u64);
    nz.shuffle(&mut rng);
    if nz.is_empty() {
        return vec![0];
    }
    let mut out = Vec::with_capacity(nz.len() * 3 / 2 + 1);
    for pair in nz.chunks(2) {
        out.push(pair[0]);
        out.push(0);
        out.extend_from_slice(&pair[1..]);
    }
    out
}

/// One point: one variant, one competing-client count, one repetition, its place in the
/// repetition.
#[derive(Debug, Clone)]
pub struct ResPoint {
    /// The variant.
    pub variant: Variant,
    /// Clients of the competing site.
    pub competitors: usize,
    /// The repetition (0-based).
    pub rep: usize,
    /// Its position within the session (0 = first measured).
    pub seq: usize,
}

/// The sessions of a run: per repetition every variant once (one server each), the order of
/// the variants rotated every repetition; within a session the points in [`schedule`]'s order
/// (seeded by the repetition and the variant's place in the loop).
pub fn sessions(p: &Params, variants: &[Variant]) -> Vec<Session<ResPoint>> {
    let n = variants.len();
    let mut out = Vec::new();
    for rep in 0..p.reps {
        for vi in 0..n {
            // Rotate the order every repetition so no variant always runs first.
            let v = &variants[(vi + rep) % n];
            // A seeded random order per repetition, a point alone beside every other point.
            let order = schedule(&p.counts, rep * n + vi, p.seed);
            out.push(Session {
                variant: v.name.clone(),
                dir: format!("{}-r{rep}", v.name),
                points: order
                    .iter()
                    .enumerate()
                    .map(|(seq, &competitors)| ResPoint {
                        variant: v.clone(),
                        competitors,
                        rep,
                        seq,
                    })
                    .collect(),
            });
        }
    }
    out
}

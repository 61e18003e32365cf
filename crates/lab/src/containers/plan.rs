//! The plan of a `triage lab containers` run: its parameters and variants ([`resolve`]) and
//! the order of its points ([`sessions`]).

use std::time::Duration;

use serde::Serialize;

use super::opts::{ContainersOpts, DEFAULT_REPS};
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
    /// Concurrent CGI requests of the points.
    pub counts: Vec<usize>,
    /// Caps of the CGI container (fractions of the server side's capacity).
    pub caps: Vec<f64>,
    /// Static-throughput window per point (s).
    pub window_s: f64,
    /// CGI load before the window (s).
    pub warmup_s: f64,
    /// Repetitions.
    pub reps: usize,
    /// Connections of the static load.
    pub static_conns: usize,
    /// Size of the static document.
    pub static_doc_bytes: usize,
    /// CPU seconds each CGI request burns.
    pub cgi_cpu_s: f64,
    /// The CGI script, in words.
    pub cgi_script: &'static str,
    /// Server-side CPU quota asked for (fraction of one CPU); the testbed says what was applied.
    pub quota: Option<f64>,
    /// CFS period of the quota (ms).
    pub period_ms: f64,
    /// The variants measured.
    pub variants: Vec<String>,
    /// CGI requests the reference twin of a capped variant keeps in flight while a point is
    /// measured (`None`: no twin, `--no-twin` or no CGI count above 0).
    pub twin_cgi: Option<usize>,
}

impl Variant {
    /// Whether a reference twin runs beside this variant: a capped CGI container (not one
    /// budget), the variants the spread goal reads.
    pub fn has_twin(&self, p: &Params) -> bool {
        p.twin_cgi.is_some()
            && matches!(
                self.kind,
                Kind::Triage {
                    cap: Some(_),
                    budget: false,
                    ..
                }
            )
    }
}

/// What a variant runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// triage with per-request containers (`cgroups`) or plain script processes, and the
    /// cap of the site's CGI container.
    Triage {
        /// Per-request containers.
        cgroups: bool,
        /// Cap of the CGI container (fraction of the server side's capacity).
        cap: Option<f64>,
        /// One budget (seed 003): the cap is a `[[container]]` holding the site's server work
        /// and its scripts together, not the scripts alone.
        budget: bool,
    },
    /// Apache httpd (prefork + mod_cgi): the unmodified system.
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

fn cap_name(c: f64) -> String {
    format!("triage-cap{}", (c * 100.0).round() as u64)
}

fn budget_name(c: f64) -> String {
    format!("triage-budget{}", (c * 100.0).round() as u64)
}

/// The parameters and variants of a run of `o`, checked.
pub fn resolve(o: &ContainersOpts) -> Result<(Params, Vec<Variant>)> {
    let tiny = o.scale == Scale::Tiny;
    let counts = o.counts.clone().unwrap_or_else(|| {
        if tiny {
            vec![0, 1, 2]
        } else if o.quick {
            vec![0, 1, 3, 5]
        } else {
            (0..=5).collect()
        }
    });
    if counts.is_empty() || counts.iter().any(|&k| k > 64) {
        return Err(LabError::Config(format!(
            "--counts {counts:?}: give 1 to 64 concurrent CGI requests per point (0 = none)"
        )));
    }
    if let Some(q) = o.quota.0 {
        if !(q > 0.0 && q <= 1.0) {
            return Err(LabError::Config(format!(
                "--quota {q}: the server side runs on one CPU, give a fraction in (0, 1]"
            )));
        }
    }
    for &c in &o.caps {
        if !(c > 0.0 && c < 1.0) {
            return Err(LabError::Config(format!(
                "--caps: {c} is not a fraction of one CPU in (0, 1)"
            )));
        }
    }
    if o.cgi_cpu.is_zero() {
        return Err(LabError::Config(
            "--cgi-cpu must be longer than zero".into(),
        ));
    }
    if o.conns == 0 {
        return Err(LabError::Config("--conns must be at least 1".into()));
    }
    // Short windows, many repetitions: the machine drifts over tens of seconds, so the points
    // of one repetition (all counts, back to back) must be close in time, and the medians need
    // many repetitions (see `blocked`).
    let window = o
        .window
        .unwrap_or(Duration::from_secs(if tiny { 1 } else { 2 }));
    if window < Duration::from_secs(1) || window.subsec_nanos() != 0 {
        return Err(LabError::Config(format!(
            "--window {window:?}: give whole seconds, at least 1s (wrk measures in seconds)"
        )));
    }
    let reps = o.reps.unwrap_or(if tiny {
        1
    } else if o.quick {
        2
    } else {
        DEFAULT_REPS
    });
    if reps == 0 {
        return Err(LabError::Config("--reps must be at least 1".into()));
    }
    let mut variants = Vec::new();
    if !tiny {
        variants.push(Variant {
            name: "triage".into(),
            kind: Kind::Triage {
                cgroups: true,
                cap: None,
                budget: false,
            },
        });
    }
    let caps: Vec<f64> = if tiny {
        o.caps.iter().copied().take(1).collect()
    } else {
        o.caps.clone()
    };
    for &c in &caps {
        variants.push(Variant {
            name: cap_name(c),
            kind: Kind::Triage {
                cgroups: true,
                cap: Some(c),
                budget: false,
            },
        });
    }
    // One budget under the first cap: the site's static work and its CGI share the cap.
    if o.budget && !tiny {
        if let Some(&c) = caps.first() {
            variants.push(Variant {
                name: budget_name(c),
                kind: Kind::Triage {
                    cgroups: true,
                    cap: Some(c),
                    budget: true,
                },
            });
        }
    }
    if o.timeshare || (!tiny && !o.quick) {
        variants.push(Variant {
            name: "triage-timeshare".into(),
            kind: Kind::Triage {
                cgroups: false,
                cap: None,
                budget: false,
            },
        });
    }
    if o.peers {
        variants.push(Variant {
            name: "apache".into(),
            kind: Kind::Apache,
        });
    }
    if let Some(only) = &o.only {
        if let Some(bad) = only
            .iter()
            .find(|n| !variants.iter().any(|v| &v.name == *n))
        {
            return Err(LabError::Config(format!(
                "--only: no variant `{bad}` in this run (variants: {})",
                variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        variants.retain(|v| only.contains(&v.name));
    }
    let warmup = if tiny {
        Duration::from_millis(300)
    } else {
        Duration::from_millis(700)
    };
    let twin_cgi = o
        .twin
        .then(|| counts.iter().copied().filter(|&k| k >= 1).min())
        .flatten();
    Ok((
        Params {
            quick: o.quick,
            scale: o.scale,
            counts,
            caps,
            window_s: window.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            reps,
            static_conns: o.conns,
            static_doc_bytes: 1024,
            cgi_cpu_s: o.cgi_cpu.as_secs_f64(),
            cgi_script: "burn.pl (Perl: loops until times() says cgi_cpu_s of CPU were used)",
            quota: o.quota.0,
            period_ms: o.period.as_secs_f64() * 1e3,
            variants: variants.iter().map(|v| v.name.clone()).collect(),
            twin_cgi,
        },
        variants,
    ))
}

/// One point: one variant, one count of concurrent CGI requests, one repetition.
#[derive(Debug, Clone)]
pub struct CgiPoint {
    /// The variant.
    pub variant: Variant,
    /// Concurrent CGI requests.
    pub cgi: usize,
    /// The repetition (0-based).
    pub rep: usize,
}

/// The sessions of a run: per repetition every variant once (one server each), the order of
/// the variants and of the CGI counts rotated every repetition, so no variant always runs first
/// and slow drifts of a shared machine spread over all counts.
pub fn sessions(p: &Params, variants: &[Variant]) -> Vec<Session<CgiPoint>> {
    let mut out = Vec::new();
    let nk = p.counts.len();
    for rep in 0..p.reps {
        for vi in 0..variants.len() {
            let v = &variants[(vi + rep) % variants.len()];
            out.push(Session {
                variant: v.name.clone(),
                dir: format!("{}-r{rep}", v.name),
                points: (0..nk)
                    .map(|ki| CgiPoint {
                        variant: v.clone(),
                        cgi: p.counts[(ki + rep) % nk],
                        rep,
                    })
                    .collect(),
            });
        }
    }
    out
}

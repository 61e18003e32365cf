//! `triage capacity`: seed 002's capacity prediction as an operator's tool. Banga and Mogul
//! logged their proxy's user, kernel and idle CPU time every 15 minutes beside its access log,
//! fitted each against the request rate, and read the peak rate the server could sustain off
//! the idle line's X-intercept (58 req/s on the old kernel, 69 on the new). This module does
//! the same for any server: [`sample`] records CPU samples (machine, cgroup, process or
//! triage's `/metrics`) into a [`cpu_csv`] file; [`log`] reads the access log's request times
//! with the one Combined Log Format parser; [`bucket`] lines the two up in time buckets
//! ([`steps`]: one bucket per step of a rate ladder);
//! [`regress`] fits the lines; [`analyze`] predicts the peak, the headroom and says when not to
//! trust them. Leaves first: `regress`, `cpu_csv`, `bucket`, `steps`, `log`, `analyze`,
//! `sample`.
//!
//! Every bad input is an error or a warning, never a silent figure: malformed log lines are
//! counted, skipped and reported; a log whose clock does not overlap the samples, too few
//! buckets for a fit, or a samples file out of order is an error; a weak r is a warning.

use std::path::{Path, PathBuf};

pub mod analyze;
pub mod bucket;
pub mod cpu_csv;
pub mod log;
pub mod opts;
pub mod regress;
pub mod sample;
pub mod steps;

pub use analyze::{Analysis, Fits, Options};
pub use opts::{AnalyzeOpts, SampleOpts};
pub use regress::{fit, Fit};

/// Why `triage capacity` could not give a figure.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The access log holds nothing usable.
    #[error("access log: {0}")]
    Log(String),
    /// The CPU samples file is malformed (line 0: the file as a whole).
    #[error("CPU samples, line {line}: {msg}")]
    CpuCsv {
        /// 1-based line number (0: the whole file).
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// The log and the samples cover different times.
    #[error(
        "the access log and the CPU samples do not overlap in time: log {log}, CPU samples \
         {cpu} (were they recorded on the same server, at the same time, with the same clock?)"
    )]
    NoOverlap {
        /// The log's span.
        log: String,
        /// The samples' span.
        cpu: String,
    },
    /// Not enough buckets to fit a line.
    #[error(
        "{got} bucket(s) of {width_s} s in the {overlap_s:.0} s the log and the CPU samples \
         share: a fit needs at least {need} (seed 002 used 96); record longer or use a smaller \
         --bucket"
    )]
    TooFewBuckets {
        /// Whole buckets found.
        got: usize,
        /// The fewest a fit is made from.
        need: usize,
        /// Their width.
        width_s: u64,
        /// Seconds both sources cover.
        overlap_s: f64,
    },
    /// Sampling failed.
    #[error("sampling: {0}")]
    Sample(String),
    /// The options are inconsistent.
    #[error("{0}")]
    Config(String),
}

/// How the log's requests and the CPU samples are grouped into the points the lines are
/// fitted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucketing {
    /// Buckets of this many seconds at whole multiples of it since the epoch (`--bucket`).
    Fixed(u64),
    /// The steps of a rate ladder, each at least this many seconds long (`--steps`).
    Steps(u64),
}

/// The whole analysis of `log` against `cpu`, bucketed as `how` says.
pub fn analyze_files(
    log: &Path,
    cpu: &Path,
    how: Bucketing,
    o: &Options,
) -> Result<Analysis, CapacityError> {
    let times = log::read_log(log)?;
    let text = std::fs::read_to_string(cpu).map_err(|e| CapacityError::Io {
        path: cpu.to_owned(),
        source: e,
    })?;
    let samples = cpu_csv::parse_cpu_csv(&text)?;
    let b = match how {
        Bucketing::Fixed(w) => bucket::bucketize(&times.times, &samples, w)?,
        Bucketing::Steps(min) => steps::bucketize_steps(&times.times, &samples, min)?,
    };
    Ok(analyze::analyze(
        &b,
        times.malformed,
        &times.malformed_note(),
        o,
    ))
}

/// `triage capacity`: the analysis as text (or JSON) on standard output.
pub fn run_analyze(o: &AnalyzeOpts) -> Result<Analysis, CapacityError> {
    let whole = |flag: &str, d: std::time::Duration| {
        if d.subsec_nanos() != 0 || d.as_secs() == 0 {
            return Err(CapacityError::Config(format!(
                "{flag} must be whole seconds (the log's resolution), not {}",
                units::format_duration(d)
            )));
        }
        Ok(d.as_secs())
    };
    let how = match o.steps {
        Some(m) => Bucketing::Steps(whole("--steps", m)?),
        None => Bucketing::Fixed(whole("--bucket", o.bucket)?),
    };
    if !(0.0..=1.0).contains(&o.min_r) {
        return Err(CapacityError::Config("--min-r must be within 0..1".into()));
    }
    if !(0.0..100.0).contains(&o.saturated_idle_pct) {
        return Err(CapacityError::Config(
            "--saturated-idle must be a percentage within 0..100".into(),
        ));
    }
    if o.low_rate_cut.is_some_and(|c| !(c.is_finite() && c >= 0.0)) {
        return Err(CapacityError::Config(
            "--low-rate-cut must be a rate in requests/s, 0 or more".into(),
        ));
    }
    let (Some(log), Some(cpu)) = (&o.log, &o.cpu) else {
        return Err(CapacityError::Config(
            "--log and --cpu are both needed".into(),
        ));
    };
    let a = analyze_files(
        log,
        cpu,
        how,
        &Options {
            low_rate_cut: o.low_rate_cut,
            min_r: o.min_r,
            saturated_idle_pct: o.saturated_idle_pct,
        },
    )?;
    if o.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&a).expect("the analysis serializes")
        );
    } else {
        print!("{}", analyze::text(&a));
    }
    Ok(a)
}

/// `triage capacity sample`: record until `--duration` or a signal; returns the samples
/// written.
pub fn run_sample(o: &SampleOpts) -> Result<usize, CapacityError> {
    let source = match (&o.cgroup, o.pid, &o.metrics) {
        (Some(p), _, _) => sample::Source::Cgroup(p.clone()),
        (_, Some(p), _) => sample::Source::Pid(p),
        (_, _, Some(u)) => sample::Source::Metrics(u.clone()),
        _ => sample::Source::Machine,
    };
    if o.cpus.is_some() && source == sample::Source::Machine {
        return Err(CapacityError::Config(
            "--cpus applies to --cgroup, --pid and --metrics (the machine's idle time is its own)"
                .into(),
        ));
    }
    let cpus = o.cpus.unwrap_or(os::cpusplit::online_cpus() as f64);
    if !(cpus.is_finite() && cpus > 0.0) {
        return Err(CapacityError::Config("--cpus must be above 0".into()));
    }
    let mut reader = sample::Reader::new(source, cpus);
    // Fail now, not at the first tick, when the source cannot be read.
    reader.read()?;
    let _sig = crate::signals::install().map_err(|e| CapacityError::Sample(e.to_string()))?;
    if o.out.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return sample::record(&mut reader, o.interval, o.duration, &mut out);
    }
    let mut f = std::fs::File::create(&o.out).map_err(|e| CapacityError::Io {
        path: o.out.clone(),
        source: e,
    })?;
    sample::record(&mut reader, o.interval, o.duration, &mut f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    /// A log and CPU samples of a server whose idle time falls 0.5 points per request/s from
    /// 100%: the predicted peak is 200 req/s. Minute buckets, rates 10..90 req/s.
    fn write_day(dir: &Path, t0: i64) -> (PathBuf, PathBuf) {
        let (mut log, mut cpu) = (String::new(), String::new());
        let _ = writeln!(cpu, "# synthetic\n{}", cpu_csv::HEADER);
        let (mut user, mut sys, mut idle) = (0.0, 0.0, 0.0);
        for m in 0..9i64 {
            let rate = 10 * (m + 1);
            for s in 0..60 {
                let t = t0 + m * 60 + s;
                let _ = writeln!(
                    cpu,
                    "{}",
                    cpu_csv::format_line(&cpu_csv::CpuSample {
                        unix_s: t as f64,
                        user_s: user,
                        system_s: sys,
                        idle_s: idle,
                    })
                );
                let busy = 0.005 * rate as f64;
                user += 0.7 * busy;
                sys += 0.3 * busy;
                idle += 1.0 - busy;
                let ts = time::OffsetDateTime::from_unix_timestamp(t).unwrap();
                for _ in 0..rate {
                    let _ = writeln!(
                        log,
                        "10.0.0.1 - - [{:02}/{}/{}:{:02}:{:02}:{:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"t\"",
                        ts.day(),
                        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
                            [ts.month() as usize - 1],
                        ts.year(),
                        ts.hour(),
                        ts.minute(),
                        ts.second()
                    );
                }
            }
        }
        let _ = writeln!(
            cpu,
            "{}",
            cpu_csv::format_line(&cpu_csv::CpuSample {
                unix_s: (t0 + 9 * 60) as f64,
                user_s: user,
                system_s: sys,
                idle_s: idle,
            })
        );
        log.push_str("garbage line\n");
        let (l, c) = (dir.join("access.log"), dir.join("cpu.csv"));
        std::fs::write(&l, log).unwrap();
        std::fs::write(&c, cpu).unwrap();
        (l, c)
    }

    #[test]
    fn files_on_disk_predict_the_known_peak() {
        let d = tempfile::tempdir().unwrap();
        let t0 = 1_764_144_000; // a whole minute
        let (log, cpu) = write_day(d.path(), t0);
        let o = Options {
            low_rate_cut: Some(30.0),
            min_r: 0.8,
            saturated_idle_pct: analyze::SATURATED_IDLE_PCT,
        };
        let a = analyze_files(&log, &cpu, Bucketing::Fixed(60), &o).unwrap();
        assert_eq!(a.buckets.len(), 9);
        assert_eq!(a.malformed_lines, 1);
        assert!(a.notes[0].contains("1 of"), "{:?}", a.notes);
        assert!(
            (a.predicted_peak_rps.unwrap() - 200.0).abs() < 1e-6,
            "{a:?}"
        );
        let (_, above) = a.above_cut.unwrap();
        assert_eq!(above.buckets, 7);
        assert!((a.headroom_pct.unwrap() - (200.0 - 90.0) / 90.0 * 100.0).abs() < 1e-6);
        // A samples file from another day: no overlap, said with both spans.
        let text = std::fs::read_to_string(&cpu).unwrap();
        let mut shifted = String::new();
        for l in text.lines() {
            match l.split_once(',') {
                Some((t, rest)) if t.parse::<f64>().is_ok() => {
                    let t: f64 = t.parse().unwrap();
                    let _ = writeln!(shifted, "{:.3},{rest}", t + 86_400.0);
                }
                _ => {
                    let _ = writeln!(shifted, "{l}");
                }
            }
        }
        let other = d.path().join("other.csv");
        std::fs::write(&other, shifted).unwrap();
        let e = analyze_files(&log, &other, Bucketing::Fixed(60), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("do not overlap") && e.contains("2025-11-26"),
            "{e}"
        );
        // Too few buckets.
        let e = analyze_files(&log, &cpu, Bucketing::Fixed(300), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 bucket(s) of 300 s"), "{e}");
        // A broken samples file names its line.
        std::fs::write(&other, format!("{}\n1,2,3\n", cpu_csv::HEADER)).unwrap();
        let e = analyze_files(&log, &other, Bucketing::Fixed(60), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}

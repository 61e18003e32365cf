//! Small pieces every lab shares: the UTC stamp of a run, medians and means, the two-value
//! time scale, CPU quota and `none` flag values, pinning the lab process, clap defaults, and
//! reading one HTTP/1.1 response off a kept-alive connection.

use std::io::Read;
use std::time::Duration;

use serde::Serialize;

/// How long a lab's time parameters are (`--seconds-scale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Minutes per lab (under two with `--quick`).
    Normal,
    /// Seconds: a few points, one repetition (CI).
    Tiny,
}

/// `YYYYMMDDTHHMMSSZ` now: the name of a run's results directory.
pub fn utc_stamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// The median of the finite values of `v` (NaN if there is none).
pub fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// [`median`], `None` when there is no finite value.
pub fn median_opt(v: &[f64]) -> Option<f64> {
    Some(median(v)).filter(|m| m.is_finite())
}

/// The mean of `v` (0 when empty).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Pin the calling thread (the lab's main thread, before it starts any other) to `cpu` when the
/// machine has two CPUs or more, so the lab's own threads (samplers, clients) stay off the
/// server's CPU. Silently does nothing on one CPU or if the kernel refuses.
pub fn pin_lab_to(cpu: usize) {
    if os::cpu::online_cpus() >= 2 {
        let _ = os::cpu::pin_current_thread(cpu);
    }
}

/// A percentage without a needless fraction (`10`, `2.5`).
pub fn pct(q: f64) -> String {
    let p = q * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

/// Parse a CPU quota: a fraction (`0.1`) or a percentage (`10%`) of one CPU, above 0 and at
/// most 64 CPUs.
pub fn parse_quota(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a CPU quota (e.g. 0.1 or 10%)"))?;
    if v > 0.0 && v <= 64.0 {
        Ok(v)
    } else {
        Err(format!(
            "CPU quota `{s}` must be above 0 and at most 64 CPUs"
        ))
    }
}

/// A flag's value that may be `none`/`off`. (A field of type `Option<Option<T>>` would make
/// clap read a flag with an optional value.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrNone<T>(pub Option<T>);

fn or_none<T>(s: &str, f: impl FnOnce(&str) -> Result<T, String>) -> Result<OrNone<T>, String> {
    match s.trim() {
        "none" | "off" => Ok(OrNone(None)),
        _ => f(s).map(|v| OrNone(Some(v))),
    }
}

/// A CPU quota ([`parse_quota`]) or `none`/`off`.
pub fn parse_quota_or_none(s: &str) -> Result<OrNone<f64>, String> {
    or_none(s, parse_quota)
}

/// A count of at least 1, or `none`/`off`.
pub fn parse_count_or_none(s: &str) -> Result<OrNone<usize>, String> {
    or_none(s, |s| match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?}: give a count of at least 1, or `none`")),
    })
}

/// A duration (`units` rules), or `none`/`off`.
pub fn parse_duration_or_none(s: &str) -> Result<OrNone<Duration>, String> {
    or_none(s, |s| units::parse_duration(s).map_err(|e| e.to_string()))
}

/// A size in bytes (`units` rules: `4096`, `20KB`, `16KiB`) that fits in memory.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let b = units::parse_size(s).map_err(|e| e.to_string())?;
    usize::try_from(b).map_err(|_| format!("`{s}` is too large"))
}

/// A whole number of seconds, at least one (wrk measures in seconds).
pub fn whole_seconds(flag: &str, d: Duration) -> Result<u64, String> {
    if d < Duration::from_secs(1) || d.subsec_nanos() != 0 {
        return Err(format!(
            "{flag} {}: give whole seconds, at least 1s (wrk measures in seconds)",
            units::format_duration(d)
        ));
    }
    Ok(d.as_secs())
}

/// The values of a clap argument struct when no flag is given (its defaults).
pub fn clap_defaults<A: clap::Args + clap::FromArgMatches>() -> A {
    let cmd = A::augment_args(clap::Command::new("defaults").no_binary_name(true));
    let m = cmd
        .try_get_matches_from(std::iter::empty::<&str>())
        .unwrap_or_else(|e| panic!("the defaults of a lab's flags do not parse: {e}"));
    A::from_arg_matches(&m).unwrap_or_else(|e| panic!("the defaults of a lab's flags: {e}"))
}

/// The command line of this process as typed, quoted where needed (for reports).
pub fn command_line() -> String {
    std::env::args()
        .map(|s| {
            if s.contains([' ', '\'', '"']) {
                format!("'{}'", s.replace('\'', "'\\''"))
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` as a TOML basic string, quoted and escaped (for the config files the labs write).
pub fn toml_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Copy every regular file under `from` (recursively) to the same path under `to`, skipping
/// files larger than `max` bytes and anything that is not a regular file or a directory
/// (sockets, pipes, links). Returns how many files were copied.
pub fn copy_files(
    from: &std::path::Path,
    to: &std::path::Path,
    max: u64,
) -> crate::error::Result<usize> {
    use crate::error::LabError;
    std::fs::create_dir_all(to).map_err(|e| LabError::io("creating", to, e))?;
    let rd = std::fs::read_dir(from).map_err(|e| LabError::io("reading", from, e))?;
    let mut n = 0;
    for entry in rd.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let dest = to.join(entry.file_name());
        if meta.is_dir() {
            n += copy_files(&entry.path(), &dest, max)?;
        } else if meta.is_file() && meta.len() <= max {
            std::fs::copy(entry.path(), &dest).map_err(|e| LabError::io("copying", &dest, e))?;
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {

    #[test]
    fn copy_files_copies_regular_files_below_the_limit_and_skips_sockets() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("run");
        std::fs::create_dir_all(from.join("load")).unwrap();
        std::fs::write(from.join("server.log"), "log").unwrap();
        std::fs::write(from.join("load").join("html.csv"), "a,b").unwrap();
        std::fs::write(from.join("big"), vec![0u8; 100]).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(from.join("php-fpm.sock")).unwrap();
        let to = d.path().join("kept").join("run");
        assert_eq!(copy_files(&from, &to, 99).unwrap(), 2);
        assert_eq!(
            std::fs::read_to_string(to.join("server.log")).unwrap(),
            "log"
        );
        assert_eq!(
            std::fs::read_to_string(to.join("load").join("html.csv")).unwrap(),
            "a,b"
        );
        assert!(!to.join("big").exists() && !to.join("php-fpm.sock").exists());
    }
    use super::*;

    #[test]
    fn medians_and_means_ignore_what_is_not_a_number() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, f64::NAN, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
        assert_eq!(median_opt(&[f64::NAN]), None);
        assert_eq!(median_opt(&[4.0, 1.0]), Some(2.5));
        assert_eq!(mean(&[1.0, 2.0]), 1.5);
        assert_eq!(mean(&[]), 0.0);
    }

    #[test]
    fn utc_stamp_shape() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16);
        assert!(s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }

    #[test]
    fn flag_values() {
        assert_eq!(parse_quota("10%").unwrap(), 0.1);
        assert_eq!(parse_quota("0.25").unwrap(), 0.25);
        assert!(parse_quota("0").is_err() && parse_quota("abc").is_err());
        assert_eq!(parse_quota_or_none("off").unwrap(), OrNone(None));
        assert_eq!(parse_quota_or_none("20%").unwrap(), OrNone(Some(0.2)));
        assert_eq!(parse_count_or_none("3").unwrap(), OrNone(Some(3)));
        assert!(parse_count_or_none("0").is_err());
        assert_eq!(
            parse_duration_or_none("30ms").unwrap(),
            OrNone(Some(Duration::from_millis(30)))
        );
        assert!(parse_duration_or_none("30").unwrap_err().contains("30ms"));
        assert_eq!(parse_bytes("20KB").unwrap(), 20_000);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("16k").is_err());
        assert_eq!(whole_seconds("--d", Duration::from_secs(3)).unwrap(), 3);
        assert!(whole_seconds("--d", Duration::from_millis(1500))
            .unwrap_err()
            .contains("1500ms"));
        assert_eq!(pct(0.1), "10");
        assert_eq!(pct(0.025), "2.5");
    }
}

/// One HTTP/1.1 response read off a kept-alive connection by [`read_response`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Its status (0 if the status line has none).
    pub status: u16,
    /// Its `Content-Length` (`None`: the head had none, and no body was taken).
    pub content_length: Option<usize>,
}

/// Read one response from `s`: `buf` holds what was read before and keeps what follows the
/// response (the next one's bytes). The end of the stream before a whole response is an error.
pub fn read_response(s: &mut impl Read, buf: &mut Vec<u8>) -> std::io::Result<Response> {
    let mut chunk = [0u8; 64 << 10];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let content_length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok());
            let len = content_length.unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                buf.drain(..end + 4 + len);
                return Ok(Response {
                    status,
                    content_length,
                });
            }
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("the peer closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

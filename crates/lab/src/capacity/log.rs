//! The request times of an access log, read line by line with the project's one Combined Log
//! Format parser ([`loadgen::clf`]): malformed lines are counted and skipped, with the first
//! few reasons kept for the report.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Serialize;

use super::CapacityError;

/// How many malformed lines are kept as examples.
const EXAMPLES: usize = 3;

/// What a log says about when requests came.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogTimes {
    /// The time of every parsed request (seconds since the Unix epoch).
    #[serde(skip)]
    pub times: Vec<i64>,
    /// Non-empty lines read.
    pub lines: u64,
    /// Lines that were not Combined (or Common) Log Format, skipped.
    pub malformed: u64,
    /// The first few: (line number, reason).
    pub malformed_examples: Vec<(u64, String)>,
}

impl LogTimes {
    /// Add one line (`n`: its 1-based number).
    pub fn push_line(&mut self, n: u64, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        self.lines += 1;
        match loadgen::clf::parse_line(line) {
            Ok(r) => self.times.push(r.time_s),
            Err(e) => {
                self.malformed += 1;
                if self.malformed_examples.len() < EXAMPLES {
                    self.malformed_examples.push((n, e));
                }
            }
        }
    }

    /// The skipped lines in one sentence (empty when none was).
    pub fn malformed_note(&self) -> String {
        if self.malformed == 0 {
            return String::new();
        }
        let ex: Vec<String> = self
            .malformed_examples
            .iter()
            .map(|(n, e)| format!("line {n}: {e}"))
            .collect();
        format!(
            "{} of {} log lines are not Combined Log Format and were skipped ({})",
            self.malformed,
            self.lines,
            ex.join("; ")
        )
    }
}

/// Read the log at `path`. An error when it cannot be read or holds no parsable line.
pub fn read_log(path: &Path) -> Result<LogTimes, CapacityError> {
    let f = std::fs::File::open(path).map_err(|e| CapacityError::Io {
        path: path.to_owned(),
        source: e,
    })?;
    let mut out = LogTimes::default();
    let mut buf = Vec::new();
    let mut r = BufReader::new(f);
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| CapacityError::Io {
                path: path.to_owned(),
                source: e,
            })?;
        if got == 0 {
            break;
        }
        n += 1;
        out.push_line(n, &String::from_utf8_lossy(&buf));
    }
    if out.times.is_empty() {
        return Err(CapacityError::Log(if out.lines == 0 {
            format!("{} is empty", path.display())
        } else {
            format!(
                "{}: no request parsed; {}",
                path.display(),
                out.malformed_note()
            )
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_are_counted_skipped_and_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("access.log");
        std::fs::write(
            &p,
            "10.0.0.1 - - [26/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"x\"\n\
             this is not a log line\n\
             \n\
             10.0.0.1 - - [26/Nov/2026:10:00:01 +0100] \"GET /a HTTP/1.1\" 404 - \"-\" \"x\"\n",
        )
        .unwrap();
        let l = read_log(&p).unwrap();
        assert_eq!((l.lines, l.malformed), (3, 1));
        assert_eq!(l.times.len(), 2);
        // Both at 09:00 UTC, one second apart.
        assert_eq!(l.times[1] - l.times[0], 1);
        let note = l.malformed_note();
        assert!(
            note.starts_with("1 of 3 log lines") && note.contains("line 2"),
            "{note}"
        );
        std::fs::write(&p, "garbage\nmore garbage\n").unwrap();
        let e = read_log(&p).unwrap_err().to_string();
        assert!(
            e.contains("no request parsed") && e.contains("2 of 2"),
            "{e}"
        );
        std::fs::write(&p, "").unwrap();
        assert!(read_log(&p).unwrap_err().to_string().contains("empty"));
        assert!(read_log(&d.path().join("none")).is_err());
    }
}

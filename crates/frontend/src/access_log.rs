//! The access log: one Combined Log Format line per request with the back end that served it
//! appended in quotes (`"-"` when none did), written by a thread of its own fed by a channel,
//! so no request waits for a disk.

use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::SystemTime;

/// One finished request.
#[derive(Debug, Clone)]
pub struct Record {
    /// The client.
    pub remote: Option<IpAddr>,
    /// When the request arrived.
    pub time: SystemTime,
    /// `METHOD target VERSION`.
    pub request_line: String,
    /// Status sent (0 if none).
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// `Referer`.
    pub referer: String,
    /// `User-Agent`.
    pub user_agent: String,
    /// The back end that answered (the one the request was sent to).
    pub backend: Option<SocketAddr>,
}

fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if c.is_control() => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        escape(s)
    }
}

/// One line (UTC), newline included.
pub fn line(r: &Record) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let t = time::OffsetDateTime::from(r.time);
    format!(
        "{} - - [{:02}/{}/{}:{:02}:{:02}:{:02} +0000] \"{}\" {} {} \"{}\" \"{}\" \"{}\"\n",
        r.remote.map_or("-".to_string(), |a| a.to_string()),
        t.day(),
        MONTHS[t.month() as usize - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second(),
        escape(&r.request_line),
        r.status,
        if r.bytes == 0 {
            "-".to_string()
        } else {
            r.bytes.to_string()
        },
        or_dash(&r.referer),
        or_dash(&r.user_agent),
        r.backend.map_or("-".to_string(), |b| b.to_string()),
    )
}

/// The writer. See the module docs.
pub struct AccessLog {
    tx: Mutex<Option<Sender<Record>>>,
    join: Mutex<Option<JoinHandle<io::Result<()>>>>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessLog")
    }
}

impl AccessLog {
    /// Start writing to `path` (`-` = stdout).
    pub fn create(path: &Path) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(
                std::fs::File::create(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
            )
        };
        let (tx, rx) = mpsc::channel::<Record>();
        let join = std::thread::Builder::new()
            .name("front-log".into())
            .spawn(move || {
                let mut w = BufWriter::with_capacity(64 * 1024, out);
                while let Ok(r) = rx.recv() {
                    w.write_all(line(&r).as_bytes())?;
                    while let Ok(r) = rx.try_recv() {
                        w.write_all(line(&r).as_bytes())?;
                    }
                    w.flush()?;
                }
                w.flush()
            })?;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            join: Mutex::new(Some(join)),
        })
    }

    /// Queue a line.
    pub fn write(&self, r: Record) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = tx.send(r);
        }
    }

    /// Write what is queued and stop.
    pub fn close(&self) -> io::Result<()> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let join = self.join.lock().unwrap_or_else(|p| p.into_inner()).take();
        match join.map(|j| j.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("access log writer panicked")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec() -> Record {
        Record {
            remote: Some("10.0.0.1".parse().unwrap()),
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(971_211_336),
            request_line: "GET /a\"b HTTP/1.1".into(),
            status: 200,
            bytes: 2326,
            referer: String::new(),
            user_agent: "curl/8".into(),
            backend: Some("127.0.0.1:8081".parse().unwrap()),
        }
    }

    #[test]
    fn combined_format_with_the_back_end() {
        assert_eq!(
            line(&rec()),
            "10.0.0.1 - - [10/Oct/2000:20:55:36 +0000] \"GET /a\\\"b HTTP/1.1\" 200 2326 \"-\" \"curl/8\" \"127.0.0.1:8081\"\n"
        );
        let none = Record {
            backend: None,
            bytes: 0,
            ..rec()
        };
        assert!(line(&none).ends_with(" 200 - \"-\" \"curl/8\" \"-\"\n"));
    }

    #[test]
    fn writes_to_a_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("access.log");
        let log = AccessLog::create(&p).unwrap();
        log.write(rec());
        log.write(rec());
        log.close().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 2);
    }
}

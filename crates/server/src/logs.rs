//! Background log writers: the worker log (`--pfs-log`, JSON lines drained from
//! `Sched::drain_log`) and the access log (Combined Log Format). Both write from their own
//! thread fed by a channel, so neither the gate nor a request ever waits for a disk.
//!
//! The access log's thread wakes at most once per [`ACCESS_LOG_LINGER`]: after the first line
//! of a quiet spell it waits that long and writes everything that came meanwhile in one
//! `write`. Woken for every line, it cost each request a futex wake-up, two context switches
//! and a `write` on the server's CPU (a third of triage's CPU at 4000 req/s on one CPU); a
//! sender finding the thread asleep in its linger makes no system call at all. A line is on
//! disk at most a linger after its request ended, and every line is written when the server
//! stops (a server killed with SIGKILL loses the last linger's lines, as nginx's `buffer=`).

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use policy::{Event, State};

/// How long the access log's thread gathers lines after the first of a quiet spell before it
/// writes them (see the module docs).
pub const ACCESS_LOG_LINGER: Duration = Duration::from_millis(100);

/// A line-writing thread fed by a channel; after the first item of a quiet spell it waits
/// `linger` and takes everything that came meanwhile.
struct Writer<T: Send + 'static> {
    tx: Mutex<Option<Sender<T>>>,
    join: Mutex<Option<JoinHandle<io::Result<()>>>>,
}

impl<T: Send + 'static> Writer<T> {
    fn spawn(
        path: &Path,
        name: &str,
        linger: Duration,
        mut format: impl FnMut(&mut dyn Write, T) -> io::Result<()> + Send + 'static,
    ) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(
                std::fs::File::create(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
            )
        };
        let (tx, rx): (Sender<T>, Receiver<T>) = mpsc::channel();
        let join = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let mut w = BufWriter::with_capacity(64 * 1024, out);
                while let Ok(item) = rx.recv() {
                    format(&mut w, item)?;
                    if !linger.is_zero() {
                        // Senders find no receiver waiting meanwhile: no wake-up per item.
                        std::thread::sleep(linger);
                    }
                    while let Ok(item) = rx.try_recv() {
                        format(&mut w, item)?;
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

    fn send(&self, item: T) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = tx.send(item);
        }
    }

    fn close(&self) -> io::Result<()> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let join = self.join.lock().unwrap_or_else(|p| p.into_inner()).take();
        match join.map(|j| j.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("log writer thread panicked")),
            None => Ok(()),
        }
    }
}

/// The worker log as JSON lines: `{"worker":3,"state":"run","t_ns":123}`.
pub struct PfsLog(Writer<Vec<Event>>);

impl PfsLog {
    /// Start writing to `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        // Drained every 50 ms by the server already: no linger.
        Writer::spawn(path, "pfs-log", Duration::ZERO, |w, events: Vec<Event>| {
            for e in events {
                let s = match e.state {
                    State::Run => "run",
                    State::Wait => "wait",
                    State::Ready => "ready",
                };
                writeln!(
                    w,
                    "{{\"worker\":{},\"state\":\"{s}\",\"t_ns\":{}}}",
                    e.worker, e.t
                )?;
            }
            Ok(())
        })
        .map(Self)
    }

    /// Queue events for writing.
    pub fn write(&self, events: Vec<Event>) {
        if !events.is_empty() {
            self.0.send(events);
        }
    }

    /// Flush and stop the writer.
    pub fn close(&self) -> io::Result<()> {
        self.0.close()
    }
}

/// What the access log needs from a request, captured when it arrives.
#[derive(Debug, Clone)]
pub struct AccessRecord {
    /// The client.
    pub remote: std::net::IpAddr,
    /// When the request arrived.
    pub time: SystemTime,
    /// `METHOD target VERSION`.
    pub request_line: String,
    /// The `Referer` header (empty if none).
    pub referer: String,
    /// The `User-Agent` header (empty if none).
    pub user_agent: String,
}

/// Combined Log Format writer.
pub struct AccessLog(Writer<(AccessRecord, u16, u64)>);

impl AccessLog {
    /// Start writing to `path` (`-` = stdout).
    pub fn create(path: &Path) -> io::Result<Self> {
        Writer::spawn(
            path,
            "access-log",
            ACCESS_LOG_LINGER,
            |w, (r, status, bytes)| w.write_all(combined_line(&r, status, bytes).as_bytes()),
        )
        .map(Self)
    }

    /// Log one finished request (its status and body bytes).
    pub fn write(&self, rec: AccessRecord, status: u16, bytes: u64) {
        self.0.send((rec, status, bytes));
    }

    /// Flush and stop the writer.
    pub fn close(&self) -> io::Result<()> {
        self.0.close()
    }
}

fn clf_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if c.is_control() => vec!['?'],
            c => vec![c],
        })
        .collect()
}

/// One Combined Log Format line (UTC), newline included.
pub fn combined_line(r: &AccessRecord, status: u16, bytes: u64) -> String {
    let t = time::OffsetDateTime::from(r.time);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let bytes = if bytes == 0 {
        "-".to_string()
    } else {
        bytes.to_string()
    };
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            clf_escape(s)
        }
    };
    format!(
        "{} - - [{:02}/{}/{}:{:02}:{:02}:{:02} +0000] \"{}\" {} {} \"{}\" \"{}\"\n",
        r.remote,
        t.day(),
        MONTHS[t.month() as usize - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second(),
        clf_escape(&r.request_line),
        status,
        bytes,
        dash(&r.referer),
        dash(&r.user_agent)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_format() {
        let r = AccessRecord {
            remote: "10.0.0.1".parse().unwrap(),
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(971_211_336),
            request_line: "GET /a\"b HTTP/1.1".into(),
            referer: String::new(),
            user_agent: "curl/8".into(),
        };
        assert_eq!(
            combined_line(&r, 200, 2326),
            "10.0.0.1 - - [10/Oct/2000:20:55:36 +0000] \"GET /a\\\"b HTTP/1.1\" 200 2326 \"-\" \"curl/8\"\n"
        );
    }

    #[test]
    fn access_log_lines_sent_during_a_linger_are_all_written_in_order_on_close() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("access.log");
        let log = AccessLog::create(&p).unwrap();
        let rec = |i: u32| AccessRecord {
            remote: "10.0.0.1".parse().unwrap(),
            time: SystemTime::UNIX_EPOCH,
            request_line: format!("GET /{i} HTTP/1.1"),
            referer: String::new(),
            user_agent: String::new(),
        };
        // The first line starts a linger; the rest arrive during it; close comes before its end.
        for i in 0..500 {
            log.write(rec(i), 200, 1);
        }
        log.close().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 500);
        for (i, l) in lines.iter().enumerate() {
            assert!(l.contains(&format!("\"GET /{i} HTTP/1.1\" 200 1 ")), "{l}");
        }
    }

    #[test]
    fn pfs_log_writes_json_lines() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("pfs.jsonl");
        let log = PfsLog::create(&p).unwrap();
        log.write(vec![Event {
            worker: 2,
            state: State::Ready,
            t: 7,
        }]);
        log.close().unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"worker\":2,\"state\":\"ready\",\"t_ns\":7}\n"
        );
    }
}

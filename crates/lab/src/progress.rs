//! Progress of a long lab: an indicatif bar on a terminal, plain lines otherwise (CI logs).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over `total` runs.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
}

impl Progress {
    /// A bar on a terminal (stderr), lines otherwise.
    pub fn new(total: u64, what: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed_precise} (eta {eta}) {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(what.to_owned());
            b
        });
        if bar.is_none() {
            eprintln!("{what}: {total} runs");
        }
        Progress {
            bar,
            total,
            done: 0,
        }
    }

    /// A run starts.
    pub fn start(&self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(msg.to_owned());
        }
    }

    /// A run ended; `line` says how it went.
    pub fn finish_one(&mut self, line: &str) {
        self.done += 1;
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
            }
            None => eprintln!("[{}/{}] {line}", self.done, self.total),
        }
    }

    /// A note that is not a run (a skipped peer, a warning).
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

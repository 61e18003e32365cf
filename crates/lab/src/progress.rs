//! Progress of a long lab: an indicatif bar on a terminal, plain lines otherwise (CI logs).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over `total` runs.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
    /// When the first run started: plain lines say the time spent and the time left.
    started: Instant,
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
            started: Instant::now(),
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
            None => eprintln!(
                "[{}/{} {}] {line}",
                self.done,
                self.total,
                elapsed_and_left(self.started.elapsed(), self.done, self.total)
            ),
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

/// `3m05s, ~4m10s left`: the time spent on `done` of `total` runs and, at that pace, the
/// time the others will take.
pub fn elapsed_and_left(elapsed: Duration, done: u64, total: u64) -> String {
    let ms = |d: Duration| {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    };
    if done == 0 || done >= total {
        return ms(elapsed);
    }
    let left = elapsed.mul_f64((total - done) as f64 / done as f64);
    format!("{}, ~{} left", ms(elapsed), ms(left))
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_say_the_time_spent_and_left() {
        let d = Duration::from_secs(125);
        assert_eq!(elapsed_and_left(d, 5, 10), "2m05s, ~2m05s left");
        assert_eq!(elapsed_and_left(d, 1, 3), "2m05s, ~4m10s left");
        assert_eq!(elapsed_and_left(d, 3, 3), "2m05s");
        assert_eq!(elapsed_and_left(d, 0, 3), "2m05s");
    }
}

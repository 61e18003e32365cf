//! A token bucket that paces reads from one connection to a byte rate, emulating a slow link
//! on the client side. Reads are cut to the tokens available; when the bucket is empty the
//! reader sleeps until a minimum chunk (about 4 ms worth, at least 1 byte) has accumulated, so
//! the timer is not woken per byte. Credit saved while data was waiting is bounded by 50 ms
//! worth of tokens; credit saved while the link was idle is dropped ([`Bucket::idle`]). With a small SO_RCVBUF the unread bytes back up into the
//! server's socket and its sends block, as they would on a 10 Mb/s network.

use tokio::time::Instant;

/// Token bucket in bytes.
#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    cap: f64,
    chunk: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A bucket refilling at `rate` bytes/s, holding at most 50 ms worth (and at least 1 KiB,
    /// or one second's worth if that is smaller), so that a reader delayed by the scheduler for
    /// less than that loses no throughput; it starts with one chunk, so there is no initial
    /// burst.
    pub fn new(rate: f64) -> Self {
        let cap = (rate * 0.05).max(1024.0f64.min(rate)).max(1.0);
        let chunk = (rate * 0.004).clamp(1.0, cap);
        Bucket {
            rate,
            cap,
            chunk,
            tokens: chunk,
            last: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.cap);
    }

    /// Waits until at least one chunk may be read and returns how many bytes may be read now.
    pub async fn allowance(&mut self) -> usize {
        self.refill();
        if self.tokens < self.chunk {
            let wait = (self.chunk - self.tokens) / self.rate;
            tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
            self.refill();
        }
        (self.tokens.floor() as usize).max(1)
    }

    /// The link was idle (the reader had to wait for data): drop the credit saved meanwhile,
    /// since a real link cannot deliver faster after a pause. Credit saved while data was
    /// waiting (the reader was late) is kept, up to the capacity.
    pub fn idle(&mut self) {
        self.refill();
        self.tokens = self.tokens.min(self.chunk);
    }

    /// Takes `n` bytes that were read.
    pub fn consume(&mut self, n: usize) {
        self.tokens -= n as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In virtual time: reading 1 MB through a 100 KB/s bucket takes 10 s (minus the initial
    /// 400-byte chunk), whatever the chunking of the reads.
    #[tokio::test(start_paused = true)]
    async fn paces_to_the_rate() {
        let mut b = Bucket::new(100_000.0);
        let t0 = Instant::now();
        let mut got = 0usize;
        let mut reads = 0;
        while got < 1_000_000 {
            let n = b.allowance().await.min(1500).min(1_000_000 - got);
            b.consume(n);
            got += n;
            reads += 1;
        }
        let secs = t0.elapsed().as_secs_f64();
        assert!((9.9..=10.05).contains(&secs), "took {secs} s");
        assert!(reads >= 667, "{reads} reads");
    }

    /// A reader that comes back late (here 30 ms, less than the 50 ms of capacity) finds the
    /// tokens it missed, so the average rate holds.
    #[tokio::test(start_paused = true)]
    async fn late_readers_keep_the_rate() {
        let mut b = Bucket::new(100_000.0);
        let t0 = Instant::now();
        let mut got = 0usize;
        let mut last = t0;
        while got < 100_000 {
            let n = b.allowance().await.min(100_000 - got);
            b.consume(n);
            got += n;
            last = Instant::now();
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        let secs = last.duration_since(t0).as_secs_f64();
        assert!((0.99..=1.04).contains(&secs), "took {secs} s");
    }

    #[tokio::test(start_paused = true)]
    async fn idle_time_is_not_credit() {
        let mut b = Bucket::new(100_000.0);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let late = b.allowance().await;
        assert_eq!(late, 5000, "a late reader may use the 50 ms capacity");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        b.idle();
        let n = b.allowance().await;
        assert!(
            n <= 400,
            "after an idle second {n} bytes were allowed at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tiny_rates_still_progress() {
        let mut b = Bucket::new(10.0);
        let t0 = Instant::now();
        let mut got = 0;
        while got < 30 {
            let n = b.allowance().await;
            assert!(n >= 1);
            b.consume(1);
            got += 1;
        }
        let secs = t0.elapsed().as_secs_f64();
        assert!((2.0..=3.1).contains(&secs), "took {secs} s");
    }
}

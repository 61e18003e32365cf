//! Admission: at most a bound of requests in the cluster at once; the others wait at the front
//! end, first come first served, and enter as requests leave (seed 004's front end does the
//! same, so that LARD's thresholds keep their meaning under any offered load). The bound is
//! read at each admission, so it follows the number of back ends that are up.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use tokio::sync::Notify;

/// The gate. See the module docs.
#[derive(Debug, Default)]
pub struct Admission {
    inside: AtomicUsize,
    left: Notify,
}

/// A request inside; it leaves when this is dropped.
#[derive(Debug)]
pub struct Admitted(Arc<Admission>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Relaxed);
        self.0.left.notify_one();
    }
}

impl Admission {
    /// Nobody inside.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Requests inside now.
    pub fn inside(&self) -> usize {
        self.inside.load(Relaxed)
    }

    fn try_enter(self: &Arc<Self>, bound: usize) -> Option<Admitted> {
        let mut n = self.inside.load(Relaxed);
        while n < bound.max(1) {
            match self
                .inside
                .compare_exchange_weak(n, n + 1, Relaxed, Relaxed)
            {
                Ok(_) => return Some(Admitted(self.clone())),
                Err(now) => n = now,
            }
        }
        None
    }

    /// Enter once fewer than `bound()` requests are inside.
    pub async fn enter(self: &Arc<Self>, bound: impl Fn() -> usize) -> Admitted {
        // The usual case: room at once, without registering as a waiter.
        if let Some(a) = self.try_enter(bound()) {
            return a;
        }
        loop {
            // Registered before the check, so a departure between the check and the wait
            // still wakes this request.
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if let Some(a) = self.try_enter(bound()) {
                return a;
            }
            left.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_a_departure() {
        let a = Admission::new();
        let first = a.enter(|| 1).await;
        let waiter = {
            let a = a.clone();
            tokio::spawn(async move { a.enter(|| 1).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert_eq!(a.inside(), 1);
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(a.inside(), 1);
        drop(second);
        assert_eq!(a.inside(), 0);
    }

    #[tokio::test]
    async fn the_bound_is_read_at_each_entry() {
        let a = Admission::new();
        let x = a.enter(|| 2).await;
        let y = a.enter(|| 2).await;
        assert!(a.try_enter(2).is_none());
        assert!(a.try_enter(3).is_some());
        drop((x, y));
    }
}

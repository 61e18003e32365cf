//! Queueing at the wake-up: a task woken while its lane is busy is polled once, when granted;
//! a grant its poll does not use is handed on; a task dropped while queued leaves no trace.

use super::*;
use crate::Permit;
use policy::{Hints, PolicyConfig, Sched};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use tokio::sync::oneshot;

fn gate(wake_queue: bool) -> Arc<Gate> {
    let p = policy::build("pos", &PolicyConfig::default()).unwrap();
    Arc::new(Gate::new(Sched::new(1, p), true, None).with_wake_queue(wake_queue))
}

/// A task's output, or a failure if it is stuck (the paused clock jumps when all are idle).
async fn within<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("the task was never granted its slot")
        .unwrap()
}

/// Counts the polls of the future it wraps.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicUsize>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

/// `a` (returned) holds the only slot, and a task of `b` that runs `then` once a message comes
/// is queued at that message's wake-up behind it.
async fn queued_behind_a<T: Send + 'static>(
    g: &Arc<Gate>,
    then: impl Future<Output = T> + Send + 'static,
) -> (Permit<'_>, tokio::task::JoinHandle<T>) {
    let (a, b) = (g.checkout(), g.checkout());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(QueueOnWake::new(g.clone(), b, async move {
        rx.await.unwrap();
        then.await
    }));
    tokio::task::yield_now().await;
    let pa = g.acquire(a, Hints::default()).await;
    tx.send(()).unwrap();
    tokio::task::yield_now().await;
    assert_eq!(g.snapshot().queued, 1, "b is queued behind a");
    (pa, task)
}

/// Worker `a` holds the only slot; a task of worker `b` waits for a message, then runs a burst.
/// The message comes while `a` runs; then `a` ends. Returns how many times `b`'s task was polled.
async fn polls_for_one_contended_burst(wake_queue: bool) -> usize {
    let g = gate(wake_queue);
    assert_eq!(g.queues_on_wake(), wake_queue);
    let (a, b) = (g.checkout(), g.checkout());
    let (tx, rx) = oneshot::channel::<()>();
    let polls = Arc::new(AtomicUsize::new(0));
    let g2 = g.clone();
    let body = Counted {
        inner: Box::pin(async move {
            rx.await.unwrap();
            let p = g2.acquire(b, Hints::default()).await;
            p.worker()
        }),
        polls: polls.clone(),
    };
    let task = if wake_queue {
        tokio::spawn(QueueOnWake::new(g.clone(), b, body))
    } else {
        tokio::spawn(body)
    };
    tokio::task::yield_now().await;
    assert_eq!(polls.load(SeqCst), 1, "b waits for its message");
    let pa = g.acquire(a, Hints::default()).await;
    tx.send(()).unwrap();
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    assert_eq!(g.snapshot().queued, 1, "b is queued behind a");
    if wake_queue {
        assert_eq!(polls.load(SeqCst), 1, "queued at its wake-up, not polled");
    }
    drop(pa);
    assert_eq!(within(task).await, b);
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0), "the gate ends idle");
    polls.load(SeqCst)
}

#[tokio::test(start_paused = true)]
async fn a_task_woken_while_its_lane_is_busy_is_polled_once_when_granted() {
    // Polled when the message came (finding the slot taken), and again when granted.
    assert_eq!(polls_for_one_contended_burst(false).await, 3);
    // Queued when the message came, polled once with the slot.
    assert_eq!(polls_for_one_contended_burst(true).await, 2);
}

#[tokio::test(start_paused = true)]
async fn a_grant_the_woken_poll_does_not_use_is_handed_on() {
    let g = gate(true);
    // b's wake-up is not for a burst: the task ends without asking for a slot.
    let (pa, task) = queued_behind_a(&g, async {}).await;
    let c = g.checkout();
    let g2 = g.clone();
    let tc = tokio::spawn(async move { g2.acquire(c, Hints::default()).await.worker() });
    tokio::task::yield_now().await;
    assert_eq!(g.snapshot().queued, 2, "b (at its wake-up) and c");
    drop(pa);
    within(task).await;
    assert_eq!(within(tc).await, c, "b's unused slot went to c");
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_task_dropped_while_queued_at_its_wake_up_leaves_no_trace() {
    let g = gate(true);
    let (pa, task) = queued_behind_a(&g, async {}).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(g.snapshot().queued, 0, "b left the queue");
    drop(pa);
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0));
}

#[test]
fn a_policy_that_orders_by_hints_is_not_queued_at_wake_ups() {
    let p = policy::build("content", &PolicyConfig::default()).unwrap();
    let g = Gate::new(Sched::new(1, p), true, None).with_wake_queue(true);
    assert!(!g.queues_on_wake());
    let g = gate(true).clone();
    assert!(g.queues_on_wake());
    let p = policy::build("pos", &PolicyConfig::default()).unwrap();
    let off = Gate::new(Sched::new(1, p), true, None)
        .with_wake_queue(true)
        .with_rounds(false);
    assert!(!off.queues_on_wake(), "no rounds: nothing to gain");
}

#[tokio::test(start_paused = true)]
async fn a_task_that_panics_with_the_slot_of_its_wake_up_gives_it_back() {
    let g = gate(true);
    // b is granted the slot through its wake-up and panics before asking for it.
    let (pa, task) = queued_behind_a(&g, async { panic!("a burst that panics") }).await;
    let c = g.checkout();
    drop(pa);
    assert!(task.await.unwrap_err().is_panic());
    let s = g.snapshot();
    assert_eq!((s.busy, s.queued), (0, 0), "the slot came back");
    let g2 = g.clone();
    let tc = tokio::spawn(async move { g2.acquire(c, Hints::default()).await.worker() });
    assert_eq!(within(tc).await, c);
}

//! Queueing at the wake-up: a task whose wake-up finds its lane busy waits in the policy's
//! ready queue, not in the runtime's, so that it is polled once, when the policy chooses it.
//!
//! Without it, under contention every burst costs its task two polls: the runtime polls the
//! task that the socket woke (FIFO), the task reads and parses its request, asks the gate for a
//! slot, finds it taken and joins the ready queue (`Pending`); when the policy grants it the
//! slot it is polled again, and the runtime's task harness, hyper's dispatcher and the handler's
//! futures are all entered a second time. A kernel does not run a woken process to find out
//! that it wants the CPU: the wake-up puts it on the run queue and the scheduler picks. With
//! [`QueueOnWake`] around a task, the task's waker does that: a wake-up that finds the worker's
//! lane busy (no free slot, or workers queued) makes the worker ready at once, in the policy's
//! order, with the hints of its last acquisition, and the task is woken when the policy grants
//! the slot; the poll then runs with the slot held, and its first acquisition takes it at no
//! cost. If the poll asks for no slot (the wake-up was for a timer, part of a request, a
//! closed connection), the slot is given back when the poll ends. A wake-up that finds the
//! lane idle wakes the task as before (its acquisition then opens a scheduling round).
//!
//! POS sees the worker become ready when its wake-up comes, which is what the kernel's
//! scheduler sees too (seed 001 logs the run/wait behaviour of processes). The gate applies it
//! only with scheduling rounds and a policy that does not order by the request's hints
//! ([`Gate::queues_on_wake`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use policy::WorkerId;

use crate::Gate;

/// What a wrapped task's waker needs: the gate, the worker, the runtime's waker for the task.
struct Hook<G> {
    /// Owner of the gate (the server's shared state): the waker outlives any borrow.
    gate: G,
    /// The task's worker (one per connection).
    worker: WorkerId,
    /// The runtime's waker for the task, as of its last poll: woken directly when the lane is
    /// idle, or by the gate when the policy grants the queued worker its slot.
    task: Mutex<Option<Waker>>,
    /// Set while a wake-up has the worker queued (or granted and not yet polled), so that a
    /// poll that finds it clear skips the lane's lock.
    queued: AtomicBool,
}

impl<G: AsRef<Gate> + Send + Sync + 'static> Wake for Hook<G> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // The gate never takes this lock, so holding it across the lane's lock cannot deadlock.
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        let Some(task) = task.as_ref() else {
            return;
        };
        if !self
            .gate
            .as_ref()
            .queue_woken(self.worker, task, &self.queued)
        {
            task.wake_by_ref();
        }
    }
}

/// A task whose wake-ups queue its worker while its lane is busy (see the module docs). Wrap
/// the whole task (the future given to the runtime), with the worker its bursts acquire for.
pub struct QueueOnWake<F, G: AsRef<Gate> + Send + Sync + 'static> {
    /// The task.
    inner: Pin<Box<F>>,
    hook: Arc<Hook<G>>,
    /// The waker the task is polled with (the hook's), made once.
    waker: Waker,
}

impl<F, G> QueueOnWake<F, G>
where
    G: AsRef<Gate> + Send + Sync + 'static,
{
    /// Wrap `task`, whose bursts acquire slots as `worker` on `gate`'s gate.
    pub fn new(gate: G, worker: WorkerId, task: F) -> Self {
        let hook = Arc::new(Hook {
            gate,
            worker,
            task: Mutex::new(None),
            queued: AtomicBool::new(false),
        });
        let waker = Waker::from(hook.clone());
        Self {
            inner: Box::pin(task),
            hook,
            waker,
        }
    }
}

impl<F, G> Future for QueueOnWake<F, G>
where
    F: Future,
    G: AsRef<Gate> + Send + Sync + 'static,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let hook = &this.hook;
        {
            let mut t = hook.task.lock().unwrap_or_else(|p| p.into_inner());
            match &*t {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *t = Some(cx.waker().clone()),
            }
        }
        let gate = hook.gate.as_ref();
        let Poll::Ready(granted) = gate.begin_woken_poll(hook.worker, &hook.queued) else {
            return Poll::Pending;
        };
        let r = this
            .inner
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker));
        if granted {
            gate.end_woken_poll(hook.worker);
        }
        r
    }
}

impl<F, G: AsRef<Gate> + Send + Sync + 'static> Drop for QueueOnWake<F, G> {
    fn drop(&mut self) {
        // Dropped while queued (the runtime shutting down): leave the queue, or give back the
        // slot granted meanwhile; dropped by a panic out of a poll that held the slot: give it
        // back.
        let hook = &self.hook;
        hook.gate.as_ref().cancel_woken(hook.worker, &hook.queued);
    }
}

#[cfg(test)]
mod tests;

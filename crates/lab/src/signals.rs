//! Ctrl-C and SIGTERM: a lab never dies leaving namespaces, cgroups or processes behind.
//!
//! [`install`] replaces the SIGINT/SIGTERM handlers with one that only raises a flag (the
//! only async-signal-safe thing to do); the lab's waiting loops poll [`check`] and return
//! [`LabError::Interrupted`], so every guard on the stack drops and cleans up. The returned
//! [`SignalGuard`] restores the previous handlers. The processes the lab starts live in their
//! own process groups, so a terminal's Ctrl-C reaches only the lab, which stops them in order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::error::{LabError, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Restores the signal handlers that were in place before [`install`].
pub struct SignalGuard {
    old: Vec<(Signal, SigAction)>,
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, act) in self.old.drain(..) {
            // SAFETY: restoring a handler previously returned by sigaction.
            let _ = unsafe { sigaction(sig, &act) };
        }
    }
}

/// Catch SIGINT and SIGTERM until the guard is dropped.
pub fn install() -> Result<SignalGuard> {
    INTERRUPTED.store(false, Ordering::SeqCst);
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    let mut old = Vec::new();
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let prev = unsafe { sigaction(sig, &act) }
            .map_err(|e| LabError::Os(format!("installing a {sig} handler: {e}")))?;
        old.push((sig, prev));
    }
    Ok(SignalGuard { old })
}

/// Whether SIGINT/SIGTERM arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// `Err(Interrupted)` once a signal arrived.
pub fn check() -> Result<()> {
    if interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleep `d`, waking every 20 ms to notice a signal.
pub fn sleep(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
    }
}

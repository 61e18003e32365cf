//! SIGINT and SIGTERM raise a flag the daemon's loop reads, so it leaves through its normal
//! path: the lever restores every raised task and the tracer detaches.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM from now on (for the process's life).
pub fn install() -> std::io::Result<()> {
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &act) }.map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// Whether a signal asked the daemon to stop.
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

//! Relaying a script's output after its header block, chunk by chunk.
//!
//! [`CgiRelay`] is a chunk source in the server's sense (the server's gated body drives it):
//! [`CgiRelay::poll_input`] waits for the next read from the script's stdout *without* a CPU
//! slot (the worker is blocked on the pipe: a wait in the log), and [`CgiRelay::produce`] hands
//! over the chunk while the worker holds a slot (a burst). Limits are enforced here:
//! - the request's deadline (`timeout` from the start of the script): the script's process
//!   group is killed and the body ends with an error (the client sees a truncated response);
//! - the output limit (`max_output` body bytes): the body is cut at exactly the limit, the
//!   script is killed, and the body ends with an error;
//! - a `Content-Length` the script declared: output beyond it is dropped, a shortfall ends the
//!   body with an error.
//!
//! When the script closes its stdout the relay ends the body and lets the script finish in the
//! background (until the deadline), then kills whatever is left of its process group and
//! removes its cgroup. The script exiting ends the body too, once the pipe holds nothing more:
//! a background process that inherited its stdout does not hold the response open (as
//! Apache's mod_cgi). If the relay is dropped early (the client went away) the process group
//! is killed at once.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe;
use tokio::time::Sleep;

use super::lever::Raised;
use super::spawn::ProcGuard;
use super::stats::{AbortOnDrop, CgiStats, Tracker};

/// Read size from the script's stdout.
pub const READ_CHUNK: usize = 16 * 1024;

enum State {
    Running,
    /// The output limit was reached: once the last chunk is out the body ends with an error.
    OverLimit,
    /// EOF seen (or the declared length reached): the body is complete.
    Done,
    /// Ended with an error (see [`CgiRelay::fail`]).
    Failed,
}

/// A script's body on its way to the client. See the module docs.
pub struct CgiRelay {
    stdout: pipe::Receiver,
    pending: Option<Bytes>,
    buf: BytesMut,
    guard: Option<ProcGuard>,
    deadline: Pin<Box<Sleep>>,
    deadline_at: tokio::time::Instant,
    sent: u64,
    max_output: u64,
    declared: Option<u64>,
    state: State,
    pub(super) tracker: Tracker,
    _stdin: Option<AbortOnDrop>,
    peer: Option<super::peer::PeerWatch>,
    /// The script has exited: the next empty read of the pipe is its end.
    exited: bool,
    /// The script runs raised by the CGI lever (restored by [`CgiRelay::lower_script`]).
    raised: Option<Arc<Raised>>,
}

impl std::fmt::Debug for CgiRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CgiRelay")
            .field("script", &self.tracker.script)
            .field("sent", &self.sent)
            .finish()
    }
}

pub(super) struct RelayParts {
    pub stdout: pipe::Receiver,
    pub first: Bytes,
    pub guard: ProcGuard,
    pub deadline: tokio::time::Instant,
    pub max_output: u64,
    pub declared: Option<u64>,
    pub tracker: Tracker,
    pub stdin: Option<AbortOnDrop>,
    pub raised: Option<Arc<Raised>>,
}

impl CgiRelay {
    pub(super) fn new(p: RelayParts) -> Self {
        let mut r = Self {
            stdout: p.stdout,
            pending: None,
            buf: BytesMut::new(),
            guard: Some(p.guard),
            deadline: Box::pin(tokio::time::sleep_until(p.deadline)),
            deadline_at: p.deadline,
            sent: 0,
            max_output: p.max_output,
            declared: p.declared,
            state: State::Running,
            tracker: p.tracker,
            _stdin: p.stdin,
            peer: None,
            exited: false,
            raised: p.raised,
        };
        if !p.first.is_empty() {
            r.accept(p.first);
        }
        r
    }

    fn stats(&self) -> &CgiStats {
        &self.tracker.stats
    }

    /// Take `chunk` into `pending`, applying the declared length and the output limit.
    fn accept(&mut self, mut chunk: Bytes) {
        if let Some(n) = self.declared {
            let room = n.saturating_sub(self.sent);
            if chunk.len() as u64 >= room {
                if chunk.len() as u64 > room {
                    tracing::warn!(
                        script = %self.tracker.script,
                        "cgi: script wrote more than its Content-Length {n}; the rest is dropped"
                    );
                }
                chunk.truncate(room as usize);
                self.finish();
            }
        }
        let room = self.max_output.saturating_sub(self.sent);
        if chunk.len() as u64 > room {
            chunk.truncate(room as usize);
            self.stats().output_limited.fetch_add(1, Relaxed);
            tracing::warn!(
                script = %self.tracker.script,
                limit = self.max_output,
                "cgi: output limit reached: script killed, response truncated"
            );
            self.kill();
            self.state = State::OverLimit;
        }
        self.sent += chunk.len() as u64;
        if !chunk.is_empty() {
            self.pending = Some(chunk);
        }
    }

    fn kill(&mut self) {
        if let Some(g) = self.guard.take() {
            g.kill();
            drop(g);
        }
    }

    /// The body is complete: let the script end by itself until the deadline, then clean up.
    fn finish(&mut self) {
        self.state = State::Done;
        self.tracker.done();
        if let Some(mut g) = self.guard.take() {
            let deadline = self.deadline_at;
            let script = self.tracker.script.clone();
            tokio::spawn(async move {
                match tokio::time::timeout_at(deadline, g.wait()).await {
                    Ok(Ok(super::spawn::Exit::Code(0))) => {}
                    Ok(Ok(e)) => tracing::info!(script = %script, "cgi: script ended: {e}"),
                    Ok(Err(e)) => tracing::warn!(script = %script, "cgi: waiting for script: {e}"),
                    Err(_) => tracing::warn!(
                        script = %script,
                        "cgi: script closed its output but did not exit before the timeout: killed"
                    ),
                }
            });
        }
    }

    /// End the body with `err`: the script's process group is killed. The server's gated body
    /// (`Gated`) sends the chunks produced before the error, and gives hyper a turn to flush
    /// them, before it fails the response.
    fn fail(&mut self, err: io::Error) -> Poll<io::Result<()>> {
        self.kill();
        self.tracker.settle();
        self.state = State::Failed;
        Poll::Ready(Err(err))
    }

    /// Wait (without a CPU slot) until there is something to produce: a chunk from the pipe,
    /// the end of the output, or an error (timeout, output limit).
    pub fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            return Poll::Ready(Ok(()));
        }
        match self.state {
            State::Running => {}
            State::Done => return Poll::Ready(Ok(())),
            State::OverLimit => {
                return self.fail(io::Error::other("CGI output limit reached"));
            }
            State::Failed => return Poll::Ready(Err(io::Error::other("CGI relay failed"))),
        }
        loop {
            if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
                self.buf.reserve(READ_CHUNK);
            }
            let mut rb = ReadBuf::uninit(self.buf.spare_capacity_mut());
            match Pin::new(&mut self.stdout).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        return self.output_ended();
                    }
                    // SAFETY: `n` bytes of the spare capacity were initialised by the read.
                    unsafe { self.buf.set_len(self.buf.len() + n) };
                    let chunk = self.buf.split().freeze();
                    self.accept(chunk);
                    if self.pending.is_some() {
                        return Poll::Ready(Ok(()));
                    }
                    if !matches!(self.state, State::Running) {
                        return self.poll_input(cx);
                    }
                }
                Poll::Ready(Err(e)) => return self.fail(e),
                Poll::Pending => {
                    // Everything the script wrote before exiting is in the pipe: once it has
                    // exited, an empty pipe is the end even if a child it left holds the pipe.
                    if self.exited {
                        return self.output_ended();
                    }
                    if let Some(g) = &self.guard {
                        if g.poll_exited(cx).is_ready() {
                            self.exited = true;
                            continue;
                        }
                    }
                    if let Some(w) = &mut self.peer {
                        if w.poll_closed(cx).is_ready() {
                            // Counted as "client gone" when the relay is dropped.
                            self.kill();
                            self.state = State::Failed;
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "the client went away",
                            )));
                        }
                    }
                    if self.deadline.as_mut().poll(cx).is_ready() {
                        self.stats().timeouts.fetch_add(1, Relaxed);
                        tracing::warn!(
                            script = %self.tracker.script,
                            "cgi: timeout after the headers were sent: script killed, response truncated"
                        );
                        return self.fail(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "CGI script timed out",
                        ));
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// The output ended (end of the pipe, or the script exited and the pipe is empty):
    /// complete the body, or fail it when it is shorter than the declared length.
    fn output_ended(&mut self) -> Poll<io::Result<()>> {
        if let Some(d) = self.declared {
            if self.sent < d {
                tracing::warn!(
                    script = %self.tracker.script,
                    "cgi: script output ended after {} of its Content-Length {d}",
                    self.sent
                );
                return self.fail(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "CGI output shorter than its Content-Length",
                ));
            }
        }
        self.finish();
        Poll::Ready(Ok(()))
    }

    /// The next chunk (`None` at the end). Cheap: the data was read by
    /// [`CgiRelay::poll_input`].
    pub fn produce(&mut self) -> io::Result<Option<Bytes>> {
        if let Some(b) = self.pending.take() {
            return Ok(Some(b));
        }
        match self.state {
            State::Done => Ok(None),
            State::Failed => Err(io::Error::other("CGI relay failed")),
            State::Running | State::OverLimit => {
                Err(io::Error::other("produce called before poll_input"))
            }
        }
    }

    /// Body bytes still to come, if the script declared a length.
    pub fn remaining(&self) -> Option<u64> {
        self.declared.map(|d| {
            d.saturating_sub(self.sent) + self.pending.as_ref().map_or(0, |b| b.len() as u64)
        })
    }

    /// Whether the body is complete.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done) && self.pending.is_none()
    }

    /// Also end the script when `w` says the client went away (while the script computes
    /// without printing, hyper would not notice).
    pub fn watch_peer(&mut self, w: super::peer::PeerWatch) {
        self.peer = Some(w);
    }

    /// The response needs no body (HEAD): end the script now, counted as completed.
    pub fn discard(mut self) {
        self.tracker.done();
        self.kill();
    }

    /// Whether the script runs raised by the CGI lever now.
    pub fn script_raised(&self) -> bool {
        self.raised.as_ref().is_some_and(|r| r.is_held())
    }

    /// Restore a raised script (its worker lost POS's mark); nothing if it is not raised.
    pub fn lower_script(&mut self) {
        if let Some(r) = self.raised.take() {
            r.lower();
        }
    }

    /// The script's pid while it runs (tests, logs).
    pub fn pid(&self) -> Option<i32> {
        self.guard.as_ref().map(|g| g.pid())
    }
}

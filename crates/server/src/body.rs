//! Response bodies produced chunk by chunk through the gate.
//!
//! [`ServeBody`] is the one body type every handler returns. A gated body holds a
//! [`ChunkSource`]; each `poll_frame` first lets the source wait for its input without a slot
//! (a CGI pipe, a disk), then acquires a slot, produces the next chunk (optionally gzip
//! compressed) and releases the slot before handing the chunk to hyper, which writes it to the
//! socket (a wait). So a body of `n` chunks is `n` run/wait cycles of its worker.
//!
//! A [`Completion`] rides along and, when the body is dropped (sent, or abandoned), records
//! the request in the metrics and the access log and marks the connection idle.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use gate::AcquireState;
use http_body::{Body, Frame, SizeHint};
use policy::{Hints, WorkerId};

use crate::ctx::{Conn, Ctx};
use crate::logs::AccessRecord;

/// Produces a body chunk by chunk. `produce` runs while the worker holds a CPU slot: keep it
/// synchronous and bounded (one chunk of work).
pub trait ChunkSource: Send + 'static {
    /// Wait for input without holding a slot (default: nothing to wait for).
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = cx;
        Poll::Ready(Ok(()))
    }
    /// Produce the next chunk (`None` at the end). Called under a slot.
    fn produce(&mut self) -> io::Result<Option<Bytes>>;
    /// Bytes still to come, if known.
    fn remaining(&self) -> Option<u64> {
        None
    }
}

/// Gzip compression applied chunk by chunk under the slot, on zlib-rs directly (a deflate
/// stream with zlib's gzip wrapper: header, CRC-32 and length trailer). Not through flate2: in
/// a build that also links a C zlib (pingora, in `triage`, turns on zlib-ng), flate2 would use
/// the C one, which costs this server about 10% more CPU per compressed response.
///
/// The compressor's state (~270 KB: window, hash chains, buffers) is taken when the first chunk
/// is compressed, not when the response starts, from a small per-thread pool of reset states,
/// the most recently used first, and goes back to it when the stream is dropped. A state used
/// a moment ago on this thread is still in the core's cache; a fresh one, or one set up in the
/// response's first burst and used after other streams' bursts ran in between (a scheduling
/// policy that takes turns), starts cold, which cost up to 15% more CPU per compressed response
/// than compressing in one go.
pub struct Gzip {
    /// The gzip level (0..=9), kept until the state is taken.
    level: u32,
    /// The deflate state, from [`take_state`] at the first chunk; back to the pool on drop.
    z: Option<zlib_rs::Deflate>,
}

/// Compressor states kept per thread for reuse (each ~270 KB).
const POOLED_STATES: usize = 4;

thread_local! {
    /// Reset deflate states and their levels, the most recently returned last.
    static STATES: std::cell::RefCell<Vec<(u32, zlib_rs::Deflate)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A reset deflate state at `level`: this thread's most recently returned one at that level, or
/// a new one.
fn take_state(level: u32) -> zlib_rs::Deflate {
    let pooled = STATES.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.iter().rposition(|(l, _)| *l == level)?;
        Some(s.remove(i).1)
    });
    if let Some(mut z) = pooled {
        z.reset();
        return z;
    }
    let cfg = zlib_rs::DeflateConfig {
        // 15 bits of window, +16: the gzip wrapper.
        window_bits: 15 + 16,
        ..zlib_rs::DeflateConfig::new(level as i32)
    };
    zlib_rs::Deflate::new_with_config(cfg)
}

/// Give a state back to this thread's pool (the oldest is freed when the pool is full).
fn return_state(level: u32, z: zlib_rs::Deflate) {
    // `try_with`: a stream dropped while the thread's locals are being torn down just frees.
    let _ = STATES.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() == POOLED_STATES {
            s.remove(0);
        }
        s.push((level, z));
    });
}

/// States in this thread's pool (tests).
#[cfg(test)]
fn pooled_states() -> usize {
    STATES.with(|s| s.borrow().len())
}

impl Gzip {
    /// A compressor at `level` (0..=9). Its state is taken at the first chunk.
    pub fn new(level: u32) -> Self {
        Self { level, z: None }
    }

    /// Feed `input` with `flush`; what the compressor has output.
    fn run(&mut self, mut input: &[u8], flush: zlib_rs::DeflateFlush) -> io::Result<Bytes> {
        let finish = matches!(flush, zlib_rs::DeflateFlush::Finish);
        let level = self.level;
        let z = self.z.get_or_insert_with(|| take_state(level));
        let mut out = Vec::new();
        loop {
            let start = out.len();
            let room = (input.len() / 2).clamp(4096, 64 * 1024);
            out.resize(start + room, 0);
            let (in0, out0) = (z.total_in(), z.total_out());
            let status = z
                .compress(input, &mut out[start..], flush)
                .map_err(|e| io::Error::other(e.as_str()))?;
            let used = (z.total_in() - in0) as usize;
            let made = (z.total_out() - out0) as usize;
            out.truncate(start + made);
            input = &input[used..];
            let full = made == room;
            let stuck = made == 0 && used == 0;
            let done = stuck
                || match status {
                    zlib_rs::Status::StreamEnd => true,
                    // No progress possible: everything given has been taken.
                    zlib_rs::Status::BufError => !full,
                    zlib_rs::Status::Ok => !finish && input.is_empty() && !full,
                };
            if done {
                return Ok(Bytes::from(out));
            }
        }
    }

    /// Compress one chunk; returns what the encoder has output so far.
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<Bytes> {
        self.run(data, zlib_rs::DeflateFlush::NoFlush)
    }

    /// Finish the stream; returns the trailing bytes.
    pub fn finish(&mut self) -> io::Result<Bytes> {
        self.run(&[], zlib_rs::DeflateFlush::Finish)
    }
}

impl Drop for Gzip {
    fn drop(&mut self) {
        if let Some(z) = self.z.take() {
            return_state(self.level, z);
        }
    }
}

/// Records a finished request (metrics, access log, connection idle) when dropped.
pub struct Completion {
    ctx: Ctx,
    conn: Conn,
    status: u16,
    bytes: u64,
    access: Option<Box<AccessRecord>>,
}

impl Completion {
    /// The record of a response with `status` on `conn` (`access`: its access-log line).
    pub fn new(ctx: Ctx, conn: Conn, status: u16, access: Option<Box<AccessRecord>>) -> Self {
        Self {
            ctx,
            conn,
            status,
            bytes: 0,
            access,
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.ctx
            .response_done(&self.conn, self.status, self.bytes, self.access.take());
    }
}

/// The producing half of a gated stream: source, compressor, end flag.
struct Producer {
    source: Box<dyn ChunkSource>,
    gzip: Option<Gzip>,
    ended: bool,
}

impl Producer {
    fn produce(&mut self) -> io::Result<Option<Bytes>> {
        if self.ended {
            return Ok(None);
        }
        let out = match self.source.produce()? {
            Some(b) => {
                // A source that knows it is exhausted ends the stream in this burst, saving a
                // burst just to learn that nothing is left.
                let last = self.source.remaining() == Some(0);
                if last {
                    self.ended = true;
                }
                match &mut self.gzip {
                    Some(gz) if last => {
                        let mut v = gz.chunk(&b)?.to_vec();
                        v.extend_from_slice(&gz.finish()?);
                        Bytes::from(v)
                    }
                    Some(gz) => gz.chunk(&b)?,
                    None => b,
                }
            }
            None => {
                self.ended = true;
                match &mut self.gzip {
                    Some(gz) => gz.finish()?,
                    None => return Ok(None),
                }
            }
        };
        Ok(Some(out))
    }
}

/// A gated chunk stream.
pub struct Gated {
    ctx: Ctx,
    worker: WorkerId,
    hints: Hints,
    acq: AcquireState,
    acquiring: bool,
    prod: Producer,
    pending: Option<Bytes>,
    /// Chunks produced ahead in the same burst, in order (see [`Gated::poll_next`]).
    ahead: std::collections::VecDeque<Bytes>,
    /// The source's error, returned after the chunks produced before it and one more turn of
    /// the connection (see [`Gated::poll_next`]).
    failure: Option<io::Error>,
    /// The turn before [`Gated::failure`] was given: the error is returned next.
    failure_flushed: bool,
}

impl Gated {
    /// `worker`'s stream of `source`'s chunks, each produced under a slot of `ctx`'s gate with
    /// `hints` (and compressed by `gzip`, if any).
    pub fn new(
        ctx: Ctx,
        worker: WorkerId,
        hints: Hints,
        source: Box<dyn ChunkSource>,
        gzip: Option<Gzip>,
    ) -> Self {
        Self {
            ctx,
            worker,
            hints,
            acq: AcquireState::default(),
            acquiring: false,
            prod: Producer {
                source,
                gzip,
                ended: false,
            },
            pending: None,
            ahead: std::collections::VecDeque::new(),
            failure: None,
            failure_flushed: false,
        }
    }

    /// Process one chunk of the source (one burst's work). Call only while holding the
    /// worker's slot. Returns `None` once the stream (including the gzip trailer) is complete,
    /// and possibly an empty chunk when the compressor kept everything buffered.
    pub fn produce_now(&mut self) -> io::Result<Option<Bytes>> {
        self.prod.produce()
    }

    /// Whether everything has been produced.
    pub fn ended(&self) -> bool {
        self.prod.ended
    }

    /// One frame. A burst produces at least one chunk and, while its input is ready at once
    /// and the gate's streak slice (`gate::Streak::slice_ns`, wall time from the burst's start)
    /// has not run out, goes on producing the following chunks, kept for the next frames: a
    /// response's chunks are CPU work with no wait in between, so they stay one burst instead
    /// of taking turns with every other stream chunk by chunk (which interleaved ~300 KB gzip
    /// states with a cold cache: pos cost up to 1.6x fifo's CPU per request). Under a CPU quota
    /// that throttles the server the slice runs out after the first chunk, as before.
    ///
    /// A failing source (a script's output shorter than its `Content-Length`, a timeout, a read
    /// error) ends the body with its error only after the chunks produced before it, and after
    /// one `Pending` turn (having woken itself): hyper drops whatever it has not yet written
    /// when a body fails, and flushes only when the body is pending. Without that turn the
    /// client could get nothing at all, not even the head, instead of a truncated response.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        loop {
            if let Some(b) = self.pending.take() {
                return Poll::Ready(Some(Ok(b)));
            }
            if let Some(b) = self.ahead.pop_front() {
                return Poll::Ready(Some(Ok(b)));
            }
            if self.failure.is_some() {
                if self.failure_flushed {
                    return Poll::Ready(self.failure.take().map(Err));
                }
                self.failure_flushed = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if self.prod.ended {
                return Poll::Ready(None);
            }
            if !self.acquiring {
                if let Err(e) = std::task::ready!(self.prod.source.poll_input(cx)) {
                    self.failure = Some(e);
                    continue;
                }
                self.acquiring = true;
            }
            let permit = std::task::ready!(self.ctx.gate().poll_acquire(
                &mut self.acq,
                self.worker,
                &self.hints,
                cx
            ));
            self.acquiring = false;
            let gate = self.ctx.gate();
            let slice = gate.streak().map_or(0, |s| s.slice_ns);
            let start = gate.now();
            let mut out = self.prod.produce();
            while let Ok(Some(b)) = &out {
                if !b.is_empty() {
                    self.ahead.push_back(b.clone());
                }
                if self.prod.ended || gate.now().saturating_sub(start) >= slice {
                    break;
                }
                match self.prod.source.poll_input(cx) {
                    Poll::Ready(Ok(())) => out = self.prod.produce(),
                    Poll::Ready(Err(e)) => {
                        self.failure = Some(e);
                        break;
                    }
                    Poll::Pending => break,
                }
            }
            drop(permit);
            match out {
                // Sent after the chunks produced before it (see above).
                Err(e) => self.failure = Some(e),
                // Produced ahead, or the end: the queue of frames says which.
                Ok(Some(_)) if !self.ahead.is_empty() => {}
                // The compressor kept everything: that was one burst; the next one goes
                // through the ready queue again, without a frame in between.
                Ok(Some(_)) => {}
                Ok(None) if !self.ahead.is_empty() => {}
                Ok(None) => return Poll::Ready(None),
            }
        }
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        self.ctx.gate().cancel(&mut self.acq, self.worker);
    }
}

enum Kind {
    Empty,
    Once(Option<Bytes>),
    Gated(Box<Gated>),
}

/// The body type of every response.
pub struct ServeBody {
    kind: Kind,
    done: Option<Completion>,
}

impl ServeBody {
    /// No body.
    pub fn empty() -> Self {
        Self {
            kind: Kind::Empty,
            done: None,
        }
    }

    /// A body sent in one frame.
    pub fn once(b: impl Into<Bytes>) -> Self {
        let b = b.into();
        Self {
            kind: if b.is_empty() {
                Kind::Empty
            } else {
                Kind::Once(Some(b))
            },
            done: None,
        }
    }

    /// A body that continues `first` (already produced under the current slot) with the
    /// remaining chunks of `gated`, each produced under its own slot.
    pub fn gated(first: Option<Bytes>, mut gated: Gated) -> Self {
        if gated.ended() {
            return first.map_or_else(Self::empty, Self::once);
        }
        gated.pending = first.filter(|b| !b.is_empty());
        Self {
            kind: Kind::Gated(Box::new(gated)),
            done: None,
        }
    }

    /// Attach the completion record.
    pub fn with_completion(mut self, c: Completion) -> Self {
        self.done = Some(c);
        self
    }
}

impl Body for ServeBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let r = match &mut this.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Once(b) => Poll::Ready(b.take().map(Ok)),
            Kind::Gated(g) => g.poll_next(cx),
        };
        if let (Poll::Ready(Some(Ok(b))), Some(d)) = (&r, &mut this.done) {
            d.bytes += b.len() as u64;
        }
        r.map(|o| o.map(|res| res.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Once(b) => b.is_none(),
            Kind::Gated(g) => g.prod.ended && g.pending.is_none() && g.ahead.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Once(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Gated(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn gzip_chunks_decode_to_the_input() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| ((i * 7) ^ (i >> 5)) as u8 % 61)
            .collect();
        for level in [0, 1, 6, 9] {
            let mut gz = Gzip::new(level);
            let mut out = Vec::new();
            for c in data.chunks(16384) {
                out.extend_from_slice(&gz.chunk(c).unwrap());
            }
            out.extend_from_slice(&gz.finish().unwrap());
            assert_eq!(out[..2], [0x1f, 0x8b], "a gzip header");
            assert_eq!(gunzip(&out), data, "level {level}");
            if level > 0 {
                assert!(out.len() < data.len() / 2, "level {level}: {}", out.len());
            }
        }
        let mut empty = Gzip::new(6);
        let out = empty.finish().unwrap();
        assert!(gunzip(&out).is_empty());
    }

    #[test]
    fn a_reused_compressor_state_starts_a_clean_stream() {
        let a: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..70_000u32).map(|i| (i * 13 % 97) as u8).collect();
        let compress = |level, data: &[u8]| {
            let mut gz = Gzip::new(level);
            let mut out = gz.chunk(data).unwrap().to_vec();
            out.extend_from_slice(&gz.finish().unwrap());
            out
        };
        // A state taken only when the first chunk is compressed.
        let idle = Gzip::new(6);
        let before = pooled_states();
        drop(idle);
        assert_eq!(
            pooled_states(),
            before,
            "a compressor never used takes no state"
        );
        let first = compress(6, &a);
        let pooled = pooled_states();
        assert!(
            pooled >= 1,
            "a finished stream's state goes back to the pool"
        );
        // The same state again (the pool does not grow), and a clean stream out of it.
        let again = compress(6, &a);
        assert_eq!(pooled_states(), pooled);
        assert_eq!(
            again, first,
            "the same input gives the same stream on a reused state"
        );
        assert_eq!(gunzip(&compress(6, &b)), b);
        // A stream abandoned in the middle leaves no trace in the next one.
        let mut cut = Gzip::new(6);
        let _ = cut.chunk(&b[..30_000]).unwrap();
        drop(cut);
        assert_eq!(compress(6, &a), first);
        // Another level gets its own state; the pool stays bounded.
        for level in [1, 9, 1, 9, 5, 4, 3] {
            assert_eq!(gunzip(&compress(level, &a)), a, "level {level}");
        }
        assert!(pooled_states() <= POOLED_STATES);
        assert_eq!(compress(6, &a), first);
    }

    /// Yields its chunks, then fails (in `poll_input`, or in `produce` when `in_produce`).
    struct FailsAfter {
        chunks: std::collections::VecDeque<&'static str>,
        in_produce: bool,
    }

    impl ChunkSource for FailsAfter {
        fn poll_input(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            if self.chunks.is_empty() && !self.in_produce {
                return Poll::Ready(Err(io::Error::other("source failed")));
            }
            Poll::Ready(Ok(()))
        }
        fn produce(&mut self) -> io::Result<Option<Bytes>> {
            match self.chunks.pop_front() {
                Some(c) => Ok(Some(Bytes::from_static(c.as_bytes()))),
                None => Err(io::Error::other("source failed")),
            }
        }
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl std::task::Wake for Wakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// What a connection sees polling a gated body of `source` (with a streak slice long
    /// enough to produce every chunk in one burst when `streak`): each frame's data, "pending"
    /// for a turn given back (the waker must have been woken), "error" at the error.
    fn frames(source: FailsAfter, streak: bool) -> Vec<String> {
        let p = policy::build("fifo", &policy::PolicyConfig::default()).unwrap();
        let slice_ns = if streak { u64::MAX / 2 } else { 0 };
        let gate =
            gate::Gate::new(policy::Sched::new(1, p), true, None).with_streak(Some(gate::Streak {
                gap_ns: 0,
                slice_ns,
            }));
        let worker = gate.checkout();
        let tree = crate::containers::Tree::build(&[], &[], 1, &["fifo"]).unwrap();
        let bodies = crate::ctx::Bodies {
            chunk: 16384,
            first_chunk: 16384,
            gzip: crate::config::GzipConfig::default(),
        };
        let site = crate::site::Site::new(
            "a.test",
            crate::store::Store::Mem(crate::store::MemStore::new()),
            Vec::new(),
        );
        let sites = crate::site::Sites::new(vec![site]);
        let containers = crate::containers::Containers::new(tree);
        let ctx = Ctx::new(gate, sites, None, bodies, containers);
        let gated = Gated::new(ctx, worker, Hints::default(), Box::new(source), None);
        let mut body = ServeBody::gated(None, gated);
        let woken = std::sync::Arc::new(Wakes::default());
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = woken.count();
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(f))) => {
                    seen.push(String::from_utf8_lossy(&f.into_data().unwrap()).into_owned())
                }
                Poll::Ready(Some(Err(_))) => {
                    seen.push("error".into());
                    break;
                }
                Poll::Ready(None) => break,
                Poll::Pending => {
                    assert!(
                        woken.count() > before,
                        "a turn given back must wake the task"
                    );
                    seen.push("pending".into());
                }
            }
        }
        seen
    }

    #[test]
    fn a_failing_source_sends_what_came_before_and_a_turn_to_flush_it_before_its_error() {
        for streak in [false, true] {
            for in_produce in [false, true] {
                let source = FailsAfter {
                    chunks: ["head", "hello"].into(),
                    in_produce,
                };
                let seen = frames(source, streak);
                let what = format!("streak {streak}, failing in produce {in_produce}: {seen:?}");
                // The gate gives turns back too (taking a slot): those do not matter here.
                let frames: Vec<_> = seen.iter().filter(|f| *f != "pending").collect();
                assert_eq!(frames, ["head", "hello", "error"], "{what}");
                assert_eq!(
                    seen[seen.len() - 2],
                    "pending",
                    "no turn before the error: {what}"
                );
            }
        }
    }
}

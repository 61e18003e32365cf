//! One emulated browser: its idle keep-alive connections (per origin, at most K each) and the
//! page fetch itself: the HTML first, then its embedded objects over up to K parallel
//! connections, timing t1 (first and last byte of the HTML) and t2 (all objects done) from the
//! page's start instant (its *scheduled* start in the open-loop modes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::time::Instant;

use crate::client::{
    self, lock, ConnOpts, ErrorKind, FetchError, Origin, Resolver, Response, Target,
};
use crate::config::{ConnMode, LoadConfig};
use crate::html::embedded_urls;
use crate::report::{HtmlTiming, PageRecord};

/// State shared by every task of a run.
pub(crate) struct Ctx {
    pub cfg: LoadConfig,
    pub resolver: Resolver,
    pub opts: ConnOpts,
    pub run_start: Instant,
    /// `run_start` as Unix time (us), to match the page's times against a server's logs.
    pub run_start_unix_us: f64,
    /// End of the schedule plus drain: requests still running then are cut (`unfinished`).
    pub hard_deadline: Option<Instant>,
    /// Pages (units) finished so far, for progress.
    pub done: AtomicU64,
    /// Pages finished with an error so far, for progress.
    pub errors: AtomicU64,
}

impl Ctx {
    pub fn since_start_ms(&self, t: Instant) -> f64 {
        ms(t.saturating_duration_since(self.run_start))
    }

    /// The deadline of a request starting now, and whether it is the run's hard deadline.
    pub fn request_deadline(&self) -> (Instant, bool) {
        let dl = Instant::now() + self.cfg.timeout;
        match self.hard_deadline {
            Some(h) if h <= dl => (h, true),
            _ => (dl, false),
        }
    }

    pub fn finished(&self, rec: &PageRecord) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if rec.error.is_some() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// An emulated browser.
pub(crate) struct Browser {
    pub id: usize,
    idle: Mutex<HashMap<Origin, Vec<client::Conn>>>,
    /// Pages started by this browser (the `{page}` placeholder).
    pub pages: AtomicU64,
}

impl Browser {
    pub fn new(id: usize) -> Self {
        Browser {
            id,
            idle: Mutex::new(HashMap::new()),
            pages: AtomicU64::new(0),
        }
    }

    fn take(&self, o: &Origin) -> Option<client::Conn> {
        lock(&self.idle).get_mut(o).and_then(Vec::pop)
    }

    fn put(&self, o: &Origin, c: client::Conn, max: usize) {
        let mut idle = lock(&self.idle);
        let v = idle.entry(o.clone()).or_default();
        if v.len() < max {
            v.push(c);
        }
    }
}

/// Fetches one URL on a pooled (keep-alive) or new connection, bounded by the timeout and the
/// run's hard deadline.
pub(crate) async fn fetch(
    ctx: &Ctx,
    b: &Browser,
    t: &Target,
    keep_body: Option<usize>,
) -> Result<Response, FetchError> {
    let (dl, hard) = ctx.request_deadline();
    match tokio::time::timeout_at(dl, fetch_inner(ctx, b, t, keep_body)).await {
        Ok(r) => r,
        Err(_) if hard => Err(FetchError::new(
            ErrorKind::Unfinished,
            format!("run ended before {} completed", t.url),
        )),
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!("{} not complete within {:?}", t.url, ctx.cfg.timeout),
        )),
    }
}

async fn fetch_inner(
    ctx: &Ctx,
    b: &Browser,
    t: &Target,
    keep_body: Option<usize>,
) -> Result<Response, FetchError> {
    let keep_alive = ctx.cfg.conn_mode == ConnMode::KeepAlive;
    let mut slot = if keep_alive { b.take(&t.origin) } else { None };
    let r = send_reusing(ctx, &mut slot, t, keep_body).await?;
    if let Some(c) = slot {
        b.put(&t.origin, c, ctx.cfg.parallel);
    }
    Ok(r)
}

/// Sends `t` on the connection in `slot` (connecting first if it is empty) and leaves the
/// connection in `slot` only if it may carry another request. A reused connection that fails
/// before any response byte (the server closed it while idle) is retried once on a fresh one.
pub(crate) async fn send_reusing(
    ctx: &Ctx,
    slot: &mut Option<client::Conn>,
    t: &Target,
    keep_body: Option<usize>,
) -> Result<Response, FetchError> {
    let reused = slot.is_some();
    let opened = Instant::now();
    let mut conn = match slot.take() {
        Some(c) => c,
        None => client::connect(&ctx.resolver, &t.origin, ctx.opts).await?,
    };
    let mut connected = (!reused).then(|| (opened, Instant::now()));
    let mut r = match conn.send(&t.request, t.accept, keep_body).await {
        Ok(r) => r,
        Err(e)
            if reused
                && !e.got_bytes
                && matches!(
                    e.kind,
                    ErrorKind::Reset | ErrorKind::Truncated | ErrorKind::Io
                ) =>
        {
            let opened = Instant::now();
            conn = client::connect(&ctx.resolver, &t.origin, ctx.opts).await?;
            connected = Some((opened, Instant::now()));
            conn.send(&t.request, t.accept, keep_body).await?
        }
        Err(e) => return Err(e),
    };
    r.connected = connected;
    if ctx.cfg.conn_mode == ConnMode::KeepAlive && r.reusable {
        *slot = Some(conn);
    }
    Ok(r)
}

/// Fetches a whole page (or just the URL when `plain`) and returns its record. `t0` is the
/// instant the page counts from.
pub(crate) async fn page(ctx: &Ctx, b: &Browser, t: &Target, t0: Instant) -> PageRecord {
    let mut rec = PageRecord::new(b.id, ctx.since_start_ms(t0));
    let keep = (!ctx.cfg.plain).then_some(ctx.cfg.max_html_bytes);
    rec.requests = 1;
    let begin = Instant::now();
    let r = match fetch(ctx, b, t, keep).await {
        Ok(r) => r,
        Err(e) => {
            rec.failed_requests = 1;
            rec.note_error(e.kind, e.to_string());
            return rec;
        }
    };
    rec.t1_first_ms = Some(ms(r.first_byte - t0));
    rec.t1_ms = Some(ms(r.done - t0));
    let after = |i: Instant| ms(i.saturating_duration_since(t0));
    rec.html = Some(HtmlTiming {
        start_unix_us: ctx.run_start_unix_us + rec.start_ms * 1e3,
        begin_ms: after(begin),
        connect_ms: r.connected.map(|(a, _)| after(a)),
        connected_ms: r.connected.map(|(_, b)| after(b)),
        sent_ms: after(r.sent),
        first_ms: after(r.first_byte),
        done_ms: after(r.done),
    });
    rec.status = r.status;
    rec.bytes = r.body_len;
    rec.bytes_decoded = r.decoded_len;
    if r.status >= 400 {
        rec.note_error(
            ErrorKind::Status,
            format!("status {} for {}", r.status, t.url),
        );
    }
    let objs = match (&r.body, r.html && (200..300).contains(&r.status)) {
        (Some(body), true) => embedded_urls(body, &t.url),
        _ => Vec::new(),
    };
    drop(r.body);
    if objs.is_empty() {
        rec.t2_ms = rec.t1_ms;
        return rec;
    }
    let next = AtomicUsize::new(0);
    let k = ctx.cfg.parallel.min(objs.len());
    let workers = (0..k).map(|_| async {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(u) = objs.get(i) else { break };
            let res = match Target::new(u.clone(), ctx.cfg.conn_mode, ctx.cfg.accept_encoding) {
                Ok(t) => fetch(ctx, b, &t, None).await,
                Err(e) => Err(e),
            };
            out.push((u, res));
        }
        out
    });
    let results = futures_util::future::join_all(workers).await;
    let mut last = r.done;
    let mut all_done = true;
    for (u, res) in results.into_iter().flatten() {
        rec.requests += 1;
        match res {
            Ok(o) => {
                rec.bytes += o.body_len;
                rec.bytes_decoded += o.decoded_len;
                last = last.max(o.done);
                if o.status >= 400 {
                    rec.note_error(ErrorKind::Status, format!("status {} for {u}", o.status));
                }
            }
            Err(e) => {
                all_done = false;
                rec.failed_requests += 1;
                rec.note_error(e.kind, e.to_string());
            }
        }
    }
    if all_done {
        rec.t2_ms = Some(ms(last - t0));
    }
    rec
}

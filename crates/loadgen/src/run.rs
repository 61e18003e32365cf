//! The run: validates the config, schedules arrivals (burst, random, trace: open loop, each page
//! its own task timed from its scheduled instant; closed: one loop per browser; rate: one loop
//! per connection timed from each request's scheduled send instant), shows progress, bounds
//! everything by duration/count plus the drain, and gathers the records into a [`Report`].

use std::collections::{BinaryHeap, HashMap};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::browser::{self, ms, Browser, Ctx};
use crate::client::{ConnOpts, ErrorKind, FetchError, Resolver, Target};
use crate::config::{Arrival, LoadConfig, RandomDist, ThinkDist};
use crate::report::{PageRecord, Report};
use crate::trace::resolve_for;
use crate::url_pattern::expand_url;
use crate::LoadError;

/// Runs the load described by `cfg` and returns what it measured. Network failures are
/// counted in the report, never returned as errors; only a bad config is.
pub async fn run(cfg: LoadConfig) -> Result<Report, LoadError> {
    cfg.validate()?;
    let run_start = Instant::now();
    let run_start_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6);
    let drain = cfg.drain.unwrap_or(cfg.timeout);
    let ctx = Arc::new(Ctx {
        opts: ConnOpts {
            rcvbuf: cfg.effective_rcvbuf(),
            throttle_bps: cfg.throttle_bps,
        },
        hard_deadline: cfg.duration.map(|d| run_start + d + drain),
        cfg,
        resolver: Resolver::default(),
        run_start,
        run_start_unix_us,
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let progress = Progress::start(ctx.clone());
    let recs = match ctx.cfg.arrival.clone() {
        Arrival::Closed { think, think_dist } => run_closed(&ctx, think, think_dist).await,
        Arrival::Rate { rate, connections } => run_rate(&ctx, rate, connections).await,
        Arrival::Burst { interval } => {
            let b = ctx.cfg.browsers;
            let it = (0u64..).flat_map(move |k| {
                (0..b).map(move |i| Event {
                    off_ns: k.saturating_mul(interval.as_nanos() as u64),
                    browser: i,
                    url: None,
                })
            });
            run_open(&ctx, it).await
        }
        Arrival::Random { interval, dist } => {
            let it = random_events(ctx.cfg.browsers, interval, dist, ctx.cfg.seed);
            run_open(&ctx, it).await
        }
        Arrival::Trace { entries, .. } => {
            let it = entries.into_iter().map(|e| Event {
                off_ns: e.offset_ns,
                browser: e.browser,
                url: Some(e.url),
            });
            run_open(&ctx, it).await
        }
    };
    let elapsed = run_start.elapsed();
    progress.finish();
    Ok(Report::new(ctx.cfg.clone(), recs, elapsed))
}

/// [`run`] on a fresh single-threaded runtime (`threads == 1`) or a multi-threaded one, for
/// callers without a runtime of their own. Returns when the run and its tasks have ended.
pub fn run_blocking(cfg: LoadConfig, threads: usize) -> Result<Report, LoadError> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .map_err(LoadError::Runtime)?;
    let r = rt.block_on(run(cfg));
    // A name lookup stuck in getaddrinfo must not hold the caller: do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    r
}

/// One scheduled page of an open-loop mode.
pub(crate) struct Event {
    off_ns: u64,
    browser: usize,
    url: Option<String>,
}

/// The arrivals of `random` mode, in time order, from `seed`.
fn random_events(
    browsers: usize,
    interval: Duration,
    dist: RandomDist,
    seed: u64,
) -> Box<dyn Iterator<Item = Event> + Send> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let iv = interval.as_nanos() as u64;
    match dist {
        RandomDist::Uniform => {
            let mut window = 0u64;
            let mut buf: Vec<(u64, usize)> = Vec::new();
            Box::new(std::iter::from_fn(move || {
                if buf.is_empty() {
                    let base = window.saturating_mul(iv);
                    buf = (0..browsers)
                        .map(|b| (base + rng.gen_range(0..iv), b))
                        .collect();
                    buf.sort_unstable_by(|a, b| b.cmp(a));
                    window += 1;
                }
                buf.pop().map(|(off_ns, browser)| Event {
                    off_ns,
                    browser,
                    url: None,
                })
            }))
        }
        RandomDist::Poisson => {
            let exp = Exp::new(1.0 / interval.as_secs_f64()).expect("positive interval");
            let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = (0..browsers)
                .map(|b| std::cmp::Reverse(((exp.sample(&mut rng) * 1e9) as u64, b)))
                .collect();
            Box::new(std::iter::from_fn(move || {
                let std::cmp::Reverse((off_ns, browser)) = heap.pop()?;
                let gap = (exp.sample(&mut rng) * 1e9) as u64;
                heap.push(std::cmp::Reverse((off_ns.saturating_add(gap), browser)));
                Some(Event {
                    off_ns,
                    browser,
                    url: None,
                })
            }))
        }
    }
}

/// The target of the next page of `b` (the URL pattern, or a trace URL).
fn page_target(ctx: &Ctx, b: &Browser, url: Option<&str>) -> Result<Target, FetchError> {
    let n = b.pages.fetch_add(1, Ordering::Relaxed);
    let url = match url {
        Some(u) => resolve_for(u, &ctx.cfg.url_pattern, b.id)
            .map_err(|m| FetchError::new(ErrorKind::Unsupported, m))?,
        None => expand_url(&ctx.cfg.url_pattern, b.id, n)
            .map_err(|e| FetchError::new(ErrorKind::Unsupported, e.to_string()))?,
    };
    Target::new(url, ctx.cfg.conn_mode, ctx.cfg.accept_encoding)
}

fn failed_page(ctx: &Ctx, browser: usize, t0: Instant, e: FetchError) -> PageRecord {
    let mut r = PageRecord::new(browser, ctx.since_start_ms(t0));
    r.requests = 1;
    r.failed_requests = 1;
    r.note_error(e.kind, e.to_string());
    r
}

fn joined(res: Result<PageRecord, tokio::task::JoinError>) -> PageRecord {
    res.unwrap_or_else(|e| {
        let mut r = PageRecord::new(0, 0.0);
        r.note_error(
            ErrorKind::Io,
            format!("internal error: page task failed: {e}"),
        );
        r
    })
}

fn past_schedule(ctx: &Ctx, off_ns: u64, n: u64) -> bool {
    ctx.cfg.max_pages.is_some_and(|m| n >= m)
        || ctx
            .cfg
            .duration
            .is_some_and(|d| u128::from(off_ns) >= d.as_nanos())
}

async fn run_open(ctx: &Arc<Ctx>, events: impl Iterator<Item = Event>) -> Vec<PageRecord> {
    let mut browsers: HashMap<usize, Arc<Browser>> = HashMap::new();
    let mut set = JoinSet::new();
    let mut recs = Vec::new();
    for (n, ev) in events.enumerate() {
        if past_schedule(ctx, ev.off_ns, n as u64) {
            break;
        }
        let at = ctx.run_start + Duration::from_nanos(ev.off_ns);
        tokio::time::sleep_until(at).await;
        while let Some(r) = set.try_join_next() {
            recs.push(joined(r));
        }
        let b = browsers
            .entry(ev.browser)
            .or_insert_with(|| Arc::new(Browser::new(ev.browser)))
            .clone();
        let c = ctx.clone();
        set.spawn(async move {
            let rec = match page_target(&c, &b, ev.url.as_deref()) {
                Ok(t) => browser::page(&c, &b, &t, at).await,
                Err(e) => failed_page(&c, b.id, at, e),
            };
            c.finished(&rec);
            rec
        });
    }
    while let Some(r) = set.join_next().await {
        recs.push(joined(r));
    }
    recs
}

async fn run_closed(ctx: &Arc<Ctx>, think: Duration, dist: ThinkDist) -> Vec<PageRecord> {
    let claimed = Arc::new(AtomicU64::new(0));
    let end = ctx.cfg.duration.map(|d| ctx.run_start + d);
    let mut set = JoinSet::new();
    for id in 0..ctx.cfg.browsers {
        let c = ctx.clone();
        let claimed = claimed.clone();
        set.spawn(async move {
            let b = Browser::new(id);
            let mut rng = ChaCha8Rng::seed_from_u64(c.cfg.seed);
            rng.set_stream(id as u64 + 1);
            let exp = Exp::new(1.0 / think.as_secs_f64().max(1e-9)).expect("positive rate");
            let fixed = !c.cfg.url_pattern.contains("{page}");
            let mut base: Option<Target> = None;
            let mut recs = Vec::new();
            loop {
                if end.is_some_and(|e| Instant::now() >= e) {
                    break;
                }
                if c.cfg
                    .max_pages
                    .is_some_and(|m| claimed.fetch_add(1, Ordering::Relaxed) >= m)
                {
                    break;
                }
                let t0 = Instant::now();
                let target = match base.take() {
                    Some(t) => Ok(t),
                    None => page_target(&c, &b, None),
                };
                let rec = match &target {
                    Ok(t) => browser::page(&c, &b, t, t0).await,
                    Err(e) => failed_page(&c, id, t0, e.clone()),
                };
                if fixed {
                    base = target.ok();
                }
                c.finished(&rec);
                recs.push(rec);
                let th = match dist {
                    ThinkDist::Fixed => think,
                    ThinkDist::Exp if think.is_zero() => think,
                    ThinkDist::Exp => Duration::from_secs_f64(exp.sample(&mut rng)),
                };
                if !th.is_zero() {
                    let wake = Instant::now() + th;
                    tokio::time::sleep_until(end.map_or(wake, |e| wake.min(e))).await;
                }
            }
            recs
        });
    }
    let mut recs = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(v) => recs.extend(v),
            Err(e) => recs.push(joined(Err(e))),
        }
    }
    recs
}

async fn run_rate(ctx: &Arc<Ctx>, rate: f64, conns: usize) -> Vec<PageRecord> {
    let mut set = JoinSet::new();
    for c in 0..conns {
        let ctx = ctx.clone();
        set.spawn(async move {
            let mut recs = Vec::new();
            let target_for = |page: u64| {
                expand_url(&ctx.cfg.url_pattern, c, page)
                    .map_err(|e| FetchError::new(ErrorKind::Unsupported, e.to_string()))
                    .and_then(|u| Target::new(u, ctx.cfg.conn_mode, ctx.cfg.accept_encoding))
            };
            let per_request = ctx.cfg.url_pattern.contains("{page}");
            let mut target = match target_for(0) {
                Ok(t) => t,
                Err(e) => {
                    recs.push(failed_page(&ctx, c, ctx.run_start, e));
                    return recs;
                }
            };
            let period = conns as f64 * 1e9 / rate;
            let first = c as f64 * 1e9 / rate;
            let mut slot = None;
            for i in 0u64.. {
                let g = i.saturating_mul(conns as u64) + c as u64;
                let off = (first + i as f64 * period) as u64;
                if ctx.cfg.max_pages.is_some_and(|m| g >= m)
                    || ctx
                        .cfg
                        .duration
                        .is_some_and(|d| u128::from(off) >= d.as_nanos())
                {
                    break;
                }
                let sched = ctx.run_start + Duration::from_nanos(off);
                let mut rec = PageRecord::new(c, ms(Duration::from_nanos(off)));
                rec.requests = 1;
                if ctx.hard_deadline.is_some_and(|h| Instant::now() >= h) {
                    rec.failed_requests = 1;
                    rec.note_error(
                        ErrorKind::Unfinished,
                        "not sent: the run ended while earlier requests were late".into(),
                    );
                    ctx.finished(&rec);
                    recs.push(rec);
                    continue;
                }
                tokio::time::sleep_until(sched).await;
                if per_request && i > 0 {
                    match target_for(i) {
                        Ok(t) => target = t,
                        Err(e) => {
                            rec.failed_requests = 1;
                            rec.note_error(e.kind, e.to_string());
                            ctx.finished(&rec);
                            recs.push(rec);
                            continue;
                        }
                    }
                }
                let (dl, hard) = ctx.request_deadline();
                let res = tokio::time::timeout_at(
                    dl,
                    browser::send_reusing(&ctx, &mut slot, &target, None),
                )
                .await;
                match res {
                    Ok(Ok(r)) => {
                        rec.t1_first_ms = Some(ms(r.first_byte.saturating_duration_since(sched)));
                        rec.t1_ms = Some(ms(r.done.saturating_duration_since(sched)));
                        rec.t2_ms = rec.t1_ms;
                        rec.status = r.status;
                        rec.bytes = r.body_len;
                        rec.bytes_decoded = r.decoded_len;
                        if r.status >= 400 {
                            rec.note_error(ErrorKind::Status, format!("status {}", r.status));
                        }
                    }
                    Ok(Err(e)) => {
                        rec.failed_requests = 1;
                        rec.note_error(e.kind, e.to_string());
                    }
                    Err(_) => {
                        slot = None;
                        rec.failed_requests = 1;
                        let kind = if hard {
                            ErrorKind::Unfinished
                        } else {
                            ErrorKind::Timeout
                        };
                        rec.note_error(
                            kind,
                            format!("{}: no complete response in time", kind.name()),
                        );
                    }
                }
                ctx.finished(&rec);
                recs.push(rec);
            }
            recs
        });
    }
    let mut recs = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(v) => recs.extend(v),
            Err(e) => recs.push(joined(Err(e))),
        }
    }
    recs
}

/// Progress on stderr: an indicatif bar on a terminal, a plain line every 5 s otherwise.
struct Progress {
    task: Option<tokio::task::JoinHandle<()>>,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn start(ctx: Arc<Ctx>) -> Progress {
        if !ctx.cfg.progress {
            return Progress {
                task: None,
                bar: None,
            };
        }
        let by_count = ctx.cfg.duration.is_none();
        let len = if by_count {
            ctx.cfg.max_pages.unwrap_or(0)
        } else {
            ctx.cfg.duration.map_or(0, |d| d.as_millis() as u64)
        };
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(len);
            let tmpl = if by_count {
                "{bar:40} {pos}/{len} pages {msg}"
            } else {
                "{bar:40} {elapsed}/{duration} {msg}"
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(tmpl) {
                bar.set_style(style);
            }
            let b = bar.clone();
            let task = tokio::spawn(async move {
                loop {
                    let done = ctx.done.load(Ordering::Relaxed);
                    let errs = ctx.errors.load(Ordering::Relaxed);
                    if by_count {
                        b.set_position(done);
                    } else {
                        b.set_position(ctx.run_start.elapsed().as_millis() as u64);
                    }
                    b.set_message(format!("{done} done, {errs} with errors"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
            Progress {
                task: Some(task),
                bar: Some(bar),
            }
        } else {
            let task = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    eprintln!(
                        "load: {:.0} s, {} done, {} with errors",
                        ctx.run_start.elapsed().as_secs_f64(),
                        ctx.done.load(Ordering::Relaxed),
                        ctx.errors.load(Ordering::Relaxed)
                    );
                }
            });
            Progress {
                task: Some(task),
                bar: None,
            }
        }
    }

    fn finish(self) {
        if let Some(t) = self.task {
            t.abort();
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_uniform_is_seeded_sorted_and_one_per_window() {
        let iv = Duration::from_secs(30);
        let a: Vec<(u64, usize)> = random_events(9, iv, RandomDist::Uniform, 7)
            .take(27)
            .map(|e| (e.off_ns, e.browser))
            .collect();
        let b: Vec<(u64, usize)> = random_events(9, iv, RandomDist::Uniform, 7)
            .take(27)
            .map(|e| (e.off_ns, e.browser))
            .collect();
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
        for w in 0..3u64 {
            let mut in_w: Vec<usize> = a
                .iter()
                .filter(|e| e.0 / iv.as_nanos() as u64 == w)
                .map(|e| e.1)
                .collect();
            in_w.sort();
            assert_eq!(in_w, (0..9).collect::<Vec<_>>());
        }
        let c: Vec<u64> = random_events(9, iv, RandomDist::Uniform, 8)
            .take(27)
            .map(|e| e.off_ns)
            .collect();
        assert_ne!(a.iter().map(|e| e.0).collect::<Vec<_>>(), c);
    }

    #[test]
    fn poisson_mean_gap() {
        let iv = Duration::from_millis(100);
        let ev: Vec<Event> = random_events(4, iv, RandomDist::Poisson, 3)
            .take(40_000)
            .collect();
        assert!(ev.windows(2).all(|w| w[0].off_ns <= w[1].off_ns));
        // 4 browsers at 10/s each: 40 000 arrivals take about 1000 s.
        let span = ev.last().unwrap().off_ns as f64 / 1e9;
        assert!((970.0..1030.0).contains(&span), "{span}");
    }
}

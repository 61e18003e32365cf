//! Accepting connections, the way nginx's workers do: with `threads = N > 1` the server runs N
//! *serving threads*, each a single-threaded tokio runtime with its own listening socket (one
//! `SO_REUSEPORT` group: the kernel spreads new connections over them) and its own accept
//! loop; a connection is served from start to end on the thread that accepted it, and that
//! thread's workers live in its own gate lane (thread `k` is lane `k % lanes`, see
//! `gate::shard::home`). Nothing a request does writes memory another serving thread writes
//! too, except when a connection opens or closes (the table of open connections, the count of
//! open connections; the gate moves no slot between lanes when each has its own thread). With
//! one thread the accept loop runs on the caller's runtime, as it always did.
//!
//! Why: with one multi-threaded runtime, one accept loop and connection tasks spread by tokio's
//! work stealing, triage's CPU per 1 KB request doubled from one core to two to four (wake-ups
//! from thread to thread, a task run by a thread other than the one its socket woke, shared
//! counters), while nginx's stayed flat.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::conn::Serving;

/// What the accept loop checks and sets on every connection.
#[derive(Debug, Clone, Copy)]
pub struct Admit {
    /// Open connections at which idle ones are reclaimed, then newcomers refused.
    pub max_conns: usize,
    /// Send buffer of each accepted socket, if configured.
    pub sndbuf: Option<u64>,
}

/// A listening socket on `addr` (port 0: a free port) with `SO_REUSEADDR`, non-blocking.
/// `group`: it will lead a `SO_REUSEPORT` group. The leader binds *without* `SO_REUSEPORT`
/// and sets it only after its bind: an address another process holds (with or without
/// `SO_REUSEPORT`) is refused with "address in use" as with one listener, instead of the
/// server silently joining that process's group.
pub fn bind_one(addr: SocketAddr, group: bool) -> io::Result<std::net::TcpListener> {
    bind_listener(addr, false, group)
}

/// A non-blocking listening socket on `addr` with `SO_REUSEADDR`, and `SO_REUSEPORT` set
/// before its bind (`port_before`: joining a group) or after it (`port_after`: leading one).
fn bind_listener(
    addr: SocketAddr,
    port_before: bool,
    port_after: bool,
) -> io::Result<std::net::TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(port_before)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    if port_after {
        sock.set_reuse_port(true)?;
    }
    sock.listen(4096)?;
    Ok(sock.into())
}

/// `n - 1` more listening sockets on `leader`'s address, in its `SO_REUSEPORT` group.
pub fn bind_members(
    leader: &std::net::TcpListener,
    n: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    let addr = leader.local_addr()?;
    (1..n).map(|_| bind_listener(addr, true, false)).collect()
}

/// Accept connections on `listener` and serve each in a task of the calling runtime, until
/// `stop` completes (then the listener closes, every open connection is told to stop and
/// their tasks go on until they have).
pub async fn accept_loop(
    listener: TcpListener,
    serving: &Serving,
    admit: Admit,
    stop: impl Future<Output = ()>,
) {
    let mut stop = pin!(stop);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = &mut stop => break,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE/ENFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let m = serving.ctx.metrics();
        // Connections asked to close count as gone: one newcomer per eviction.
        let open = m.open_conns().saturating_sub(serving.reclaim.pending());
        if open >= admit.max_conns as u64 {
            // Reclaim idle connections (a sixteenth of the limit at a time, oldest first)
            // before refusing the newcomer.
            let batch = (admit.max_conns / 16).max(1);
            if serving.reclaim.evict(batch) == 0 {
                m.conn_refused();
                tokio::spawn(refuse(stream));
                continue;
            }
        }
        m.conn_accepted();
        let _ = stream.set_nodelay(true);
        if let Some(n) = admit.sndbuf {
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(n as usize);
        }
        let conn = crate::conn::open(serving, &stream, peer);
        let worker = conn.worker();
        let task = crate::conn::serve(serving.clone(), stream, conn);
        if serving.ctx.gate().queues_on_wake() {
            tokio::spawn(gate::QueueOnWake::new(serving.ctx.clone(), worker, task));
        } else {
            tokio::spawn(task);
        }
    }
    serving.reclaim.stop_all();
}

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        stream.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 20\r\nRetry-After: 1\r\n\r\n503 too many conns\r\n",
        ),
    )
    .await;
    let _ = stream.shutdown().await;
}

/// How each serving thread runs.
#[derive(Debug, Clone, Copy)]
pub struct ThreadPlan {
    /// The runtime's event interval (`Config::effective_event_interval`).
    pub event_interval: u32,
    /// How long a stopping thread waits for its connections to finish.
    pub shutdown_timeout: Duration,
    /// What its accept loop checks.
    pub admit: Admit,
}

/// Start one serving thread per listener (thread `k` serves `listeners[k]` and is home `k`:
/// `gate::shard::set_home`). Each stops accepting when `stop` turns `true` (or its sender is
/// dropped), waits up to `plan.shutdown_timeout` for its own connections to finish, and ends.
/// `serving.running` is replaced by each thread's own completion channel.
pub fn spawn_threads(
    listeners: Vec<std::net::TcpListener>,
    serving: &Serving,
    plan: ThreadPlan,
) -> io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(listeners.len());
    for (k, listener) in listeners.into_iter().enumerate() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .event_interval(plan.event_interval)
            .enable_all()
            .build()?;
        let (running, closed) = mpsc::channel::<()>(1);
        let serving = Serving {
            running,
            ctx: serving.ctx.for_thread(),
            ..serving.clone()
        };
        let h = std::thread::Builder::new()
            .name(format!("triage-serve-{k}"))
            .spawn(move || {
                gate::shard::set_home(k);
                rt.block_on(serve_thread(listener, serving, closed, plan));
            })?;
        handles.push(h);
    }
    Ok(handles)
}

/// One serving thread's life: accept until the stop, then wait for its connections.
async fn serve_thread(
    listener: std::net::TcpListener,
    serving: Serving,
    mut closed: mpsc::Receiver<()>,
    plan: ThreadPlan,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "serving thread cannot register its listener");
            return;
        }
    };
    let mut stop = serving.stop.clone();
    let stopped = async move {
        // `Err`: the server's stop sender is gone (its `run` was dropped): stop too.
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    };
    let collector = tokio::spawn(collect_on_trim(serving.trims.clone()));
    accept_loop(listener, &serving, plan.admit, stopped).await;
    collector.abort();
    drop(serving);
    // `None` once every connection task of this thread has dropped its sender.
    let _ = tokio::time::timeout(plan.shutdown_timeout, closed.recv()).await;
}

/// Hand this serving thread's empty allocator pages back each time the server's trimmer
/// trims (a crowd of connections left or went idle: see `server::spawn_trimmer`). The
/// connections' memory was allocated and freed on this thread, and only this thread can
/// return its heap's empty pages.
async fn collect_on_trim(mut trims: tokio::sync::watch::Receiver<u64>) {
    while trims.changed().await.is_ok() {
        os::heap::collect_thread();
    }
}

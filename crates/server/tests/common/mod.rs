//! Test helpers: start the real server on port 0 and talk to it over raw TCP.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use server::{Config, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

pub struct Running {
    pub addr: SocketAddr,
    pub admin: Option<SocketAddr>,
    pub ctx: server::Ctx,
    stop: Option<oneshot::Sender<()>>,
    join: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(j) = self.join.take() {
            tokio::time::timeout(Duration::from_secs(20), j)
                .await
                .expect("server stops")
                .unwrap()
                .unwrap();
        }
    }
}

pub fn config(root: Option<&Path>) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        root: root.map(|p| p.to_owned()),
        slots: Some(1),
        workers: 4,
        ..Config::default()
    }
}

pub async fn start(cfg: Config) -> Running {
    let srv = Server::bind(cfg).await.expect("bind");
    let addr = srv.local_addr();
    let admin = srv.admin_addr();
    let ctx = srv.ctx().clone();
    let (tx, rx) = oneshot::channel::<()>();
    let join = tokio::spawn(srv.run(async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        admin,
        ctx,
        stop: Some(tx),
        join: Some(join),
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn h(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(|s| s.as_str())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parse one response from `buf` (complete), given whether it answers a HEAD.
pub fn parse(buf: &[u8], head: bool) -> Option<(Resp, usize)> {
    let end = find(buf, b"\r\n\r\n")?;
    let text = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = text.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut pos = end + 4;
    let mut body = Vec::new();
    if head || status == 304 || status == 204 {
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let le = find(&buf[pos..], b"\r\n")? + pos;
            let n =
                usize::from_str_radix(std::str::from_utf8(&buf[pos..le]).ok()?.trim(), 16).ok()?;
            pos = le + 2;
            if n == 0 {
                pos += 2;
                break;
            }
            if buf.len() < pos + n + 2 {
                return None;
            }
            body.extend_from_slice(&buf[pos..pos + n]);
            pos += n + 2;
        }
    } else if let Some(cl) = headers.get("content-length") {
        let n: usize = cl.parse().ok()?;
        if buf.len() < pos + n {
            return None;
        }
        body.extend_from_slice(&buf[pos..pos + n]);
        pos += n;
    } else {
        body.extend_from_slice(&buf[pos..]);
        pos = buf.len();
    }
    if buf.len() < pos {
        return None;
    }
    Some((
        Resp {
            status,
            headers,
            body,
        },
        pos,
    ))
}

/// Send raw bytes, read until the server closes (or 10 s), parse the first response.
pub async fn raw(addr: SocketAddr, req: &[u8]) -> Resp {
    let head = req.starts_with(b"HEAD");
    let buf = raw_bytes(addr, req).await;
    match parse(&buf, head) {
        Some((r, _)) => r,
        None => panic!("unparsable response: {:?}", String::from_utf8_lossy(&buf)),
    }
}

pub async fn raw_bytes(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    buf
}

/// GET with extra header lines, connection closed after.
pub async fn get(addr: SocketAddr, path: &str, extra: &str) -> Resp {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    )
    .await
}

/// Read the whole admin `/metrics` text.
pub async fn metrics(admin: SocketAddr) -> String {
    let r = get(admin, "/metrics", "").await;
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap()
}

/// A value from Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.starts_with(name) && l[name.len()..].starts_with([' ', '{']) && !l.starts_with('#')
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

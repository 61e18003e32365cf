//! The alternative client measured when choosing loadgen's HTTP client: a closed loop of N
//! `hyper::client::conn::http1` connections (reused, single-threaded runtime) GETting one URL
//! for D seconds; prints requests/s. Compare with `triage load --plain --mode closed` and wrk
//! (see docs/load.md):
//!
//! `taskset -c 1 target/release/examples/hyper_closed http://127.0.0.1:8080/1k.html 32 5`

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: hyper_closed URL CONNECTIONS SECONDS");
        std::process::exit(2);
    }
    let url = url::Url::parse(&args[1]).expect("a valid http:// URL");
    let conns: usize = args[2].parse().expect("CONNECTIONS is a number");
    let secs: u64 = args[3].parse().expect("SECONDS is a number");
    let host = url.host_str().expect("URL has a host").to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let authority = format!("{host}:{port}");
    let path = url.path().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let total: u64 = rt.block_on(async move {
        let end = Instant::now() + Duration::from_secs(secs);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..conns {
            let (authority, path) = (authority.clone(), path.clone());
            set.spawn(async move {
                let stream = tokio::net::TcpStream::connect(&authority)
                    .await
                    .expect("connect");
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .expect("handshake");
                tokio::spawn(conn);
                let mut n = 0u64;
                while Instant::now() < end {
                    let req = hyper::Request::get(path.as_str())
                        .header("host", authority.as_str())
                        .body(Empty::<Bytes>::new())
                        .expect("request");
                    let Ok(resp) = sender.send_request(req).await else {
                        break;
                    };
                    if resp.into_body().collect().await.is_err() {
                        break;
                    }
                    n += 1;
                }
                n
            });
        }
        let mut total = 0;
        while let Some(n) = set.join_next().await {
            total += n.unwrap_or(0);
        }
        total
    });
    println!("{:.0}", total as f64 / secs as f64);
}

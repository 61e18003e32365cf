//! The admin listener: `/metrics` (Prometheus text), `/metrics.json` (the same snapshot as
//! JSON, for programs such as the cluster lab) and `/healthz` (`ok` while some back end is
//! up, 503 otherwise).

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::metrics::FrontMetrics;

/// Answers one admin request: `snapshot` gives the metrics, `up` the back ends up.
fn page(path: &str, snapshot: &dyn Fn() -> FrontMetrics) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            snapshot().prometheus(),
        ),
        "/metrics.json" => (
            StatusCode::OK,
            "application/json",
            serde_json::to_string_pretty(&snapshot()).unwrap_or_default() + "\n",
        ),
        "/healthz" => {
            if snapshot().backends.iter().any(|b| b.up) {
                (StatusCode::OK, "text/plain", "ok\n".into())
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "no back end is up\n".into(),
                )
            }
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "404 Not Found (try /metrics, /metrics.json, /healthz)\n".into(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// Accept admin connections until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    snapshot: std::sync::Arc<dyn Fn() -> FrontMetrics + Send + Sync>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        let snapshot = snapshot.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let r = page(req.uri().path(), &*snapshot);
                async move { Ok::<_, Infallible>(r) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

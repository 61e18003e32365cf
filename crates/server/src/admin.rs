//! The admin listener: `/metrics` (Prometheus text: the gate, the counters, CGI and resource
//! containers), `/samples` (recent PL/LRQ samples as JSON) and `/healthz`.

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

use crate::ctx::Ctx;

/// Accept admin connections until `stop` changes.
pub async fn serve(listener: TcpListener, ctx: Ctx, mut stop: watch::Receiver<bool>) {
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
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let page = page(&ctx, req.uri().path());
                async move { Ok::<_, Infallible>(page) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The Prometheus text of everything the server counts.
pub fn metrics_text(ctx: &Ctx) -> String {
    let cgi: Vec<_> = ctx
        .sites()
        .iter()
        .filter_map(|s| s.cgi.as_ref().map(|c| (s.name.as_str(), c)))
        .collect();
    crate::metrics::render(ctx.gate(), ctx.metrics())
        + &crate::cgi::render_metrics(&cgi)
        + &ctx.containers().render_metrics()
        + &crate::cluster_metrics::render(ctx.sites())
}

fn page(ctx: &Ctx, path: &str) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics_text(ctx),
        ),
        "/samples" => (
            StatusCode::OK,
            "application/json",
            crate::metrics::samples_json(ctx.gate()),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "404 Not Found (try /metrics, /samples, /healthz)\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

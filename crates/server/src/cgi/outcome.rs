//! What a CGI request comes to: a response (a short text, or the script's output relayed) or
//! a local redirect for the server to follow.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body::Body;

use super::relay::CgiRelay;

/// What the server does with a CGI request.
#[derive(Debug)]
pub enum Outcome {
    /// Send this response.
    Response(Response<Reply>),
    /// RFC 3875 local redirect: answer a GET for this path (and query) instead.
    LocalRedirect(String),
}

/// A response body: a short fixed text (errors) or the script's output.
#[derive(Debug)]
pub enum Reply {
    /// A short fixed text.
    Bytes(Bytes),
    /// The script's output.
    Relay(Box<CgiRelay>),
}

impl Body for Reply {
    type Data = Bytes;
    type Error = std::io::Error;

    /// Ungated relay (embedding without the server's gate, tests): the server itself wraps a
    /// [`CgiRelay`] in its gated body instead.
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        use std::task::Poll;
        match self.get_mut() {
            Reply::Bytes(b) if b.is_empty() => Poll::Ready(None),
            Reply::Bytes(b) => Poll::Ready(Some(Ok(http_body::Frame::data(std::mem::take(b))))),
            Reply::Relay(r) => {
                if let Err(e) = std::task::ready!(r.poll_input(cx)) {
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(
                    r.produce()
                        .transpose()
                        .map(|x| x.map(http_body::Frame::data)),
                )
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Bytes(b) => b.is_empty(),
            Reply::Relay(r) => r.is_done(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Reply::Bytes(b) => http_body::SizeHint::with_exact(b.len() as u64),
            Reply::Relay(r) => match r.remaining() {
                Some(n) => http_body::SizeHint::with_exact(n),
                None => http_body::SizeHint::default(),
            },
        }
    }
}

/// A short plain-text answer (errors).
pub(crate) fn text(status: StatusCode, msg: &str) -> Outcome {
    let mut r = Response::new(Reply::Bytes(Bytes::from(format!(
        "{} {}\n{msg}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    ))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Outcome::Response(r)
}

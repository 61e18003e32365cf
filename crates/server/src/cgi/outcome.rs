//! What a CGI request comes to: a response (a short text, or the script's output relayed) or
//! a local redirect for the server to follow.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

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

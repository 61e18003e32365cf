//! The static-file handler: one burst (under a slot) resolves the path, looks the file up,
//! evaluates conditionals and ranges, builds the head and produces the first chunk; the rest
//! of the body follows chunk by chunk, a burst each (see `body`).

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use policy::Hints;

use crate::body::{ChunkSource, Gated, Gzip, ServeBody};
use crate::ctx::{Conn, Ctx};
use crate::headers::{self, RangeReq};
use crate::resolve::{resolve, Reject};
use crate::site::Site;
use crate::store::{Entry, Fill, Lookup};

/// The extensions most requests name, with mime_guess's answer for each (a test holds them
/// equal): matched byte for byte before mime_guess's case-insensitive search, which cost
/// about 0.2 us of a 1 KB request's 14 us.
const COMMON_TYPES: [(&str, &str); 14] = [
    ("html", "text/html"),
    ("htm", "text/html"),
    ("css", "text/css"),
    ("js", "text/javascript"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("svg", "image/svg+xml"),
    ("ico", "image/x-icon"),
    ("json", "application/json"),
    ("txt", "text/plain"),
    ("bmp", "image/bmp"),
    ("webp", "image/webp"),
];

/// MIME type for a file name's extension.
pub fn mime_for(ext: Option<&str>) -> &'static str {
    let Some(e) = ext else {
        return "application/octet-stream";
    };
    if let Some((_, t)) = COMMON_TYPES.iter().find(|(x, _)| *x == e) {
        return t;
    }
    mime_guess::from_ext(e)
        .first_raw()
        .unwrap_or("application/octet-stream")
}

/// What follows the last `.` of the path's last segment (by `memrchr`: a reverse `char`
/// search is a few hundred instructions a request).
fn ext_of(path: &str) -> Option<&str> {
    let b = path.as_bytes();
    let start = memchr::memrchr(b'/', b).map_or(0, |i| i + 1);
    let dot = memchr::memrchr(b'.', &b[start..])?;
    Some(&path[start + dot + 1..])
}

/// A short plain-text response.
pub fn simple(status: StatusCode) -> Response<ServeBody> {
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let mut r = Response::new(ServeBody::once(text.clone()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    r
}

/// Serve a request from `site`'s store.
pub async fn serve<B>(ctx: &Ctx, conn: &Conn, site: &Site, req: Request<B>) -> Response<ServeBody> {
    let mime = mime_for(ext_of(req.uri().path()));
    let hints = Hints {
        class: headers::content_class(mime),
        urgency: req
            .headers()
            .get("priority")
            .and_then(|v| v.to_str().ok())
            .and_then(headers::urgency),
        container: site.container,
    };
    if let Some(peer) = crate::forward_route::wanted(conn, site, &req) {
        if let Some(r) = crate::forward_route::relay(ctx, conn, site, peer, &req).await {
            return r;
        }
    }
    let permit = ctx.gate().acquire(conn.worker(), hints).await;
    let mut resp = burst(ctx, conn, site, &req, hints, mime);
    drop(permit);
    if let Some(fill) = resp.extensions_mut().remove::<Fill>() {
        read_through(site, fill, &mut resp).await;
    }
    resp
}

/// A body the cache did not hold waits for the emulated disk (without a slot); the response
/// says where its body came from when the store reports it.
async fn read_through(site: &Site, fill: Fill, resp: &mut Response<ServeBody>) {
    use crate::forward_route::{CACHE_HEADER, DISK_HEADER};
    let Some(dir) = site.store.dir().filter(|d| d.reports_fill()) else {
        return;
    };
    if let (Fill::Miss(len), Some(disk)) = (fill, dir.disk()) {
        disk.read(len).await;
    }
    let h = resp.headers_mut();
    let how = if fill == Fill::Hit { "hit" } else { "miss" };
    h.insert(CACHE_HEADER, HeaderValue::from_static(how));
    if let Some(disk) = dir.disk() {
        h.insert(DISK_HEADER, HeaderValue::from(disk.queued()));
    }
}

/// `r` with the fill of its body's lookup, for [`read_through`], when `site` reports fills
/// (nothing is added otherwise: no allocation on a plain server's path).
fn with_fill(site: &Site, mut r: Response<ServeBody>, fill: Fill) -> Response<ServeBody> {
    if fill != Fill::None && site.store.dir().is_some_and(|d| d.reports_fill()) {
        r.extensions_mut().insert(fill);
    }
    r
}

fn burst<B>(
    ctx: &Ctx,
    conn: &Conn,
    site: &Site,
    req: &Request<B>,
    hints: Hints,
    path_mime: &'static str,
) -> Response<ServeBody> {
    let head = match *req.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => {
            let mut r = simple(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
    };
    let path = req.uri().path();
    let resolved = match resolve(path) {
        Ok(r) => r,
        Err(Reject::BadRequest) => return simple(StatusCode::BAD_REQUEST),
        Err(Reject::Forbidden) => return simple(StatusCode::FORBIDDEN),
    };
    let rel = resolved.rel_path();
    let (found, mut fill) = site.store.lookup_traced(rel);
    let (entry, mime) = match found {
        // The decoded name has the same extension as the raw path unless the dot or the
        // extension was percent-encoded.
        // `/file.txt/` and `/file.txt/.` name a directory that is not there.
        Lookup::File(_) if resolved.names_dir => return simple(StatusCode::NOT_FOUND),
        Lookup::File(e) => match resolved.extension() {
            Some(x) if path.ends_with(x) => (e, path_mime),
            x => (e, mime_for(x)),
        },
        Lookup::Dir => {
            if !resolved.names_dir && !resolved.is_root() {
                let mut loc = redirect_path(path);
                loc.push('/');
                if let Some(q) = req.uri().query() {
                    loc.push('?');
                    loc.push_str(q);
                }
                let mut r = simple(StatusCode::MOVED_PERMANENTLY);
                if let Ok(v) = HeaderValue::from_str(&loc) {
                    r.headers_mut().insert(header::LOCATION, v);
                }
                return r;
            }
            let found = site.index.iter().find_map(|idx| {
                let mut p = rel.to_vec();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(idx.as_bytes());
                match site.store.lookup_traced(&p) {
                    (Lookup::File(e), f) => Some((e, mime_for(ext_of(idx)), f)),
                    _ => None,
                }
            });
            match found {
                Some((e, m, f)) => {
                    fill = f;
                    (e, m)
                }
                None => return simple(StatusCode::FORBIDDEN),
            }
        }
        Lookup::NotFound => return simple(StatusCode::NOT_FOUND),
        Lookup::Forbidden => return simple(StatusCode::FORBIDDEN),
        Lookup::Error(e) => {
            tracing::warn!(path, error = %e, "lookup failed");
            return simple(StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    with_fill(
        site,
        respond(ctx, conn, req, entry, mime, head, hints),
        fill,
    )
}

/// The path of a redirect to `path`: with one leading slash, so that it cannot be read as a
/// network-path reference (`//host/...`, which a client would resolve to another host).
fn redirect_path(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

fn header_str(h: &HeaderMap, n: header::HeaderName) -> Option<&str> {
    h.get(n).and_then(|v| v.to_str().ok())
}

fn respond<B>(
    ctx: &Ctx,
    conn: &Conn,
    req: &Request<B>,
    entry: Arc<Entry>,
    mime: &'static str,
    head: bool,
    hints: Hints,
) -> Response<ServeBody> {
    let rh = req.headers();
    let etag = entry.etag.to_str().unwrap_or("");
    let bodies = ctx.bodies();
    let gz_cfg = &bodies.gzip;
    let gzippable = gz_cfg.enabled
        && entry.len >= gz_cfg.min_size
        && headers::mime_matches(mime, &gz_cfg.types);
    let gzip = gzippable
        && header_str(rh, header::ACCEPT_ENCODING).is_some_and(headers::accepts_gzip)
        && !rh.contains_key(header::RANGE);

    let not_modified = match header_str(rh, header::IF_NONE_MATCH) {
        Some(inm) => headers::none_match(inm, etag),
        None => header_str(rh, header::IF_MODIFIED_SINCE)
            .is_some_and(|ims| headers::not_modified_since(ims, entry.mtime)),
    };

    let (hm, status, start, end) = if !gzip && !not_modified && !rh.contains_key(header::RANGE) {
        // The common case, the whole file as it is: its head is built once per entry.
        (
            entry.plain_head(mime, gzippable),
            StatusCode::OK,
            0,
            entry.len,
        )
    } else {
        match head_of(rh, &entry, mime, gzip, gzippable, not_modified) {
            Ok(h) => h,
            Err(r) => return *r,
        }
    };

    let body = if head {
        ServeBody::empty()
    } else {
        // A response that fits in one chunk is one burst; a longer one starts with a short
        // burst (`first_chunk`), so that its first burst costs little wherever a policy puts it.
        // A longer compressed one is compressed in its body's bursts only: the compressor's
        // state, taken at the first chunk (`Gzip`), is then warm in the burst that uses it,
        // where a first chunk compressed here would leave it to cool while other streams run.
        let one_burst = end - start <= bodies.chunk as u64;
        let compress_later = gzip && !one_burst;
        let first = if one_burst || compress_later {
            bodies.chunk
        } else {
            bodies.first_chunk
        };
        let source = EntrySource {
            entry,
            pos: start,
            end,
            chunk: first,
            next_chunk: bodies.chunk,
        };
        let gz = gzip.then(|| Gzip::new(gz_cfg.level));
        let mut gated = Gated::new(ctx.clone(), conn.worker(), hints, Box::new(source), gz);
        if compress_later {
            ServeBody::gated(None, gated)
        } else {
            match gated.produce_now() {
                Ok(first) => ServeBody::gated(first, gated),
                Err(e) => {
                    tracing::warn!(error = %e, "reading file failed");
                    return simple(StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
        }
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = hm;
    r
}

/// A response's headers, status and the byte range of the file it sends.
type Head = (HeaderMap, StatusCode, u64, u64);

/// The head of a response that is not the whole file as it is: compressed, a range, or not
/// modified (then the whole response, as `Err`). `Err` is a response complete
/// without a body (boxed: the rare path).
fn head_of(
    rh: &HeaderMap,
    entry: &Entry,
    mime: &'static str,
    gzip: bool,
    gzippable: bool,
    not_modified: bool,
) -> Result<Head, Box<Response<ServeBody>>> {
    let etag = entry.etag.to_str().unwrap_or("");
    let mut hm = HeaderMap::with_capacity(10);
    hm.insert(header::SERVER, HeaderValue::from_static("triage"));
    if gzip {
        // A distinct validator for the compressed representation.
        let tag = format!("{}-gzip\"", etag.trim_end_matches('"'));
        if let Ok(v) = HeaderValue::from_str(&tag) {
            hm.insert(header::ETAG, v);
        }
    } else {
        hm.insert(header::ETAG, entry.etag.clone());
    }
    hm.insert(header::LAST_MODIFIED, entry.last_modified.clone());
    if gzippable {
        hm.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    if not_modified {
        let mut r = Response::new(ServeBody::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = hm;
        return Err(Box::new(r));
    }
    hm.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));

    let mut status = StatusCode::OK;
    let (mut start, mut end) = (0, entry.len);
    if gzip {
        hm.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    } else {
        hm.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        let range = header_str(rh, header::RANGE).filter(|_| {
            header_str(rh, header::IF_RANGE).is_none_or(|ir| {
                headers::if_range_ok(ir, etag, entry.last_modified.to_str().unwrap_or(""))
            })
        });
        match range.map(|r| headers::parse_range(r, entry.len)) {
            None | Some(RangeReq::Full) => {
                hm.insert(header::CONTENT_LENGTH, entry.content_length.clone());
            }
            Some(RangeReq::Partial(a, b)) => {
                status = StatusCode::PARTIAL_CONTENT;
                (start, end) = (a, b + 1);
                hm.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
                if let Ok(v) = HeaderValue::from_str(&format!("bytes {a}-{b}/{}", entry.len)) {
                    hm.insert(header::CONTENT_RANGE, v);
                }
            }
            Some(RangeReq::Unsatisfiable) => {
                let mut r = simple(StatusCode::RANGE_NOT_SATISFIABLE);
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", entry.len)) {
                    r.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return Err(Box::new(r));
            }
        }
    }
    Ok((hm, status, start, end))
}

/// Chunks of a file (memory slices, or `pread`).
struct EntrySource {
    entry: Arc<Entry>,
    pos: u64,
    end: u64,
    /// Size of the next chunk: the first burst's (`first_chunk` when the response is longer
    /// than one chunk), then `next_chunk`.
    chunk: usize,
    next_chunk: usize,
}

impl ChunkSource for EntrySource {
    fn produce(&mut self) -> io::Result<Option<Bytes>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let n = (self.end - self.pos).min(self.chunk as u64) as usize;
        let b = self.entry.read_at(self.pos, n)?;
        self.pos += n as u64;
        self.chunk = self.next_chunk;
        Ok(Some(b))
    }

    fn remaining(&self) -> Option<u64> {
        Some(self.end - self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_is_the_last_segments_after_its_last_dot() {
        assert_eq!(ext_of("/x.tar.gz"), Some("gz"));
        assert_eq!(ext_of("/a.b/c"), None);
        assert_eq!(ext_of("/a.b/"), None);
        assert_eq!(ext_of("f."), Some(""));
        assert_eq!(ext_of("/.hidden"), Some("hidden"));
        assert_eq!(ext_of(""), None);
    }

    #[test]
    fn redirects_are_never_protocol_relative() {
        assert_eq!(redirect_path("//sub"), "/sub");
        assert_eq!(redirect_path("///evil.example/x"), "/evil.example/x");
        assert_eq!(redirect_path("/a//b"), "/a//b");
    }

    #[test]
    fn the_common_types_are_what_mime_guess_says() {
        for (ext, t) in COMMON_TYPES {
            assert_eq!(mime_guess::from_ext(ext).first_raw(), Some(t), ".{ext}");
            assert_eq!(mime_for(Some(ext)), t);
        }
        assert_eq!(
            mime_for(Some("HTML")),
            "text/html",
            "other cases: mime_guess"
        );
        assert_eq!(mime_for(Some("woff2")), "font/woff2");
        assert_eq!(mime_for(Some("no-such")), "application/octet-stream");
        assert_eq!(mime_for(None), "application/octet-stream");
    }
}

//! Request bodies of unknown length (`Transfer-Encoding: chunked`) on their way to a script.
//!
//! RFC 3875 gives a script its body's length in `CONTENT_LENGTH`, known only once a chunked
//! body has ended. [`spool`] writes the body, as it arrives, to an unnamed temporary file
//! (`O_TMPFILE` in the temporary directory, `TMPDIR` or `/tmp`; a name unlinked at once where
//! the file system has no `O_TMPFILE`), up to `max_request_body`; the file, rewound, becomes
//! the script's stdin. So the server holds at most [`SPOOL_BUFFER`] bytes of such a body in
//! memory, whatever its length (a Content-Length body is streamed through a pipe as it
//! arrives). The file writes run on the blocking pool, never on a runtime thread.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use bytes::{Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;

/// Most bytes of a spooled body held in memory before they are written out.
pub const SPOOL_BUFFER: usize = 64 * 1024;

/// Why a body could not be spooled.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// Longer than the limit (413).
    #[error("request body longer than {0} bytes")]
    TooLarge(u64),
    /// The client's body was broken or cut (400).
    #[error("reading the request body: {0}")]
    Read(String),
    /// The temporary file failed (500).
    #[error("spooling the request body: {0}")]
    Io(#[from] io::Error),
}

/// An unnamed file in the temporary directory, open for reading and writing.
fn temp_file() -> io::Result<File> {
    let dir = std::env::temp_dir();
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in TMPDIR"))?;
    // SAFETY: a valid C string; the descriptor returned is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        // SAFETY: a fresh descriptor nobody else owns.
        return Ok(unsafe { File::from_raw_fd(fd) });
    }
    // No O_TMPFILE here: a fresh name, unlinked at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("triage-body-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

fn write_out(mut f: File, b: Bytes) -> io::Result<File> {
    f.write_all(&b)?;
    Ok(f)
}

/// Write `body` to a temporary file, at most `limit` bytes; returns the file, rewound (to
/// become the script's stdin), and the body's length.
pub async fn spool<B>(mut body: B, limit: u64) -> Result<(OwnedFd, u64), SpoolError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut file = blocking(temp_file).await?;
    let mut buf = BytesMut::new();
    let mut len = 0u64;
    loop {
        let frame = body.frame().await;
        let done = match frame {
            None => true,
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    len += d.len() as u64;
                    if len > limit {
                        return Err(SpoolError::TooLarge(limit));
                    }
                    buf.extend_from_slice(&d);
                }
                false
            }
            Some(Err(e)) => return Err(SpoolError::Read(e.to_string())),
        };
        if buf.len() >= SPOOL_BUFFER || (done && !buf.is_empty()) {
            let chunk = buf.split().freeze();
            file = blocking(move || write_out(file, chunk)).await?;
        }
        if done {
            break;
        }
    }
    let file = blocking(move || {
        let mut f = file;
        f.rewind()?;
        Ok(f)
    })
    .await?;
    Ok((OwnedFd::from(file), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[tokio::test]
    async fn a_body_goes_to_a_rewound_file() {
        let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = (0..50)
            .map(|i| Ok(http_body::Frame::data(Bytes::from(vec![i as u8; 10_000]))))
            .collect();
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let (fd, len) = spool(body, 1 << 20).await.unwrap();
        assert_eq!(len, 500_000);
        let mut back = Vec::new();
        File::from(fd).read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 500_000);
        assert!(back[..10_000].iter().all(|&b| b == 0));
        assert!(back[490_000..].iter().all(|&b| b == 49));
    }

    #[tokio::test]
    async fn past_the_limit_is_too_large() {
        let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> =
            vec![Ok(http_body::Frame::data(Bytes::from(vec![0u8; 2000])))];
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        assert!(matches!(
            spool(body, 1000).await,
            Err(SpoolError::TooLarge(1000))
        ));
    }
}

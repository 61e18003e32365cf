//! Where an HTTP/1.1 message body ends, found without changing a byte: the relay copies the
//! body through as it came and asks [`Body::advance`] how many of the bytes it holds belong
//! to the body. Content-Length counts bytes; chunked parses each chunk's size line
//! (extensions skipped), the data, the CRLF after it, the last chunk and the trailers; a
//! response without a length ends when the back end closes. Pure: no I/O.

/// How a message's body is delimited (RFC 9112 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (a request without length, HEAD's response, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the sender closes (a response without a length).
    Close,
}

/// The body's bytes are not valid chunked framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad chunked framing: {0}")]
pub struct FramingError(pub &'static str);

/// What [`Body::advance`] found in the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// How many of the bytes, from the start, belong to the body.
    pub used: usize,
    /// Whether the body ended with them.
    pub done: bool,
}

/// Where the parser of chunked framing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In a chunk-size line: the size so far, its hex digits, whether past them (extension).
    Size {
        size: u64,
        digits: u8,
        ext: bool,
    },
    /// The size line's CR was seen.
    SizeLf {
        size: u64,
    },
    /// In a chunk's data, this many bytes left.
    Data(u64),
    /// After the data: its CR, then its LF.
    DataCr,
    DataLf,
    /// After the last chunk: at a trailer line's start (`empty`) or inside one.
    Trailer {
        empty: bool,
    },
    /// A trailer line's CR was seen.
    TrailerLf {
        empty: bool,
    },
}

/// The state of one body being relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    Chunked(Chunk),
    Close,
    Done,
}

/// One body's framing, advanced over its bytes as they arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Body {
    state: State,
}

const MAX_SIZE_DIGITS: u8 = 15;

impl Body {
    /// A body framed as `framing`.
    pub fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::None | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Chunked(Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
            }),
            Framing::Close => State::Close,
        };
        Self { state }
    }

    /// Whether the body has ended (a close-delimited one ends only at [`Body::closed`]).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the end of the connection ends this body properly.
    pub fn closed(&self) -> bool {
        matches!(self.state, State::Close | State::Done)
    }

    /// Take the bytes `data` that follow what was advanced over so far: how many belong to
    /// the body, and whether it ended.
    pub fn advance(&mut self, data: &[u8]) -> Result<Step, FramingError> {
        let used = match &mut self.state {
            State::Done => 0,
            State::Close => data.len(),
            State::Length(left) => {
                let n = (*left).min(data.len() as u64);
                *left -= n;
                if *left == 0 {
                    self.state = State::Done;
                }
                n as usize
            }
            State::Chunked(c) => {
                let (used, done) = chunked(c, data)?;
                if done {
                    self.state = State::Done;
                }
                used
            }
        };
        Ok(Step {
            used,
            done: self.state == State::Done,
        })
    }
}

fn hex(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

/// Advance chunked framing over `data`: the bytes used and whether the body ended.
fn chunked(c: &mut Chunk, data: &[u8]) -> Result<(usize, bool), FramingError> {
    let mut i = 0;
    while i < data.len() {
        if let Chunk::Data(left) = c {
            let n = (*left).min((data.len() - i) as u64);
            *left -= n;
            i += n as usize;
            if *left == 0 {
                *c = Chunk::DataCr;
            }
            continue;
        }
        let b = data[i];
        i += 1;
        *c = match *c {
            Chunk::Size { size, digits, ext } => match (hex(b), ext) {
                (Some(d), false) => {
                    if digits >= MAX_SIZE_DIGITS {
                        return Err(FramingError("chunk size too large"));
                    }
                    Chunk::Size {
                        size: size * 16 + d,
                        digits: digits + 1,
                        ext,
                    }
                }
                _ if b == b'\r' && digits > 0 => Chunk::SizeLf { size },
                _ if ext && b != b'\n' => Chunk::Size { size, digits, ext },
                _ if digits > 0 && matches!(b, b';' | b' ' | b'\t') => Chunk::Size {
                    size,
                    digits,
                    ext: true,
                },
                _ => return Err(FramingError("bad chunk size line")),
            },
            Chunk::SizeLf { size } => match (b, size) {
                (b'\n', 0) => Chunk::Trailer { empty: true },
                (b'\n', n) => Chunk::Data(n),
                _ => return Err(FramingError("chunk size line without CRLF")),
            },
            Chunk::DataCr if b == b'\r' => Chunk::DataLf,
            Chunk::DataLf if b == b'\n' => Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
            },
            Chunk::DataCr | Chunk::DataLf => {
                return Err(FramingError("chunk data not followed by CRLF"))
            }
            Chunk::Trailer { empty } if b == b'\r' => Chunk::TrailerLf { empty },
            Chunk::Trailer { .. } if b == b'\n' => return Err(FramingError("bare LF in trailers")),
            Chunk::Trailer { .. } => Chunk::Trailer { empty: false },
            Chunk::TrailerLf { empty: true } if b == b'\n' => return Ok((i, true)),
            Chunk::TrailerLf { empty: false } if b == b'\n' => Chunk::Trailer { empty: true },
            Chunk::TrailerLf { .. } => return Err(FramingError("trailer line without CRLF")),
            Chunk::Data(_) => unreachable!("handled above"),
        };
    }
    Ok((i, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `wire` in pieces of `step` bytes; the bytes used and whether it ended.
    fn feed(framing: Framing, wire: &[u8], step: usize) -> Result<(usize, bool), FramingError> {
        let mut b = Body::new(framing);
        let mut used = 0;
        for piece in wire.chunks(step.max(1)) {
            let s = b.advance(piece)?;
            used += s.used;
            if s.done {
                return Ok((used, true));
            }
            assert_eq!(s.used, piece.len(), "stopped early without ending");
        }
        Ok((used, b.is_done()))
    }

    fn every_split(framing: Framing, wire: &[u8]) -> Result<(usize, bool), FramingError> {
        let whole = feed(framing, wire, wire.len())?;
        for step in 1..wire.len() {
            assert_eq!(feed(framing, wire, step)?, whole, "pieces of {step}");
        }
        Ok(whole)
    }

    #[test]
    fn content_length_takes_exactly_its_bytes() {
        assert_eq!(
            every_split(Framing::Length(5), b"hello").unwrap(),
            (5, true)
        );
        // What follows is the next message, not this body.
        assert_eq!(
            every_split(Framing::Length(5), b"helloGET /").unwrap(),
            (5, true)
        );
        assert_eq!(feed(Framing::Length(9), b"hello", 2).unwrap(), (5, false));
        assert!(Body::new(Framing::Length(0)).is_done());
        assert!(Body::new(Framing::None).is_done());
    }

    #[test]
    fn chunked_ends_after_the_last_chunk_and_empty_trailers() {
        let wire = b"5\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
        assert_eq!(
            every_split(Framing::Chunked, wire).unwrap(),
            (wire.len(), true)
        );
        let mut next = wire.to_vec();
        next.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(
            every_split(Framing::Chunked, &next).unwrap(),
            (wire.len(), true)
        );
    }

    #[test]
    fn chunked_skips_extensions_and_trailers() {
        let wire =
            b"3;name=\"va;l\"\r\nabc\r\n4 ; x\r\ndefg\r\n0;last\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n";
        assert_eq!(
            every_split(Framing::Chunked, wire).unwrap(),
            (wire.len(), true)
        );
    }

    #[test]
    fn a_body_that_stops_short_has_not_ended() {
        let b = b"5\r\nhello\r\n0\r\n";
        assert_eq!(every_split(Framing::Chunked, b).unwrap(), (b.len(), false));
        let mut body = Body::new(Framing::Chunked);
        body.advance(b).unwrap();
        assert!(!body.closed(), "a connection closed here truncated it");
    }

    #[test]
    fn bad_chunked_framing_is_an_error() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\nhello\r\n",
            b"5\r\nhelloXX0\r\n\r\n",
            b"10000000000000000\r\n",
            b";ext\r\n",
            b"0\r\nX: y\n\r\n",
        ] {
            assert!(
                feed(Framing::Chunked, bad, bad.len()).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_close_delimited_body_takes_everything_until_close() {
        let mut b = Body::new(Framing::Close);
        assert_eq!(
            b.advance(b"anything at all").unwrap(),
            Step {
                used: 15,
                done: false
            }
        );
        assert!(b.closed());
        assert!(!Body::new(Framing::Length(3)).closed());
    }
}

//! The request line, looked at as its bytes arrive, before the HTTP parser sees them (pure).
//!
//! The parser (hyper's) knows HTTP/1.0 and HTTP/1.1 only, and answers everything else 400 or
//! not at all. [`LineScan`] gives the answers RFC 9112 and nginx give:
//! - `HTTP/1.2` ... `HTTP/1.9`: a later minor version of HTTP/1 is served as HTTP/1.1 (the
//!   version digit is rewritten in place);
//! - a major version of 2 or more (`HTTP/2.0`, `HTTP/9.9`, the HTTP/2 preface
//!   `PRI * HTTP/2.0`): 505;
//! - a request line as long as the whole head may be (`max_header_size`) without its end: 414;
//! - a head with both `Content-Length` and `Transfer-Encoding` (the parser would drop the
//!   length and go on; a proxy in front may have believed it): 400, as nginx.
//!
//! Only heads that start in a fresh read (a new connection, or after a response) are looked
//! at: a head that pipelining put behind another one is left to the parser.

/// What to do with the bytes just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand them to the parser (possibly rewritten).
    Pass,
    /// Answer with this status and close, without parsing.
    Refuse(u16),
}

/// Where the scanner is in a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not following a head.
    Off,
    /// In the request line.
    Line,
    /// In the header lines: their names are checked for `Content-Length` and
    /// `Transfer-Encoding`.
    Headers,
}

/// Follows one request head across reads. See the module docs.
#[derive(Debug, Clone)]
pub struct LineScan {
    limit: usize,
    phase: Phase,
    len: usize,
    /// Whether the first word so far is a method token (`tchar`s).
    method: bool,
    spaces: u8,
    /// The last bytes of the line (enough for ` HTTP/x.y\r`).
    tail: [u8; 12],
    /// The current header line: at its start, in its name, the name's first bytes (lower case).
    at_start: bool,
    in_name: bool,
    name: [u8; 17],
    name_len: usize,
    content_length: bool,
    transfer_encoding: bool,
}

fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl LineScan {
    /// A scanner refusing request lines of `limit` bytes or more (414).
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            phase: Phase::Off,
            len: 0,
            method: true,
            spaces: 0,
            tail: [0; 12],
            at_start: true,
            in_name: true,
            name: [0; 17],
            name_len: 0,
            content_length: false,
            transfer_encoding: false,
        }
    }

    /// A request head starts with the next bytes.
    pub fn start(&mut self) {
        *self = Self::new(self.limit);
        self.phase = Phase::Line;
    }

    /// Whether a request head is being followed.
    pub fn active(&self) -> bool {
        self.phase != Phase::Off
    }

    /// The line's bytes `seg` (no newline) arrived: keep its last bytes, count its spaces,
    /// check its first word.
    fn take_line_bytes(&mut self, seg: &[u8]) {
        for &b in seg {
            if b == b' ' {
                self.spaces = self.spaces.saturating_add(1);
            } else if self.spaces == 0 && !tchar(b) {
                self.method = false;
            }
        }
        let n = seg.len().min(self.tail.len());
        self.tail.copy_within(n.., 0);
        let keep = self.tail.len() - n;
        self.tail[keep..].copy_from_slice(&seg[seg.len() - n..]);
        self.len += seg.len();
    }

    /// Look at `buf`, the bytes just read (the version digit of an HTTP/1.x line with x > 1 is
    /// rewritten to `1` when it is in `buf`). The request line is taken a line at a time (its
    /// end found by `memchr`), a header line's value skipped to its end: a head costs a few
    /// passes over its bytes, not a state change per byte.
    pub fn feed(&mut self, buf: &mut [u8]) -> Verdict {
        let mut i = 0;
        while i < buf.len() {
            match self.phase {
                Phase::Off => return Verdict::Pass,
                Phase::Line => {
                    if self.len == 0 && (buf[i] == b'\r' || buf[i] == b'\n') {
                        // Empty lines before a request line are allowed (RFC 9112 §2.2).
                        i += 1;
                        continue;
                    }
                    let nl = memchr::memchr(b'\n', &buf[i..]).map(|at| i + at);
                    let end = nl.unwrap_or(buf.len());
                    // The line may not reach `limit` bytes before its end (414).
                    let room = self.limit.saturating_sub(self.len);
                    if end - i >= room {
                        self.phase = Phase::Off;
                        return Verdict::Refuse(414);
                    }
                    self.take_line_bytes(&buf[i..end]);
                    let Some(nl) = nl else {
                        return Verdict::Pass;
                    };
                    if let Verdict::Refuse(s) = self.line_end(buf, nl) {
                        self.phase = Phase::Off;
                        return Verdict::Refuse(s);
                    }
                    // Only a request line's head is followed further.
                    self.phase = if self.method && self.spaces >= 2 {
                        Phase::Headers
                    } else {
                        Phase::Off
                    };
                    i = nl + 1;
                }
                Phase::Headers => {
                    if !self.in_name {
                        // A value (or a name longer than any looked for): on to its line end.
                        match memchr::memchr(b'\n', &buf[i..]) {
                            Some(at) => i += at,
                            None => return Verdict::Pass,
                        }
                    }
                    let b = buf[i];
                    i += 1;
                    if b == b'\n' {
                        if self.at_start {
                            // The empty line: the head is complete.
                            self.phase = Phase::Off;
                            if self.content_length && self.transfer_encoding {
                                return Verdict::Refuse(400);
                            }
                            return Verdict::Pass;
                        }
                        self.at_start = true;
                        self.in_name = true;
                        self.name_len = 0;
                        continue;
                    }
                    if self.at_start && b == b'\r' {
                        continue;
                    }
                    self.at_start = false;
                    if b == b':' {
                        self.in_name = false;
                        match &self.name[..self.name_len] {
                            b"content-length" => self.content_length = true,
                            b"transfer-encoding" => self.transfer_encoding = true,
                            _ => {}
                        }
                    } else if self.name_len < self.name.len() {
                        self.name[self.name_len] = b.to_ascii_lowercase();
                        self.name_len += 1;
                    } else {
                        // Longer than any name looked for.
                        self.in_name = false;
                    }
                }
            }
        }
        Verdict::Pass
    }
}

impl LineScan {
    /// The line ended at `buf[nl]`: judge its version.
    fn line_end(&self, buf: &mut [u8], nl: usize) -> Verdict {
        if !self.method || self.spaces < 2 {
            return Verdict::Pass;
        }
        let cr = usize::from(self.tail[11] == b'\r');
        let t = &self.tail[..12 - cr];
        // `... HTTP/x.y`: the last 9 bytes.
        let v = &t[t.len() - 9..];
        if &v[..6] != b" HTTP/" || v[7] != b'.' {
            return Verdict::Pass;
        }
        let (major, minor) = (v[6], v[8]);
        if !major.is_ascii_digit() || !minor.is_ascii_digit() {
            return Verdict::Pass;
        }
        if major >= b'2' {
            return Verdict::Refuse(505);
        }
        if major == b'1' && minor > b'1' {
            // The minor digit sits just before the line end (and its CR).
            if let Some(at) = nl.checked_sub(1 + cr) {
                buf[at] = b'1';
            }
        }
        Verdict::Pass
    }
}

/// The reason phrase of the statuses [`LineScan`] answers.
pub fn reason(status: u16) -> &'static str {
    match status {
        414 => "URI Too Long",
        505 => "HTTP Version Not Supported",
        _ => "Bad Request",
    }
}

/// The whole answer for a refused request line (the connection is closed after it).
pub fn answer(status: u16) -> Vec<u8> {
    let body = format!("{status} {}\n", reason(status));
    format!(
        "HTTP/1.1 {status} {}\r\nServer: triage\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]], limit: usize) -> (Verdict, Vec<u8>) {
        let mut s = LineScan::new(limit);
        s.start();
        let mut out = Vec::new();
        for c in chunks {
            let mut b = c.to_vec();
            let v = s.feed(&mut b);
            out.extend_from_slice(&b);
            if v != Verdict::Pass {
                return (v, out);
            }
        }
        (Verdict::Pass, out)
    }

    #[test]
    fn versions() {
        let one = |l: &[u8]| scan(&[l], 8192);
        assert_eq!(one(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").0, Verdict::Pass);
        assert_eq!(one(b"GET / HTTP/1.0\r\n\r\n").0, Verdict::Pass);
        assert_eq!(
            one(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n").0,
            Verdict::Refuse(505)
        );
        assert_eq!(one(b"GET / HTTP/9.9\r\n\r\n").0, Verdict::Refuse(505));
        assert_eq!(
            one(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").0,
            Verdict::Refuse(505)
        );
        let (v, out) = one(b"GET /x HTTP/1.2\r\nHost: a\r\n\r\n");
        assert_eq!(v, Verdict::Pass);
        assert_eq!(out, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
        let (_, out) = one(b"GET /x HTTP/1.5\nHost: a\n\n");
        assert_eq!(
            out, b"GET /x HTTP/1.1\nHost: a\n\n",
            "bare LF line ends too"
        );
        assert_eq!(
            one(b"\r\nGET / HTTP/2.0\r\n").0,
            Verdict::Refuse(505),
            "after empty lines"
        );
    }

    #[test]
    fn lines_split_across_reads() {
        assert_eq!(
            scan(&[b"GET / HT", b"TP/2.0\r", b"\n"], 8192).0,
            Verdict::Refuse(505)
        );
        let (_, out) = scan(&[b"GET / HTTP/1.", b"3\r\n\r\n"], 8192);
        assert_eq!(out, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn only_request_lines_are_judged() {
        // A header line or a body that happens to say HTTP/2.0 is not a request line.
        assert_eq!(scan(&[b"X-A: b HTTP/2.0\r\n"], 8192).0, Verdict::Pass);
        assert_eq!(scan(&[b"garbage\r\n"], 8192).0, Verdict::Pass);
        let mut s = LineScan::new(8192);
        assert_eq!(
            s.feed(&mut b"GET / HTTP/2.0\r\n".to_vec()),
            Verdict::Pass,
            "not started"
        );
    }

    #[test]
    fn a_line_as_long_as_the_head_is_414() {
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(20_000));
        assert_eq!(scan(&[long.as_bytes()], 16384).0, Verdict::Refuse(414));
        assert_eq!(scan(&[long.as_bytes()], 32768).0, Verdict::Pass);
        let a = answer(414);
        assert!(a.starts_with(b"HTTP/1.1 414 URI Too Long\r\n"));
    }

    #[test]
    fn length_and_chunked_together_are_400() {
        let both = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(scan(&[both], 8192).0, Verdict::Refuse(400));
        let split: Vec<&[u8]> = both.chunks(5).collect();
        assert_eq!(scan(&split, 8192).0, Verdict::Refuse(400), "across reads");
        let upper = b"POST / HTTP/1.1\r\nCONTENT-LENGTH: 4\r\nTRANSFER-ENCODING: chunked\r\n\r\n";
        assert_eq!(scan(&[upper], 8192).0, Verdict::Refuse(400));
        let one = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(scan(&[one], 8192).0, Verdict::Pass);
        // A body mentioning both after the head is not a head.
        let body =
            b"POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(scan(&[body], 8192).0, Verdict::Pass);
    }
}

//! Request-path resolution, pure: turn the path of a request URI into the list of segments of a
//! file below the document root, or refuse it. No file system access here (symlinks are
//! handled by the store, which opens files with `openat2(RESOLVE_BENEATH)`).
//!
//! Refused (403): any `..` segment, raw or percent-encoded (`%2e%2e`); an encoded slash
//! (`%2f`) or any backslash (raw or `%5c`); NUL (`%00`) or other control bytes. Malformed
//! percent-encoding and paths not starting with `/` are 400.

use smallvec::SmallVec;

/// Longest decoded path a [`Resolved`] holds without allocating.
pub const INLINE_PATH: usize = 64;

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Syntactically broken (400).
    BadRequest,
    /// Tries to leave the root or smuggle a separator (403).
    Forbidden,
}

/// A resolved path: the decoded segments (no `.`/`..`/empty ones) joined with `/`, whether the
/// request path ended with `/`, and whether it names a directory (ends with `/` or `/.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The decoded segments joined with `/` (empty for the root): one buffer, not one per
    /// segment, since this is built for every request, and held inline up to
    /// [`INLINE_PATH`] bytes: no allocation for a usual path (a 16-byte block per request
    /// that, with ten thousand parked connections, cost as much as the rest of the lookup:
    /// docs/results-log.md). Joining loses nothing: no decoded segment holds a `/` (an encoded
    /// slash is refused).
    rel: SmallVec<[u8; INLINE_PATH]>,
    /// Whether the request path ended with `/`.
    pub trailing_slash: bool,
    /// Whether the path can only name a directory: it ends with `/` or with a `.` segment
    /// (`/a/` and `/a/.`; a file there is 404).
    pub names_dir: bool,
}

impl Resolved {
    /// The relative path: the decoded segments joined with `/` (empty for the root).
    pub fn rel_path(&self) -> &[u8] {
        &self.rel
    }

    /// The decoded segments, none of them `.`, `..` or empty.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.rel.split(|&b| b == b'/').filter(|s| !s.is_empty())
    }

    /// The decoded segments, each its own buffer.
    pub fn segment_vecs(&self) -> Vec<Vec<u8>> {
        self.segments().map(<[u8]>::to_vec).collect()
    }

    /// Whether the path names the root itself.
    pub fn is_root(&self) -> bool {
        self.rel.is_empty()
    }

    /// Extension of the last segment (after the last `.`), if any.
    pub fn extension(&self) -> Option<&str> {
        let last = self.segments().last()?;
        let dot = last.iter().rposition(|&b| b == b'.')?;
        std::str::from_utf8(&last[dot + 1..]).ok()
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Resolve the path component of a request target (query already removed).
pub fn resolve(path: &str) -> Result<Resolved, Reject> {
    let raw = path.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(Reject::BadRequest);
    }
    // Decoding only shortens: the bytes after the leading `/` are room enough.
    let mut rel = SmallVec::<[u8; INLINE_PATH]>::with_capacity(raw.len() - 1);
    let mut trailing_slash = false;
    let mut names_dir = false;
    for seg in raw[1..].split(|&b| b == b'/') {
        trailing_slash = seg.is_empty();
        names_dir = trailing_slash;
        if seg.is_empty() {
            continue;
        }
        let before = rel.len();
        if before > 0 {
            rel.push(b'/');
        }
        let start = rel.len();
        let mut i = 0;
        while i < seg.len() {
            let b = seg[i];
            if b == b'%' {
                let (Some(h), Some(l)) = (
                    seg.get(i + 1).copied().and_then(hex),
                    seg.get(i + 2).copied().and_then(hex),
                ) else {
                    return Err(Reject::BadRequest);
                };
                let v = h << 4 | l;
                if v == b'/' {
                    return Err(Reject::Forbidden);
                }
                rel.push(v);
                i += 3;
            } else {
                rel.push(b);
                i += 1;
            }
        }
        let dec = &rel[start..];
        if dec
            .iter()
            .any(|&b| b == b'\\' || b == 0 || b < 0x20 || b == 0x7f)
        {
            return Err(Reject::Forbidden);
        }
        match dec {
            b"." => {
                names_dir = true;
                rel.truncate(before);
            }
            b".." => return Err(Reject::Forbidden),
            _ => {}
        }
    }
    Ok(Resolved {
        rel,
        trailing_slash,
        names_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn segs(p: &str) -> Vec<String> {
        resolve(p)
            .unwrap()
            .segments()
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn plain_paths() {
        assert_eq!(segs("/"), Vec::<String>::new());
        assert_eq!(segs("/a/b.html"), vec!["a", "b.html"]);
        assert_eq!(segs("//a/./b"), vec!["a", "b"]);
        assert_eq!(segs("/a%20b"), vec!["a b"]);
        assert!(resolve("/dir/").unwrap().trailing_slash);
        assert!(!resolve("/dir").unwrap().trailing_slash);
        assert!(resolve("/dir/").unwrap().names_dir);
        assert!(resolve("/f.txt/.").unwrap().names_dir);
        assert!(resolve("/f.txt/%2e").unwrap().names_dir);
        assert!(!resolve("/f.txt").unwrap().names_dir);
        assert!(!resolve("/./f.txt").unwrap().names_dir);
        assert_eq!(resolve("/x/y.PNG").unwrap().extension(), Some("PNG"));
        assert_eq!(resolve("/a/b").unwrap().rel_path(), b"a/b");
        assert_eq!(resolve("/./a/.//b/%41/.").unwrap().rel_path(), b"a/b/A");
        assert_eq!(resolve("/%2e/a").unwrap().rel_path(), b"a");
        assert!(resolve("/").unwrap().is_root());
        assert!(resolve("/./.").unwrap().is_root());
        assert!(!resolve("/a").unwrap().is_root());
        assert_eq!(
            resolve("/a/b").unwrap().segment_vecs(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
    }

    #[test]
    fn traversal_forms_are_refused() {
        for p in [
            "/..",
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/.%2e/x",
            "/a%2fb",
            "/a%2F..%2Fb",
            "/a\\b",
            "/..\\x",
            "/a%5cb",
            "/a%00b",
            "/a%0ab",
        ] {
            assert_eq!(resolve(p), Err(Reject::Forbidden), "{p}");
        }
    }

    #[test]
    fn a_usual_path_is_held_without_allocating() {
        let name = "a".repeat(INLINE_PATH - 5);
        for p in [
            "/file.html".to_owned(),
            format!("/{name}/x.js"),
            "/dir/a%2eb.js".to_owned(),
        ] {
            let r = resolve(&p).unwrap();
            assert!(!r.rel.spilled(), "{p}");
        }
        let long = format!("/{name}/{name}.html");
        let r = resolve(&long).unwrap();
        assert!(r.rel.spilled());
        assert_eq!(r.rel_path(), &long.as_bytes()[1..]);
    }

    #[test]
    fn malformed_is_bad_request() {
        for p in ["", "a", "/%", "/%4", "/%zz", "*"] {
            assert_eq!(resolve(p), Err(Reject::BadRequest), "{p}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_never_escapes(p in "\\PC*") {
            if let Ok(r) = resolve(&p) {
                for s in r.segments() {
                    prop_assert!(!s.is_empty());
                    prop_assert!(s != b".." && s != b".");
                    prop_assert!(!s.contains(&b'/') && !s.contains(&b'\\') && !s.contains(&0));
                }
            }
        }

        #[test]
        fn traversal_mixes_never_pass(parts in proptest::collection::vec(
            prop_oneof![Just("a"), Just(".."), Just("%2e%2e"), Just("."), Just("%2e"), Just("%2f"), Just("b.txt")], 1..8)) {
            let p = format!("/{}", parts.join("/"));
            let has_up = parts.iter().any(|s| *s == ".." || *s == "%2e%2e");
            let has_slash = parts.contains(&"%2f");
            if has_up || has_slash {
                prop_assert_eq!(resolve(&p), Err(Reject::Forbidden));
            } else {
                prop_assert!(resolve(&p).is_ok());
            }
        }
    }
}

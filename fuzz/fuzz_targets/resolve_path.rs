//! Fuzz target: request-path resolution (`server::resolve::resolve`) on arbitrary input, raw
//! and as the HTTP URI parser hands it over. It must never panic, and whatever it accepts must
//! stay below the root: no empty, `.` or `..` segment, no `/`, `\` or NUL inside a segment.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn check(path: &str) {
    if let Ok(r) = server::resolve::resolve(path) {
        // The relative path's own parts, not `segments()` (which skips empty ones).
        let rel = r.rel_path();
        if !rel.is_empty() {
            for s in rel.split(|&b| b == b'/') {
                assert!(!s.is_empty());
                assert!(s != b"." && s != b"..");
                assert!(!s.contains(&b'\\') && !s.contains(&0));
            }
        }
        assert_eq!(r.segments().count(), r.segment_vecs().len());
        let _ = r.extension();
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        check(s);
        if let Ok(uri) = s.parse::<http::Uri>() {
            check(uri.path());
        }
    }
});

//! Fuzz target: request-path resolution (`server::resolve::resolve`) on arbitrary input, raw
//! and as the HTTP URI parser hands it over. It must never panic, and whatever it accepts must
//! stay below the root: no empty, `.` or `..` segment, no `/`, `\` or NUL inside a segment.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn check(path: &str) {
    if let Ok(r) = server::resolve::resolve(path) {
        for s in &r.segments {
            assert!(!s.is_empty());
            assert!(s.as_slice() != b"." && s.as_slice() != b"..");
            assert!(!s.contains(&b'/') && !s.contains(&b'\\') && !s.contains(&0));
        }
        let _ = r.rel_path();
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

//! Fuzz target: request-path resolution (`server::resolve::resolve`) on arbitrary input, raw
//! and as the HTTP URI parser hands it over. It must never panic, and whatever it accepts must
//! stay below the root: no empty, `.` or `..` segment, no `\` or NUL inside a segment (the
//! check is `request::check_resolve`, shared with the `request` target).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/request.rs"]
#[allow(dead_code)]
mod request;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        request::check_resolve(s);
        if let Ok(uri) = s.parse::<http::Uri>() {
            request::check_resolve(uri.path());
        }
    }
});

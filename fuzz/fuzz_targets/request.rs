//! Fuzz target: the request path, from raw bytes on a socket to the answer, and the pure
//! parsers beside it (see `fuzz/src/request.rs`). Build and run it with `fuzz/run.sh`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/request.rs"]
mod request;

fuzz_target!(|data: &[u8]| request::check(data));

//! The request-path fuzz target (`fuzz/src/request.rs`) on every test run: the committed seeds
//! (`fuzz/seeds/request`), then a bounded number of mutations of them drawn from a fixed seed,
//! so a run is the same every time. The coverage-guided long run is `fuzz/run.sh request`.

#[path = "../../../fuzz/src/request.rs"]
mod request;

use rand::{Rng, SeedableRng};

const TOKENS: &[&[u8]] = &[
    b"GET ",
    b"HEAD ",
    b"POST ",
    b" HTTP/1.1\r\n",
    b" HTTP/1.0\r\n",
    b" HTTP/2.0\r\n",
    b"\r\n",
    b"Host: b.test\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 3\r\n",
    b"Range: bytes=1-2\r\n",
    b"If-None-Match: *\r\n",
    b"http://b.test",
    b"@",
    b"%2e",
    b"%2f",
    b"/",
    b"..",
    b"0\r\n\r\n",
];

fn seeds() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/request");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn mutate(rng: &mut rand_chacha::ChaCha8Rng, input: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(1..5) {
        let at = rng.gen_range(0..=input.len());
        match rng.gen_range(0..5) {
            0 if !input.is_empty() => {
                let i = rng.gen_range(0..input.len());
                input[i] ^= 1 << rng.gen_range(0..8);
            }
            1 => input.insert(at, rng.gen()),
            2 if at < input.len() => {
                let n = rng.gen_range(1..=(input.len() - at).min(8));
                input.drain(at..at + n);
            }
            3 => {
                let t = TOKENS[rng.gen_range(0..TOKENS.len())];
                input.splice(at..at, t.iter().copied());
            }
            _ => {
                let n = rng.gen_range(1..64);
                input.splice(at..at, std::iter::repeat_n(rng.gen::<u8>(), n));
            }
        }
    }
}

#[test]
fn seeds_and_seeded_mutations_pass_the_request_path() {
    let seeds = seeds();
    assert!(seeds.len() >= 10, "the seed corpus is there");
    for s in &seeds {
        request::check(s);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(19);
    for _ in 0..1500 {
        let mut input = seeds[rng.gen_range(0..seeds.len())].clone();
        mutate(&mut rng, &mut input);
        request::check(&input);
    }
    assert!(request::healthy(), "the server still answers /healthz");
}

#[test]
fn the_exchanges_reach_the_handlers() {
    // The seeds' answers end with the last request's (the file of site a).
    let seeds = seeds();
    let mut answered = 0;
    for s in seeds.iter().filter(|s| s[0] % 4 < 2) {
        let out = request::answer(&s[1..]);
        if out.ends_with(b"hello from a\n") {
            answered += 1;
        }
    }
    assert!(answered >= 8, "{answered} seeds answered to the end");
}

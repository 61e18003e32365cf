//! `triage load --accept-encoding gzip` as a process against real servers on 127.0.0.1 with
//! on-the-fly gzip on: `triage serve --gzip` and, if installed, nginx with `gzip on`. With the
//! flag the HTML arrives compressed (fewer bytes received than the file) and decodes to the
//! file, and the page's embedded objects are still found and fetched (the same request count as
//! without the flag); without the flag the server sends identity. Also: a bad value is a usage
//! error (exit 2) and `--help` names the flag (the POS lab probes for it).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::Child;

/// Objects the page embeds: a stylesheet, a script and two images.
const OBJECTS: u64 = 4;

/// Writes the site: a compressible index.html referencing s.css, x.js, a.gif and b.png.
/// Returns (HTML bytes, all content bytes of one page).
fn write_site(root: &Path) -> (u64, u64) {
    let mut html = String::from(
        "<!doctype html><html><head><title>gzip</title>\
         <link rel=\"stylesheet\" href=\"s.css\"><script src=\"x.js\"></script></head><body>\n",
    );
    for i in 0..300 {
        html.push_str(&format!(
            "<p class=\"para\">Paragraph {i}: the quick brown fox jumps over the lazy dog.</p>\n"
        ));
    }
    html.push_str("<img src=\"a.gif\"><img src=\"b.png\"></body></html>\n");
    let css = "p.para { color: #333; margin: 0 0 1em 0; font-family: serif; }\n".repeat(30);
    let js = "function f(x) { return x * 2 + 1; }\n".repeat(20);
    // Images: not compressible types for either server (and pseudo-random bytes).
    let img = |n: usize, seed: u32| -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect()
    };
    let (a, b) = (img(5000, 1), img(7000, 2));
    std::fs::write(root.join("index.html"), &html).unwrap();
    std::fs::write(root.join("s.css"), &css).unwrap();
    std::fs::write(root.join("x.js"), &js).unwrap();
    std::fs::write(root.join("a.gif"), &a).unwrap();
    std::fs::write(root.join("b.png"), &b).unwrap();
    let total = html.len() + css.len() + js.len() + a.len() + b.len();
    (html.len() as u64, total as u64)
}

/// Runs `triage load URL --pages N -q --out DIR [extra]` and returns its summary.json.
fn load(url: &str, pages: u64, extra: &[&str], out: &Path) -> serde_json::Value {
    let status = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args([
            "load",
            url,
            "--pages",
            &pages.to_string(),
            "-q",
            "--timeout",
            "5s",
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "triage load {url} {extra:?}: {status}");
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("summary.json has no integer `{key}`: {v}"))
}

/// The assertions shared by both servers; `base` is e.g. `http://127.0.0.1:PORT`.
fn check_server(name: &str, base: &str, html_len: u64, content: u64, tmp: &Path) {
    let page = format!("{base}/index.html");
    let pages = 3;
    let gz = ["--accept-encoding", "gzip"];

    // The HTML alone: compressed on the wire, decoded to the file.
    let s = load(
        &page,
        1,
        &[&["--plain"][..], &gz].concat(),
        &tmp.join("p-gz"),
    );
    assert_eq!(u(&s, "errors"), 0, "{name}: {s}");
    assert_eq!(u(&s, "bytes_decoded"), html_len, "{name}: {s}");
    assert!(
        u(&s, "bytes") < html_len / 2,
        "{name}: HTML not compressed: {} bytes received for a {html_len}-byte file",
        u(&s, "bytes")
    );
    let s = load(&page, 1, &["--plain"], &tmp.join("p-id"));
    assert_eq!(
        (u(&s, "bytes"), u(&s, "bytes_decoded")),
        (html_len, html_len),
        "{name}: without the flag the HTML must come as identity: {s}"
    );

    // Whole pages.
    let with = load(&page, pages, &gz, &tmp.join("gz"));
    let without = load(&page, pages, &[], &tmp.join("id"));
    for (v, what) in [(&with, "gzip"), (&without, "identity")] {
        assert_eq!(u(v, "errors"), 0, "{name} {what}: {v}");
        assert_eq!(u(v, "request_errors"), 0, "{name} {what}: {v}");
        assert_eq!(u(v, "pages"), pages, "{name} {what}: {v}");
        assert_eq!(u(v, "bytes_decoded"), pages * content, "{name} {what}: {v}");
    }
    // The same objects were found and fetched from the decoded HTML.
    assert_eq!(
        u(&with, "requests"),
        pages * (1 + OBJECTS),
        "{name}: {with}"
    );
    assert_eq!(u(&with, "requests"), u(&without, "requests"), "{name}");
    assert_eq!(u(&without, "bytes"), pages * content, "{name}: {without}");
    assert!(
        u(&with, "bytes") < u(&without, "bytes"),
        "{name}: gzip received {} bytes, identity {}",
        u(&with, "bytes"),
        u(&without, "bytes")
    );
}

#[test]
fn gzip_against_triage_serve() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("site");
    std::fs::create_dir(&root).unwrap();
    let (html_len, content) = write_site(&root);
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_triage"))
            .args(["serve", "--listen", "127.0.0.1:0", "--slots", "1", "--gzip"])
            .arg("--root")
            .arg(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split(['/', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    check_server(
        "triage serve",
        &format!("http://{addr}"),
        html_len,
        content,
        t.path(),
    );
}

/// A port free right now (nginx binds it itself; retried if another process wins it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn gzip_against_nginx() {
    use lab::peers::{Gzip, Peer, PeerSite, Prefork};
    if let Some(why) = Peer::Nginx.unavailable() {
        eprintln!("SKIP gzip_against_nginx: {why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("site");
    std::fs::create_dir(&root).unwrap();
    // nginx as root switches to `user root`; otherwise it runs as this user. Either way the
    // site must be readable by it.
    let (html_len, content) = write_site(&root);
    let mut started = None;
    for attempt in 0..3 {
        let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let site = PeerSite {
            root: root.clone(),
            listen,
            gzip: Some(Gzip {
                level: 6,
                types: vec![
                    "text/html".into(),
                    "text/css".into(),
                    "application/javascript".into(),
                ],
            }),
            keepalive_s: 5,
            extra: String::new(),
        };
        let dir = t.path().join(format!("nginx{attempt}"));
        let p = Peer::Nginx
            .prepare(&dir, &site, &Prefork::default())
            .unwrap();
        let mut m = lab::process::Launch::new("nginx", &p.program)
            .args(p.args.clone())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if TcpStream::connect(listen).is_ok() {
                started = Some((m, listen));
                break;
            }
            if let Ok(Some(_)) = m.try_wait() {
                break; // exited (port taken meanwhile?): try another port
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if started.is_some() {
            break;
        }
        eprintln!(
            "nginx did not start on {listen} (attempt {attempt}): {}",
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
    }
    let (_nginx, listen) = started.expect("nginx started within 3 attempts");
    check_server(
        "nginx",
        &format!("http://{listen}"),
        html_len,
        content,
        t.path(),
    );
}

#[test]
fn bad_accept_encoding_is_a_usage_error_and_help_names_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(["load", "http://127.0.0.1:9/", "--accept-encoding", "brotli"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--accept-encoding") && err.contains("brotli") && err.contains("gzip"),
        "{err}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(["load", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--accept-encoding"), "{help}");
}

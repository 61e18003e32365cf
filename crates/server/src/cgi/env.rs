//! The CGI/1.1 meta-variables (RFC 3875 §4.1) a script gets as its environment.
//!
//! The environment is built from scratch (nothing of the server's own environment leaks into
//! a script but a fixed `PATH`). Request headers become `HTTP_*` variables, except:
//! `Content-Type`/`Content-Length` (they are `CONTENT_TYPE`/`CONTENT_LENGTH`), `Authorization`
//! and `Proxy-Authorization` (RFC 3875 §4.1.18: credentials are not passed), `Proxy` (would
//! become `HTTP_PROXY`, which many HTTP libraries take as their proxy: "httpoxy"), and any
//! header whose name holds a character other than letters, digits and `-` (an `X_Forwarded`
//! header would otherwise be indistinguishable from `X-Forwarded`). Repeated headers are joined
//! with `, ` (`Cookie` with `; `). Values that are not UTF-8 are passed with replacement
//! characters.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use http::{HeaderMap, Method, Version};

/// The `PATH` a script gets.
pub const SCRIPT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Everything the meta-variables are made of.
#[derive(Debug, Clone)]
pub struct EnvInput<'a> {
    /// `REQUEST_METHOD`.
    pub method: &'a Method,
    /// `SERVER_PROTOCOL`.
    pub version: Version,
    /// Request target as received (path and query, still encoded): `REQUEST_URI`.
    pub request_uri: &'a str,
    /// The query string, encoded, without `?`.
    pub query: &'a str,
    /// The request headers (`HTTP_*`, `CONTENT_TYPE`).
    pub headers: &'a HeaderMap,
    /// Decoded URL path of the script (`SCRIPT_NAME`).
    pub script_name: &'a str,
    /// The script file (`SCRIPT_FILENAME`).
    pub script_filename: &'a Path,
    /// Decoded extra path after the script (`PATH_INFO`), empty if none.
    pub path_info: &'a str,
    /// `DOCUMENT_ROOT`.
    pub document_root: &'a Path,
    /// `SERVER_SOFTWARE`.
    pub server_software: &'a str,
    /// Used for `SERVER_NAME` when the request has no usable `Host`.
    pub default_server_name: &'a str,
    /// The server's address of the connection (`SERVER_ADDR`, `SERVER_PORT`).
    pub local: SocketAddr,
    /// The client's address (`REMOTE_ADDR`, `REMOTE_PORT`).
    pub remote: SocketAddr,
    /// The request body length, if the request has a body.
    pub content_length: Option<u64>,
}

fn ip(a: IpAddr) -> String {
    match a {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// The host part of a `Host` header value (port and IPv6 brackets handled); `None` if it is
/// not a plausible host name.
fn host_name(h: &str) -> Option<&str> {
    let h = h.trim();
    let host = if let Some(rest) = h.strip_prefix('[') {
        &h[..rest.find(']')? + 2]
    } else {
        h.rsplit_once(':').map_or(h, |(a, _)| a)
    };
    let ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
    ok.then_some(host)
}

fn header_var(name: &str) -> Option<String> {
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    match name {
        "content-type" | "content-length" | "authorization" | "proxy-authorization" | "proxy" => {
            None
        }
        _ => Some(format!(
            "HTTP_{}",
            name.to_ascii_uppercase().replace('-', "_")
        )),
    }
}

/// The script's whole environment, sorted by name.
pub fn build(i: &EnvInput<'_>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::with_capacity(32 + i.headers.len());
    let mut put = |k: &str, v: String| env.push((k.to_owned(), v));
    put("GATEWAY_INTERFACE", "CGI/1.1".into());
    put("SERVER_SOFTWARE", i.server_software.into());
    put(
        "SERVER_PROTOCOL",
        match i.version {
            Version::HTTP_09 => "HTTP/0.9",
            Version::HTTP_10 => "HTTP/1.0",
            Version::HTTP_2 => "HTTP/2",
            Version::HTTP_3 => "HTTP/3",
            _ => "HTTP/1.1",
        }
        .into(),
    );
    let host = i
        .headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(host_name);
    put(
        "SERVER_NAME",
        host.unwrap_or(i.default_server_name).to_owned(),
    );
    put("SERVER_ADDR", ip(i.local.ip()));
    put("SERVER_PORT", i.local.port().to_string());
    put("REQUEST_METHOD", i.method.as_str().into());
    put("REQUEST_URI", i.request_uri.into());
    put("QUERY_STRING", i.query.into());
    put("SCRIPT_NAME", i.script_name.into());
    put("SCRIPT_FILENAME", i.script_filename.display().to_string());
    if !i.path_info.is_empty() {
        put("PATH_INFO", i.path_info.into());
        let mut t = i.document_root.display().to_string();
        while t.ends_with('/') {
            t.pop();
        }
        put("PATH_TRANSLATED", format!("{t}{}", i.path_info));
    }
    put("DOCUMENT_ROOT", i.document_root.display().to_string());
    put("REMOTE_ADDR", ip(i.remote.ip()));
    put("REMOTE_PORT", i.remote.port().to_string());
    if let Some(n) = i.content_length {
        put("CONTENT_LENGTH", n.to_string());
    }
    if let Some(ct) = i.headers.get(http::header::CONTENT_TYPE) {
        put(
            "CONTENT_TYPE",
            String::from_utf8_lossy(ct.as_bytes()).into_owned(),
        );
    }
    put("PATH", SCRIPT_PATH.into());
    for name in i.headers.keys() {
        let Some(var) = header_var(name.as_str()) else {
            continue;
        };
        let sep = if name == http::header::COOKIE {
            "; "
        } else {
            ", "
        };
        let joined = i
            .headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(sep);
        env.push((var, joined));
    }
    env.sort();
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    fn sample(headers: &HeaderMap, path_info: &str, cl: Option<u64>) -> Vec<(String, String)> {
        let filename = PathBuf::from("/srv/cgi/env.sh");
        let root = PathBuf::from("/srv/www/");
        build(&EnvInput {
            method: &Method::POST,
            version: Version::HTTP_11,
            request_uri: "/cgi-bin/env.sh/a%20b?x=1&y=%41",
            query: "x=1&y=%41",
            headers,
            script_name: "/cgi-bin/env.sh",
            script_filename: &filename,
            path_info,
            document_root: &root,
            server_software: "triage/0.1",
            default_server_name: "localhost",
            local: "127.0.0.1:8080".parse().unwrap(),
            remote: "[::ffff:10.1.2.3]:5555".parse().unwrap(),
            content_length: cl,
        })
    }

    #[test]
    fn standard_variables() {
        let mut h = HeaderMap::new();
        h.insert("host", "example.org:8080".parse().unwrap());
        h.insert("content-type", "text/plain".parse().unwrap());
        h.insert("content-length", "5".parse().unwrap());
        let env = sample(&h, "/a b", Some(5));
        assert_eq!(get(&env, "GATEWAY_INTERFACE"), Some("CGI/1.1"));
        assert_eq!(get(&env, "SERVER_PROTOCOL"), Some("HTTP/1.1"));
        assert_eq!(get(&env, "SERVER_NAME"), Some("example.org"));
        assert_eq!(get(&env, "SERVER_PORT"), Some("8080"));
        assert_eq!(get(&env, "REQUEST_METHOD"), Some("POST"));
        assert_eq!(get(&env, "SCRIPT_NAME"), Some("/cgi-bin/env.sh"));
        assert_eq!(get(&env, "PATH_INFO"), Some("/a b"));
        assert_eq!(get(&env, "PATH_TRANSLATED"), Some("/srv/www/a b"));
        assert_eq!(get(&env, "QUERY_STRING"), Some("x=1&y=%41"));
        assert_eq!(get(&env, "REMOTE_ADDR"), Some("10.1.2.3"));
        assert_eq!(get(&env, "REMOTE_PORT"), Some("5555"));
        assert_eq!(get(&env, "CONTENT_TYPE"), Some("text/plain"));
        assert_eq!(get(&env, "CONTENT_LENGTH"), Some("5"));
        assert_eq!(get(&env, "HTTP_HOST"), Some("example.org:8080"));
        assert_eq!(get(&env, "HTTP_CONTENT_TYPE"), None);
        assert_eq!(get(&env, "HTTP_CONTENT_LENGTH"), None);
        assert_eq!(
            get(&env, "REQUEST_URI"),
            Some("/cgi-bin/env.sh/a%20b?x=1&y=%41")
        );
        assert_eq!(get(&env, "DOCUMENT_ROOT"), Some("/srv/www/"));
        assert_eq!(get(&env, "SCRIPT_FILENAME"), Some("/srv/cgi/env.sh"));
        assert_eq!(get(&env, "PATH"), Some(SCRIPT_PATH));
        let mut names: Vec<_> = env.iter().map(|(k, _)| k.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), env.len(), "no duplicate variables");
    }

    #[test]
    fn no_path_info_no_path_translated_no_body_no_length() {
        let env = sample(&HeaderMap::new(), "", None);
        assert_eq!(get(&env, "PATH_INFO"), None);
        assert_eq!(get(&env, "PATH_TRANSLATED"), None);
        assert_eq!(get(&env, "CONTENT_LENGTH"), None);
        assert_eq!(get(&env, "SERVER_NAME"), Some("localhost"));
    }

    #[test]
    fn header_filtering_and_joining() {
        let mut h = HeaderMap::new();
        h.append("x-a", "1".parse().unwrap());
        h.append("x-a", "2".parse().unwrap());
        h.append("cookie", "a=1".parse().unwrap());
        h.append("cookie", "b=2".parse().unwrap());
        h.insert("authorization", "Basic eDp5".parse().unwrap());
        h.insert("proxy", "http://evil:1".parse().unwrap());
        h.insert("x_forwarded_for", "1.2.3.4".parse().unwrap());
        h.insert(
            "host",
            "bad host\u{7f}"
                .parse::<http::HeaderValue>()
                .unwrap_or_else(|_| http::HeaderValue::from_static("a b")),
        );
        let env = sample(&h, "", None);
        assert_eq!(get(&env, "HTTP_X_A"), Some("1, 2"));
        assert_eq!(get(&env, "HTTP_COOKIE"), Some("a=1; b=2"));
        assert_eq!(get(&env, "HTTP_AUTHORIZATION"), None);
        assert_eq!(get(&env, "HTTP_PROXY"), None);
        assert_eq!(get(&env, "HTTP_X_FORWARDED_FOR"), None);
        assert_eq!(get(&env, "SERVER_NAME"), Some("localhost"));
    }

    #[test]
    fn host_forms() {
        assert_eq!(host_name("a.b"), Some("a.b"));
        assert_eq!(host_name("a.b:81"), Some("a.b"));
        assert_eq!(host_name("[::1]:81"), Some("[::1]"));
        assert_eq!(host_name("[::1]"), Some("[::1]"));
        assert_eq!(host_name("a;b"), None);
        assert_eq!(host_name("[::1"), None);
    }
}

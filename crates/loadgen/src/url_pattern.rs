//! URL patterns: `{browser}` and `{page}` placeholders in a page URL, and the check that a URL
//! is one `triage load` can fetch (absolute `http://` with a host).

use url::Url;

use crate::LoadError;

/// Substitutes `{browser}` and `{page}` in `pattern` and parses the result as an `http://` URL.
pub fn expand_url(pattern: &str, browser: usize, page: u64) -> Result<Url, LoadError> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut rest = pattern;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("{browser}") {
            out.push_str(&browser.to_string());
            rest = t;
        } else if let Some(t) = tail.strip_prefix("{page}") {
            out.push_str(&page.to_string());
            rest = t;
        } else {
            let end = tail.find('}').map(|j| j + 1).unwrap_or(tail.len());
            return Err(LoadError::Config(format!(
                "URL pattern {pattern:?}: unknown placeholder {:?} (known: {{browser}}, {{page}})",
                &tail[..end]
            )));
        }
    }
    out.push_str(rest);
    parse_http_url(&out).map_err(|m| LoadError::Config(format!("URL pattern {pattern:?}: {m}")))
}

/// Parses an absolute `http://` URL with a host; the message says what is wrong.
pub fn parse_http_url(s: &str) -> Result<Url, String> {
    let u = Url::parse(s).map_err(|e| format!("not a valid URL ({e}): {s:?}"))?;
    match u.scheme() {
        "http" => {}
        "https" => {
            return Err(format!(
                "https is not supported (no TLS in triage load): {s:?}"
            ))
        }
        other => {
            return Err(format!(
                "scheme {other:?} is not supported, use http://: {s:?}"
            ))
        }
    }
    if u.host().is_none() {
        return Err(format!("URL has no host: {s:?}"));
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_patterns() {
        let u = expand_url("http://h:8080/b{browser}/p{page}.html", 3, 7).unwrap();
        assert_eq!(u.as_str(), "http://h:8080/b3/p7.html");
        assert!(expand_url("http://h/{brows}/", 0, 0).is_err());
        assert!(expand_url("https://h/", 0, 0).is_err());
        assert!(expand_url("ftp://h/", 0, 0).is_err());
        assert!(expand_url("not a url", 0, 0).is_err());
    }
}

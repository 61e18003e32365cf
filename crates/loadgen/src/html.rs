//! Finds a page's embedded objects with a real HTML parser (scraper/html5ever), as a browser
//! would: `<img src>`, `<link rel=stylesheet href>` and `<script src>`, in document order,
//! resolved against the page URL (or its `<base href>`), fragments dropped, duplicates fetched
//! once (a browser's memory cache), and only `http(s)` URLs kept (`data:` and `javascript:`
//! are not fetched over the network).

use std::collections::HashSet;
use std::sync::OnceLock;

use scraper::{Html, Selector};
use url::Url;

fn selectors() -> &'static (Selector, Selector) {
    static S: OnceLock<(Selector, Selector)> = OnceLock::new();
    S.get_or_init(|| {
        (
            Selector::parse("img[src], link[href], script[src]").expect("static selector"),
            Selector::parse("base[href]").expect("static selector"),
        )
    })
}

/// The embedded objects of `html` (bytes of an HTML document) fetched from `page`.
pub fn embedded_urls(html: &[u8], page: &Url) -> Vec<Url> {
    let text = String::from_utf8_lossy(html);
    let doc = Html::parse_document(&text);
    let (objs, base_sel) = selectors();
    let base = doc
        .select(base_sel)
        .next()
        .and_then(|b| b.value().attr("href"))
        .and_then(|h| page.join(h.trim()).ok())
        .unwrap_or_else(|| page.clone());
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for el in doc.select(objs) {
        let v = el.value();
        let attr = match v.name() {
            "link" => {
                let is_css = v
                    .attr("rel")
                    .map(|r| {
                        r.split_ascii_whitespace()
                            .any(|t| t.eq_ignore_ascii_case("stylesheet"))
                    })
                    .unwrap_or(false);
                if !is_css {
                    continue;
                }
                v.attr("href")
            }
            _ => v.attr("src"),
        };
        let Some(raw) = attr.map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let Ok(mut u) = base.join(raw) else {
            continue;
        };
        if u.scheme() != "http" && u.scheme() != "https" {
            continue;
        }
        u.set_fragment(None);
        if seen.insert(u.as_str().to_string()) {
            out.push(u);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_objects_in_order_once() {
        let page = Url::parse("http://h:8080/b3/index.html").unwrap();
        let html = br#"<!doctype html><html><head>
            <link rel="stylesheet" href="s.css"><link rel="icon" href="fav.ico">
            <link rel="alternate STYLESHEET" href="/alt.css">
            <script src="js/a.js"></script><script>var x = "<img src=no.gif>";</script>
            </head><body><IMG SRC="i1.gif"><img src="i1.gif#x"><img src=' ../i2.png '>
            <img src="data:image/gif;base64,R0lGOD"><img alt="no src">
            <img src="http://other:81/i3.jpg"><img src="https://s/i4.jpg">
            <p>text <!-- <img src="comment.gif"> --></body></html>"#;
        let got: Vec<String> = embedded_urls(html, &page)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            got,
            vec![
                "http://h:8080/b3/s.css",
                "http://h:8080/alt.css",
                "http://h:8080/b3/js/a.js",
                "http://h:8080/b3/i1.gif",
                "http://h:8080/i2.png",
                "http://other:81/i3.jpg",
                "https://s/i4.jpg",
            ]
        );
    }

    #[test]
    fn base_href_and_garbage() {
        let page = Url::parse("http://h/a/b.html").unwrap();
        let html = br#"<base href="/img/"><img src="x.gif">"#;
        let got = embedded_urls(html, &page);
        assert_eq!(got[0].as_str(), "http://h/img/x.gif");
        assert!(embedded_urls(b"\xff\xfe<<<>>>&&&", &page).is_empty());
        assert!(embedded_urls(b"", &page).is_empty());
    }
}

//! Virtual hosts: a request picks its [`Site`] by `Host` (case-insensitive, port ignored;
//! unknown hosts get the first site). A site serves its files, and its CGI script directories
//! when it has them.

use std::sync::Arc;

use crate::cgi::Cgi;
use crate::forward::Forwarder;
use crate::store::Store;

/// One virtual host.
#[derive(Debug)]
pub struct Site {
    /// Host name (`SERVER_NAME` for CGI).
    pub name: String,
    /// Other host names it answers to.
    pub aliases: Vec<String>,
    /// Its files.
    pub store: Store,
    /// Index files for directory requests.
    pub index: Vec<String>,
    /// Resource container charged for this site's work (0 = root), passed to the policy in
    /// `Hints::container` for every burst.
    pub container: u32,
    /// CGI script directories, checked before the files (see `cgi`).
    pub cgi: Option<Cgi>,
    /// Back-end forwarding of its static files (see `forward`), shared by the sites.
    pub forward: Option<Arc<Forwarder>>,
}

impl Site {
    /// A site serving `store`, without aliases, container or CGI.
    pub fn new(name: impl Into<String>, store: Store, index: Vec<String>) -> Self {
        Self {
            name: name.into(),
            aliases: Vec::new(),
            store,
            index,
            container: 0,
            cgi: None,
            forward: None,
        }
    }

    /// The site's CGI handler if `path` is under one of its script directories.
    pub fn cgi_for(&self, path: &str) -> Option<&Cgi> {
        self.cgi.as_ref().filter(|c| c.handles_path(path))
    }

    fn answers(&self, host: &str) -> bool {
        self.name.eq_ignore_ascii_case(host)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(host))
    }
}

/// All sites; the first is the default. Never empty.
#[derive(Debug)]
pub struct Sites(Vec<Site>);

impl Sites {
    /// `sites` in configuration order (the first is the default).
    ///
    /// # Panics
    /// If `sites` is empty.
    pub fn new(sites: Vec<Site>) -> Self {
        assert!(!sites.is_empty(), "a server has at least one site");
        Self(sites)
    }

    /// The site for a `Host` value.
    pub fn pick(&self, host: Option<&str>) -> &Site {
        if self.0.len() > 1 {
            if let Some(h) = host {
                let h = strip_port(h);
                if let Some(s) = self.0.iter().find(|s| s.answers(h)) {
                    return s;
                }
            }
        }
        &self.0[0]
    }

    /// Every site, in configuration order.
    pub fn iter(&self) -> std::slice::Iter<'_, Site> {
        self.0.iter()
    }
}

fn strip_port(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().unwrap_or(rest);
    }
    match memchr::memrchr(b':', h.as_bytes()) {
        Some(i) if h.as_bytes()[i + 1..].iter().all(u8::is_ascii_digit) => &h[..i],
        _ => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn ports_are_ignored() {
        assert_eq!(strip_port("a.test:8080"), "a.test");
        assert_eq!(strip_port("a.test"), "a.test");
        assert_eq!(strip_port("[::1]:80"), "::1");
    }

    #[test]
    fn hosts_pick_their_site_and_unknown_ones_the_first() {
        let site = |n: &str| Site::new(n, Store::Mem(MemStore::new()), Vec::new());
        let mut b = site("b.test");
        b.aliases = vec!["www.b.test".into()];
        let sites = Sites::new(vec![site("a.test"), b]);
        assert_eq!(sites.pick(Some("WWW.B.test:80")).name, "b.test");
        assert_eq!(sites.pick(Some("c.test")).name, "a.test");
        assert_eq!(sites.pick(None).name, "a.test");
    }
}

//! Script directories: which request paths are CGI, and which script file a path names (the
//! rest of the path is `PATH_INFO`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use http::StatusCode;

use super::config::{CgiDirConfig, CgiError};
use crate::resolve::{resolve, Reject};

/// One script directory, checked.
#[derive(Debug)]
struct Dir {
    /// The URL prefix, normalized (`/cgi-bin`).
    url: String,
    segs: Vec<Vec<u8>>,
    /// The directory, canonical.
    path: PathBuf,
}

fn join_segs(segs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in segs {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    out
}

/// The script a request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    /// Its directory (the script's working directory).
    pub cwd: PathBuf,
    /// The script file, symlinks resolved.
    pub script: PathBuf,
    /// `SCRIPT_NAME`: the decoded URL path of the script.
    pub script_name: String,
    /// `PATH_INFO`: the decoded rest of the path, empty if none.
    pub path_info: String,
}

/// A site's script directories, longest URL prefix first.
#[derive(Debug)]
pub(crate) struct ScriptDirs(Vec<Dir>);

impl ScriptDirs {
    /// Check `[site.cgi] dirs` (directories exist; prefixes are clean, not `/`, distinct).
    pub(crate) fn new(cfgs: &[CgiDirConfig]) -> Result<Self, CgiError> {
        let mut dirs: Vec<Dir> = Vec::new();
        for (i, d) in cfgs.iter().enumerate() {
            let bad = |k: &str, msg: String| CgiError {
                key: format!("cgi.dirs[{i}].{k}"),
                msg,
            };
            let r = resolve(&d.url)
                .map_err(|_| bad("url", format!("{:?} is not a clean absolute path", d.url)))?;
            if r.is_root() {
                return Err(bad(
                    "url",
                    "`/` would make every file of the site a script".into(),
                ));
            }
            let segs = r.segment_vecs();
            let url =
                String::from_utf8(join_segs(&segs)).map_err(|_| bad("url", "not UTF-8".into()))?;
            let path = std::fs::canonicalize(&d.dir)
                .map_err(|e| bad("dir", format!("{}: {e}", d.dir.display())))?;
            if !path.is_dir() {
                return Err(bad("dir", format!("{} is not a directory", path.display())));
            }
            if dirs.iter().any(|o| o.segs == segs) {
                return Err(bad("url", format!("{url} is listed twice")));
            }
            dirs.push(Dir { url, segs, path });
        }
        // Longest prefix first.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.segs.len()));
        Ok(Self(dirs))
    }

    /// The directory whose URL prefix `segments` (a decoded path) starts with.
    fn find(&self, segments: &[Vec<u8>]) -> Option<&Dir> {
        self.0
            .iter()
            .find(|d| segments.len() >= d.segs.len() && segments[..d.segs.len()] == d.segs[..])
    }

    /// Whether `segments` (a decoded path) is under a script directory.
    pub(crate) fn handles(&self, segments: &[Vec<u8>]) -> bool {
        self.find(segments).is_some()
    }

    /// The script a raw request path names, or why there is none (status and reason).
    pub(crate) fn locate(&self, path: &str) -> Result<Located, (StatusCode, &'static str)> {
        let r = match resolve(path) {
            Ok(r) => r,
            Err(Reject::BadRequest) => return Err((StatusCode::BAD_REQUEST, "malformed path")),
            Err(Reject::Forbidden) => return Err((StatusCode::FORBIDDEN, "path refused")),
        };
        let segs = r.segment_vecs();
        let Some(dir) = self.find(&segs) else {
            return Err((StatusCode::NOT_FOUND, "not a script path"));
        };
        let rest = &segs[dir.segs.len()..];
        let mut file = dir.path.clone();
        let mut found = None;
        for (i, seg) in rest.iter().enumerate() {
            if seg.first() == Some(&b'.') {
                return Err((StatusCode::NOT_FOUND, "no such script"));
            }
            file.push(OsStr::from_bytes(seg));
            match std::fs::metadata(&file) {
                Ok(m) if m.is_dir() => continue,
                Ok(m) if m.is_file() => {
                    found = Some((i, m));
                    break;
                }
                Ok(_) => return Err((StatusCode::FORBIDDEN, "not a regular file")),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Err((StatusCode::FORBIDDEN, "permission denied"))
                }
                Err(_) => return Err((StatusCode::NOT_FOUND, "no such script")),
            }
        }
        let Some((i, meta)) = found else {
            return Err((StatusCode::FORBIDDEN, "a script directory is not a script"));
        };
        let real =
            std::fs::canonicalize(&file).map_err(|_| (StatusCode::NOT_FOUND, "no such script"))?;
        if !real.starts_with(&dir.path) {
            return Err((StatusCode::FORBIDDEN, "script leaves its directory"));
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err((StatusCode::FORBIDDEN, "script is not executable"));
        }
        if rest[i].starts_with(b"nph-") {
            return Err((
                StatusCode::NOT_IMPLEMENTED,
                "non-parsed-header (nph-) scripts are not supported",
            ));
        }
        let mut name = dir.url.as_bytes().to_vec();
        name.extend_from_slice(&join_segs(&rest[..=i]));
        let mut info = join_segs(&rest[i + 1..]);
        if r.trailing_slash && (i + 1 < rest.len() || info.is_empty()) {
            info.push(b'/');
        }
        let (Ok(name), Ok(info)) = (String::from_utf8(name), String::from_utf8(info)) else {
            return Err((StatusCode::BAD_REQUEST, "path is not UTF-8"));
        };
        let cwd = real
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.path.clone());
        Ok(Located {
            cwd,
            script: real,
            script_name: name,
            path_info: info,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(t: &Path) -> ScriptDirs {
        let bin = t.join("bin");
        std::fs::create_dir_all(bin.join("sub")).unwrap();
        std::fs::write(bin.join("run.sh"), "#!/bin/sh\n").unwrap();
        let exec = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(bin.join("run.sh"), exec).unwrap();
        std::fs::write(bin.join("plain.txt"), "x").unwrap();
        ScriptDirs::new(&[CgiDirConfig {
            url: "/cgi-bin/".into(),
            dir: bin,
        }])
        .unwrap()
    }

    #[test]
    fn a_path_names_its_script_and_the_rest_is_path_info() {
        let t = tempfile::tempdir().unwrap();
        let d = dirs(t.path());
        let l = d.locate("/cgi-bin/run.sh/a/b%20c").unwrap();
        assert_eq!(l.script_name, "/cgi-bin/run.sh");
        assert_eq!(l.path_info, "/a/b c");
        assert!(l.script.ends_with("bin/run.sh"));
        assert!(d.handles(&[b"cgi-bin".to_vec(), b"x".to_vec()]));
        assert!(!d.handles(&[b"www".to_vec()]));
        for (path, status) in [
            ("/cgi-bin/plain.txt", StatusCode::FORBIDDEN),
            ("/cgi-bin/sub", StatusCode::FORBIDDEN),
            ("/cgi-bin/.hidden", StatusCode::NOT_FOUND),
            ("/cgi-bin/nope", StatusCode::NOT_FOUND),
            ("/cgi-bin/%2e%2e/x", StatusCode::FORBIDDEN),
        ] {
            assert_eq!(d.locate(path).unwrap_err().0, status, "{path}");
        }
    }

    #[test]
    fn bad_directories_are_named() {
        let t = tempfile::tempdir().unwrap();
        let e = ScriptDirs::new(&[CgiDirConfig {
            url: "/".into(),
            dir: t.path().into(),
        }])
        .unwrap_err();
        assert_eq!(e.key, "cgi.dirs[0].url");
        let e = ScriptDirs::new(&[CgiDirConfig {
            url: "/x".into(),
            dir: t.path().join("missing"),
        }])
        .unwrap_err();
        assert_eq!(e.key, "cgi.dirs[0].dir");
    }
}

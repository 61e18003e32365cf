//! Files beneath a directory descriptor, the way a web server's document root needs them: the
//! root opened once ([`open_dir`]), a file opened so that no path or symlink can leave it
//! ([`open_beneath`], `openat2` with `RESOLVE_BENEATH`), and the identity of the regular file a
//! path names now, checked without opening it ([`stat_beneath`], one `statx`).
//!
//! Where `openat2` is missing (a kernel before 5.6, a seccomp filter that answers `ENOSYS`, a
//! tool such as valgrind that does not know the call), [`open_beneath`] walks the path one
//! component at a time instead, each opened relative to the last with `O_NOFOLLOW`: as safe, but
//! stricter (a symlink anywhere in the path is refused with `ELOOP`, even one that stays
//! beneath). [`resolution`] says which is in use, so that a server can say it at start.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Longest relative path [`stat_beneath`] takes (built on the stack); a longer one is `None`.
pub const STAT_PATH_MAX: usize = 512;

/// Which regular file a path named and its validators (from `statx` or `fstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device and inode: the same file, not one renamed over it.
    pub file: (u64, u64),
    /// Modification time (s, ns).
    pub mtime: (i64, i64),
    /// Size in bytes.
    pub len: u64,
}

/// Open the directory `path` (read-only, close-on-exec) to resolve paths beneath it.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: valid C string; the returned fd is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open `rel` (empty: the directory itself) beneath `dir`, read-only and non-blocking (a FIFO
/// without a writer returns at once instead of waiting; nothing changes for regular files and
/// directories). A path or symlink that would leave `dir` fails with `EXDEV`, a magic link with
/// `ELOOP`. Without `openat2` (see [`resolution`]) the path is walked component by component and
/// any symlink in it fails with `ELOOP`.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<File> {
    if OPENAT2.load(Relaxed) != MISSING {
        match open_openat2(dir, rel) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => OPENAT2.store(MISSING, Relaxed),
            r => {
                OPENAT2.store(PRESENT, Relaxed);
                return r;
            }
        }
    }
    open_walk(dir, rel)
}

/// How [`open_beneath`] resolves paths on this system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// `openat2` with `RESOLVE_BENEATH`: symlinks that stay beneath the root are followed.
    Openat2,
    /// Component by component with `O_NOFOLLOW`: every symlink is refused.
    Walk,
}

/// Which way [`open_beneath`] resolves paths here (probes `openat2` once, on `/`).
pub fn resolution() -> Resolution {
    if OPENAT2.load(Relaxed) == UNKNOWN {
        if let Ok(root) = open_dir(Path::new("/")) {
            let _ = open_beneath(std::os::fd::AsFd::as_fd(&root), b"");
        }
    }
    match OPENAT2.load(Relaxed) {
        MISSING => Resolution::Walk,
        _ => Resolution::Openat2,
    }
}

/// Whether `openat2` answered here: [`UNKNOWN`] until the first call, then [`PRESENT`] or
/// [`MISSING`] (it answered `ENOSYS`) for the process's life.
static OPENAT2: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const PRESENT: u8 = 1;
const MISSING: u8 = 2;

/// Open flags shared by both ways of resolving.
const OPEN_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;

/// `openat2(dir, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
fn open_openat2(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<File> {
    let rel: &[u8] = if rel.is_empty() { b"." } else { rel };
    let c = CString::new(rel)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `open_how` is a plain C struct of integers, for which all zeroes is a valid value
    // (no flags, no mode, no resolve restrictions) before the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = OPEN_FLAGS as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid fd, C string and open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// `rel` beneath `dir` one component at a time: `.` and empty components skipped, `..` back to
/// the directory before (`EXDEV` above `dir`), an absolute path `EXDEV`, every component opened
/// relative to the last with `O_NOFOLLOW` (a symlink: `ELOOP`), the ones before the last with
/// `O_DIRECTORY` too.
fn open_walk(dir: BorrowedFd<'_>, rel: &[u8]) -> io::Result<File> {
    if rel.first() == Some(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    let parts: Vec<&[u8]> = rel
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    // The directories walked into, `dir` itself not among them (it is borrowed).
    let mut stack: Vec<OwnedFd> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if *part == b".." {
            if stack.pop().is_none() {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            continue;
        }
        let last = i + 1 == parts.len();
        let flags = OPEN_FLAGS | libc::O_NOFOLLOW | if last { 0 } else { libc::O_DIRECTORY };
        let at = stack.last().map_or(dir.as_raw_fd(), |d| d.as_raw_fd());
        stack.push(openat(at, part, flags)?);
    }
    let fd = match stack.pop() {
        Some(fd) => fd,
        // Nothing left open (an empty path, or `..` back to `dir`): `dir` itself, anew.
        None => openat(dir.as_raw_fd(), b".", OPEN_FLAGS)?,
    };
    Ok(File::from(fd))
}

/// `openat(at, name, flags)`.
fn openat(at: libc::c_int, name: &[u8], flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: a valid fd (borrowed or owned by the caller) and C string.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The regular file `rel` names beneath `dir` now, by one `statx` (the final symlink not
/// followed, no descriptor opened); `None` for anything else: no such path, a symlink, a
/// directory, an absolute path, a path of [`STAT_PATH_MAX`] bytes or more or with a NUL. It
/// does not keep the path beneath `dir` (a `..` or an inner symlink is followed): compare its
/// answer with what a file opened by [`open_beneath`] was, never serve by it alone.
pub fn stat_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> Option<FileId> {
    if rel.is_empty() || rel.len() >= STAT_PATH_MAX || rel[0] == b'/' || rel.contains(&0) {
        return None;
    }
    let mut path = [0u8; STAT_PATH_MAX];
    path[..rel.len()].copy_from_slice(rel);
    // SAFETY: `statx` is a plain C struct of integers; all zeroes is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid directory fd, a NUL-terminated path in `path`, a valid out struct.
    let r = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            path.as_ptr().cast(),
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MTIME | libc::STATX_SIZE,
            &mut st,
        )
    };
    if r != 0 || u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some(FileId {
        file: (
            libc::makedev(st.stx_dev_major, st.stx_dev_minor),
            st.stx_ino,
        ),
        mtime: (st.stx_mtime.tv_sec, i64::from(st.stx_mtime.tv_nsec)),
        len: st.stx_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_walk_stays_beneath_and_refuses_every_symlink() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), b"abc").unwrap();
        std::fs::write(t.path().join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub/f", root.join("inside")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("subdir")).unwrap();
        let d = open_dir(&root).unwrap();
        let read = |rel: &[u8]| {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut open_walk(d.as_fd(), rel)?, &mut s)?;
            io::Result::Ok(s)
        };
        assert_eq!(read(b"sub/f").unwrap(), "abc");
        assert_eq!(read(b"./sub//./f").unwrap(), "abc");
        assert_eq!(read(b"sub/../sub/f").unwrap(), "abc");
        let errno = |rel: &[u8]| open_walk(d.as_fd(), rel).unwrap_err().raw_os_error();
        assert_eq!(errno(b"../secret"), Some(libc::EXDEV));
        assert_eq!(errno(b"sub/../../secret"), Some(libc::EXDEV));
        assert_eq!(errno(b"/etc/passwd"), Some(libc::EXDEV));
        assert_eq!(errno(b"out"), Some(libc::ELOOP), "a symlink out");
        assert_eq!(errno(b"inside"), Some(libc::ELOOP), "stricter than openat2");
        assert!(
            matches!(errno(b"subdir/f"), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
            "a symlinked directory"
        );
        assert_eq!(errno(b"sub/missing"), Some(libc::ENOENT));
        for dir in [&b""[..], b".", b"sub/..", b"sub"] {
            assert!(open_walk(d.as_fd(), dir)
                .unwrap()
                .metadata()
                .unwrap()
                .is_dir());
        }
        // Where openat2 is present, both ways agree on what they serve.
        assert_eq!(resolution(), Resolution::Openat2, "kernel 5.6+ has openat2");
        let f = open_beneath(d.as_fd(), b"sub/f").unwrap();
        let w = open_walk(d.as_fd(), b"sub/f").unwrap();
        assert_eq!(f.metadata().unwrap().ino(), w.metadata().unwrap().ino());
    }

    #[test]
    fn stat_and_open_agree_and_stay_beneath() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("f"), b"abc").unwrap();
        std::fs::write(t.path().join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("out")).unwrap();
        let d = open_dir(&root).unwrap();
        let f = open_beneath(d.as_fd(), b"f").unwrap();
        let md = f.metadata().unwrap();
        let id = stat_beneath(d.as_fd(), b"f").unwrap();
        assert_eq!(id.file, (md.dev(), md.ino()));
        assert_eq!((id.mtime, id.len), ((md.mtime(), md.mtime_nsec()), 3));
        let e = open_beneath(d.as_fd(), b"out").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        assert_eq!(
            stat_beneath(d.as_fd(), b"out"),
            None,
            "a symlink is not a file"
        );
        assert_eq!(stat_beneath(d.as_fd(), b"/etc/passwd"), None);
        assert_eq!(stat_beneath(d.as_fd(), &[b'a'; STAT_PATH_MAX]), None);
        assert_eq!(stat_beneath(d.as_fd(), b""), None);
        assert!(open_beneath(d.as_fd(), b"")
            .unwrap()
            .metadata()
            .unwrap()
            .is_dir());
    }
}

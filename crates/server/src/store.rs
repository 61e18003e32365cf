//! Where a site's files come from: a directory (opened with `openat2(RESOLVE_BENEATH)` so no
//! path or symlink can leave the document root) with a small content cache, or an in-memory
//! map (the built-in demo site, tests).
//!
//! Files are opened non-blocking (`O_NONBLOCK`) and their type checked on the open
//! descriptor: a FIFO, socket or device in the root is "not found" at once (as nginx answers
//! them), never an open that waits for a writer on a runtime thread.
//!
//! The cache keeps, per (device, inode), the file's validators and header values and, for files
//! up to `cache_max_file` bytes, the content. Every request still checks the file, so a
//! changed file (new mtime or size) is re-read at once; a total budget bounds memory, and
//! the cache's eviction ([`crate::body_cache::Eviction`]) decides what goes when a new entry
//! would exceed it: everything (`clear`, the default), or the least recently used or least
//! valuable entries (`lru`, `gds`). With an emulated disk ([`crate::disk`]) a lookup that did
//! not find the body in the cache tells its caller how many bytes the disk must read
//! ([`Fill`]).
//!
//! With the default `clear` eviction and no emulated disk, each serving thread keeps its own
//! copy of the small entries it serves ([`crate::near_cache`]), keyed by the request's path: a
//! hit then takes no lock and no reference count that another thread's hits take too, and its
//! check is one `statx` of the path (beneath the root's descriptor, the final symlink not
//! followed) compared with the file's identity and validators when it was read — no
//! descriptor opened and closed. Serving threads share one descriptor table, so an open and a
//! close per request took its lock on every core (`alloc_fd` and its spinlock grew from 0.2
//! to 3% of a 4-thread server's CPU on the 16-core machine). The check cannot widen what is
//! served: an entry is only ever made from a file opened with `RESOLVE_BENEATH`, and a path
//! whose `statx` names another file, a symlink or nothing takes the full open.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue};

use crate::body_cache::{BodyCache, CacheStats, Eviction};
use crate::disk::EmulatedDisk;
use crate::near_cache::{NearCache, NEAR_MAX_FILE};
use os::beneath::STAT_PATH_MAX;

/// A file ready to be served: validators, preformatted header values, and its content (in
/// memory, or an open file to read chunk by chunk).
#[derive(Debug)]
pub struct Entry {
    /// Size in bytes.
    pub len: u64,
    /// Modification time.
    pub mtime: SystemTime,
    /// `ETag` value.
    pub etag: HeaderValue,
    /// `Last-Modified` value.
    pub last_modified: HeaderValue,
    /// `Content-Length` value of the whole file.
    pub content_length: HeaderValue,
    /// The bytes.
    pub content: Content,
    /// The head of a plain `200` of the whole file, built on first use with its content type
    /// and whether it varies by `Accept-Encoding`, and cloned for every such response after it
    /// (building it inserts six or seven headers into a hashed map: about 5% of a 1 KB
    /// response's user-space work, and a map sized for ten headers, whose 1,248-byte table
    /// shares the allocator's size class with every connection's task: docs/results-log.md).
    pub plain_head: OnceLock<(PlainHeadKey, HeaderMap)>,
}

/// What an [`Entry`]'s cached plain head was built for: its content type, and whether it says
/// `Vary: Accept-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainHeadKey {
    /// The `Content-Type`.
    pub mime: &'static str,
    /// Whether the head holds `Vary: Accept-Encoding`.
    pub vary: bool,
}

/// Where the bytes are.
#[derive(Debug)]
pub enum Content {
    /// In memory (small files, the cache, the demo site).
    Mem(Bytes),
    /// An open file, read with `pread`.
    File(File),
}

impl Entry {
    /// Build an entry with its header values.
    pub fn new(len: u64, mtime: SystemTime, content: Content) -> Self {
        let secs = mtime
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let etag = HeaderValue::from_str(&format!("\"{secs:x}-{len:x}\"")).expect("ascii etag");
        let last_modified =
            HeaderValue::from_str(&httpdate::fmt_http_date(mtime)).expect("ascii date");
        Self {
            len,
            mtime,
            etag,
            last_modified,
            content_length: HeaderValue::from(len),
            content,
            plain_head: OnceLock::new(),
        }
    }

    /// The headers of a plain `200` of the whole file served as `mime` (no compression, no
    /// range): `Server`, `ETag`, `Last-Modified`, `Vary: Accept-Encoding` if `vary` (a file
    /// that is served compressed to clients that accept it), `Content-Type`, `Accept-Ranges`,
    /// `Content-Length`, in that order. Built once per entry, then cloned (the clone's table is
    /// sized to its headers).
    pub fn plain_head(&self, mime: &'static str, vary: bool) -> HeaderMap {
        let build = || {
            let mut hm = HeaderMap::with_capacity(7);
            hm.insert(header::SERVER, HeaderValue::from_static("triage"));
            hm.insert(header::ETAG, self.etag.clone());
            hm.insert(header::LAST_MODIFIED, self.last_modified.clone());
            if vary {
                hm.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
            }
            hm.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
            hm.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            hm.insert(header::CONTENT_LENGTH, self.content_length.clone());
            hm
        };
        let key = PlainHeadKey { mime, vary };
        match self.plain_head.get_or_init(|| (key, build())) {
            (k, hm) if *k == key => hm.clone(),
            _ => build(),
        }
    }

    /// Read `len` bytes at `off` (from memory or with `pread`).
    pub fn read_at(&self, off: u64, len: usize) -> io::Result<Bytes> {
        match &self.content {
            Content::Mem(b) => {
                let start = (off as usize).min(b.len());
                let end = start.saturating_add(len).min(b.len());
                Ok(b.slice(start..end))
            }
            Content::File(f) => {
                let mut buf = vec![0u8; len];
                let mut got = 0;
                while got < len {
                    match f.read_at(&mut buf[got..], off + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                if got < len {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ));
                }
                buf.truncate(got);
                Ok(Bytes::from(buf))
            }
        }
    }
}

/// Result of looking a path up.
#[derive(Debug)]
pub enum Lookup {
    /// A regular file.
    File(Arc<Entry>),
    /// A directory.
    Dir,
    /// No such file, or not a regular file or directory (FIFO, socket, device).
    NotFound,
    /// Outside the root (symlink escape), or not readable.
    Forbidden,
    /// Any other failure.
    Error(io::Error),
}

/// A site's files.
#[derive(Debug)]
pub enum Store {
    /// A document root on disk.
    Dir(DirStore),
    /// Files in memory.
    Mem(MemStore),
}

/// Where a looked-up file's body came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Not a file, or a store without a body cache (the demo site).
    None,
    /// The body was in the cache.
    Hit,
    /// The body was not in the cache: `len` bytes were read (into the cache when they fit).
    Miss(u64),
}

impl Store {
    /// Look up `rel` (segments joined with `/`, already checked by `resolve`).
    pub fn lookup(&self, rel: &[u8]) -> Lookup {
        self.lookup_traced(rel).0
    }

    /// [`Store::lookup`], and whether the body came from the cache.
    pub fn lookup_traced(&self, rel: &[u8]) -> (Lookup, Fill) {
        match self {
            Store::Dir(d) => d.lookup_traced(rel),
            Store::Mem(m) => (m.lookup(rel), Fill::None),
        }
    }

    /// The store's document root on disk, if it has one.
    pub fn dir(&self) -> Option<&DirStore> {
        match self {
            Store::Dir(d) => Some(d),
            Store::Mem(_) => None,
        }
    }
}

/// A document root on disk.
#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
    root_fd: OwnedFd,
    cache: Mutex<Cache>,
    /// Per-thread copies of small entries in front of `cache` (`clear` eviction without an
    /// emulated disk only: LRU and GDS must see every hit, and so must the disk's fill
    /// reports).
    near: Option<NearCache<Box<[u8]>, NearValue>>,
    cache_max_file: u64,
    eviction: Eviction,
    disk: Option<Arc<EmulatedDisk>>,
}

/// Per (device, inode): its [`CacheValue`].
type Cache = BodyCache<(u64, u64), CacheValue>;

/// The modification time (s, ns) an entry was read at, and the entry.
type CacheValue = (i64, i64, Arc<Entry>);

/// Per request path, for the calling thread: the file it named when read, and the entry.
type NearValue = (Identity, Arc<Entry>);

/// Which file a path named, and its validators: a thread's copy is served only while a
/// `statx` of the path finds all of them unchanged.
type Identity = os::beneath::FileId;

fn identity_of(md: &std::fs::Metadata) -> Identity {
    Identity {
        file: (md.dev(), md.ino()),
        mtime: (md.mtime(), md.mtime_nsec()),
        len: md.len(),
    }
}

impl DirStore {
    /// Open `root` (must be a directory).
    pub fn open(root: &Path, cache_max_file: u64, cache_budget: u64) -> io::Result<Self> {
        Ok(Self {
            root: root.to_owned(),
            root_fd: os::beneath::open_dir(root)?,
            cache: Mutex::new(Cache::new(Eviction::Clear, cache_budget)),
            near: Some(NearCache::default()),
            cache_max_file,
            eviction: Eviction::Clear,
            disk: None,
        })
    }

    /// The same store with its cache making room by `eviction` (keeping its budget).
    pub fn with_eviction(self, eviction: Eviction) -> Self {
        let budget = self.cache_budget();
        Self {
            cache: Mutex::new(Cache::new(eviction, budget)),
            near: self.near.filter(|_| eviction == Eviction::Clear),
            eviction,
            ..self
        }
    }

    /// The same store whose cache misses read from `disk` (shared by the server's stores).
    pub fn with_disk(self, disk: Option<Arc<EmulatedDisk>>) -> Self {
        Self {
            near: self.near.filter(|_| disk.is_none()),
            disk,
            ..self
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cache_budget(&self) -> u64 {
        self.cache().budget()
    }

    /// The cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        let mut s = self.cache().stats();
        s.hits += self.near.as_ref().map_or(0, NearCache::hits);
        s
    }

    /// Keep a copy of `e` (a small in-memory entry just found in the shared cache) for the
    /// calling thread, so that its next hits touch nothing another thread's hits touch.
    fn keep_near(&self, rel: &[u8], id: Identity, e: &Entry) {
        let Content::Mem(b) = &e.content else {
            return;
        };
        if self.near.is_some() && e.len <= NEAR_MAX_FILE {
            let copy = Entry::new(e.len, e.mtime, Content::Mem(Bytes::copy_from_slice(b)));
            self.keep_near_as(rel, id, Arc::new(copy));
        }
    }

    /// Keep `e` itself for the calling thread (an entry it just read: other threads take
    /// their own copies on their first hit).
    fn keep_near_as(&self, rel: &[u8], id: Identity, e: Arc<Entry>) {
        if let Some(near) = &self.near {
            if e.len <= NEAR_MAX_FILE && rel.len() < STAT_PATH_MAX {
                let len = e.len;
                near.insert(rel.into(), (id, e), len);
            }
        }
    }

    /// The regular file `rel` names now (`os::beneath::stat_beneath`: one `statx`, nothing
    /// opened); `None` sends the lookup to the full open.
    fn stat_beneath(&self, rel: &[u8]) -> Option<Identity> {
        os::beneath::stat_beneath(self.root_fd.as_fd(), rel)
    }

    /// How the cache makes room.
    pub fn eviction(&self) -> Eviction {
        self.eviction
    }

    /// Whether responses say where their body came from (`X-Triage-Cache`, `X-Triage-Disk`):
    /// with an emulated disk or a cache that keeps a working set (`lru`, `gds`).
    pub fn reports_fill(&self) -> bool {
        self.disk.is_some() || self.eviction != Eviction::Clear
    }

    /// The emulated disk misses read from, if any.
    pub fn disk(&self) -> Option<&Arc<EmulatedDisk>> {
        self.disk.as_ref()
    }

    /// The document root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn open_beneath(&self, rel: &[u8]) -> io::Result<File> {
        os::beneath::open_beneath(self.root_fd.as_fd(), rel)
    }

    /// [`DirStore::lookup`], and whether the body came from the cache.
    pub fn lookup_traced(&self, rel: &[u8]) -> (Lookup, Fill) {
        let mut fill = Fill::None;
        let found = self.lookup_filling(rel, &mut fill);
        (found, fill)
    }

    /// Look up `rel` under the root.
    pub fn lookup(&self, rel: &[u8]) -> Lookup {
        self.lookup_filling(rel, &mut Fill::None)
    }

    fn lookup_filling(&self, rel: &[u8], fill: &mut Fill) -> Lookup {
        if let Some(near) = &self.near {
            if let Some(now) = self.stat_beneath(rel) {
                if let Some(e) = near.get(rel, |(id, _)| *id == now, |(_, e)| e.clone()) {
                    *fill = Fill::Hit;
                    return Lookup::File(e);
                }
            }
        }
        let file = match self.open_beneath(rel) {
            Ok(f) => f,
            Err(e) => {
                return match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG) => {
                        Lookup::NotFound
                    }
                    // EXDEV: resolution left the root (symlink escape); ELOOP: magic links.
                    Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::EACCES)
                    | Some(libc::EPERM) => Lookup::Forbidden,
                    _ => Lookup::Error(e),
                };
            }
        };
        let md = match file.metadata() {
            Ok(m) => m,
            Err(e) => return Lookup::Error(e),
        };
        if md.is_dir() {
            return Lookup::Dir;
        }
        if !md.is_file() {
            // FIFOs, sockets, devices: not something a site serves.
            return Lookup::NotFound;
        }
        let id = identity_of(&md);
        let (key, stamp) = (id.file, id.mtime);
        let fresh = |(s, ns, e): &(i64, i64, Arc<Entry>)| (*s, *ns) == stamp && e.len == md.len();
        let held = self.cache().get(&key, fresh).map(|(_, _, e)| e.clone());
        if let Some(e) = held {
            *fill = Fill::Hit;
            self.keep_near(rel, id, &e);
            return Lookup::File(e);
        }
        let mtime = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let len = md.len();
        *fill = Fill::Miss(len);
        if len <= self.cache_max_file {
            let probe = Entry::new(len, mtime, Content::File(file));
            let data = match probe.read_at(0, len as usize) {
                Ok(d) => d,
                Err(e) => return Lookup::Error(e),
            };
            let e = Arc::new(Entry {
                content: Content::Mem(data),
                ..probe
            });
            if self.cache().insert(key, (stamp.0, stamp.1, e.clone()), len) {
                self.keep_near_as(rel, id, e.clone());
            }
            Lookup::File(e)
        } else {
            Lookup::File(Arc::new(Entry::new(len, mtime, Content::File(file))))
        }
    }
}

/// Files held in memory, keyed by relative path (`a/b.html`).
#[derive(Debug, Default)]
pub struct MemStore {
    files: HashMap<Vec<u8>, Arc<Entry>>,
    dirs: std::collections::HashSet<Vec<u8>>,
}

impl MemStore {
    /// An empty store (its root directory exists).
    pub fn new() -> Self {
        let mut s = Self::default();
        s.dirs.insert(Vec::new());
        s
    }

    /// Add a file (its parent directories appear too).
    pub fn insert(&mut self, rel: &str, data: impl Into<Bytes>, mtime: SystemTime) {
        let data = data.into();
        let rel = rel.trim_start_matches('/');
        let mut p = rel;
        while let Some(i) = p.rfind('/') {
            p = &p[..i];
            self.dirs.insert(p.as_bytes().to_vec());
        }
        self.files.insert(
            rel.as_bytes().to_vec(),
            Arc::new(Entry::new(data.len() as u64, mtime, Content::Mem(data))),
        );
    }

    fn lookup(&self, rel: &[u8]) -> Lookup {
        if let Some(e) = self.files.get(rel) {
            return Lookup::File(e.clone());
        }
        if self.dirs.contains(rel) {
            return Lookup::Dir;
        }
        Lookup::NotFound
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn dir_store_stays_beneath_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        std::fs::write(t.path().join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("out")).unwrap();
        std::os::unix::fs::symlink("a.txt", root.join("in")).unwrap();
        let s = DirStore::open(&root, 1024, 1 << 20).unwrap();
        match s.lookup(b"a.txt") {
            Lookup::File(e) => assert_eq!(e.read_at(0, 5).unwrap(), &b"hello"[..]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(s.lookup(b"in"), Lookup::File(_)));
        assert!(matches!(s.lookup(b"out"), Lookup::Forbidden));
        assert!(matches!(s.lookup(b"nope"), Lookup::NotFound));
        assert!(matches!(s.lookup(b""), Lookup::Dir));
    }

    #[test]
    fn the_stat_checked_copy_never_outlives_its_file() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("f"), b"one").unwrap();
        std::fs::write(root.join("g"), b"two").unwrap();
        std::fs::write(t.path().join("secret"), b"sec").unwrap();
        let s = DirStore::open(&root, 1024, 1 << 20).unwrap();
        gate::shard::set_home(3);
        let body = |l: Lookup| match l {
            Lookup::File(e) => e.read_at(0, e.len as usize).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(body(s.lookup(b"f")), &b"one"[..]);
        let (hit, fill) = s.lookup_traced(b"f");
        assert!(
            matches!(fill, Fill::Hit),
            "the thread's copy serves the second"
        );
        assert_eq!(body(hit), &b"one"[..]);
        // Another file renamed over it (same size, maybe the same mtime): a new inode.
        std::fs::rename(root.join("g"), root.join("f")).unwrap();
        assert_eq!(body(s.lookup(b"f")), &b"two"[..]);
        // A symlink out of the root put in its place is refused, not served from the copy.
        std::fs::remove_file(root.join("f")).unwrap();
        std::os::unix::fs::symlink("../secret", root.join("f")).unwrap();
        assert!(matches!(s.lookup(b"f"), Lookup::Forbidden));
        // Gone: not found.
        std::fs::remove_file(root.join("f")).unwrap();
        assert!(matches!(s.lookup(b"f"), Lookup::NotFound));
        // A directory in its place.
        std::fs::create_dir(root.join("f")).unwrap();
        assert!(matches!(s.lookup(b"f"), Lookup::Dir));
        // An absolute or overlong path never takes the check (and resolves as before).
        assert!(s.stat_beneath(b"/etc/passwd").is_none());
        assert!(s.stat_beneath(&[b'a'; STAT_PATH_MAX]).is_none());
    }

    #[test]
    fn the_plain_head_is_built_for_its_type_and_vary() {
        let e = Entry::new(1024, SystemTime::UNIX_EPOCH, Content::Mem(Bytes::new()));
        let names = |hm: &HeaderMap| hm.keys().map(|k| k.as_str().to_owned()).collect::<Vec<_>>();
        let vary = e.plain_head("text/html", true);
        assert_eq!(
            names(&vary),
            [
                "server",
                "etag",
                "last-modified",
                "vary",
                "content-type",
                "accept-ranges",
                "content-length"
            ]
        );
        assert_eq!(vary[header::VARY], "Accept-Encoding");
        assert_eq!(vary[header::CONTENT_LENGTH], "1024");
        // Another key than the cached one is built afresh, never the cached head.
        let plain = e.plain_head("text/html", false);
        assert!(!plain.contains_key(header::VARY));
        assert_eq!(plain.len(), 6);
        assert_eq!(
            e.plain_head("text/css", true)[header::CONTENT_TYPE],
            "text/css"
        );
        assert_eq!(e.plain_head("text/html", true), vary);
    }

    #[test]
    fn a_fifo_is_not_found_at_once() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let s = DirStore::open(t.path(), 1024, 1 << 20).unwrap();
        // Without O_NONBLOCK this open would wait for a writer forever.
        assert!(matches!(s.lookup(b"fifo"), Lookup::NotFound));
    }

    #[test]
    fn cache_sees_changes() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), b"one").unwrap();
        let s = DirStore::open(t.path(), 1024, 1 << 20).unwrap();
        let Lookup::File(a) = s.lookup(b"f") else {
            panic!()
        };
        let Lookup::File(b) = s.lookup(b"f") else {
            panic!()
        };
        assert!(Arc::ptr_eq(&a, &b));
        std::fs::write(t.path().join("f"), b"three").unwrap();
        let Lookup::File(c) = s.lookup(b"f") else {
            panic!()
        };
        assert_eq!(c.len, 5);
    }

    fn body_ptr(e: &Entry) -> *const u8 {
        match &e.content {
            Content::Mem(b) => b.as_ptr(),
            Content::File(_) => panic!("a small file is held in memory"),
        }
    }

    #[test]
    fn each_serving_thread_serves_its_own_copy_of_a_small_file() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), b"one").unwrap();
        let s = Arc::new(DirStore::open(t.path(), 1024, 1 << 20).unwrap());
        let on_home = |home: usize| {
            let s = s.clone();
            std::thread::spawn(move || {
                gate::shard::set_home(home);
                let mut got = Vec::new();
                for _ in 0..2 {
                    let Lookup::File(e) = s.lookup(b"f") else {
                        panic!("f is a file")
                    };
                    got.push(e);
                }
                got
            })
            .join()
            .unwrap()
        };
        let first = on_home(0);
        let second = on_home(1);
        assert!(
            Arc::ptr_eq(&first[0], &first[1]),
            "the reader keeps its entry"
        );
        // The second thread's first hit copies the entry; its next hit serves the copy,
        // which shares neither the entry's nor the body's reference count with the first.
        assert!(Arc::ptr_eq(&first[0], &second[0]));
        assert!(!Arc::ptr_eq(&first[0], &second[1]));
        assert_ne!(body_ptr(&first[0]), body_ptr(&second[1]));
        assert_eq!(second[1].read_at(0, 3).unwrap(), &b"one"[..]);
        assert_eq!(second[1].etag, first[0].etag);
        assert_eq!(s.cache_stats().hits, 3);
        // A change reaches every thread's copy.
        std::fs::write(t.path().join("f"), b"three").unwrap();
        assert!(on_home(1).iter().all(|e| e.len == 5));
        assert!(on_home(0).iter().all(|e| e.len == 5));
    }

    #[test]
    fn lru_serves_every_hit_from_the_shared_cache() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), b"one").unwrap();
        let s = DirStore::open(t.path(), 1024, 1 << 20)
            .unwrap()
            .with_eviction(Eviction::Lru);
        let e: Vec<_> = (0..3)
            .map(|_| match s.lookup(b"f") {
                Lookup::File(e) => e,
                _ => panic!("f is a file"),
            })
            .collect();
        assert!(Arc::ptr_eq(&e[0], &e[2]));
        assert_eq!(s.cache_stats().hits, 2);
    }

    #[test]
    fn lookups_say_hit_or_miss_and_lru_keeps_the_hot_file() {
        let t = tempfile::tempdir().unwrap();
        for f in ["a", "b", "c"] {
            std::fs::write(t.path().join(f), [b'x'; 100]).unwrap();
        }
        std::fs::write(t.path().join("big"), [b'x'; 300]).unwrap();
        let s = DirStore::open(t.path(), 200, 250)
            .unwrap()
            .with_eviction(Eviction::Lru);
        let fill = |p: &[u8]| s.lookup_traced(p).1;
        assert_eq!(fill(b"a"), Fill::Miss(100));
        assert_eq!(fill(b"a"), Fill::Hit);
        assert_eq!(fill(b"b"), Fill::Miss(100));
        assert_eq!(fill(b"a"), Fill::Hit);
        // c evicts b, the least recently used, not a.
        assert_eq!(fill(b"c"), Fill::Miss(100));
        assert_eq!(fill(b"a"), Fill::Hit);
        assert_eq!(fill(b"b"), Fill::Miss(100));
        // Above cache_max_file: never held, every lookup reads it.
        assert_eq!(fill(b"big"), Fill::Miss(300));
        assert_eq!(fill(b"big"), Fill::Miss(300));
        assert_eq!(fill(b"nope"), Fill::None);
        let st = s.cache_stats();
        assert!(st.bytes <= 250);
        assert_eq!((st.hits, st.evictions), (3, 2));
    }
}

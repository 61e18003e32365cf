//! The test site of seed 001 §4.1: pages of one HTML file (a few KB) plus images (tens to
//! hundreds of KB), reached by every browser through its own URLs with the same content.
//!
//! Layout (generated deterministically from a seed):
//! ```text
//! DIR/_content/index.html, img0.bmp, img1.bmp, ...   the one copy of the content
//! DIR/b0/..., DIR/b1/..., ...                         hard links, one directory per browser
//! ```
//! so browser `i` fetches `/b{i}/index.html` and then `/b{i}/img{k}.bmp`: unique URLs, same
//! bytes, and every server (triage, nginx, Apache) sees plain regular files.
//!
//! Images are real 24-bit BMP files: a gradient in 4x4-pixel blocks with a quarter of the
//! pixels dithered ([`bmp`]), which on-the-fly gzip takes to about a third at a real CPU cost,
//! as it does a real image stored as BMP; their content type is `image/bmp`, not text, so a
//! content-type policy and POS see them as media.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{LabError, Result};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteSpec {
    /// Number of per-browser directories (`b0` .. `b{n-1}`).
    pub browsers: usize,
    /// Size of the HTML file in bytes (at least 512).
    pub html_bytes: usize,
    /// Size of each image in bytes (each at least 1 KB).
    pub image_bytes: Vec<usize>,
    /// Seed of the content.
    pub seed: u64,
}

impl SiteSpec {
    /// Bytes of one page (HTML plus all images).
    pub fn page_bytes(&self) -> usize {
        self.html_bytes + self.image_bytes.iter().sum::<usize>()
    }

    /// The URL path of browser `b`'s page.
    pub fn page_path(browser: usize) -> String {
        format!("/b{browser}/index.html")
    }

    /// Check the sizes.
    pub fn validate(&self) -> Result<()> {
        if self.browsers == 0 {
            return Err(LabError::Config("site: browsers must be at least 1".into()));
        }
        if self.html_bytes < 512 {
            return Err(LabError::Config(format!(
                "site: html size {} B is below 512 B",
                self.html_bytes
            )));
        }
        if let Some(b) = self.image_bytes.iter().find(|&&b| b < 1024) {
            return Err(LabError::Config(format!(
                "site: image size {b} B is below 1 KB"
            )));
        }
        Ok(())
    }
}

/// A generated site.
#[derive(Debug, Clone)]
pub struct Site {
    /// Document root to serve.
    pub root: PathBuf,
    /// What was generated.
    pub spec: SiteSpec,
}

const WORDS: &[&str] = &[
    "server",
    "process",
    "schedule",
    "browser",
    "image",
    "text",
    "queue",
    "ready",
    "wait",
    "run",
    "response",
    "time",
    "request",
    "page",
    "contents",
    "behavior",
    "predict",
    "policy",
    "processor",
    "load",
    "kernel",
    "worker",
    "priority",
    "head",
    "back",
    "period",
];

/// The HTML of the page: deterministic text padded to `spec.html_bytes`, referencing the
/// images by relative URL.
pub fn html(spec: &SiteSpec) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut head = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>triage lab page</title></head>\n<body>\n<h1>triage lab page</h1>\n",
    );
    for (i, _) in spec.image_bytes.iter().enumerate() {
        head.push_str(&format!("<img src=\"img{i}.bmp\" alt=\"image {i}\">\n"));
    }
    let tail = "</p>\n</body></html>\n";
    head.push_str("<p>");
    loop {
        let w = WORDS[rng.gen_range(0..WORDS.len())];
        if head.len() + w.len() + 1 + tail.len() > spec.html_bytes {
            break;
        }
        head.push_str(w);
        head.push(' ');
    }
    while head.len() + tail.len() < spec.html_bytes {
        head.push(' ');
    }
    let mut out = head;
    out.push_str(tail);
    out.into_bytes()
}

/// A 24-bit BMP of about `bytes` bytes (exactly `bytes` rounded to whole 256-pixel rows).
pub fn bmp(bytes: usize, seed: u64) -> Vec<u8> {
    const W: usize = 256;
    let row = W * 3; // 768: a multiple of 4, no row padding
    let h = bytes.saturating_sub(54).div_ceil(row).max(1);
    let data_len = row * h;
    let file_len = 54 + data_len;
    let mut out = Vec::with_capacity(file_len);
    out.extend_from_slice(b"BM");
    out.extend_from_slice(&(file_len as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&54u32.to_le_bytes());
    out.extend_from_slice(&40u32.to_le_bytes());
    out.extend_from_slice(&(W as i32).to_le_bytes());
    out.extend_from_slice(&(h as i32).to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&24u16.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // BI_RGB
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    out.extend_from_slice(&2835i32.to_le_bytes());
    out.extend_from_slice(&2835i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    // A gradient in 4x4-pixel blocks with a quarter of the pixels dithered: gzip level 6 takes
    // it to about a third, as it does a real image stored as BMP. (Images that do not compress
    // would make the 10 Mbit/s link, not the CPU, the bottleneck of a burst; docs/lab.md.)
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for y in 0..h {
        let yb = y / 4 * 4;
        for x in 0..W {
            let xb = x / 4 * 4;
            let noise: u8 = if rng.gen_range(0..4) == 0 {
                rng.gen_range(0..16)
            } else {
                0
            };
            let b = ((xb + yb) & 0xff) as u8;
            let g = ((xb * 2 + yb / 2) & 0xff) as u8;
            let r = ((yb * 3) & 0xff) as u8;
            out.extend_from_slice(&[b.wrapping_add(noise), g, r]);
        }
    }
    out
}

fn write(path: &Path, data: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| LabError::io("creating", path, e))?;
    f.write_all(data)
        .map_err(|e| LabError::io("writing", path, e))
}

/// Generate the site under `dir` (which must exist and be empty or absent). Files are made
/// world-readable so peers that drop privileges (Apache's children) can serve them.
pub fn generate(dir: &Path, spec: &SiteSpec) -> Result<Site> {
    use std::os::unix::fs::PermissionsExt;
    spec.validate()?;
    let content = dir.join("_content");
    std::fs::create_dir_all(&content).map_err(|e| LabError::io("creating", &content, e))?;
    let mut files = vec![("index.html".to_owned(), html(spec))];
    for (i, &b) in spec.image_bytes.iter().enumerate() {
        files.push((
            format!("img{i}.bmp"),
            bmp(b, spec.seed.wrapping_add(1 + i as u64)),
        ));
    }
    for (name, data) in &files {
        let p = content.join(name);
        write(&p, data)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| LabError::io("chmod", &p, e))?;
    }
    for b in 0..spec.browsers {
        let bd = dir.join(format!("b{b}"));
        std::fs::create_dir_all(&bd).map_err(|e| LabError::io("creating", &bd, e))?;
        for (name, _) in &files {
            let link = bd.join(name);
            std::fs::hard_link(content.join(name), &link)
                .map_err(|e| LabError::io("hard-linking", &link, e))?;
        }
    }
    for d in std::iter::once(dir.to_path_buf())
        .chain(std::iter::once(content))
        .chain((0..spec.browsers).map(|b| dir.join(format!("b{b}"))))
    {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", &d, e))?;
    }
    Ok(Site {
        root: dir.to_path_buf(),
        spec: spec.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SiteSpec {
        SiteSpec {
            browsers: 3,
            html_bytes: 4096,
            image_bytes: vec![20_000, 100_000],
            seed: 7,
        }
    }

    #[test]
    fn html_has_requested_size_and_references_every_image() {
        let h = html(&spec());
        assert_eq!(h.len(), 4096);
        let s = String::from_utf8(h).unwrap();
        assert!(s.contains("src=\"img0.bmp\"") && s.contains("src=\"img1.bmp\""));
        assert!(s.ends_with("</html>\n"));
    }

    #[test]
    fn bmp_is_well_formed_and_close_to_size() {
        let b = bmp(100_000, 1);
        assert_eq!(&b[..2], b"BM");
        let len = u32::from_le_bytes(b[2..6].try_into().unwrap()) as usize;
        assert_eq!(len, b.len());
        assert!(b.len() >= 100_000 && b.len() < 100_000 + 768, "{}", b.len());
        let h = i32::from_le_bytes(b[22..26].try_into().unwrap()) as usize;
        assert_eq!(54 + h * 768, b.len());
    }

    #[test]
    fn bmp_compresses_to_about_a_third() {
        // The lab's link must not be the bottleneck: gzip level 6 (the lab's) takes an image
        // to 25-45% of its size.
        use std::io::Write as _;
        let b = bmp(80_000, 3);
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(&b).unwrap();
        let ratio = e.finish().unwrap().len() as f64 / b.len() as f64;
        assert!((0.25..0.45).contains(&ratio), "{ratio}");
    }

    #[test]
    fn generation_is_deterministic_and_seed_dependent() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        generate(a.path(), &spec()).unwrap();
        generate(b.path(), &spec()).unwrap();
        for f in ["index.html", "img0.bmp", "img1.bmp"] {
            let x = std::fs::read(a.path().join("b2").join(f)).unwrap();
            let y = std::fs::read(b.path().join("b2").join(f)).unwrap();
            assert_eq!(x, y, "{f}");
        }
        let other = SiteSpec { seed: 8, ..spec() };
        assert_ne!(bmp(20_000, other.seed + 1), bmp(20_000, spec().seed + 1));
        assert_ne!(html(&other), html(&spec()));
    }

    #[test]
    fn every_browser_has_its_own_urls_to_the_same_content() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let site = generate(d.path(), &spec()).unwrap();
        let ino = |b: usize| {
            std::fs::metadata(site.root.join(format!("b{b}/img1.bmp")))
                .unwrap()
                .ino()
        };
        assert_eq!(ino(0), ino(2));
        assert!(!site.root.join("b3").exists());
        assert_eq!(SiteSpec::page_path(2), "/b2/index.html");
        assert_eq!(spec().page_bytes(), 124_096);
    }

    #[test]
    fn bad_sizes_are_rejected_with_the_value() {
        let e = SiteSpec {
            html_bytes: 10,
            ..spec()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("10 B"), "{e}");
        let e = SiteSpec {
            image_bytes: vec![5],
            ..spec()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("5 B"), "{e}");
    }
}

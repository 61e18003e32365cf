//! The built-in demo site, generated in memory at start: an HTML page with several images
//! (BMP, PNG, SVG) of different sizes, so `triage serve` with no arguments shows something and
//! exercises both short (text) and long (image) workers.

use std::io::Write;
use std::time::SystemTime;

use crate::store::MemStore;

/// A 24-bit BMP of `w` x `h` pixels with a gradient.
pub fn bmp(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let row = (w * 3).div_ceil(4) * 4;
    let size = 54 + row * h;
    let mut v = Vec::with_capacity(size as usize);
    v.extend_from_slice(b"BM");
    v.extend_from_slice(&size.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&54u32.to_le_bytes());
    v.extend_from_slice(&40u32.to_le_bytes());
    v.extend_from_slice(&(w as i32).to_le_bytes());
    v.extend_from_slice(&(h as i32).to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&24u16.to_le_bytes());
    v.extend_from_slice(&[0u8; 24]);
    for y in 0..h {
        for x in 0..w {
            v.push((x * 255 / w.max(1)) as u8 ^ seed);
            v.push((y * 255 / h.max(1)) as u8);
            v.push(seed.wrapping_mul(37).wrapping_add((x + y) as u8));
        }
        v.resize(v.len() + (row - w * 3) as usize, 0);
    }
    v
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = Crc32::default();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.0.to_be_bytes());
}

#[derive(Clone, Copy, Default)]
struct Crc32(u32);

impl Crc32 {
    fn update(&mut self, data: &[u8]) {
        let mut c = !self.0;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        self.0 = !c;
    }
}

/// An RGB PNG of `w` x `h` pixels with a pattern (zlib through flate2).
pub fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let mut raw = Vec::with_capacity(((w * 3 + 1) * h) as usize);
    for y in 0..h {
        raw.push(0);
        for x in 0..w {
            raw.push(((x ^ y) as u8).wrapping_add(seed));
            raw.push((x * 7 + y * 3) as u8);
            raw.push(seed.wrapping_sub((y / 4) as u8));
        }
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&raw).expect("in-memory write");
    let idat = z.finish().expect("in-memory write");
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png_chunk(&mut out, b"IHDR", &ihdr);
    png_chunk(&mut out, b"IDAT", &idat);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

fn svg(n: u32) -> String {
    let mut s = String::from(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"320\" height=\"120\" viewBox=\"0 0 320 120\">",
    );
    for i in 0..n {
        s.push_str(&format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"hsl({},70%,55%)\" opacity=\"0.6\"/>",
            (i * 37) % 320,
            (i * 53) % 120,
            6 + i % 20,
            (i * 29) % 360
        ));
    }
    s.push_str("</svg>");
    s
}

/// The demo site's files.
pub fn site() -> MemStore {
    let now = SystemTime::now();
    let mut m = MemStore::new();
    let images = [
        ("img/gradient-small.bmp", bmp(48, 48, 3)),
        ("img/gradient-large.bmp", bmp(200, 160, 90)),
        ("img/pattern.png", png(256, 256, 17)),
        ("img/stripes.bmp", bmp(120, 120, 200)),
    ];
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>triage demo</title>\n\
         <style>body{font-family:sans-serif;max-width:52em;margin:2em auto} img{margin:4px;border:1px solid #ccc}</style>\n\
         </head><body>\n<h1>triage</h1>\n\
         <p>This page is served by <code>triage serve</code>'s built-in demo site. Every request \
         passes through the gate: a worker takes a CPU slot for each burst (parsing a request, \
         producing a 16 KiB chunk of a body) and waits without one. The HTML arrives in one \
         burst; each image takes several. With <code>--policy pos</code> the server learns from \
         the workers' run/wait log alone which ones serve text and puts them first when the \
         CPU is the bottleneck.</p>\n<p>Metrics: start with <code>--admin 127.0.0.1:9090</code> \
         and read <code>/metrics</code>.</p>\n",
    );
    for (path, data) in &images {
        html.push_str(&format!(
            "<figure><img src=\"/{path}\" alt=\"{path}\"><figcaption>{path} ({} bytes)</figcaption></figure>\n",
            data.len()
        ));
    }
    html.push_str("<figure><img src=\"/img/circles.svg\" alt=\"circles\"></figure>\n");
    html.push_str("</body></html>\n");
    m.insert("index.html", html, now);
    for (path, data) in images {
        m.insert(path, data, now);
    }
    m.insert("img/circles.svg", svg(60), now);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_have_valid_headers() {
        let b = bmp(3, 2, 0);
        assert_eq!(&b[..2], b"BM");
        assert_eq!(
            u32::from_le_bytes(b[2..6].try_into().unwrap()) as usize,
            b.len()
        );
        let p = png(4, 4, 0);
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        // CRC of IEND is the well-known constant.
        assert_eq!(&p[p.len() - 4..], &[0xAE, 0x42, 0x60, 0x82]);
    }
}

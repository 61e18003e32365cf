//! The `php-fpm` variants of `triage lab pos` (issue 16): unmodified nginx + php-fpm (the
//! [`Peer::PhpFpm`] peer) serving seed 001's page where a PHP script produces the HTML and
//! another the images, CPU-bound, as `--site cgi`'s Perl scripts do ([`super::cgi`]).
//!
//! - **The scripts** ([`page_script`], [`image_script`], written by [`write_scripts`] into the
//!   site's [`PHP_DIR`]): the page burns its CPU and then prints the HTML in one write; an image
//!   burns its CPU in [`IMAGE_BANDS`] bands and prints (and flushes) each band's bytes once it
//!   is computed. The bytes are the site's (`_content/`, the same the static variants serve;
//!   nginx compresses them as it does the static files). A php-fpm child lives on, so a script
//!   counts its CPU from its own start (`getrusage`).
//! - **The CPU per request** ([`script_cpu`]): `--page-cpu` and `--image-cpu` (the cgi
//!   site's one definition), scaled by the run's server-side quota over the cgi site's
//!   ([`DEFAULT_QUOTA_CGI`]): a run whose quota is 10% of a CPU gives a page 40% of the CPU
//!   time, so a burst takes as long (wall time) as the cgi site's at its 25%, and the idle time
//!   between bursts stays longer than SLP. `--site cgi` runs them unscaled.
//! - **The variants** ([`super::attach`]): `php-fpm` (no daemon) and `php-fpm+pos` (`triage
//!   pos attach --pid <php-fpm master>`, its children followed from their fork, with the
//!   options of [`super::attach::default_pos_kind`]: a fixed episode budget of 0.5 ms (a
//!   new request's first CPU at the text level, then the order its episode began in), the
//!   tail's head, the floor at -5, and nginx, a front not followed, moved into the boost
//!   cgroup while they are raised), in the server side's one budget with the hog.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::cgi::{DEFAULT_QUOTA_CGI, IMAGE_BANDS};
use super::opts::PosOpts;
use crate::error::{LabError, Result};
use crate::peers::{Peer, IMAGE_SCRIPT, PAGE_SCRIPT, PHP_DIR};
use crate::runner::Variant;

/// The PHP that reads the request's own CPU time (seconds) and burns it up to a bound.
const CPU_PHP: &str = "function cpu() {\n\
    \x20   $r = getrusage();\n\
    \x20   return $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6\n\
    \x20       + $r['ru_stime.tv_sec'] + $r['ru_stime.tv_usec'] / 1e6;\n\
    }\n\
    function burn($until) {\n\
    \x20   $x = 0;\n\
    \x20   while (cpu() < $until) { for ($i = 1; $i <= 200; $i++) { $x += $i * 0.5; } }\n\
    \x20   return $x;\n\
    }\n\
    $t0 = cpu();\n";

/// The page script: `cpu` of CPU, then the whole HTML (`CONTENT_FILE`) in one write.
pub fn page_script(cpu: Duration) -> String {
    format!(
        "<?php\n\
         // triage lab pos, php-fpm: the page. About {ms:.2} ms of CPU, then the HTML in one\n\
         // write.\n\
         {CPU_PHP}\
         burn($t0 + {s});\n\
         $body = file_get_contents($_SERVER['CONTENT_FILE']);\n\
         header('Content-Type: text/html; charset=UTF-8');\n\
         header('Content-Length: ' . strlen($body));\n\
         echo $body;\n",
        ms = cpu.as_secs_f64() * 1e3,
        s = cpu.as_secs_f64(),
    )
}

/// The image script: `cpu` of CPU in [`IMAGE_BANDS`] bands, each band's bytes printed and
/// flushed once computed.
pub fn image_script(cpu: Duration) -> String {
    format!(
        "<?php\n\
         // triage lab pos, php-fpm: an image. About {ms:.2} ms of CPU in {IMAGE_BANDS} bands,\n\
         // each printed as soon as it is computed.\n\
         {CPU_PHP}\
         $img = file_get_contents($_SERVER['CONTENT_FILE']);\n\
         $n = strlen($img);\n\
         header('Content-Type: image/bmp');\n\
         header('Content-Length: ' . $n);\n\
         for ($b = 1; $b <= {IMAGE_BANDS}; $b++) {{\n\
         \x20   burn($t0 + {s} * $b / {IMAGE_BANDS});\n\
         \x20   $from = intdiv($n * ($b - 1), {IMAGE_BANDS});\n\
         \x20   $to = intdiv($n * $b, {IMAGE_BANDS});\n\
         \x20   echo substr($img, $from, $to - $from);\n\
         \x20   flush();\n\
         }}\n",
        ms = cpu.as_secs_f64() * 1e3,
        s = cpu.as_secs_f64(),
    )
}

/// The CPU of the page script and of each image script in a run of `o` whose server side has
/// `quota` (fraction of one CPU): `--page-cpu` and `--image-cpu` scaled by `quota` over
/// [`DEFAULT_QUOTA_CGI`] (see the module docs); unscaled without a quota.
pub fn script_cpu(o: &PosOpts, quota: Option<f64>) -> (Duration, Duration) {
    let f = quota.map_or(1.0, |q| q / DEFAULT_QUOTA_CGI);
    (o.page_cpu.mul_f64(f), o.image_cpu.mul_f64(f))
}

/// Whether `v` runs php-fpm (its scripts must be written).
pub fn runs_php(v: &Variant) -> bool {
    v.peer_kind() == Some(Peer::PhpFpm)
}

/// Write the two scripts into `root/`[`PHP_DIR`] (world-readable: the pool's children run
/// as `www-data`).
pub fn write_scripts(root: &Path, page_cpu: Duration, image_cpu: Duration) -> Result<()> {
    let dir = root.join(PHP_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| LabError::io("creating", &dir, e))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| LabError::io("chmod", &dir, e))?;
    for (name, text) in [
        (PAGE_SCRIPT, page_script(page_cpu)),
        (IMAGE_SCRIPT, image_script(image_cpu)),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::io("writing", &p, e))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| LabError::io("chmod", &p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::which;

    #[test]
    fn the_cpu_per_request_follows_the_quota() {
        let o = PosOpts::new(1, std::path::PathBuf::from("/bin/false"));
        let (p, i) = script_cpu(&o, Some(DEFAULT_QUOTA_CGI));
        assert_eq!((p, i), (o.page_cpu, o.image_cpu));
        let (p, i) = script_cpu(&o, Some(DEFAULT_QUOTA_CGI / 2.0));
        assert_eq!((p * 2, i * 2), (o.page_cpu, o.image_cpu));
    }

    /// The scripts, run by the PHP CGI binary, burn their CPU and print the site's bytes.
    #[test]
    fn scripts_burn_their_cpu_and_print_the_content() {
        let Some(php) = which("php-cgi8.2").or_else(|| which("php-cgi")) else {
            eprintln!("SKIP scripts_burn_their_cpu_and_print_the_content: no php-cgi");
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let content = tmp.path().join("img.bmp");
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&content, &bytes).unwrap();
        write_scripts(
            tmp.path(),
            Duration::from_millis(2),
            Duration::from_millis(30),
        )
        .unwrap();
        let run = |script: &str| {
            let t0 = os::cputime::children_cpu_time();
            let out = std::process::Command::new(&php)
                .args(["-n", "-q"])
                .arg(tmp.path().join(PHP_DIR).join(script))
                .env("CONTENT_FILE", &content)
                .env("REDIRECT_STATUS", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (out.stdout, os::cputime::children_cpu_time() - t0)
        };
        let (img, cpu) = run(IMAGE_SCRIPT);
        assert_eq!(img, bytes, "the image's bytes, in order");
        assert!(cpu >= Duration::from_millis(30), "{cpu:?}");
        let (page, _) = run(PAGE_SCRIPT);
        assert_eq!(page, bytes);
    }
}

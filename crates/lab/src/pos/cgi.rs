//! `triage lab pos --site cgi` (issue 16): seed 001's page with the HTML and the images both
//! produced by CPU-bound CGI scripts, so that the work the policy should order runs in
//! processes the kernel schedules, not in the server's gate.
//!
//! - **The site** ([`generate`]): every browser's directory `b<i>` holds executable Perl
//!   scripts named like the static site's files: `index.html` (the page: about `--page-cpu`
//!   of CPU, its start included, then the whole HTML in one write, as a page built from a
//!   template is) and `img<k>.bmp` (an image: about `--image-cpu` of CPU in [`IMAGE_BANDS`]
//!   bands, each band's bytes printed as soon as it is computed, the header block with the
//!   first). The bytes are the static site's (`_content/`). The content type is known only
//!   once a script prints it. The scripts read their own CPU clock with a raw `clock_gettime`
//!   system call (loading Perl's `Time::HiRes` alone costs about 5 ms of CPU).
//! - **The server** ([`serve_config`]): one site whose script directories are `/b<i>`, scripts
//!   run in the server's cgroup (`cgroups = false`), beside the hog: one leaf cgroup, one CPU
//!   budget, where a nice value orders them.
//! - **The variants** ([`variants`]): `fifo`, `content` (the content-type oracle: it learns
//!   the type only from the script's output, too late to order the script), `pos-rw<N>` (POS
//!   with the CGI lever: a script started for a marked worker runs at nice -20 until its worker
//!   loses the mark, `server::cgi::lever`), `pos-rw<N>-budget-tailyield-threads-back-program` (the
//!   lever with the rules that met the goal, [`DEFAULT_LEVER_SUFFIX`]; any other
//!   `pos-rw<N>-<flag>-...` runs when named, [`lever_of_suffix`]) and `pos-rw<N>-nolever`
//!   (the same POS without the lever: what it adds). nginx and Apache do not run this site.
//! - **The goals** ([`goals`]): pos with the lever >= 50% better mean t1 than fifo with mean
//!   t2 at most 10% worse; and the lever's share (the same POS without it).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::opts::PosOpts;
use super::plan::{slp_flag, triage_variant, Params};
use super::summary::VariantSummary;
use crate::error::{LabError, Result};
use crate::results::Goal;
use crate::runner::Variant;
use crate::site::{bmp, html, Site, SiteSpec};
use crate::util::toml_str;

/// Image sizes of `--site cgi` (bytes): script output is not compressed, and about this much
/// of the static site's images is left after gzip, so the 10 Mbit/s link stays as loaded.
pub const DEFAULT_IMAGE_BYTES: [usize; 4] = [8_000, 16_000, 24_000, 32_000];

/// Bands an image script computes and prints one after the other.
pub const IMAGE_BANDS: usize = 8;

/// Default server-side quota of `--site cgi` (fraction of one CPU) in exp 1: a page costs
/// about 4 x 10 + 3 ms of script CPU and about 1 ms of the server's per script, so 9 browsers
/// keep the side busy for about 2 s of each 5 s interval beside the hog (idle > SLP after).
pub const DEFAULT_QUOTA_CGI: f64 = 0.25;

/// The default quota of `--site cgi` in experiment `exp` (halved without the hog, as the
/// static site's).
pub fn default_quota(exp: u8) -> f64 {
    if exp == 1 {
        DEFAULT_QUOTA_CGI
    } else {
        DEFAULT_QUOTA_CGI * super::opts::RANDOM_QUOTA_SCALE
    }
}

/// The Perl that reads the script's own CPU time (seconds) with a raw system call.
fn cpu_clock_perl() -> String {
    let (nr, clock) = os::cputime::process_clock_syscall();
    format!(
        "my $ts = \"\\0\" x 16;\n\
         sub cpu {{ syscall({nr}, {clock}, $ts) == 0 or die \"clock_gettime: $!\"; \
         my ($s, $ns) = unpack(\"q q\", $ts); $s + $ns / 1e9 }}\n\
         my $x = 0;\n\
         sub burn {{ my $until = shift; while (cpu() < $until) {{ $x += $_ * 0.5 for 1 .. 100 }} }}\n"
    )
}

/// The page script: `cpu` of CPU, then the whole HTML in one write.
pub fn page_script(cpu: Duration) -> String {
    format!(
        "#!/usr/bin/perl\n\
         # triage lab pos --site cgi: the page. About {ms:.1} ms of CPU (its start included),\n\
         # then the HTML in one write.\n\
         {clock}\
         burn({s});\n\
         open(my $f, \"<\", \"../_content/index.html\") or die \"index.html: $!\";\n\
         binmode $f; local $/; my $body = <$f>;\n\
         binmode STDOUT;\n\
         print \"Content-Type: text/html\\r\\nContent-Length: \", length($body), \"\\r\\n\\r\\n\", $body;\n",
        ms = cpu.as_secs_f64() * 1e3,
        clock = cpu_clock_perl(),
        s = cpu.as_secs_f64(),
    )
}

/// The script of image `k`: `cpu` of CPU in [`IMAGE_BANDS`] bands, each printed once computed.
pub fn image_script(k: usize, cpu: Duration) -> String {
    format!(
        "#!/usr/bin/perl\n\
         # triage lab pos --site cgi: image {k}. About {ms:.1} ms of CPU (its start included) in\n\
         # {IMAGE_BANDS} bands, each printed as soon as it is computed.\n\
         {clock}\
         open(my $f, \"<\", \"../_content/img{k}.bmp\") or die \"img{k}.bmp: $!\";\n\
         binmode $f; local $/; my $img = <$f>;\n\
         binmode STDOUT; $| = 1;\n\
         my ($n, $bands) = (length($img), {IMAGE_BANDS});\n\
         my $out = \"Content-Type: image/bmp\\r\\nContent-Length: $n\\r\\n\\r\\n\";\n\
         for my $i (1 .. $bands) {{\n\
         \x20   burn({s} * $i / $bands);\n\
         \x20   my ($from, $to) = (int($n * ($i - 1) / $bands), int($n * $i / $bands));\n\
         \x20   print $out, substr($img, $from, $to - $from);\n\
         \x20   $out = \"\";\n\
         }}\n",
        ms = cpu.as_secs_f64() * 1e3,
        clock = cpu_clock_perl(),
        s = cpu.as_secs_f64(),
    )
}

fn write_exec(path: &Path, text: &str, mode: u32) -> Result<()> {
    std::fs::write(path, text).map_err(|e| LabError::io("writing", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| LabError::io("chmod", path, e))
}

/// Generate the CGI site under `dir`: `_content/` (the static site's bytes) and per browser
/// `b<i>/index.html` and `b<i>/img<k>.bmp` as executable scripts.
pub fn generate(
    dir: &Path,
    spec: &SiteSpec,
    page_cpu: Duration,
    image_cpu: Duration,
) -> Result<Site> {
    spec.validate()?;
    let content = dir.join("_content");
    std::fs::create_dir_all(&content).map_err(|e| LabError::io("creating", &content, e))?;
    let p = content.join("index.html");
    std::fs::write(&p, html(spec)).map_err(|e| LabError::io("writing", &p, e))?;
    for (k, &b) in spec.image_bytes.iter().enumerate() {
        let p = content.join(format!("img{k}.bmp"));
        std::fs::write(&p, bmp(b, spec.seed.wrapping_add(1 + k as u64)))
            .map_err(|e| LabError::io("writing", &p, e))?;
    }
    for b in 0..spec.browsers {
        let bd = dir.join(format!("b{b}"));
        std::fs::create_dir_all(&bd).map_err(|e| LabError::io("creating", &bd, e))?;
        write_exec(&bd.join("index.html"), &page_script(page_cpu), 0o755)?;
        for k in 0..spec.image_bytes.len() {
            write_exec(
                &bd.join(format!("img{k}.bmp")),
                &image_script(k, image_cpu),
                0o755,
            )?;
        }
    }
    Ok(Site {
        root: dir.to_path_buf(),
        spec: spec.clone(),
    })
}

/// The `triage serve --config` text of the CGI site: one site, `/b<i>` -> `b<i>` script
/// directories, scripts in the server's cgroup, a timeout long enough for a capped side.
pub fn serve_config(site: &Site) -> String {
    let root = site.root.display().to_string();
    let mut s = format!(
        "# generated by triage lab pos --site cgi\n[[site]]\nname = \"lab\"\nroot = {}\n\
         [site.cgi]\ntimeout = \"120s\"\ncgroups = false\ndirs = [\n",
        toml_str(&root)
    );
    for b in 0..site.spec.browsers {
        let d = site.root.join(format!("b{b}"));
        s.push_str(&format!(
            "  {{ url = \"/b{b}\", dir = {} }},\n",
            toml_str(&d.display().to_string())
        ));
    }
    s.push_str("]\n");
    s
}

/// Write [`serve_config`] next to the site; returns its path.
pub fn write_serve_config(site: &Site, dir: &Path) -> Result<PathBuf> {
    let p = dir.join("serve-cgi.toml");
    std::fs::write(&p, serve_config(site)).map_err(|e| LabError::io("writing", &p, e))?;
    Ok(p)
}

/// The variants of `--site cgi`, in order (see the module docs), as `--variants` filters them.
pub fn variants(p: &Params, o: &PosOpts) -> Vec<Variant> {
    let slp = slp_flag(p);
    let tail = super::opts::tail_name(p.pos_tail);
    let pos = |name: &str, rw: u32, lever: &str| {
        let r = rw.to_string();
        let mut a = vec![
            "--policy",
            "pos",
            "--slp",
            &slp,
            "--rw",
            &r,
            "--pos-tail",
            tail,
            "--cgi-lever",
            lever,
        ];
        if name.ends_with("-rest") {
            // The server's own threads too: raised at rest, lowered for unmarked bursts.
            a.extend(["--boost", "rest", "--boost-nice", "-20"]);
        }
        triage_variant(p, name, &a)
    };
    let mut v = vec![triage_variant(p, "fifo", &["--policy", "fifo"])];
    for &rw in &p.rw {
        v.push(pos(&format!("pos-rw{rw}"), rw, "nice"));
    }
    let rw0 = p.rw[0];
    if o.only.is_none() {
        let lever = lever_of_suffix(DEFAULT_LEVER_SUFFIX).expect("the default's flags are known");
        v.push(pos(
            &format!("pos-rw{rw0}-{DEFAULT_LEVER_SUFFIX}"),
            rw0,
            &lever,
        ));
    }
    v.push(pos(&format!("pos-rw{rw0}-nolever"), rw0, "off"));
    // The lever's further rules (`pos-rw<N>-<flag>-<flag>...`, each a flag of the server's
    // `--cgi-lever nice+<flag>+...`): when named.
    if let Some(only) = &o.only {
        let prefix = format!("pos-rw{rw0}-");
        for name in only {
            if let Some(lever) = name.strip_prefix(&prefix).and_then(lever_of_suffix) {
                v.push(pos(name, rw0, &lever));
            }
        }
    }
    // The CGI lever with the server's threads raised at rest: when named.
    let rest = format!("pos-rw{rw0}-rest");
    if o.only.as_ref().is_some_and(|only| only.contains(&rest)) {
        v.push(pos(&rest, rw0, "nice"));
    }
    v.push(triage_variant(p, "content", &["--policy", "content"]));
    if let Some(only) = &o.only {
        v.retain(|x| only.iter().any(|n| n == &x.name));
    }
    v
}

/// The lever's rules the lab runs by default beside the plain lever (`pos-rw<N>-<this>`,
/// `--cgi-lever nice+budget+tailyield+threads+back+program`): the back of the ready queue
/// (docs/kpos.md "The back of the ready queue") and the programs' previous executions
/// ("A program's previous executions": the mis-marked image scripts of a page no longer
/// start raised once their program has run).
pub const DEFAULT_LEVER_SUFFIX: &str = "budget-tailyield-threads-back-program";

/// The flags of the server's CGI lever a variant's name may join with `-` after
/// `pos-rw<N>-` (`--cgi-lever nice+<flag>+...`; the server's `CgiLever::FLAGS`, the same list:
/// the `triage` binary's tests compare them).
pub const LEVER_FLAGS: [&str; 11] = [
    "budget",
    "tail",
    "tailyield",
    "order",
    "newest",
    "threads",
    "textbelow",
    "back",
    "output",
    "preempt",
    "program",
];

/// The `--cgi-lever` of a variant named `pos-rw<N>-<suffix>`: `nice+` and the suffix's
/// flags, if every `-`-separated word of it is one of [`LEVER_FLAGS`].
pub fn lever_of_suffix(suffix: &str) -> Option<String> {
    let flags: Vec<&str> = suffix.split('-').collect();
    flags
        .iter()
        .all(|f| LEVER_FLAGS.contains(f))
        .then(|| format!("nice+{}", flags.join("+")))
}

/// Print where the CGI requests' time went per variant and class (the server's own timing:
/// means per request in ms).
pub fn print_breakdown(vs: &[VariantSummary]) {
    let mut head = false;
    for v in vs {
        let Some(t) = v.gate.as_ref().map(|g| &g.cgi_times) else {
            continue;
        };
        for class in ["text", "media"] {
            let Some(n) = t.get(&format!("{class}.n")) else {
                continue;
            };
            if !head {
                println!(
                    "where a CGI request's time goes (server side, mean ms per request; runq: \
                     runnable without a CPU, throttled time included; thr: of the part before, \
                     the time the server side's cgroup was throttled, its quota spent)"
                );
                println!(
                    "{:<18} {:<6} {:>6} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>7} {:>7} {:>6} \
                     {:>6} {:>7} {:>6}",
                    "variant",
                    "class",
                    "n/run",
                    "raised",
                    "gate",
                    "thr",
                    "start",
                    "thr",
                    "run",
                    "runq",
                    "blocked",
                    "thr",
                    "relay",
                    "total",
                    "thr"
                );
                head = true;
            }
            let g = |p: &str| t.get(&format!("{class}.{p}")).copied().unwrap_or(f64::NAN);
            println!(
                "{:<18} {:<6} {:>6.1} {:>6.0}% {:>7.1} {:>6.1} {:>6.1} {:>6.1} {:>6.2} {:>7.1} \
                 {:>7.1} {:>6.1} {:>6.1} {:>7.1} {:>6.1}",
                v.name,
                class,
                n,
                g("raised") * 100.0,
                g("gate"),
                g("thr_gate"),
                g("start"),
                g("thr_start"),
                g("run"),
                g("runq"),
                g("blocked"),
                g("thr_life"),
                g("relay"),
                g("total"),
                g("thr_total"),
            );
        }
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:+.1}%"))
}

fn ci(v: &VariantSummary) -> String {
    v.t1_mean_improvement
        .as_ref()
        .and_then(|i| i.ci95)
        .map_or("no ci95 (one repetition)".into(), |c| {
            format!("ci95 [{:+.1}%, {:+.1}%]", c.low * 100.0, c.high * 100.0)
        })
}

/// The goals of `--site cgi` (see the module docs).
pub fn goals(vs: &[VariantSummary]) -> Vec<Goal> {
    let goal = "cgi site: POS with the kernel lever improves mean t1 by >= 50% over fifo with \
                mean t2 at most 10% worse";
    let lever: Vec<&VariantSummary> = vs
        .iter()
        .filter(|v| v.name.starts_with("pos") && !v.name.ends_with("-nolever"))
        .filter(|v| v.t1_mean_improvement_pct.is_some())
        .collect();
    let by_t1 = |a: &&&VariantSummary, b: &&&VariantSummary| {
        a.t1_mean_improvement_pct
            .unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&b.t1_mean_improvement_pct.unwrap_or(f64::NEG_INFINITY))
    };
    let within = |v: &&&VariantSummary| {
        v.t1_mean_improvement_pct.is_some_and(|t| t >= 50.0)
            && v.t2_mean_improvement_pct.is_some_and(|t| t >= -10.0)
    };
    let best = lever
        .iter()
        .filter(within)
        .max_by(by_t1)
        .or_else(|| lever.iter().max_by(by_t1));
    let mut out = Vec::new();
    match best {
        Some(b) => {
            let raised = b.gate.as_ref().map_or(0.0, |g| g.scripts_raised);
            let lowered = b.gate.as_ref().map_or(0.0, |g| g.scripts_lowered);
            let by_budget = b.gate.as_ref().map_or(0.0, |g| g.scripts_lowered_budget);
            let t1 = b.t1_mean_improvement_pct.unwrap_or(f64::NAN);
            let t2 = b.t2_mean_improvement_pct.unwrap_or(f64::NAN);
            out.push(Goal {
                goal: goal.into(),
                met: t1 >= 50.0 && t2 >= -10.0 && raised > 0.0,
                detail: format!(
                    "{}: mean t1 {} ({}), mean t2 {}; the lever raised {raised:.0} scripts per \
                     run and restored {lowered:.0} while they ran ({by_budget:.0} by their own \
                     CPU time)",
                    b.name,
                    pct(Some(t1)),
                    ci(b),
                    pct(Some(t2)),
                ),
            });
        }
        None => out.push(Goal {
            goal: goal.into(),
            met: false,
            detail: "no POS variant with the lever was measured".into(),
        }),
    }
    for v in vs.iter().filter(|v| v.name.ends_with("-nolever")) {
        let with = v.name.trim_end_matches("-nolever");
        let Some(w) = vs.iter().find(|x| x.name == with) else {
            continue;
        };
        let (a, b) = (
            w.t1.as_ref().map(|s| s.mean_ms),
            v.t1.as_ref().map(|s| s.mean_ms),
        );
        out.push(Goal {
            goal: format!(
                "cgi site: what the kernel lever adds ({with} against {})",
                v.name
            ),
            met: a.is_some() && b.is_some(),
            detail: format!(
                "mean t1 {} ms with the lever, {} ms without; against fifo: {} ({}) with, {} \
                 ({}) without; mean t2 against fifo {} with, {} without",
                a.map_or("-".into(), |x| format!("{x:.1}")),
                b.map_or("-".into(), |x| format!("{x:.1}")),
                pct(w.t1_mean_improvement_pct),
                ci(w),
                pct(v.t1_mean_improvement_pct),
                ci(v),
                pct(w.t2_mean_improvement_pct),
                pct(v.t2_mean_improvement_pct),
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_burn_their_cpu_and_print_the_sites_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = SiteSpec {
            browsers: 2,
            html_bytes: 1024,
            image_bytes: vec![3000, 5000],
            seed: 3,
        };
        let site = generate(
            tmp.path(),
            &spec,
            Duration::from_millis(3),
            Duration::from_millis(10),
        )
        .unwrap();
        let run = |script: &str| {
            let out = std::process::Command::new(site.root.join(script))
                .current_dir(site.root.join(Path::new(script).parent().unwrap()))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let page = run("b1/index.html");
        let split = page.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&page[..split]);
        assert!(head.contains("Content-Type: text/html"), "{head}");
        assert_eq!(&page[split + 4..], &html(&spec)[..]);
        let img = run("b0/img1.bmp");
        let split = img.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        assert!(String::from_utf8_lossy(&img[..split]).contains("image/bmp"));
        assert_eq!(&img[split + 4..], &bmp(5000, 3 + 2)[..]);
        // The configuration names every browser's script directory, scripts in the
        // server's cgroup.
        let c = serve_config(&site);
        assert!(
            c.contains("url = \"/b1\"") && c.contains("cgroups = false"),
            "{c}"
        );
        assert_eq!(c.matches("url = ").count(), 2, "{c}");
    }

    #[test]
    fn variants_compare_the_lever_with_the_same_pos_without_it() {
        let mut o = PosOpts::new(1, PathBuf::from("/bin/false"));
        o.site = super::super::opts::SiteKind::Cgi;
        o.quick = true;
        let p = super::super::plan::resolve(&o).unwrap();
        assert_eq!(p.quota, Some(DEFAULT_QUOTA_CGI));
        assert_eq!(p.site.image_bytes, DEFAULT_IMAGE_BYTES);
        let v = variants(&p, &o);
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "fifo",
                "pos-rw3",
                "pos-rw3-budget-tailyield-threads-back-program",
                "pos-rw3-nolever",
                "content"
            ]
        );
        let args = |n: &str| match &v.iter().find(|x| x.name == n).unwrap().server {
            crate::runner::ServerKind::Triage { args } => args.clone(),
            _ => panic!("not triage"),
        };
        assert!(args("pos-rw3")
            .windows(2)
            .any(|w| w == ["--cgi-lever", "nice"]));
        assert!(args("pos-rw3-budget-tailyield-threads-back-program")
            .windows(2)
            .any(|w| w == ["--cgi-lever", "nice+budget+tailyield+threads+back+program"]));
        assert!(args("pos-rw3-nolever")
            .windows(2)
            .any(|w| w == ["--cgi-lever", "off"]));
        assert!(v.iter().all(|v| v.hog), "exp 1: the hog in the same budget");
        // The server's threads raised at rest beside the CGI lever: only when named.
        o.only = Some(vec!["fifo".into(), "pos-rw3-rest".into()]);
        let v = variants(&p, &o);
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["fifo", "pos-rw3-rest"]);
        let crate::runner::ServerKind::Triage { args } = &v[1].server else {
            panic!("not triage")
        };
        let a = args.join(" ");
        assert!(
            a.contains("--cgi-lever nice") && a.contains("--boost rest --boost-nice -20"),
            "{a}"
        );
        // The budget and the tail: only when named, each with its lever.
        o.only = Some(vec![
            "pos-rw3-budget".into(),
            "pos-rw3-budget-tailyield".into(),
            "pos-rw3-budget-tailyield-threads".into(),
            "pos-rw3-budget-tailyield-textbelow".into(),
            "pos-rw3-budget-tailyield-bogus".into(),
        ]);
        let v = variants(&p, &o);
        let levers: Vec<String> = v
            .iter()
            .map(|v| match &v.server {
                crate::runner::ServerKind::Triage { args } => {
                    let i = args.iter().position(|a| a == "--cgi-lever").unwrap();
                    format!("{}={}", v.name, args[i + 1])
                }
                _ => panic!("not triage"),
            })
            .collect();
        assert_eq!(
            levers,
            [
                "pos-rw3-budget=nice+budget",
                "pos-rw3-budget-tailyield=nice+budget+tailyield",
                "pos-rw3-budget-tailyield-threads=nice+budget+tailyield+threads",
                "pos-rw3-budget-tailyield-textbelow=nice+budget+tailyield+textbelow"
            ]
        );
    }
}

//! `triage load`: emulate browsers against a server and measure what users feel (t1, t2).
//! The options are `loadgen::LoadOpts` (defined once, in the library); this file is glue.

use super::UsageError;

/// Arguments of `triage load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: loadgen::LoadOpts,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let o = &args.opts;
    let usage = |e: loadgen::LoadError| -> anyhow::Error {
        match e {
            loadgen::LoadError::Config(m) => UsageError(m).into(),
            e => anyhow::Error::new(e),
        }
    };
    let cfg = o.config().map_err(usage)?;
    let report = loadgen::run_blocking(cfg, o.threads).map_err(usage)?;
    if let Some(dir) = &o.out {
        report.write_dir(dir)?;
        if !o.quiet {
            eprintln!(
                "wrote {}/{{pages.csv,summary.json,config.json}}",
                dir.display()
            );
        }
    }
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
    } else if !o.quiet {
        print!("{}", report.table());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        super::super::parse_args(args)
    }

    #[test]
    fn inconsistent_flags_are_usage_errors() {
        let e = run(parse(&["http://h/", "--rate", "5"]).unwrap()).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some(), "{e:#}");
        assert!(e.to_string().contains("--rate"), "{e}");
    }

    #[test]
    fn network_failures_are_counted_not_fatal() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let dir = tempfile::tempdir().unwrap();
        let url = format!("http://127.0.0.1:{port}/");
        let a = parse(&[
            &url,
            "--pages",
            "2",
            "-q",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .unwrap();
        run(a).unwrap();
        let s = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["pages"], 2);
        assert_eq!(v["errors"], 2);
        let rows = loadgen::pages::read_csv(
            &std::fs::read_to_string(dir.path().join("pages.csv")).unwrap(),
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| !r.ok() && !r.error.is_empty()));
    }
}

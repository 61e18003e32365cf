//! `triage pos`: POS outside triage's own gate. `attach` follows processes triage did not
//! start and passes POS's decision on to the kernel (`pos_attach.rs`).

use clap::Subcommand;

/// Arguments of `triage pos`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: PosCmd,
}

#[derive(Subcommand, Debug)]
enum PosCmd {
    /// Follow running processes (a pid and its children, a cgroup, or an executable name),
    /// classify their run/wait behaviour with POS, and raise the ones predicted to serve text
    /// in the kernel (nice, nice + short slice, or a high-weight cgroup); everything raised is
    /// restored on exit, on SIGINT/SIGTERM, and after a crash on the next start.
    Attach(Box<super::pos_attach::Args>),
}

/// Run `triage pos`.
pub fn run(a: Args) -> anyhow::Result<()> {
    match a.cmd {
        PosCmd::Attach(a) => super::pos_attach::run(*a),
    }
}

//! `triage serve` (being written).

/// Arguments of `triage serve`.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`triage serve` is not implemented yet")
}

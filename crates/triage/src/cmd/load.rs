//! `triage load` (being written).

/// Arguments of `triage load`.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`triage load` is not implemented yet")
}

//! `triage sim` (being written).

/// Arguments of `triage sim`.
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`triage sim` is not implemented yet")
}

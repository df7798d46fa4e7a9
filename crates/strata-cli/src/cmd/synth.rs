//! `strata synth` (being built; see the open issue).

/// Arguments (being built).
#[derive(clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("this command is not built yet")
}

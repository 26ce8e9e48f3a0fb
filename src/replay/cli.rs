//! Command-line surface of `tearline replay`.

use std::process::ExitCode;

/// Arguments of `tearline replay`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline replay`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline replay is not built yet"))
}

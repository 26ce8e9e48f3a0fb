//! Command-line surface of `tearline report`.

use std::process::ExitCode;

/// Arguments of `tearline report`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline report`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline report is not built yet"))
}

//! Command-line surface of `tearline proxy`.

use std::process::ExitCode;

/// Arguments of `tearline proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline proxy`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline proxy is not built yet"))
}

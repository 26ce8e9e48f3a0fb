//! Command-line surface of `tearline serve`.

use std::process::ExitCode;

/// Arguments of `tearline serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline serve`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline serve is not built yet"))
}

//! Command-line surface of `tearline load`.

use std::process::ExitCode;

/// Arguments of `tearline load`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline load`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline load is not built yet"))
}

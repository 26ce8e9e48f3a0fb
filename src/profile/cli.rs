//! Command-line surface of `tearline profiles`.

use std::process::ExitCode;

/// Arguments of `tearline profiles`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tearline profiles`.
pub async fn run(_args: Args) -> Result<ExitCode, std::io::Error> {
    Err(std::io::Error::other("tearline profiles is not built yet"))
}

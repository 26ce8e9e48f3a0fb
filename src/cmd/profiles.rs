//! Command-line surface of `tearline profiles`: list the shipped profiles, validate files.
//!
//! Output contract: `list` prints one line per `*.toml` file of the directory, sorted by name
//! (`name  description`); `validate` prints `FILE: ok` per valid file and the located error
//! (`FILE:LINE:COLUMN: message`) per invalid one. Both exit non-zero if any file is invalid.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::profile::ProfileError;

/// Arguments of `tearline profiles`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline profiles list                         # the profiles shipped in ./profiles
  tearline profiles list --dir /etc/tearline     # another directory
  tearline profiles validate profiles/reset-250ms.toml
  tearline profiles validate my/*.toml           # exit status 1 if any file is invalid

Every key of a profile is documented in profiles/README.md.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `tearline profiles` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the profiles of a directory with their one-line description.
    List {
        /// Directory to list.
        #[arg(long, default_value = "profiles")]
        dir: PathBuf,
    },
    /// Check profile files: prints `ok` or the precise error (file:line:column) per file.
    Validate {
        /// Profile files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// `tearline profiles` failed before it could judge a profile.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The directory could not be listed.
    #[error("cannot list {path}: {source}")]
    ListDir {
        /// The directory.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Standard output or error could not be written.
    #[error("cannot write output: {0}")]
    Output(#[source] std::io::Error),
}

/// Runs `tearline profiles`.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let ok = match args.command {
        Command::List { dir } => list(&dir, &mut out)?,
        Command::Validate { files } => validate(&files, &mut out)?,
    };
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes one line per profile of `dir`; returns whether every one is valid.
pub fn list(dir: &Path, out: &mut dyn Write) -> Result<bool, CliError> {
    let list_err = |source| CliError::ListDir {
        path: dir.display().to_string(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(list_err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let width = files
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().chars().count()))
        .max()
        .unwrap_or(0);
    let mut all_ok = true;
    for path in &files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        let line = match crate::profile::load(path) {
            Ok(p) => p.description.unwrap_or_else(|| "(no description)".into()),
            Err(e) => {
                all_ok = false;
                format!("INVALID: {e}")
            }
        };
        writeln!(out, "{name:<width$}  {line}").map_err(CliError::Output)?;
    }
    Ok(all_ok)
}

/// Validates each file; writes `FILE: ok` or the error; returns whether all are valid.
pub fn validate(files: &[PathBuf], out: &mut dyn Write) -> Result<bool, CliError> {
    let mut all_ok = true;
    for path in files {
        match crate::profile::load(path) {
            Ok(p) => writeln!(
                out,
                "{}: ok ({} proxies, {} faults)",
                path.display(),
                p.proxies.len(),
                p.faults.len()
            ),
            Err(e @ (ProfileError::Invalid { .. } | ProfileError::Read { .. })) => {
                all_ok = false;
                writeln!(out, "{e}")
            }
        }
        .map_err(CliError::Output)?;
    }
    Ok(all_ok)
}

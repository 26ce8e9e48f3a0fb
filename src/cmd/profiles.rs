//! Command-line surface of `tearline profiles`: list the shipped profiles (built into the
//! binary, so from any directory) or a directory's, print one, validate files.
//!
//! Output contract: `list` prints one line per profile, sorted by name (`name  description`);
//! `show NAME` prints a shipped profile's TOML as shipped; `validate` prints `FILE: ok` per
//! valid file and the located error (`FILE:LINE:COLUMN: message`) per invalid one. An invalid
//! profile exits 2, as every other error. Output into a closed pipe (`| head`) ends quietly
//! (the caller of `run` sees the broken pipe and exits 0).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::profile::ProfileError;

/// Arguments of `tearline profiles`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline profiles list                         # the shipped profiles (built in)
  tearline profiles list --dir profiles          # the profiles of a directory
  tearline profiles show gateway-idle-kill > my.toml   # a shipped profile, to start from
  tearline profiles validate profiles/reset-250ms.toml
  tearline profiles validate my.toml             # exit status 2 if any file is invalid

Every key of a profile is documented in profiles/README.md.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `tearline profiles` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the shipped profiles (or a directory's) with their one-line description.
    List {
        /// List the `*.toml` files of this directory instead of the built-in ones.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print a shipped profile's TOML (to copy and edit).
    Show {
        /// Its name, as `list` prints it.
        name: String,
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
    #[error("cannot list {path}")]
    ListDir {
        /// The directory.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Standard output or error could not be written.
    #[error("cannot write output")]
    Output(#[source] std::io::Error),
    /// `show` named no shipped profile.
    #[error("no shipped profile is named '{name}' (shipped: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The shipped names.
        known: String,
    },
}

/// Runs `tearline profiles`.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let ok = match args.command {
        Command::List { dir: Some(dir) } => list(&dir, &mut out)?,
        Command::List { dir: None } => list_shipped(&mut out)?,
        Command::Show { name } => {
            let text = crate::profile::shipped::text(&name).ok_or_else(|| CliError::Unknown {
                name: name.clone(),
                known: crate::profile::shipped::names(),
            })?;
            out.write_all(text.as_bytes()).map_err(CliError::Output)?;
            true
        }
        Command::Validate { files } => validate(&files, &mut out)?,
    };
    out.flush().map_err(CliError::Output)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Writes one line per shipped profile; returns whether every one is valid.
pub fn list_shipped(out: &mut dyn Write) -> Result<bool, CliError> {
    let width = crate::profile::shipped::SHIPPED
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let mut all_ok = true;
    for (name, text) in crate::profile::shipped::SHIPPED {
        let line = match crate::profile::parse(text, name) {
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

//! The `tearline` command line. Each subcommand lives in its module's `cli.rs`; this file only
//! parses, sets up logging and maps errors to exit codes (anyhow is used here and nowhere else).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

#[cfg(test)]
#[path = "cli_examples.rs"]
mod cli_examples;

/// tearline: a fault-injecting TCP chaos proxy that knows SSE.
///
/// It cuts streaming HTTP (Server-Sent Events, MCP Streamable HTTP) connections at chosen
/// positions inside events, then judges how clients and servers resume.
#[derive(Debug, Parser)]
#[command(name = "tearline", version, propagate_version = true)]
#[command(after_help = "Examples:
  tearline replay                                   # the 250 ms reset load test, lab server included
  tearline proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080
  tearline proxy --profile profiles/reset-250ms.toml --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080
  tearline serve --listen 127.0.0.1:8931
  tearline profiles list")]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    /// More log lines on stderr: -v info, -vv debug, -vvv trace. The default is warn for
    /// `replay`, `report` and `profiles` (their output is the story and the summary) and info
    /// for the servers; RUST_LOG, when set, overrides both.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once at start; boxing the largest (proxy) arguments would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Relay TCP through faults (one proxy, or several from a profile).
    Proxy(tearline::cmd::proxy::Args),
    /// Run the lab MCP Streamable HTTP server.
    Serve(tearline::cmd::serve::Args),
    /// Drive MCP sessions against a server and measure them.
    Load(tearline::cmd::load::Args),
    /// Run the 250 ms reset load test end to end and write reports.
    Replay(tearline::cmd::replay::Args),
    /// Work with report files (merge interval logs, show a report).
    Report(tearline::cmd::report::Args),
    /// List and validate fault profiles.
    Profiles(tearline::cmd::profiles::Args),
    /// toxiproxy-server's command line (-host, -port, -config FILE, -seed): the control API
    /// as a drop-in for toxiproxy-server (also when the binary is named toxiproxy-server).
    #[command(name = "toxiproxy-server", disable_help_flag = true)]
    ToxiproxyServer {
        /// toxiproxy-server flags, as its Go flag package reads them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<String>,
    },
}

/// The log level without RUST_LOG: the command's default, raised by each `-v`.
fn default_level(command: &Command, verbose: u8) -> &'static str {
    const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
    let base = match command {
        Command::Replay(_) | Command::Report(_) | Command::Profiles(_) => 1,
        Command::Proxy(_)
        | Command::Serve(_)
        | Command::Load(_)
        | Command::ToxiproxyServer { .. } => 2,
    };
    LEVELS[(base + usize::from(verbose)).min(LEVELS.len() - 1)]
}

fn init_logging(format: LogFormat, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colours only for a person reading a terminal, never into a file or a pipe.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    Ok(match command {
        Command::Proxy(a) => tearline::cmd::proxy::run(a).await.context("proxy")?,
        Command::Serve(a) => tearline::cmd::serve::run(a).await.context("serve")?,
        Command::Load(a) => tearline::cmd::load::run(a).await.context("load")?,
        Command::Replay(a) => tearline::cmd::replay::run(a).await.context("replay")?,
        Command::Report(a) => tearline::cmd::report::run(a).await.context("report")?,
        Command::Profiles(a) => tearline::cmd::profiles::run(a).await.context("profiles")?,
        Command::ToxiproxyServer { flags } => tearline::cmd::toxiproxy_server::run(flags)
            .await
            .context("toxiproxy-server")?,
    })
}

/// The error's chain on one line, outermost first, joined by ": "; a cause whose text the
/// message before it already ends with (an error that prints its source, as many library
/// errors do for their logs) is not said twice.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// True if and only if `e` comes from writing into a pipe nobody reads any more.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `println!` panics when standard output is a pipe whose reader left (`tearline … | head`):
/// that ends the program quietly with 0, as for any tool whose reader had enough; every other
/// panic is reported as usual.
fn quiet_on_broken_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.contains("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info);
    }));
}

#[tokio::main]
async fn main() -> ExitCode {
    quiet_on_broken_stdout();
    // Started as `toxiproxy-server` or `toxiproxy` (the entrypoint of Toxiproxy's image, a
    // link in deploy/Dockerfile.toxiproxy): toxiproxy-server's command line.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "toxiproxy-server" || n == "toxiproxy");
    if invoked {
        argv.insert(1, "toxiproxy-server".into());
    }
    let cli = Cli::parse_from(argv);
    init_logging(cli.log_format, default_level(&cli.command, cli.verbose));
    match dispatch(cli.command).await {
        Ok(code) => code,
        // The reader went away (`| head`): what it wanted it has; end quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the context chain, outermost first, each cause said once.
            eprintln!("tearline: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod one_line_tests {
    use super::one_line;

    #[derive(Debug, thiserror::Error)]
    #[error("TLS configuration: {0}")]
    struct Says(#[source] std::io::Error);

    #[test]
    fn a_cause_the_message_already_says_is_said_once() {
        let io = || std::io::Error::other("no such file");
        let e = anyhow::Error::new(Says(io())).context("proxy");
        assert_eq!(one_line(&e), "proxy: TLS configuration: no such file");
        let e = anyhow::Error::new(io())
            .context("cannot list x")
            .context("profiles");
        assert_eq!(one_line(&e), "profiles: cannot list x: no such file");
    }
}

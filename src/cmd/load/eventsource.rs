//! `tearline load --client eventsource`: one browser-like EventSource ([`crate::load::eventsource`])
//! against --target, and its outcome on stdout (text or JSON).
//!
//! Invariants: flags of the MCP client that mean nothing here are rejected when they would
//! change behaviour (`--client-bug`, `--policy` other than strict); the exit is an error when
//! the feed did not complete (a refused stream, or the connection or time budget spent), so a
//! script can tell a recovered feed from a lost one.

use std::process::ExitCode;

use super::{Args, CliError};
use crate::load::config::Policy;
use crate::load::eventsource::{EventSourceConfig, EventSourceOutcome, run as run_client};

/// The client configuration the flags describe.
pub fn config(args: &Args) -> Result<EventSourceConfig, CliError> {
    if args.client_bug.is_some() {
        return Err(CliError::Flags(
            "--client-bug is for the MCP client; the EventSource client has none",
        ));
    }
    if args.policy.0 != [Policy::Strict] {
        return Err(CliError::Flags(
            "--policy is for the MCP client; the EventSource client behaves as a browser does",
        ));
    }
    Ok(EventSourceConfig {
        url: super::target(args)?,
        side_path: args.side_path.clone(),
        max_connections: args.max_attempts.max(1),
        timeout: args.timeout,
        backoff: args.backoff,
        truth: None,
    })
}

/// The outcome as one line of text.
pub fn text(o: &EventSourceOutcome) -> String {
    format!(
        "eventsource: {} event(s) dispatched over {} connection(s); feed complete: {}{}\n",
        o.events,
        o.connections,
        if o.complete { "yes" } else { "no" },
        o.failed_status
            .map_or(String::new(), |s| format!("; refused with status {s}"))
    )
}

/// Runs the client and prints its outcome.
pub async fn run(args: &Args) -> Result<ExitCode, CliError> {
    let cfg = config(args)?;
    let out = run_client(&cfg).await;
    if args.json {
        println!(
            "{:#}",
            serde_json::to_value(&out).unwrap_or(serde_json::Value::Null)
        );
    } else {
        print!("{}", text(&out));
    }
    if out.complete {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::Incomplete(match out.failed_status {
            Some(s) => format!("the stream request was answered {s}"),
            None => format!("{} connection(s) used", out.connections),
        }))
    }
}

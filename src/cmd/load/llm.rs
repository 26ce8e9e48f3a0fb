//! `tearline load` against an LLM endpoint: a `--target` whose path names an LLM API
//! (`…/v1/chat/completions`, `…/v1/responses`, `…/v1/messages`) runs the LLM load client
//! (`load::llm`) instead of MCP sessions, with the same `--sessions`, `--calls`/`--duration`,
//! `--rate`, `--policy`, `--max-attempts`, `--timeout`, `--backoff`, `--seed` and
//! `--report-dir`, plus the `--llm-*` flags here.
//!
//! Every invocation draws a random run id (printed on stderr, in `--json` and in the report's
//! `facts.run_id`) that every request's key and prompt carry with the phase's policy: a proxy
//! that sees several runs, or both phases of `--policy both`, never takes one run's request
//! for a re-send of another's.
//!
//! Invariant: the API key is read from the environment variable `--api-key-env` names, never
//! from the command line (which other users may see), and never printed or written.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::{Args, CliError};
use crate::load::config::{Stop, Target};
use crate::load::llm::{LlmExtras, LlmLoadConfig};
use crate::load::{LoadOutcome, summary};
use crate::report::names::{LLM_NAMES, LLM_TPOT, events_per_s};

/// Flags of the LLM load client.
#[derive(Debug, Clone, clap::Args)]
pub struct LlmFlags {
    /// LLM endpoints: `model` of every request.
    #[arg(long, default_value = "tearline-lab")]
    pub llm_model: String,
    /// LLM endpoints: output token limit of every request.
    #[arg(long, default_value_t = 1024)]
    pub llm_max_tokens: u32,
    /// LLM endpoints: offer a `get_weather` tool the answer must call (tool-call streams).
    #[arg(long)]
    pub llm_tools: bool,
    /// LLM endpoints: the environment variable holding the API key to send (as
    /// `Authorization: Bearer`, and `x-api-key` for /v1/messages), e.g. OPENAI_API_KEY.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
}

/// Runs the LLM load client for every policy `args` names.
pub async fn run(args: &Args, target: Target) -> Result<ExitCode, CliError> {
    // `retry` (or `--reissue-unsafe`) is `strict` here: LLM requests carry no annotations.
    let policies = &args.policy.0;
    let labels: Vec<&str> = policies.iter().map(|p| p.as_str()).collect();
    super::verdict::check_before(args, &labels, true)?;
    let api_key = match &args.llm.api_key_env {
        None => None,
        Some(var) => Some(std::env::var(var).map_err(|_| {
            CliError::Flags("--api-key-env names an environment variable that is not set")
        })?),
    };
    // One run id per invocation: its phases differ by policy in every key and prompt.
    let run_id: u64 = rand::random();
    let ran = super::per_policy(policies.iter().copied(), |policy, shutdown| {
        let cfg = config(args, &target, policy, &api_key).map(|mut c| {
            c.run_id = run_id;
            c
        });
        async move {
            let cfg = cfg?;
            Ok(crate::load::llm::run(cfg, shutdown).await?)
        }
    })
    .await?;
    let interruption = ran.interruption(ran.done.last().map(|(o, _)| o.policy.to_string()));
    let interrupted = ran.interrupted.is_some();
    let exit = ran.exit(ExitCode::SUCCESS);
    let (outcomes, extras): (Vec<LoadOutcome>, Vec<LlmExtras>) = ran.done.into_iter().unzip();
    super::write_report(
        args,
        &outcomes,
        &target,
        Some(format!("{run_id:016x}")),
        interruption.as_ref(),
    )?;
    eprintln!(
        "tearline load: run id {run_id:016x} (every request's key is tl-llm-{run_id:016x}-<policy>-<call>)"
    );
    if args.json {
        let mut v = summary::json(&outcomes);
        v["run_id"] = format!("{run_id:016x}").into();
        super::mark_interrupted(&mut v, interruption.as_ref());
        if let Some(list) = v.get_mut("runs").and_then(|p| p.as_array_mut()) {
            for (p, x) in list.iter_mut().zip(&extras) {
                p["output_tokens"] = x.tokens.into();
                p["tokens_per_s"] = x.tokens_per_s.into();
            }
        }
        println!("{v:#}");
    } else {
        if let Some(i) = &interruption {
            println!("{}", i.line());
        }
        print!("{}", text(&outcomes, &extras));
    }
    if interrupted {
        super::verdict::not_evaluated(args);
        return Ok(exit);
    }
    super::verdict::judge(args, &outcomes, &target)
}

/// The LLM load client's configuration for `policy` from the flags.
fn config(
    args: &Args,
    target: &Target,
    policy: crate::load::config::Policy,
    api_key: &Option<String>,
) -> Result<LlmLoadConfig, CliError> {
    let mut cfg = LlmLoadConfig::new(target.clone(), policy)?;
    cfg.sessions = args.sessions;
    cfg.stop = match (args.calls, args.duration) {
        (Some(n), _) => Stop::Calls(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(std::time::Duration::from_secs(10)),
    };
    cfg.rate = args.rate;
    cfg.model.clone_from(&args.llm.llm_model);
    cfg.max_tokens = args.llm.llm_max_tokens;
    cfg.tools = args.llm.llm_tools;
    cfg.api_key.clone_from(api_key);
    cfg.max_attempts = args.max_attempts;
    cfg.idle_timeout = args.timeout;
    cfg.connect_timeout = args.connect_timeout;
    cfg.backoff = args.backoff;
    Ok(cfg)
}

/// One counter row of the summary: its label and how to read it from an outcome.
type Row = (&'static str, fn(&LoadOutcome) -> u64);

/// One line of the summary: `label` in 22 columns, then one right-aligned 14-column cell per
/// policy.
fn row<T: std::fmt::Display>(out: &mut String, label: &str, cells: impl Iterator<Item = T>) {
    let _ = write!(out, "{label:<22}");
    for c in cells {
        let _ = write!(out, "{c:>14}");
    }
    out.push('\n');
}

/// The summary: counters, tokens, and the LLM latencies (ms) per policy.
pub fn text(outcomes: &[LoadOutcome], extras: &[LlmExtras]) -> String {
    let mut out = String::new();
    row(&mut out, "", outcomes.iter().map(|o| o.policy.as_str()));
    let rows: [Row; 4] = [
        ("requests", |o| o.counters.calls),
        ("complete", |o| o.counters.ok),
        ("failed (visible)", |o| o.counters.failed),
        ("truncated, accepted", |o| o.counters.silent_loss),
    ];
    for (name, get) in rows {
        row(&mut out, name, outcomes.iter().map(get));
    }
    row(
        &mut out,
        "truncations detected",
        extras.iter().map(|x| x.truncations),
    );
    row(
        &mut out,
        "re-sends",
        outcomes.iter().map(|o| o.counters.reissued),
    );
    row(&mut out, "output tokens", extras.iter().map(|x| x.tokens));
    let per_s = extras.iter().map(|x| format!("{:.1}", x.tokens_per_s));
    row(&mut out, "output tokens/s", per_s);
    out.push_str("\nlatency (ms)                 count      p50      p90      p99      max\n");
    for o in outcomes {
        for name in LLM_NAMES {
            let Some(h) = o.histograms.get(name).filter(|h| !h.is_empty()) else {
                continue;
            };
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            let _ = writeln!(
                out,
                "{:<6} {:<21} {:>6} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                o.policy.as_str(),
                name,
                h.len(),
                ms(0.5),
                ms(0.9),
                ms(0.99),
                h.max() as f64 / 1000.0
            );
        }
        if let Some(h) = o.histograms.get(LLM_TPOT).filter(|h| !h.is_empty()) {
            let _ = writeln!(
                out,
                "{:<6} {:<21} {:>6} {:>8.1} (tokens/s of the median answer)",
                o.policy.as_str(),
                "tokens/s",
                h.len(),
                events_per_s(h.value_at_quantile(0.5))
            );
        }
    }
    out
}

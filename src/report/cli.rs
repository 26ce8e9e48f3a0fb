//! Command-line surface of `tearline report`: `merge` interval logs, `show` a saved report.
//!
//! Why: loads from several machines are merged into one `.hlog`, and a saved `report.json` is
//! re-read (summary printed, thresholds checked) in CI without rerunning the test.
//! Invariants: `show` exits 0 when every `--fail-on` threshold holds and 99 when one fails;
//! errors (unreadable files, malformed thresholds, unknown names) are returned and become exit
//! 2 in `main`; malformed thresholds are rejected while parsing arguments, before any file is
//! read.

use std::path::PathBuf;
use std::process::ExitCode;

use super::thresholds::{self, Threshold};
use super::{ReportError, hlog, json, summary};

/// Arguments of `tearline report`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline report show tearline-report/20261130T030405Z/report.json
  tearline report show report.json --fail-on 'silent-loss>0' --fail-on 'p99(call)>2s'
  tearline report merge load-a/report.hlog load-b/report.hlog -o all.hlog

Exit status: 0 when every threshold holds, 99 when a threshold fails, 2 on errors.")]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Merge interval logs (.hlog) from several machines into one, losslessly.
    ///
    /// Every interval of every input is kept with its tag, re-based onto the earliest input's
    /// start, in time order; the per-tag totals of the result equal the sum of the inputs.
    /// Prints the per-tag totals (count and percentiles) of the merged log.
    Merge(MergeArgs),
    /// Print the summary of a saved report.json and check thresholds.
    ///
    /// Thresholds name the condition that FAILS the run, e.g. `silent-loss>0`.
    /// Counts: calls ok failed silent-loss torn-detections resumes renegotiations duplicates
    /// gaps reorders explicit-errors (summed over policies, or POLICY.NAME such as
    /// naive.silent-loss); finding kinds such as torn-cut, cursor-ahead, fresh-stream; cuts,
    /// cut.CLASS (cut.mid-value), cut.ACTION (cut.reset).
    /// Latencies: pNN(HISTOGRAM), max(..), min(..), mean(..) with a unit us, ms or s, where
    /// HISTOGRAM is NAME (policies merged), POLICY.NAME or proxy.NAME: p99(call)>2s,
    /// p99.9(strict.call)>=500ms, max(proxy.client-reconnect)>1s.
    /// Operators: > >= < <= == !=.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Interval logs to merge.
    #[arg(required = true, num_args = 1..)]
    inputs: Vec<PathBuf>,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// A report.json written by `tearline replay`.
    report: PathBuf,
    /// Fail (exit 99) when this condition is true; repeatable.
    #[arg(long = "fail-on", value_name = "THRESHOLD", value_parser = parse_threshold)]
    fail_on: Vec<Threshold>,
}

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    s.parse::<Threshold>().map_err(|e| e.to_string())
}

/// Prints verdicts and returns the exit code they call for.
pub fn print_verdicts(verdicts: &[thresholds::Verdict]) -> ExitCode {
    if !verdicts.is_empty() {
        println!("\nThresholds");
        for v in verdicts {
            println!("  {v}");
        }
    }
    ExitCode::from(thresholds::exit_code(verdicts))
}

/// Runs `tearline report`.
pub async fn run(args: Args) -> Result<ExitCode, ReportError> {
    match args.command {
        Command::Show(a) => {
            let report = json::load(&a.report)?;
            let verdicts = thresholds::evaluate_all(&a.fail_on, &report)?;
            print!("{}", summary::render(&report));
            Ok(print_verdicts(&verdicts))
        }
        Command::Merge(a) => {
            let mut logs = Vec::with_capacity(a.inputs.len());
            for input in &a.inputs {
                logs.push(hlog::load(input)?);
            }
            let merged = hlog::merge(&logs)?;
            std::fs::write(&a.output, &merged).map_err(|e| ReportError::io(&a.output, e))?;
            let totals = hlog::parse(&merged, &a.output)?.totals()?;
            let rows: Vec<Vec<String>> = totals
                .iter()
                .map(|(tag, h)| {
                    let s = super::Summary::of(h);
                    let mut row = vec![tag.clone(), s.count.to_string()];
                    for v in [s.p50, s.p90, s.p99, s.p99_9, s.max] {
                        row.push(super::latency::human_us(v as f64));
                    }
                    row
                })
                .collect();
            let intervals: usize = logs.iter().map(|l| l.intervals.len()).sum();
            println!(
                "merged {} logs ({intervals} intervals) into {}",
                logs.len(),
                a.output.display()
            );
            print!(
                "{}",
                summary::table(
                    &["tag", "count", "p50", "p90", "p99", "p99.9", "max"],
                    &rows
                )
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

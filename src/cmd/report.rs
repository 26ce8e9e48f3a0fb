//! Command-line surface of `tearline report`: `merge` agents' report directories (or interval
//! logs), `show` a saved report.
//!
//! Why: loads from several machines are merged into one report (or one `.hlog`), and a saved
//! `report.json` is re-read (summary printed, thresholds checked) in CI without rerunning the
//! test.
//! Invariants: `show` and `merge` of directories exit 0 when every `--fail-on` threshold holds and 99 when one fails;
//! errors (unreadable files, malformed thresholds, unknown names) are returned and become exit
//! 2 in `main`; malformed thresholds are rejected while parsing arguments, before any file is
//! read.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::report::thresholds::{self, Threshold};
use crate::report::thresholds_names::Vocabulary;
use crate::report::{Report, ReportError, hlog, json, merge, summary};

/// Arguments of `tearline report`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline report show tearline-report/20261130T030405Z/report.json
  tearline report show report.json --fail-on 'silent-loss>0' --fail-on 'p99(call)>2s'
  tearline report merge out/agent-1 out/agent-2 out/agent-3 out/agent-4 -o out/merged \
      --cuts proxy-a/cuts.jsonl --findings proxy-a/findings.jsonl --fail-on 'p99(call)>2s'
  tearline report merge load-a/report.hlog load-b/report.hlog -o all.hlog

Exit status: 0 when every threshold holds, 99 when a threshold fails, 2 on errors.")]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Merge load agents' report directories into one report, or interval logs into one log.
    ///
    /// Directories (written by `tearline load --report-dir`): histograms are added exactly,
    /// interval by interval per tag on the plan's clock (second 0 = the earliest agent's
    /// start), counters are summed, the proxies' cut and findings logs (--cuts, --findings:
    /// JSON Lines from --cuts-log/--findings-log, or the JSON of GET /cuts and /findings) are
    /// counted and dated; the merged report directory is written to -o and --fail-on is judged
    /// on the merged data (exit 99 when a threshold fails).
    ///
    /// .hlog files: every interval of every input is kept with its tag, re-based onto the
    /// earliest input's start; the per-tag totals of the result equal the sum of the inputs.
    #[command(after_long_help = FAIL_ON_HELP)]
    Merge(MergeArgs),
    /// Print the summary of a saved report.json and check --fail-on thresholds.
    #[command(long_about = SHOW_LONG_HELP, after_long_help = FAIL_ON_HELP)]
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Agents' report directories, or interval logs (.hlog) — not both.
    #[arg(required = true, num_args = 1..)]
    inputs: Vec<PathBuf>,
    /// Output: the merged report directory (for directories) or the merged .hlog file.
    #[arg(short, long)]
    output: PathBuf,
    /// A proxy's cuts: --cuts-log JSON Lines or the JSON of GET /cuts; repeatable.
    #[arg(long, value_name = "FILE")]
    cuts: Vec<PathBuf>,
    /// A proxy's findings: --findings-log JSON Lines or the JSON of GET /findings; repeatable.
    #[arg(long, value_name = "FILE")]
    findings: Vec<PathBuf>,
    /// Fail (exit 99) when this condition is true of the merged report; repeatable.
    #[arg(long = "fail-on", value_name = "THRESHOLD")]
    fail_on: Vec<Threshold>,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// A report.json written by `tearline replay`, or the directory holding it.
    report: PathBuf,
    /// Fail (exit 99) when this condition is true; repeatable (see `tearline report show
    /// --help` for the language).
    #[arg(long = "fail-on", value_name = "THRESHOLD")]
    fail_on: Vec<Threshold>,
}

const SHOW_LONG_HELP: &str =
    "Print the summary of a saved report.json, the metric names --fail-on can use on it
(counters, POLICY.COUNTER, finding.KIND, cut.CLASS, the histograms), and check --fail-on.

Exit status: 0 when every threshold holds, 99 when one fails (k6's convention), 2 on errors
(unreadable report, malformed threshold, a policy or histogram the report does not have).";

/// The `--fail-on` language, for the long help of every command that takes thresholds.
pub const FAIL_ON_HELP: &str =
    "A threshold names the condition that FAILS the run: --fail-on 'silent-loss>0'.

  THRESHOLD := METRIC OP VALUE          OP: >  >=  <  <=  ==  !=
  counts (VALUE is a plain number):
    calls ok failed silent-loss resumes renegotiations explicit-errors events
                                          the clients' counters, summed over the policies
    POLICY.COUNTER                        one policy's counter, e.g. naive.silent-loss; the
                                          facts the audit also reports keep its names:
                                          torn-cut replay-gap replay-duplicate replay-reorder
                                          fresh-stream explicit-loss reissued abandoned
    torn-cut cursor-ahead abandoned …     proxy findings by kind (also finding.KIND); a name
                                          both count means the findings without a POLICY.
    cuts  cut.CLASS  cut.ACTION           e.g. cut.mid-value, cut.mid-delta, cut.reset
  latencies (VALUE needs a unit: us, ms or s):
    pNN(H) max(H) min(H) mean(H)          NN in (0, 100], e.g. p50 p99 p99.9
    H := NAME | POLICY.NAME | proxy.NAME  NAME alone merges that histogram of every policy;
         | proxy.POLICY.NAME              replay's proxy histograms are per phase
  A histogram without samples reads 0. `tearline report show` lists a report's names; replay
  and load check every name before the run starts (exit 2 with the valid ones).

Examples:
  --fail-on 'silent-loss>0' --fail-on 'torn-cut>=1'
  --fail-on 'naive.silent-loss>0' --fail-on 'p99(call)>2s' --fail-on 'p99.9(strict.call)>=500ms'
  --fail-on 'max(proxy.naive.client-reconnect)>1s' --fail-on 'finding.llm-truncated>0'";

/// Prints `report`'s summary, evaluates `fail_on` on it, prints the verdicts, and returns the
/// exit code: 0 when all hold, 99 when one fails. Unknown policies or histograms are errors.
pub fn show(report: &Report, fail_on: &[Threshold]) -> Result<ExitCode, ReportError> {
    let verdicts = thresholds::evaluate_all(fail_on, report)?;
    print!("{}", summary::render(report));
    println!("\nMetric names for --fail-on");
    print!("{}", Vocabulary::of_report(report).listing());
    Ok(print_verdicts(&verdicts))
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
            let path = if a.report.is_dir() {
                a.report.join("report.json")
            } else {
                a.report
            };
            let report = json::load(&path)?;
            show(&report, &a.fail_on)
        }
        Command::Merge(a) => {
            let dirs = a.inputs.iter().filter(|p| p.is_dir()).count();
            if dirs == a.inputs.len() {
                merge_dirs(&a)
            } else if dirs == 0
                && a.cuts.is_empty()
                && a.findings.is_empty()
                && a.fail_on.is_empty()
            {
                merge_logs(&a)
            } else {
                Err(ReportError::MergeInputs)
            }
        }
    }
}

fn merge_dirs(a: &MergeArgs) -> Result<ExitCode, ReportError> {
    let mut agents = Vec::with_capacity(a.inputs.len());
    for dir in &a.inputs {
        agents.push(merge::load_dir(dir)?);
    }
    let proxies = merge::ProxyLogs::load(&a.cuts, &a.findings)?;
    let report = merge::merge(&agents, &proxies)?;
    let verdicts = thresholds::evaluate_all(&a.fail_on, &report)?;
    let written = crate::report::write_all(&report, &a.output)?;
    println!(
        "merged {} agent reports, {} cuts and {} findings into {}",
        agents.len(),
        proxies.cuts.len(),
        proxies.findings.len(),
        written.dir.display()
    );
    if let Some(gaps) = merge::segment_gaps(&agents) {
        println!("warning: {gaps}");
    }
    print!("{}", summary::render(&report));
    Ok(print_verdicts(&verdicts))
}

fn merge_logs(a: &MergeArgs) -> Result<ExitCode, ReportError> {
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
            let s = crate::report::Summary::of(h);
            let mut row = vec![tag.clone(), s.count.to_string()];
            for v in [s.p50, s.p90, s.p99, s.p99_9, s.max] {
                row.push(crate::report::latency::human_us(v as f64));
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

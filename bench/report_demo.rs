//! Writes the synthetic report of the report tests into a directory (default
//! `target/report-demo`) and prints its summary: a way to look at every report file without a
//! full run (`bench/render_report.sh` screenshots its `report.html`).

#[path = "../tests/common/report/mod.rs"]
mod report_common;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("target/report-demo"), PathBuf::from);
    let report = report_common::report(1);
    match tearline::report::write_all(&report, &dir) {
        Ok(written) => {
            print!("{}", tearline::report::summary::render(&report));
            println!("\nwrote {}", written.dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("report_demo: {e}");
            ExitCode::from(2)
        }
    }
}

//! Reports: terminal summary, JSON, HdrHistogram files and a self-contained HTML page.

pub mod cli;

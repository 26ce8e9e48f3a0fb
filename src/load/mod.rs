//! The load client: resumable MCP sessions, torn-boundary detection, corrected histograms.

pub mod cli;

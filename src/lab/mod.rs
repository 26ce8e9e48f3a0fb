//! The lab server: a reference MCP Streamable HTTP server that can misbehave on purpose.

pub mod cli;

//! Fault profiles: the TOML model, parsing and validation (errors carry file:line:col).

pub mod cli;

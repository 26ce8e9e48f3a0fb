//! `tearline replay`: the documents' 250 ms reset load test in one command (lab server, proxy
//! with a profile, load client with both policies, reports).

pub mod cli;

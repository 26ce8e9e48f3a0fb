//! The resume audit: a ledger per session and stream, turned into findings.

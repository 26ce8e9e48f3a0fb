//! Integration tests of `audit`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod accuracy;
mod deadlines;
mod delivery_clean_end;
mod delivery_encoded;
mod delivery_faults;
mod delivery_figures;
mod delivery_intake;
mod delivery_memory;
mod delivery_replay;
mod delivery_request;
mod e2e;
mod e2e_more;
mod e2e_stale_peer;
mod findings;
mod gauges;
mod h2;
mod h2_llm_cancel;
mod judge;
mod ledger;
mod links;
mod not_judged;
mod reissue_race;
mod reset_window;
mod sent_after_cancel;
mod sessionless;
mod sessions;
mod stateless;
mod traces;
mod truncation;
mod unanswered;

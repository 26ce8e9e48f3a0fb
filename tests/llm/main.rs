//! Integration tests of tearline on LLM token streams (issue 27): the lab's provider-shaped
//! endpoints, the observer's provider positions, cuts with provider meaning and the verdicts,
//! and the real SDKs apps use (`sdk*`, their harness in `support`), one module per capability,
//! in one executable.

#[path = "../common/mod.rs"]
mod common;
// The SDK harness (tests/llm/support/); explicit, beside the observer tests' support.rs.
#[path = "support/mod.rs"]
mod support;

mod cuts;
mod keys;
mod lab;
#[path = "support.rs"]
mod llm_support;
mod observe;
mod replay;
mod runs;
mod sdk;
mod sdk_matrix;
mod sdk_matrix_h2;
mod sdk_tls;
mod shutdown;
mod verdicts;

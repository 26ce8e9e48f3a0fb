//! Integration tests of tearline on LLM token streams (issue 27), one module per capability, in
//! one executable: the real SDKs apps use (`sdk*`, harness in `support`).

#[path = "../common/mod.rs"]
mod common;
mod support;

mod sdk;
mod sdk_matrix;
mod sdk_tls;

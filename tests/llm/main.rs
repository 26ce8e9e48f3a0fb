//! The llm test group: tearline with LLM token streams and the real SDKs apps use (issue 27).
//! One executable; one module per capability, the shared harness in `support`.

#[path = "../peers/mod.rs"]
mod peers;
mod support;

mod sdk;
mod sdk_tls;

//! Integration tests of tearline on LLM token streams (issue 27's core): the lab's provider-shaped
//! endpoints, the observer's provider positions, cuts with provider meaning and the verdicts,
//! one module per capability, in one executable.

#[path = "../common/mod.rs"]
mod common;

mod cuts;
mod lab;
#[path = "support.rs"]
mod llm_support;
mod observe;

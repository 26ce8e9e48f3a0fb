//! Profiles: every shipped profile validates, and each broken profile of the corpus
//! (tests/profiles_broken/, one kind of mistake per file) gives its exact, located error.

use std::path::{Path, PathBuf};

use tearline::fault::registry::Built;
use tearline::profile::{self, ProfileError};

/// (file in tests/profiles_broken, expected "line:column: message").
const BROKEN: &[(&str, &str)] = &[
    (
        "unknown-position.toml",
        "3:6: sse_cut 'at': unknown position 'mid-valeu'; known: boundary, field-name, after-colon, mid-value, before-eol, cr-lf, before-dispatch, dispatch-cr-lf, after-id, mid-id, chunk-framing, mid-utf8, bom, priming, after-final, during-replay; LLM streams: before-first-delta, mid-delta, mid-tool-args, before-completion, after-completion; or \"any-byte\" alone",
    ),
    (
        "bad-address.toml",
        "3:10: listen must be host:port (e.g. 127.0.0.1:7000), got '127.0.0.1': no port",
    ),
    (
        "bad-direction.toml",
        "3:13: direction must be one of 'upstream' or 'downstream', got 'down'",
    ),
    (
        "bad-leg.toml",
        "4:7: leg must be one of 'any', 'first' or 'resume', got 'second'",
    ),
    (
        "bad-range.toml",
        "3:9: range must be [a, b] with integers 0 <= a <= b, got [1000, 10]",
    ),
    (
        "conflicting-triggers.toml",
        "4:1: reset takes exactly one of 'bytes', 'range' or 'after_ms'; 'range' conflicts with 'bytes'",
    ),
    (
        "down-is-not-a-kind.toml",
        "2:8: unknown fault kind 'down'; known: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer, goaway, hold_headers, flow_stall, refuse_streams ('down' is a proxy state: set `enabled = false` on the [[proxy]])",
    ),
    (
        "unknown-action.toml",
        "4:10: action 'explode' is not allowed; allowed: reset, fin, clean-end",
    ),
    (
        "events-reversed.toml",
        "4:10: sse_cut 'events' must be [a, b] with a <= b, got [9, 2]",
    ),
    ("idle-zero.toml", "3:11: idle_ms must be greater than 0"),
    (
        "direction-on-sse-cut.toml",
        "4:13: sse_cut acts on the downstream direction only (SSE responses)",
    ),
    (
        "negative-weight.toml",
        "3:6: sse_cut 'at' needs at least one positive weight, and no negative or non-finite one",
    ),
    (
        "single-bracket-fault.toml",
        "1:1: a single [table] where a list of tables belongs: write [[fault]], [[proxy]], [[phase]] or [[llm_route]] (double brackets), once per entry",
    ),
    (
        "integer-overflow.toml",
        "3:14: integer out of range: TOML integers are 64-bit, at most 9223372036854775807",
    ),
    (
        "probability-nan.toml",
        "4:15: sse_cut 'probability' must be between 0 and 1, got NaN",
    ),
    (
        "duplicate-listen.toml",
        "8:10: proxy 'admin' listens on 0.0.0.0:7000, as proxy 'api' (line 2) does: two proxies cannot bind one address; give each its own port (or port 0)",
    ),
    (
        "duplicate-fault-name.toml",
        "5:1: duplicate fault name 'latency' (also used by the fault at line 1; a name defaults to the kind); give one a distinct `name`",
    ),
    (
        "duplicate-proxy-name.toml",
        "7:8: duplicate proxy name 'api' (first at line 2)",
    ),
    (
        "empty-profile.toml",
        "1:1: the profile defines no [[proxy]] and no [[fault]]",
    ),
    (
        "missing-kind.toml",
        "1:1: missing required key 'kind'; known kinds: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer, goaway, hold_headers, flow_stall, refuse_streams",
    ),
    (
        "missing-required-key.toml",
        "3:1: missing required key 'rate' for kind bandwidth",
    ),
    (
        "negative-seed.toml",
        "1:8: seed must be a non-negative integer, got -1",
    ),
    (
        "outage-with-direction.toml",
        "4:1: unknown key 'direction' for kind outage; known: kind, name, proxy, duration_ms, start_ms, every_ms, count, mode",
    ),
    (
        "probability-out-of-range.toml",
        "4:15: probability must be between 0 and 1, got 1.5",
    ),
    (
        "proxy-missing-upstream.toml",
        "1:1: missing required key 'upstream' in [[proxy]]",
    ),
    ("toml-syntax.toml", "3:14: extra '=', expected nothing"),
    (
        "unknown-fault-key.toml",
        "3:1: unknown key 'latency' for kind latency; known: kind, name, proxy, direction, probability, latency_ms, jitter_ms",
    ),
    (
        "unknown-kind.toml",
        "4:8: unknown fault kind 'latncy'; known: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer, goaway, hold_headers, flow_stall, refuse_streams",
    ),
    (
        "unknown-proxy-reference.toml",
        "8:9: fault 'latency' names proxy 'ap', which is not defined; defined: api",
    ),
    (
        "unknown-top-level-key.toml",
        "1:1: unknown key 'descripton'; known: description, seed, proxy, fault, phase, llm_route",
    ),
    (
        "wrong-type.toml",
        "3:14: latency_ms must be a non-negative integer (milliseconds), got a string",
    ),
];

fn broken_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profiles_broken")
}

#[test]
fn every_shipped_profile_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("profiles/ exists") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|x| x == "toml") {
            let p = profile::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                p.description.is_some(),
                "{} needs a description",
                path.display()
            );
            seen.push(
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    }
    for required in [
        "latency-jitter.toml",
        "flaky-mobile.toml",
        "reset-250ms.toml",
        "gateway-idle-kill.toml",
        "proxy-buffering.toml",
        "rolling-deploy.toml",
        "flaky-wifi.toml",
        "slow-consumer.toml",
    ] {
        assert!(seen.iter().any(|s| s == required), "{required} is shipped");
    }
}

#[test]
fn each_broken_profile_gives_its_precise_error() {
    for (file, expected) in BROKEN {
        let path = broken_dir().join(file);
        let text = std::fs::read_to_string(&path).expect("corpus file");
        match profile::parse(&text, file) {
            Ok(_) => panic!("{file} must not validate"),
            Err(e) => assert_eq!(e.to_string(), format!("{file}:{expected}")),
        }
    }
}

#[test]
fn the_corpus_has_no_file_without_an_expectation() {
    let mut files: Vec<String> = std::fs::read_dir(broken_dir())
        .expect("corpus dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    files.sort();
    let mut listed: Vec<String> = BROKEN.iter().map(|(f, _)| (*f).to_owned()).collect();
    listed.sort();
    assert_eq!(files, listed);
    assert!(files.len() >= 10);
}

#[test]
fn invalid_errors_carry_line_column_and_key() {
    let text = "[[fault]]\nkind = \"latency\"\nlatency_ms = 5\nprobability = 2\n";
    match profile::parse(text, "inline") {
        Err(ProfileError::Invalid {
            line, column, key, ..
        }) => {
            assert_eq!((line, column, key.as_deref()), (4, 15, Some("probability")));
        }
        other => panic!("expected an invalid-profile error, got {other:?}"),
    }
}

#[test]
fn faults_apply_to_their_proxy_or_to_every_proxy() {
    let text = r#"
description = "two proxies"
seed = 42

[[proxy]]
name = "api"
listen = "127.0.0.1:0"
upstream = "localhost:8080"

[[proxy]]
name = "web"
listen = "[::1]:0"
upstream = "127.0.0.1:8081"
enabled = false

[[fault]]
kind = "latency"
latency_ms = 10

[[fault]]
kind = "reset"
proxy = "api"
bytes = 100
outage_ms = 250

[[fault]]
kind = "outage"
proxy = "web"
duration_ms = 250
"#;
    let p = profile::parse(text, "inline").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.seed, Some(42));
    assert_eq!(p.proxies.len(), 2);
    assert!(p.proxies[0].enabled && !p.proxies[1].enabled);
    let kinds = |proxy| {
        p.faults_for(proxy)
            .map(|f| f.kind.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(Some("api")), ["latency", "reset"]);
    assert_eq!(kinds(Some("web")), ["latency", "outage"]);
    assert_eq!(
        kinds(None),
        ["latency"],
        "the command line's proxy gets only unscoped faults"
    );
    assert_eq!(p.factories_for(Some("api")).len(), 2);
    assert_eq!(p.outages_for(Some("web")).len(), 1);
    assert_eq!(p.faults[1].line, 20);
    assert!(matches!(p.faults[2].built, Built::Outage(_)));
}

#[test]
fn a_missing_file_is_a_read_error_naming_the_path() {
    let err = profile::load(Path::new("/nonexistent/p.toml")).expect_err("no such file");
    assert!(matches!(err, ProfileError::Read { .. }));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/p.toml: cannot read:")
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let text =
        "description = \"±±\"\n[[fault]]\nkind = \"latency\"\nlatency_ms = 1\njitter_ms = \"±\" \n";
    let err = profile::parse(text, "u").expect_err("jitter is a string");
    assert_eq!(
        err.to_string(),
        "u:5:13: jitter_ms must be a non-negative integer (milliseconds), got a string"
    );
    assert_eq!(profile::line_col("é = 1\nab", 4), (1, 4));
    assert_eq!(profile::line_col("é = 1\nab", 8), (2, 2));
}

#[test]
fn llm_routes_are_read_and_a_bad_one_is_located() {
    let text = "[[llm_route]]\npath = \"/gen/*\"\napi = \"chat-completions\"\n\n[[llm_route]]\npath = \"/claude/stream\"\napi = \"messages\"\n";
    let p = profile::parse(text, "inline").expect("valid");
    assert_eq!(
        p.llm_routes,
        vec![
            (
                "/gen/*".to_owned(),
                tearline::vocab::LlmApi::ChatCompletions
            ),
            (
                "/claude/stream".to_owned(),
                tearline::vocab::LlmApi::Messages
            ),
        ]
    );
    let bad = "[[llm_route]]\npath = \"/gen\"\napi = \"chat\"\n";
    match profile::parse(bad, "inline") {
        Err(ProfileError::Invalid {
            line, key, message, ..
        }) => {
            assert_eq!((line, key.as_deref()), (3, Some("api")));
            assert!(message.contains("chat-completions"), "{message}");
        }
        other => panic!("expected an invalid-profile error, got {other:?}"),
    }
    let relative = "[[llm_route]]\npath = \"gen\"\napi = \"responses\"\n";
    assert!(profile::parse(relative, "inline").is_err());
}

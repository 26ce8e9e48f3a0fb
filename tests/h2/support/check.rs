//! Checks of a client peer's log against the servers' contract: stream `s` carries events
//! `id: k` with data `{"stream":s,"n":k,"pad":"x"*size}` for k = 1..=n, each exactly once, in
//! order, over HTTP/2, and nothing was reset or failed.

use serde_json::Value;

/// The data of event `k` of stream `s` with `size` bytes of padding, exactly as the servers
/// write it.
pub fn data(stream: &str, k: u64, size: usize) -> String {
    format!(
        "{{\"stream\":\"{stream}\",\"n\":{k},\"pad\":\"{}\"}}",
        "x".repeat(size)
    )
}

/// The whole SSE body of stream `s` (what curl writes to its output file).
pub fn body(stream: &str, n: u64, size: usize) -> String {
    (1..=n)
        .map(|k| format!("id: {k}\ndata: {}\n\n", data(stream, k, size)))
        .collect()
}

/// The lines of `log` with `"event" == event`.
pub fn events<'a>(log: &'a [Value], event: &str) -> Vec<&'a Value> {
    log.iter().filter(|v| v["event"] == event).collect()
}

/// The `(id, data)` of each message the log shows on `stream`, in order.
pub fn messages(log: &[Value], stream: &str) -> Vec<(String, String)> {
    events(log, "message")
        .into_iter()
        .filter(|v| v["stream"] == stream)
        .map(|v| {
            (
                v["id"].as_str().unwrap_or("").to_owned(),
                v["data"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// A peer's log, one JSON line per entry, for failure messages.
pub fn show(log: &[Value]) -> String {
    log.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that each of `streams` carried events 1..=`n` exactly once, in order, byte for
/// byte (whatever resets and resumes came between).
pub fn each_once(what: &str, log: &[Value], streams: &[&str], n: u64, size: usize) {
    for s in streams {
        let want: Vec<(String, String)> =
            (1..=n).map(|k| (k.to_string(), data(s, k, size))).collect();
        assert!(
            messages(log, s) == want,
            "{what}: stream {s} should carry events 1..={n} exactly once, in order, byte for byte; the client logged:\n{}",
            show(log)
        );
    }
}

/// Asserts that the client's log shows every stream complete and exact, no reset, no GOAWAY
/// with an error, no error line, and `done` with `complete: true`.
pub fn complete_and_exact(what: &str, log: &[Value], streams: &[&str], n: u64, size: usize) {
    each_once(what, log, streams, n, size);
    for bad in ["reset", "error"] {
        assert!(
            events(log, bad).is_empty(),
            "{what}: the client logged a {bad}:\n{}",
            show(log)
        );
    }
    let done = events(log, "done");
    assert!(
        done.len() == 1 && done[0]["complete"] == true,
        "{what}: the client did not say it completed:\n{}",
        show(log)
    );
}

/// The distinct h2 stream ids the client's responses came on (several = multiplexed).
pub fn h2_streams(log: &[Value]) -> Vec<u64> {
    let mut ids: Vec<u64> = events(log, "response")
        .into_iter()
        .filter_map(|v| v["h2_stream"].as_u64())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

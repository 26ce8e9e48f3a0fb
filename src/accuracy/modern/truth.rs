//! The client half of a 2026-07-28 run's ground truth, one shape for every client: each POST
//! of a logical call is an [`Attempt`] — which call, original or re-send of which call, the
//! JSON-RPC id, `Idempotency-Key` and tool arguments it carried, whether its response arrived.
//!
//! Sources: the SDK app drivers write it themselves (`tests/peers/{js,py}/app_driver.*`, JSON
//! lines, see [`from_driver_jsonl`]); tearline's load client records it per leg
//! ([`crate::load::truth::ClientLeg`], see [`from_client_legs`]). Neither reads the audit.
//!
//! Invariants: attempts are in send order; a call's attempt 0 is its original, every later
//! attempt a re-send of it (the app or the client says so, whatever the wire shows); an
//! attempt that never reached the server (no response head) is not listed.

use serde::Deserialize;

use crate::load::truth::ClientLeg;

/// One POST of one logical call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The logical call (0-based, in the app's order).
    pub call: u64,
    /// 0 for the original, n for the n-th re-send.
    pub attempt: u32,
    /// The JSON-RPC id sent (JSON text, e.g. `7` or `"a"`).
    pub rpc_id: String,
    /// The `Idempotency-Key` sent, if any.
    pub key: Option<String>,
    /// The tool arguments sent (`params.arguments`), as the client recorded them; `None` if
    /// the record has none.
    pub args: Option<serde_json::Value>,
    /// Whether the call's response arrived for this attempt.
    pub answered: bool,
    /// Why it failed, as the client said (driver error text or the load client's stop).
    pub error: Option<String>,
}

impl Attempt {
    /// Whether this attempt re-sends an earlier one of its call.
    pub fn is_resend(&self) -> bool {
        self.attempt > 0
    }
}

#[derive(Deserialize)]
struct Line {
    post: Option<u64>,
    method: Option<String>,
    rpc_id: Option<String>,
    call: Option<u64>,
    attempt: Option<u32>,
    key: Option<String>,
    args: Option<serde_json::Value>,
    answered: Option<bool>,
    error: Option<String>,
    done: Option<bool>,
}

/// Parses an app driver's truth file (see the module doc); `Err` says which line is wrong, or
/// that the driver did not finish (no `done` line).
pub fn from_driver_jsonl(text: &str) -> Result<Vec<Attempt>, String> {
    let mut out: Vec<Attempt> = Vec::new();
    let mut done = false;
    for (n, raw) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let line: Line =
            serde_json::from_str(raw).map_err(|e| format!("truth line {}: {e}: {raw}", n + 1))?;
        if line.done == Some(true) {
            done = true;
            continue;
        }
        match (line.post, line.call, line.attempt) {
            (Some(_), Some(call), Some(attempt))
                if line.method.as_deref() == Some("tools/call") =>
            {
                out.push(Attempt {
                    call,
                    attempt,
                    rpc_id: line.rpc_id.unwrap_or_default(),
                    key: line.key,
                    args: line.args,
                    answered: false,
                    error: None,
                });
            }
            (None, Some(call), Some(attempt)) => {
                let a = out
                    .iter_mut()
                    .rev()
                    .find(|a| a.call == call && a.attempt == attempt)
                    .ok_or_else(|| {
                        format!(
                            "truth line {}: outcome of an attempt never POSTed: {raw}",
                            n + 1
                        )
                    })?;
                a.answered = line.answered == Some(true);
                a.error = line.error;
            }
            _ => {}
        }
    }
    if !done {
        return Err("the driver did not finish its workload (no `done` line)".to_owned());
    }
    Ok(out)
}

/// The attempts of tearline's load client, from its legs: each POST that got a response head
/// is one attempt of its leg's call; `args_of(call)` gives the arguments the client sends for a
/// logical call (its configuration decides them, the legs do not record them).
pub fn from_client_legs(
    legs: &[ClientLeg],
    args_of: impl Fn(u64) -> serde_json::Value,
) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = Vec::new();
    for leg in legs
        .iter()
        .filter(|l| l.method == "POST" && l.status.is_some())
    {
        let attempt = out.iter().filter(|a| a.call == leg.call).count() as u32;
        out.push(Attempt {
            call: leg.call,
            attempt,
            rpc_id: leg.request_id.map(|r| r.to_string()).unwrap_or_default(),
            key: leg.idempotency_key.clone(),
            args: Some(args_of(leg.call)),
            answered: leg.answered,
            error: (!leg.answered).then(|| leg.stop.clone()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_lines_become_attempts_with_their_outcomes() {
        let text = r#"{"post":0,"method":"tools/list","rpc_id":"0","call":null,"attempt":null,"resend_of":null,"key":null}
{"post":1,"method":"tools/call","rpc_id":"1","call":0,"attempt":0,"resend_of":null,"key":"k0","args":{"n":1}}
{"call":0,"attempt":0,"resend_of":null,"answered":false,"error":"timed out"}
{"post":2,"method":"tools/call","rpc_id":"2","call":0,"attempt":1,"resend_of":0,"key":"k0"}
{"call":0,"attempt":1,"resend_of":0,"answered":true,"error":null}
{"done":true}
"#;
        let a = from_driver_jsonl(text).expect("parses");
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].rpc_id.as_str(), a[0].answered), ("1", false));
        assert!(a[1].is_resend() && a[1].answered && a[1].key.as_deref() == Some("k0"));
        assert_eq!(a[0].args, Some(serde_json::json!({"n": 1})));
        assert_eq!(a[1].args, None, "a line without arguments records none");
        assert!(from_driver_jsonl("{\"post\":0,\"method\":\"tools/list\"}\n").is_err());
    }
}

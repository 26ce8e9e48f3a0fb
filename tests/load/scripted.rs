//! The load client against a scripted MCP server that emits exact bytes: a call's result event
//! is torn (part of data line 1 of 3, then FIN inside the chunk) and the resume is answered by a
//! fresh stream, a faithful replay, or (no ids) nothing to resume from. Proves that the strict
//! client detects the torn boundary and never accepts a loss, and that the naive client resumes
//! with the torn event's id and loses the call silently.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::load::{self, CallEnd, LoadConfig, Policy, ResumeAnswer, Stop, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resume {
    /// Resume GETs get a new stream (`s9-…`) that ends cleanly: seed 004's evicted server.
    Fresh,
    /// Resume GETs get a new priming event of the same stream whose sequence jumps (the lab's
    /// `fresh` mode), then a clean end.
    Jump,
    /// Resume GETs replay the original stream after the given id.
    Replay,
    /// Resume GETs replay the owed events under ids one further on (a gap the ids show).
    Skip,
    /// No event ids at all (2026-07-28-like): nothing to resume from.
    NoIds,
    /// Resume GETs get 200 with `event: error` (the server says it lost the buffer).
    ErrorEvent,
    /// Resume GETs get 404 (session gone).
    Gone,
}

struct Script {
    resume: Resume,
    /// How many tools/call POSTs to tear (the first ones).
    tear: u32,
    /// Tear with a clean end of the chunked body (`0\r\n\r\n`) instead of FIN mid-chunk.
    clean_end: bool,
    calls: AtomicU32,
    sessions: AtomicU32,
    first_request_id: Mutex<Option<u64>>,
    /// The progress token of the first tools/call (echoed in its progress events, as MCP
    /// servers do).
    first_token: Mutex<String>,
    last_event_ids: Mutex<Vec<String>>,
    /// The `Idempotency-Key` of every tools/call POST, in arrival order.
    keys: Mutex<Vec<Option<String>>>,
}

const TEXT: &str = "abcdefgh";

fn chunk(out: &mut Vec<u8>, payload: &str) {
    out.extend_from_slice(format!("{:x}\r\n{payload}\r\n", payload.len()).as_bytes());
}

/// The events of the stream `s` answering request `id`: priming, one progress, the result
/// split over three data lines.
fn events(s: &str, id: u64, token: &str, with_ids: bool) -> Vec<String> {
    let idl = |n: u32| {
        if with_ids {
            format!("id: {s}-{n}\n")
        } else {
            String::new()
        }
    };
    vec![
        format!("{}retry: 10\ndata:\n\n", idl(0)),
        format!(
            "{}event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"{token}\",\"progress\":1,\"total\":1}}}}\n\n",
            idl(1)
        ),
        format!(
            "{}event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\ndata: \"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{TEXT}\"}}]}}\ndata: }}\n\n",
            idl(2)
        ),
    ]
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

async fn handle(mut sock: TcpStream, script: Arc<Script>) {
    let mut buf = Vec::new();
    loop {
        // Read one request (head + Content-Length body).
        let (method, headers, body) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut hs);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
                let headers: Vec<(String, String)> = req
                    .headers
                    .iter()
                    .map(|h| {
                        let v = String::from_utf8_lossy(h.value).to_string();
                        (h.name.to_ascii_lowercase(), v)
                    })
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                if buf.len() >= n + len {
                    let method = req.method.unwrap_or("").to_string();
                    let body = buf[n..n + len].to_vec();
                    buf.drain(..n + len);
                    break (method, headers, body);
                }
            }
            let mut tmp = [0u8; 4096];
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(k) => buf.extend_from_slice(&tmp[..k]),
            }
        };
        let header = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let mut out = Vec::new();
        let mut tear_after: Option<usize> = None;
        if method == "GET" {
            let lei = header("last-event-id").unwrap_or_default();
            script.last_event_ids.lock().unwrap().push(lei.clone());
            if script.resume == Resume::Gone {
                out.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                let _ = sock.write_all(&out).await;
                continue;
            }
            out.extend_from_slice(SSE_HEAD.as_bytes());
            match script.resume {
                Resume::Gone => {}
                Resume::ErrorEvent => chunk(
                    &mut out,
                    "event: error\ndata: {\"code\":\"resumption-failed\"}\n\n",
                ),
                Resume::Fresh | Resume::NoIds => chunk(&mut out, "id: s9-0\ndata:\n\n"),
                Resume::Jump => chunk(&mut out, "id: s1-7\nretry: 10\ndata:\n\n"),
                Resume::Replay | Resume::Skip => {
                    let id = script.first_request_id.lock().unwrap().unwrap_or(0);
                    let token = script.first_token.lock().unwrap().clone();
                    let after: u32 = lei
                        .rsplit('-')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    for (n, ev) in events("s1", id, &token, true).iter().enumerate() {
                        if n as u32 > after && script.resume == Resume::Skip {
                            // The owed events under ids one further on: seq `after + 1` never
                            // comes (a gap the ids show).
                            let shifted = ev
                                .replace(&format!("id: s1-{n}\n"), &format!("id: s1-{}\n", n + 1));
                            chunk(&mut out, &shifted);
                        } else if n as u32 > after {
                            chunk(&mut out, ev);
                        }
                    }
                }
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let rpc_method = msg["method"].as_str().unwrap_or("");
            match rpc_method {
                "initialize" => {
                    let n = script.sessions.fetch_add(1, Ordering::SeqCst);
                    let body = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"script","version":"0"}}}"#;
                    out.extend_from_slice(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: sess-{n}\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    );
                }
                "tools/call" => {
                    script.keys.lock().unwrap().push(header("idempotency-key"));
                    let id = msg["id"].as_u64().unwrap_or(0);
                    let k = script.calls.fetch_add(1, Ordering::SeqCst);
                    let token = msg["params"]["_meta"]["progressToken"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    if script.first_request_id.lock().unwrap().get_or_insert(id) == &id {
                        *script.first_token.lock().unwrap() = token.clone();
                    }
                    out.extend_from_slice(SSE_HEAD.as_bytes());
                    let evs = events("s1", id, &token, script.resume != Resume::NoIds);
                    chunk(&mut out, &evs[0]);
                    chunk(&mut out, &evs[1]);
                    if k < script.tear && script.clean_end {
                        let cut = evs[2].find("\"2.0\"").unwrap_or(0);
                        chunk(&mut out, &evs[2][..cut]);
                        out.extend_from_slice(b"0\r\n\r\n");
                    } else if k < script.tear {
                        // Declare the whole result event's chunk, send up to the middle of
                        // data line 1 of 3, then close: FIN inside the chunk.
                        out.extend_from_slice(format!("{:x}\r\n", evs[2].len()).as_bytes());
                        let cut = evs[2].find("\"2.0\"").unwrap_or(0);
                        out.extend_from_slice(&evs[2].as_bytes()[..cut]);
                        tear_after = Some(out.len());
                    } else {
                        chunk(&mut out, &evs[2]);
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                }
                _ => out.extend_from_slice(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"),
            }
        }
        if sock.write_all(&out).await.is_err() {
            return;
        }
        if tear_after.is_some() {
            let _ = sock.shutdown().await;
            return;
        }
    }
}

async fn start(resume: Resume, tear: u32) -> (Target, Arc<Script>) {
    start_with(resume, tear, false).await
}

async fn start_with(resume: Resume, tear: u32, clean_end: bool) -> (Target, Arc<Script>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = Arc::new(Script {
        resume,
        tear,
        clean_end,
        calls: AtomicU32::new(0),
        sessions: AtomicU32::new(0),
        first_request_id: Mutex::new(None),
        first_token: Mutex::new(String::new()),
        last_event_ids: Mutex::new(Vec::new()),
        keys: Mutex::new(Vec::new()),
    });
    let s = Arc::clone(&script);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(handle(sock, Arc::clone(&s)));
        }
    });
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
    (target, script)
}

fn config(target: Target, policy: Policy, calls: u64) -> LoadConfig {
    let mut cfg = LoadConfig::new(target, "blob", serde_json::json!({"size": TEXT.len()}));
    cfg.policy = policy;
    cfg.stop = Stop::Calls(calls);
    cfg.backoff = Duration::from_millis(1);
    cfg.call_timeout = Duration::from_secs(5);
    cfg
}

async fn run(cfg: LoadConfig) -> load::LoadOutcome {
    tokio::time::timeout(
        Duration::from_secs(20),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("run starts")
}

#[tokio::test]
async fn clean_server_gives_all_calls_ok_and_no_detections() {
    let (target, _) = start(Resume::Replay, 0).await;
    let mut cfg = config(target, Policy::Strict, 40);
    cfg.sessions = 4;
    let o = run(cfg).await;
    let c = o.counters;
    assert_eq!((c.calls, c.ok, c.torn_cut, c.resumes), (40, 40, 0, 0));
    assert!(c.is_balanced());
    assert_eq!(o.histograms["call"].len(), 40);
    assert_eq!(o.histograms["first-event"].len(), 40);
    // Stream metrics: one value per call or per stream, and no recovery without a cut.
    for per_call_or_stream in ["last-event", "max-gap", "stream-interval"] {
        assert_eq!(
            o.histograms[per_call_or_stream].len(),
            40,
            "{per_call_or_stream}"
        );
    }
    assert_eq!(o.histograms["recovery"].len(), 0);
    assert!(o.histograms["last-event"].min() >= o.histograms["first-event"].min());
}

#[tokio::test]
async fn strict_detects_torn_event_and_reissues_after_fresh_stream() {
    let (target, script) = start(Resume::Fresh, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!(c.torn_cut, 1);
    assert_eq!(c.fresh_stream, 1);
    assert_eq!((c.renegotiations, c.reissued), (1, 1));
    assert_eq!((c.calls, c.ok, c.silent_loss, c.failed), (1, 1, 0, 0));
    assert!(c.is_balanced());
    // The strict cursor is the last dispatched id, never the torn event's id.
    assert_eq!(
        *script.last_event_ids.lock().unwrap(),
        vec!["s1-1".to_string()]
    );
    assert_eq!(script.sessions.load(Ordering::SeqCst), 2);
    let t = &o.traces[0];
    assert_eq!(
        (t.committed_id.as_str(), t.pending_id.as_deref()),
        ("s1-1", Some("s1-2"))
    );
    assert!(t.partial && t.mid_data_line);
    assert_eq!(t.partial_data_lines, 0);
    assert_eq!(t.last_event_id_sent.as_deref(), Some("s1-1"));
    assert!(
        matches!(&t.answer, Some(ResumeAnswer::Stream { discontinuous: true, first_id: Some(f), .. }) if f == "s9-0")
    );
    assert_eq!(t.outcome, Some(CallEnd::Ok));
    // One cut, recovered by the re-issue: one recovery time, from the cut.
    assert_eq!(o.histograms["recovery"].len(), 1);
}

#[tokio::test]
async fn naive_resumes_with_torn_id_and_loses_the_call_silently() {
    let (target, script) = start(Resume::Fresh, 1).await;
    let o = run(config(target, Policy::Naive, 1)).await;
    let c = o.counters;
    assert_eq!((c.calls, c.ok, c.silent_loss, c.failed), (1, 0, 1, 0));
    // The naive client does not act on the torn event, but it held one: `torn-cut` counts the
    // fact for every policy, as the audit does.
    assert_eq!((c.torn_cut, c.renegotiations, c.reissued), (1, 0, 0));
    assert!(c.is_balanced());
    assert_eq!(
        *script.last_event_ids.lock().unwrap(),
        vec!["s1-2".to_string()]
    );
    assert_eq!(o.traces[0].outcome, Some(CallEnd::SilentlyLost));
}

#[tokio::test]
async fn strict_resume_from_replaying_server_completes_without_reissue() {
    let (target, script) = start(Resume::Replay, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!(
        (c.ok, c.torn_cut, c.resumes, c.reissued, c.replay_duplicate),
        (1, 1, 1, 0, 0)
    );
    assert_eq!(
        *script.last_event_ids.lock().unwrap(),
        vec!["s1-1".to_string()]
    );
    assert_eq!(o.histograms["resume"].len(), 1);
    assert_eq!(o.histograms["recovery"].len(), 1);
}

#[tokio::test]
async fn naive_cursor_ahead_skips_the_torn_event_and_loses_it() {
    let (target, _) = start(Resume::Replay, 1).await;
    let o = run(config(target, Policy::Naive, 1)).await;
    assert_eq!((o.counters.ok, o.counters.silent_loss), (0, 1));
}

#[tokio::test]
async fn without_event_ids_a_torn_call_is_reissued_with_a_new_id() {
    let (target, script) = start(Resume::NoIds, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!((c.ok, c.torn_cut, c.resumes, c.reissued), (1, 1, 0, 1));
    assert!(script.last_event_ids.lock().unwrap().is_empty());
    assert_eq!(script.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn strict_and_retry_mark_each_call_with_a_fresh_idempotency_key_repeated_on_its_reissue() {
    for policy in [Policy::Strict, Policy::Retry] {
        let (target, script) = start(Resume::NoIds, 1).await;
        let o = run(config(target, policy, 2)).await;
        assert_eq!((o.counters.ok, o.counters.reissued), (2, 1), "{policy}");
        let keys = script.keys.lock().unwrap().clone();
        assert_eq!(
            keys.len(),
            3,
            "{policy}: torn call, its re-issue, the next call"
        );
        let (first, again, next) = (&keys[0], &keys[1], &keys[2]);
        assert!(first.as_ref().is_some_and(|k| !k.is_empty()), "{policy}");
        assert_eq!(
            first, again,
            "{policy}: the re-issue repeats its call's key"
        );
        assert!(
            next.is_some() && next != first,
            "{policy}: a new call, a new key"
        );
    }
}

#[tokio::test]
async fn naive_sends_no_idempotency_key() {
    let (target, script) = start(Resume::NoIds, 0).await;
    run(config(target, Policy::Naive, 2)).await;
    assert_eq!(*script.keys.lock().unwrap(), [None, None]);
}

#[tokio::test]
async fn strict_takes_a_clean_end_mid_event_as_torn_and_resumes() {
    let (target, script) = start_with(Resume::Replay, 1, true).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!((c.ok, c.torn_cut, c.resumes, c.reissued), (1, 1, 1, 0));
    assert_eq!(
        *script.last_event_ids.lock().unwrap(),
        vec!["s1-1".to_string()]
    );
    assert_eq!(o.traces[0].stop, "clean-end");
}

#[tokio::test]
async fn naive_takes_a_clean_end_mid_event_as_completion() {
    let (target, script) = start_with(Resume::Replay, 1, true).await;
    let o = run(config(target, Policy::Naive, 1)).await;
    assert_eq!((o.counters.silent_loss, o.counters.resumes), (1, 0));
    assert!(script.last_event_ids.lock().unwrap().is_empty());
}

#[tokio::test]
async fn strict_renegotiates_when_the_resume_says_error() {
    let (target, script) = start(Resume::ErrorEvent, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!(
        (c.ok, c.explicit_errors, c.renegotiations, c.reissued),
        (1, 1, 1, 1)
    );
    assert_eq!(script.sessions.load(Ordering::SeqCst), 2);
    assert!(matches!(
        o.traces[0].answer,
        Some(ResumeAnswer::Stream {
            error_event: true,
            ..
        })
    ));
}

#[tokio::test]
async fn refused_resume_is_explicit_for_both_policies() {
    let (target, _) = start(Resume::Gone, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!(
        (c.ok, c.explicit_errors, c.renegotiations, c.reissued),
        (1, 1, 1, 1)
    );
    assert!(matches!(
        o.traces[0].answer,
        Some(ResumeAnswer::Refused { status: 404 })
    ));
    let (target, _) = start(Resume::Gone, 1).await;
    let o = run(config(target, Policy::Naive, 1)).await;
    assert_eq!(
        (
            o.counters.failed,
            o.counters.silent_loss,
            o.counters.explicit_errors
        ),
        (1, 0, 1)
    );
}

#[tokio::test]
async fn open_loop_rate_runs_every_call_from_its_schedule() {
    let (target, _) = start(Resume::Replay, 0).await;
    let mut cfg = config(target, Policy::Strict, 20);
    cfg.sessions = 2;
    cfg.rate = Some(400.0);
    let o = run(cfg).await;
    assert_eq!((o.counters.calls, o.counters.ok), (20, 20));
    // 20 calls at 400/s are scheduled over 47.5 ms.
    assert!(o.elapsed >= Duration::from_millis(45), "{:?}", o.elapsed);
}

#[tokio::test]
async fn strict_counts_a_replay_that_skips_an_owed_event_as_a_replay_gap() {
    let (target, _) = start(Resume::Skip, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    assert_eq!(
        (c.ok, c.replay_gap, c.fresh_stream, c.reissued),
        (1, 1, 0, 1),
        "{:?}",
        o.errors
    );
}

#[tokio::test]
async fn strict_treats_a_sequence_jump_on_resume_as_a_discontinuity() {
    let (target, _) = start(Resume::Jump, 1).await;
    let o = run(config(target, Policy::Strict, 1)).await;
    let c = o.counters;
    // The resume opens with a new priming event that jumps over the owed events: the audit's
    // `fresh-stream` (continuation instead of replay), counted under that name, not a gap.
    assert_eq!(
        (
            c.ok,
            c.torn_cut,
            c.fresh_stream,
            c.replay_gap,
            c.renegotiations,
            c.reissued
        ),
        (1, 1, 1, 0, 1, 1)
    );
    assert_eq!(o.errors.get("discontinuity"), Some(&1));
}

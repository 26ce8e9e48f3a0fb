//! Cuts with provider meaning, on real sockets (lab → proxy → raw client): each LLM position
//! of `sse_cut`, on each API, with each action, leaves the client exactly what the position
//! promises, and the cut is recorded with that position.

use tearline::lab::LabConfig;
use tearline::lab::llm::Knobs;
use tearline::vocab::LlmApi;
use tearline::wire::LlmPos;
use tearline::wire::llm_args::ArgsStatus;
use tearline::wire::record::CutRecord;

use crate::llm_support::*;

const TOKENS: u32 = 12;

fn lab() -> LabConfig {
    LabConfig {
        llm: Knobs {
            tokens: TOKENS,
            ..Knobs::default()
        },
        ..LabConfig::default()
    }
}

/// One request cut at `at` with `action` (and `stall_ms` when given); the reply and the cut.
async fn cut_once(
    api: LlmApi,
    tool: bool,
    at: LlmPos,
    action: &str,
    stall_ms: Option<i64>,
) -> (Reply, Vec<tearline::wire::CutPoint>) {
    let mut pairs = vec![
        ("kind", s("sse_cut")),
        ("at", s(at.as_str())),
        ("path", s("/v1/*")),
        ("action", s(action)),
    ];
    if let Some(ms) = stall_ms {
        pairs.push(("stall_ms", i(ms)));
    }
    let rig = Rig::start(lab(), vec![fault(&pairs)], 7).await;
    let reply = rig.ask(api, &request_body(api, tool)).await;
    // The observer's cut report follows the client's end: wait for it (bounded).
    let mut found = Vec::new();
    for _ in 0..200 {
        found = cuts(&rig.recorder.all());
        if !found.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    (reply, found)
}

/// What the client must hold after a cut at `at`.
fn check(api: LlmApi, tool: bool, at: LlmPos, r: &Reply, label: &str) {
    let seen = &r.seen;
    let all_deltas = if tool { 0 } else { u64::from(TOKENS) };
    match at {
        LlmPos::BeforeFirstDelta => {
            assert!(seen.events >= 1, "{label}: {seen:?}");
            assert_eq!((seen.deltas, seen.args), (0, None), "{label}: {seen:?}");
            assert!(seen.completion.is_none(), "{label}");
        }
        LlmPos::MidDelta => {
            assert!(seen.torn, "{label}: a delta is torn");
            assert!(seen.deltas < all_deltas, "{label}: {seen:?}");
            assert!(seen.completion.is_none(), "{label}");
        }
        LlmPos::MidToolArgs => {
            assert!(seen.tool_name.is_some(), "{label}: {seen:?}");
            assert!(
                seen.args.is_none_or(|(_, s)| s != ArgsStatus::Complete),
                "{label}: {seen:?}"
            );
            assert!(seen.completion.is_none(), "{label}");
        }
        LlmPos::BeforeCompletion => {
            assert!(seen.torn, "{label}: the completion signal is torn");
            assert_eq!(seen.deltas, all_deltas, "{label}: {seen:?}");
            if tool {
                assert_eq!(
                    seen.args.map(|a| a.1),
                    Some(ArgsStatus::Complete),
                    "{label}"
                );
            }
            assert!(seen.completion.is_none(), "{label}: {seen:?}");
        }
        LlmPos::AfterCompletion => {
            assert!(seen.completion.is_some(), "{label}: {seen:?}");
            assert!(!seen.terminal, "{label}: {seen:?}");
            assert_ne!(api, LlmApi::Responses);
        }
    }
}

async fn every_position(api: LlmApi) {
    for at in LlmPos::ALL {
        if at == LlmPos::AfterCompletion && api == LlmApi::Responses {
            continue;
        }
        let tool = at == LlmPos::MidToolArgs;
        for action in ["reset", "fin", "clean-end"] {
            let label = format!("{api} {at} {action}");
            let (reply, cuts) = cut_once(api, tool, at, action, None).await;
            assert_eq!(reply.status, 200, "{label}");
            check(api, tool, at, &reply, &label);
            assert_eq!(cuts.len(), 1, "{label}: {cuts:?}");
            assert_eq!(cuts[0].llm, Some(at), "{label}");
            let record = CutRecord::from_observation(
                &tearline::wire::Observation::Cut {
                    conn: 0,
                    direction: tearline::vocab::Direction::Downstream,
                    action: tearline::vocab::CutAction::Reset,
                    point: cuts[0].clone(),
                },
                "llm",
                std::time::SystemTime::now(),
            )
            .expect("record");
            assert_eq!(
                record.point.llm.map(|p| p.as_str()),
                Some(at.as_str()),
                "{label}"
            );
            assert_eq!(
                record.point.by,
                Some("sse_cut"),
                "{label}: the pump names the fault"
            );
            match action {
                "reset" => assert_eq!(
                    reply.error,
                    Some(std::io::ErrorKind::ConnectionReset),
                    "{label}"
                ),
                "fin" => {
                    assert_eq!(reply.error, None, "{label}");
                    assert!(!reply.body_complete, "{label}");
                }
                _ => {
                    assert!(reply.body_complete, "{label}: a clean end of the body");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_cuts_land_at_every_llm_position() {
    every_position(LlmApi::ChatCompletions).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_cuts_land_at_every_llm_position() {
    every_position(LlmApi::Responses).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cuts_land_at_every_llm_position() {
    every_position(LlmApi::Messages).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_before_the_completion_signal_then_the_action() {
    for api in LlmApi::ALL {
        let (reply, cuts) =
            cut_once(api, false, LlmPos::BeforeCompletion, "clean-end", Some(50)).await;
        check(
            api,
            false,
            LlmPos::BeforeCompletion,
            &reply,
            &format!("{api} stall"),
        );
        assert!(reply.body_complete, "{api}");
        assert_eq!(cuts.len(), 1, "{api}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_positions_never_cut_streams_of_other_paths() {
    // A plain SSE feed through the same fault has no LLM positions: never cut; the LLM
    // stream on the next connection is.
    let cfg = LabConfig {
        plain_path: Some("/events".into()),
        ..lab()
    };
    let rig = Rig::start(
        cfg,
        vec![fault(&[("kind", s("sse_cut")), ("at", s("mid-delta"))])],
        3,
    )
    .await;
    let mut c = tokio::net::TcpStream::connect(rig.proxy)
        .await
        .expect("connect");
    let req =
        "GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n";
    tokio::io::AsyncWriteExt::write_all(&mut c, req.as_bytes())
        .await
        .expect("send");
    let mut out = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut c, &mut out).await;
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.contains("\"last\":true"),
        "{text}"
    );
    assert!(text.ends_with("0\r\n\r\n"), "the feed ends whole");
    assert!(
        cuts(&rig.recorder.all()).is_empty(),
        "the plain feed was cut"
    );
    let r = rig
        .ask(
            LlmApi::ChatCompletions,
            &request_body(LlmApi::ChatCompletions, false),
        )
        .await;
    assert!(
        r.seen.torn && !r.seen.terminal,
        "the LLM stream is cut mid-delta"
    );
}

/// The deltas (or argument bytes, with `tool`) the client held after each of `asks` requests
/// through one proxy cutting at `at` with `nth` (the default when `None`).
async fn held_after_cuts(
    api: LlmApi,
    at: LlmPos,
    nth: Option<[i64; 2]>,
    asks: usize,
) -> Vec<(u64, Option<(u64, ArgsStatus)>)> {
    let mut pairs = vec![
        ("kind", s("sse_cut")),
        ("at", s(at.as_str())),
        ("action", s("clean-end")),
    ];
    if let Some([a, b]) = nth {
        pairs.push(("nth", toml::Value::Array(vec![i(a), i(b)])));
    }
    let rig = Rig::start(lab(), vec![fault(&pairs)], 11).await;
    let tool = at == LlmPos::MidToolArgs;
    let mut held = Vec::new();
    for _ in 0..asks {
        let r = rig.ask(api, &request_body(api, tool)).await;
        assert!(
            r.seen.completion.is_none(),
            "{api} {at}: not cut: {:?}",
            r.seen
        );
        held.push((r.seen.deltas, r.seen.args));
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_delta_cuts_the_drawn_delta_and_spreads_over_the_answer() {
    for api in LlmApi::ALL {
        let held = held_after_cuts(api, LlmPos::MidDelta, Some([3, 3]), 2).await;
        assert!(held.iter().all(|h| h.0 == 3), "{api}: {held:?}");
        let held = held_after_cuts(api, LlmPos::MidDelta, Some([0, 0]), 2).await;
        assert!(held.iter().all(|h| h.0 == 0), "{api}: {held:?}");
    }
    // By default the delta is drawn from the first eight, both ends included.
    let held = held_after_cuts(LlmApi::ChatCompletions, LlmPos::MidDelta, None, 40).await;
    let deltas: std::collections::BTreeSet<u64> = held.iter().map(|h| h.0).collect();
    assert_eq!(deltas.first(), Some(&0), "{deltas:?}");
    assert_eq!(deltas.last(), Some(&7), "{deltas:?}");
    assert!(deltas.len() >= 5, "{deltas:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_tool_args_cuts_past_the_first_piece_when_drawn_so() {
    for api in LlmApi::ALL {
        let first = held_after_cuts(api, LlmPos::MidToolArgs, Some([0, 0]), 1).await;
        let later = held_after_cuts(api, LlmPos::MidToolArgs, Some([2, 2]), 1).await;
        let bytes = |h: &[(u64, Option<(u64, ArgsStatus)>)]| h[0].1.map_or(0, |a| a.0);
        assert_eq!(bytes(&first), 0, "{api}: {first:?}");
        assert!(bytes(&later) > 0, "{api}: {later:?}");
        assert_ne!(later[0].1.map(|a| a.1), Some(ArgsStatus::Complete), "{api}");
    }
}

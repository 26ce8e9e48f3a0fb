//! The four HTTP/2 fault kinds through the stream relay, each against hyper's HTTP/2 server or
//! client (real peers) on 127.0.0.1:0: `goaway` (the client sees `GOAWAY` with the last stream
//! the server got, then the close), `hold_headers` (no response headers reach the client before
//! the response's first `DATA`), `flow_stall` (a stream stalls for the withheld credit, then
//! completes byte-exact), `refuse_streams` (the stream past the limit gets `REFUSED_STREAM`,
//! the others flow).

use std::time::Duration;

use http_body_util::BodyExt;
use tearline::wire::Observation;
use tearline::wire::h2::frame::{flags, goaway_fields, rst_code};
use tearline::wire::h2::{ErrorCode, FrameType};
use tokio::time::{Instant, timeout};

use super::h2_kinds_peers::*;

const LIMIT: Duration = Duration::from_secs(20);

fn ends(f: &Read, stream: u32) -> bool {
    f.header.stream == stream
        && matches!(f.header.kind, FrameType::Data | FrameType::Headers)
        && f.header.has(flags::END_STREAM)
}

#[tokio::test]
async fn goaway_names_the_last_stream_the_server_got_then_the_connection_closes() {
    timeout(LIMIT, async {
        let server = hyper_h2_server().await;
        let p = h2_proxy(
            server,
            "kind = \"goaway\"\nafter_streams = 2\ndrain_ms = 300",
        )
        .await;
        let mut c = Raw::client(p.addr).await;
        c.get(1, "/json").await;
        assert!(c.until(|f| ends(f, 1)).await.is_some(), "stream 1 answered");
        c.get(3, "/json").await;
        let goaway = c
            .until(|f| f.header.kind == FrameType::GoAway)
            .await
            .expect("a GOAWAY before the close");
        assert_eq!(
            goaway_fields(&goaway.payload),
            Some((3, ErrorCode::NO_ERROR)),
            "graceful, naming stream 3: the last one forwarded"
        );
        // A stream the client opened before it read the GOAWAY is not processed.
        c.get(5, "/json").await;
        let mut answered_3 = c.log.iter().any(|f| ends(f, 3));
        let mut refused_5 = None;
        while let Some(f) = c.next().await {
            answered_3 |= ends(&f, 3);
            if f.header.kind == FrameType::RstStream && f.header.stream == 5 {
                refused_5 = rst_code(&f.payload);
            }
            assert!(
                !(f.header.stream == 5 && f.header.kind == FrameType::Data),
                "stream 5 was processed"
            );
        }
        assert!(
            answered_3,
            "stream 3 (at the last id) completes in the drain"
        );
        assert_eq!(refused_5, Some(ErrorCode::REFUSED_STREAM));
        let by_proxy = p.seen.0.lock().expect("seen").iter().any(|o| {
            matches!(
                o,
                Observation::GoAway {
                    last_stream: 3,
                    by_proxy: true,
                    ..
                }
            )
        });
        assert!(by_proxy, "the GOAWAY is recorded as the proxy's");
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn held_response_headers_reach_the_client_only_with_the_first_data() {
    timeout(LIMIT, async {
        let (upstream, accepted) = one_connection().await;
        let p = h2_proxy(upstream, "kind = \"hold_headers\"\nonly_sse = false").await;
        let pinged = signal();
        let go = signal();
        let (pinged2, go2) = (pinged.clone(), go.clone());
        // The server (scripted, so that the order of its frames is known): the response
        // HEADERS, then a PING; once the client acknowledged the PING — it read every frame
        // before it — the first DATA.
        let server = tokio::spawn(async move {
            let mut s = Raw::server(accepted.await.expect("accepted")).await;
            let req = s
                .until(|f| f.header.kind == FrameType::Headers)
                .await
                .expect("request");
            let id = req.header.stream;
            s.frame(
                FrameType::Headers,
                flags::END_HEADERS,
                id,
                &sse_response_block(),
            )
            .await;
            s.frame(FrameType::Ping, 0, 0, b"barrier!").await;
            s.until(|f| f.header.kind == FrameType::Ping && f.header.has(flags::ACK))
                .await
                .expect("ping ack");
            pinged2.notify_one();
            go2.notified().await;
            s.frame(FrameType::Data, flags::END_STREAM, id, b"data: first\n\n")
                .await;
            while s.next().await.is_some() {}
        });
        let mut client = hyper_h2_client(p.addr).await;
        let mut response = Box::pin(client.send_request(get("/events")));
        tokio::select! {
            r = &mut response => panic!("headers arrived before any DATA: {r:?}"),
            () = pinged.notified() => {}
        }
        // The client acknowledged the PING that followed the HEADERS: had the HEADERS reached
        // it, hyper would have read them first.
        assert!(
            futures_util::poll!(&mut response).is_pending(),
            "the response headers passed the proxy before the first DATA"
        );
        go.notify_one();
        let resp = response.await.expect("response");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&body[..], b"data: first\n\n");
        drop(client);
        server.abort();
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_flow_stalled_stream_waits_for_the_withheld_credit_then_completes() {
    timeout(LIMIT, async {
        let server = hyper_h2_server().await;
        let stall = Duration::from_millis(400);
        let p = h2_proxy(
            server,
            "kind = \"flow_stall\"\nstream = \"all\"\nstall_ms = 400",
        )
        .await;
        let mut client = hyper_h2_client(p.addr).await;
        let start = Instant::now();
        let resp = client.send_request(get("/big")).await.expect("response");
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        let took = start.elapsed();
        assert_eq!(body.len(), 16 * 16_384, "every byte arrives");
        for (i, chunk) in body.chunks(16_384).enumerate() {
            assert!(
                chunk.iter().all(|b| usize::from(*b) == i),
                "chunk {i} intact"
            );
        }
        // 256 KiB through a 64 KiB stream window needs credit the proxy held for 400 ms.
        assert!(took >= stall, "the stream did not stall: {took:?}");
        let again = client.send_request(get("/json")).await.expect("response");
        assert_eq!(again.status(), 200, "the connection lives on");
        drop(p);
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn the_stream_past_max_concurrent_is_refused_and_the_open_one_flows() {
    timeout(LIMIT, async {
        let server = hyper_h2_server().await;
        let p = h2_proxy(server, "kind = \"refuse_streams\"\nmax_concurrent = 1").await;
        let mut c = Raw::client(p.addr).await;
        c.get(1, "/open").await;
        c.until(|f| f.header.stream == 1 && f.header.kind == FrameType::Data)
            .await
            .expect("stream 1's first event");
        c.get(3, "/json").await;
        let rst = c
            .until(|f| f.header.kind == FrameType::RstStream && f.header.stream == 3)
            .await
            .expect("stream 3 reset");
        assert_eq!(rst_code(&rst.payload), Some(ErrorCode::REFUSED_STREAM));
        assert!(
            !c.log.iter().any(|f| f.header.stream == 3),
            "nothing of stream 3 before its refusal"
        );
        // The client ends stream 1: its place frees, and the next stream is served.
        c.frame(
            FrameType::RstStream,
            0,
            1,
            &ErrorCode::CANCEL.0.to_be_bytes(),
        )
        .await;
        c.get(5, "/json").await;
        let end = c
            .until(|f| ends(f, 5) || f.header.stream == 5 && f.header.kind == FrameType::RstStream)
            .await;
        let end = end.expect("stream 5 answered");
        assert_ne!(
            end.header.kind,
            FrameType::RstStream,
            "stream 5 was refused"
        );
    })
    .await
    .expect("in time");
}

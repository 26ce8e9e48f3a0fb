//! Lab sessions end: after an idle timeout (a session followed by a connected reader is not
//! idle), and on DELETE; a client that sends half a request is closed at the read timeout.

use std::time::Duration;

use crate::common::lab_client::{ACCEPT_BOTH, JSON, Lab, call, within};
use tearline::lab::LabConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PING: &[u8] = br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;

async fn ping(lab: &Lab, sid: &str) -> u16 {
    let mut c = lab.connect().await;
    let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid)];
    c.request("POST", "/mcp", &h, PING).await.status
}

fn config(idle: Duration) -> LabConfig {
    LabConfig {
        session_idle: Some(idle),
        read_timeout: Duration::from_millis(300),
        ..LabConfig::default()
    }
}

#[tokio::test]
async fn an_idle_session_expires_while_a_used_one_and_one_with_a_reader_stay() {
    within(async {
        let idle = Duration::from_millis(300);
        let lab = Lab::start(config(idle)).await;
        let forgotten = lab.session(&[]).await;
        let used = lab.session(&[]).await;
        let streaming = lab.session(&[]).await;
        // `streaming` follows a 1.5 s stream and sends nothing else meanwhile.
        let mut c = lab.connect().await;
        let sid = streaming.clone();
        let stream = tokio::spawn(async move {
            let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
            let body = call(1, "progress", r#"{"n":30,"interval":50}"#);
            c.request("POST", "/mcp", &h, &body).await
        });
        // `used` is named by a request every 60 ms for four idle periods.
        let until = tokio::time::Instant::now() + idle * 4;
        while tokio::time::Instant::now() < until {
            assert_eq!(ping(&lab, &used).await, 200, "a used session stays");
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        let streamed = stream.await.expect("stream task");
        assert_eq!(streamed.status, 200);
        assert_eq!(streamed.chunks.len(), 32, "priming, 30 progress, result");
        assert_eq!(ping(&lab, &streaming).await, 200, "a reader kept it alive");
        assert_eq!(
            ping(&lab, &forgotten).await,
            404,
            "idle for 4 periods: expired"
        );
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn delete_ends_the_session_and_a_second_delete_finds_nothing() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let mut c = lab.connect().await;
        let s = ("Mcp-Session-Id", sid.as_str());
        assert_eq!(c.request("DELETE", "/mcp", &[s], b"").await.status, 200);
        assert_eq!(ping(&lab, &sid).await, 404);
        let mut c = lab.connect().await;
        assert_eq!(c.request("DELETE", "/mcp", &[s], b"").await.status, 404);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_client_sending_half_a_request_is_closed_at_the_read_timeout() {
    within(async {
        let lab = Lab::start(config(Duration::from_secs(60))).await;
        let mut slow = TcpStream::connect(lab.addr).await.expect("connect");
        slow.write_all(b"POST /mc").await.expect("write");
        let t = tokio::time::Instant::now();
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match slow.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "still open after 5 s");
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        // Others are still served.
        let sid = lab.session(&[]).await;
        assert_eq!(ping(&lab, &sid).await, 200);
        lab.stop().await;
    })
    .await;
}

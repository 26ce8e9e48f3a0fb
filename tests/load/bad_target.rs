//! A bad target ends the run with a clear error, quickly: refused port, a server that does not
//! speak HTTP, an HTTP server without the MCP endpoint (404), and one that never answers.

use std::time::{Duration, Instant};

use tearline::load::http::HttpError;
use tearline::load::{self, LoadConfig, LoadError, SessionError, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A server that answers every connection with `reply` after reading the request's first bytes
/// (or never answers if `reply` is None), then closes.
async fn server(reply: Option<&'static [u8]>) -> Target {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = sock.read(&mut buf).await;
                match reply {
                    Some(bytes) => {
                        let _ = sock.write_all(bytes).await;
                        let _ = sock.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap()
}

async fn run_against(target: Target) -> (LoadError, Duration) {
    let mut cfg = LoadConfig::new(target, "blob", serde_json::json!({}));
    cfg.connect_timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("a bad target must not hang the run");
    let err = r.expect_err("a bad target is an error");
    (err, t0.elapsed())
}

#[tokio::test]
async fn refused_port_is_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
    let (err, took) = run_against(target).await;
    assert!(
        matches!(
            &err,
            LoadError::Target {
                source: SessionError::Http(HttpError::Connect { .. }),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(2));
}

#[tokio::test]
async fn non_http_server_is_reported_as_not_http() {
    let target = server(Some(b"SSH-2.0-OpenSSH_9.6\r\n")).await;
    let (err, took) = run_against(target).await;
    assert!(
        matches!(
            &err,
            LoadError::Target {
                source: SessionError::Http(HttpError::NotHttp(_)),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(2));
}

#[tokio::test]
async fn http_404_names_the_status() {
    let target = server(Some(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")).await;
    let (err, _) = run_against(target).await;
    assert!(
        matches!(
            &err,
            LoadError::Target {
                source: SessionError::Status { status: 404 },
                ..
            }
        ),
        "{err:?}"
    );
    let chain = format!(
        "{err}: {}",
        std::error::Error::source(&err)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    assert!(chain.contains("404"), "{chain}");
}

#[tokio::test]
async fn silent_server_times_out_instead_of_hanging() {
    let target = server(None).await;
    let (err, took) = run_against(target).await;
    assert!(
        matches!(
            &err,
            LoadError::Target {
                source: SessionError::Http(HttpError::Timeout),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(3));
}

#[tokio::test]
async fn cli_exits_non_zero_with_a_clear_message_on_a_refused_port() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
            .args([
                "load",
                "--target",
                &format!("http://127.0.0.1:{port}/mcp"),
                "--calls",
                "1",
            ])
            .output(),
    )
    .await
    .expect("the CLI must not hang")
    .expect("the CLI runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

//! `tearline load` judges its own runs: `--fail-on` (names checked before the load, exit 99 when
//! a condition is true, 0 when none is) and a failure when no call succeeded, with the server's
//! first message of each error kind.

use std::process::Output;
use std::time::Duration;

use tearline::lab::{LabConfig, serve};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

async fn lab() -> (String, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, LabConfig::default(), shutdown.clone()));
    (format!("http://127.0.0.1:{port}/mcp"), shutdown)
}

async fn load(target: &str, extra: &[&str]) -> Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
            .args([
                "load",
                "--target",
                target,
                "--sessions",
                "1",
                "--calls",
                "3",
            ])
            .args(["--args", r#"{"size":1024,"lines":1}"#])
            .args(extra)
            .output(),
    )
    .await
    .expect("the CLI must not hang")
    .expect("the CLI runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_succeeding_exits_2_with_the_servers_first_message() {
    let (target, stop) = lab().await;
    let out = load(&target, &["--tool", "no-such-tool"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no call succeeded"), "{stderr}");
    assert!(stderr.contains("jsonrpc-error=3"), "{stderr}");
    assert!(stderr.contains("unknown tool"), "{stderr}");
    assert!(
        text(&out.stdout).contains("first jsonrpc-error:"),
        "summary shows it"
    );

    let out = load(&target, &["--tool", "blob"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_on_exits_99_when_its_condition_is_true_and_0_when_not() {
    let (target, stop) = lab().await;
    let out = load(
        &target,
        &["--fail-on", "calls>0", "--fail-on", "silent-loss>0"],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(99), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("FAILED calls>0  (actual 3)"), "{stdout}");
    assert!(stdout.contains("ok     silent-loss>0"), "{stdout}");

    let out = load(&target, &["--fail-on", "p99(strict.call)>3600s"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    stop.cancel();
}

#[tokio::test]
async fn an_unknown_name_exits_2_before_any_connection() {
    // Nothing listens here: a run that started would fail to connect instead.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        l.local_addr().expect("addr").port()
    };
    let target = format!("http://127.0.0.1:{port}/mcp");
    let out = load(&target, &["--fail-on", "p99(naive.call)>1s"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("histograms: strict.first-event"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot connect"), "{stderr}");
    let out = load(
        &target,
        &["--fail-on", "p99(max-gap)>1s", "--fail-on", "naive.ok>0"],
    )
    .await;
    let stderr = text(&out.stderr);
    assert!(stderr.contains("policies: strict"), "{stderr}");
    let out = load(
        &target,
        &["--client", "eventsource", "--fail-on", "calls>0"],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--fail-on is for the MCP and LLM clients"),
        "{stderr}"
    );
    let out = load(&target, &["--fail-on", "p99(strict.call)>1s"]).await;
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot connect"),
        "valid names reach the run: {stderr}"
    );
}

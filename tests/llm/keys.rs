//! API keys never reach an output: a key planted in the load client's environment travels on
//! every request (checked first against a server that records what it gets), and after a run
//! of `tearline load` through `tearline proxy` with cuts, verdicts, logs at debug level, a
//! findings log, a cuts log and a report directory, no file the run wrote holds it — nor when
//! the key travels in the URL's query string (`?key=…`), which records name without values.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tearline::lab::LabConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-tearline-planted-0d1f2e3c4b5a69788796a5b4c3d2e1f0";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tearline")
}

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The first `127.0.0.1:PORT` in `path`, waiting up to 10 s for it to appear.
pub async fn address_in(path: &Path) -> String {
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(i) = text.find("127.0.0.1:") {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
                .unwrap_or(rest.len());
            let addr = &rest[..end];
            if addr.len() > "127.0.0.1:".len() {
                return addr.to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no address in {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_api_key_is_sent_and_never_written_anywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path();

    // 1. The load client sends the key (a server that records the request head).
    let rec = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let rec_addr = rec.local_addr().expect("addr");
    let seen = tokio::spawn(async move {
        let (mut s, _) = rec.accept().await.expect("accept");
        let mut buf = vec![0u8; 16384];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s
            .write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        String::from_utf8_lossy(&head).into_owned()
    });
    let probe = Command::new(bin())
        .args([
            "load",
            "--target",
            &format!("http://{rec_addr}/v1/messages"),
            "--calls",
            "1",
            "--sessions",
            "1",
            "--policy",
            "naive",
            "--api-key-env",
            "TL_PLANTED_KEY",
        ])
        .env("TL_PLANTED_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run load");
    // The only call got a 500: no call succeeded, which `load` reports with exit 2.
    assert_eq!(probe.code(), Some(2), "{probe:?}");
    let head = tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .expect("request seen")
        .expect("recorder");
    assert!(head.contains(&format!("Bearer {KEY}")), "{head}");
    assert!(head.contains(&format!("x-api-key: {KEY}")), "{head}");

    // 2. A run through the proxy with cuts and every output on.
    let lab = TcpListener::bind("127.0.0.1:0").await.expect("bind lab");
    let lab_addr = lab.local_addr().expect("lab addr");
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(tearline::lab::serve(
        lab,
        LabConfig::default(),
        stop.clone(),
    ));
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/llm-truncation.toml");
    let proxy_err = std::fs::File::create(out.join("proxy.stderr")).expect("file");
    let proxy_out = std::fs::File::create(out.join("proxy.stdout")).expect("file");
    let mut proxy = Command::new(bin())
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(lab_addr.to_string())
        .arg("--profile")
        .arg(&profile)
        .args(["--api", "off", "-vv", "--findings-log"])
        .arg(out.join("findings.jsonl"))
        .arg("--cuts-log")
        .arg(out.join("cuts.jsonl"))
        .stdout(proxy_out)
        .stderr(proxy_err)
        .spawn()
        .expect("start proxy");
    let proxy_addr = address_in(&out.join("proxy.stderr")).await;
    for (i, (api, tools)) in [
        ("chat/completions", false),
        ("responses", true),
        ("messages", false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut args = vec![
            "load".to_owned(),
            "--target".to_owned(),
            format!("http://{proxy_addr}/v1/{api}"),
            "--calls".to_owned(),
            "8".to_owned(),
            "--sessions".to_owned(),
            "2".to_owned(),
            "--policy".to_owned(),
            "both".to_owned(),
            "-vv".to_owned(),
            "--api-key-env".to_owned(),
            "TL_PLANTED_KEY".to_owned(),
            "--report-dir".to_owned(),
            out.join(format!("report-{i}")).display().to_string(),
        ];
        if tools {
            args.push("--llm-tools".to_owned());
        }
        let status = Command::new(bin())
            .args(&args)
            .env("TL_PLANTED_KEY", KEY)
            .stdout(std::fs::File::create(out.join(format!("load-{i}.stdout"))).expect("f"))
            .stderr(std::fs::File::create(out.join(format!("load-{i}.stderr"))).expect("f"))
            .status()
            .expect("run load");
        assert!(status.success(), "load {api}: {status:?}");
    }
    // 3. A key in the URL's query string (Gemini's `?key=`, Azure's `?sig=`): requests through
    //    the proxy until one is cut (half are), so a cut record and findings name the request.
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut cut = false;
    for _ in 0..40 {
        let mut s = tokio::net::TcpStream::connect(&proxy_addr)
            .await
            .expect("connect to the proxy");
        let req = format!(
            "POST /v1/chat/completions?alt=sse&key={KEY} HTTP/1.1\r\nHost: x\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.expect("request");
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
        if !String::from_utf8_lossy(&got).contains("[DONE]") {
            cut = true;
            break;
        }
    }
    assert!(cut, "no request with a key in its URL was cut in 40");
    // SIGTERM: the proxy prints its summary and flushes its logs.
    let _ = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status();
    let _ = tokio::task::spawn_blocking(move || proxy.wait()).await;
    stop.cancel();

    let cuts = std::fs::read_to_string(out.join("cuts.jsonl")).unwrap_or_default();
    assert!(
        cuts.contains("/v1/chat/completions?alt=…&key=…"),
        "the cut of a keyed URL names its parameters: {cuts}"
    );
    let findings = std::fs::read_to_string(out.join("findings.jsonl")).unwrap_or_default();
    assert!(
        findings.contains("llm-truncated") || findings.contains("llm-retried"),
        "the run produced no LLM verdict: {findings}"
    );
    let mut all = Vec::new();
    files(out, &mut all);
    assert!(all.len() >= 10, "{all:?}");
    for f in &all {
        let bytes = std::fs::read(f).unwrap_or_default();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "{} holds the planted key",
            f.display()
        );
        // Nor a recognisable part of it.
        assert!(
            !bytes.windows(16).any(|w| w == &KEY.as_bytes()[8..24]),
            "{} holds part of the planted key",
            f.display()
        );
    }
}

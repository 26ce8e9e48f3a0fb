//! Real HTTPS clients as users run them, trusting the CA that `--tls-self-signed` prints:
//! `curl --cacert`, Python `httpx` (an SSL context from the CA file) and Node `fetch` with
//! `NODE_EXTRA_CA_CERTS`, each through the proxy terminating TLS in front of a plain server.
//! Each must negotiate HTTP/1.1 (the only ALPN protocol a proxy offers before a plain server
//! unless `--upstream-alpn` says h2) and get the server's answer.

use crate::common;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use crate::common::tls::*;

/// A proxy terminating TLS with a local-CA certificate, in front of a plain server; returns
/// the proxy, its URL and the CA file (and the temporary directory holding it).
async fn proxy() -> (Running, String, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let t = terminator(dir.path());
    let ca = t.ca_file().unwrap().to_owned();
    let p = start_proxy(
        &plain_server().await.to_string(),
        |c| c.tls.client = Some(t),
        Vec::new(),
    )
    .await;
    let url = format!("https://localhost:{}/hello", p.addr.port());
    (p, url, ca, dir)
}

async fn run(cmd: std::process::Command) -> Output {
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the client finishes")
        .expect("the client starts")
}

fn stdout_of(o: &Output) -> String {
    assert!(
        o.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test]
async fn curl_with_cacert_gets_the_answer_over_http1() {
    let (p, url, ca, _dir) = proxy().await;
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "--cacert"])
        .arg(&ca)
        .args(["-w", "\\nversion=%{http_version}", &url]);
    let out = stdout_of(&run(cmd).await);
    let host = format!("host=localhost:{}", p.addr.port());
    assert!(out.contains(&format!("sni=none;{host};alpn=none")), "{out}");
    assert!(
        out.ends_with("version=1.1"),
        "ALPN must pick HTTP/1.1: {out}"
    );
}

#[tokio::test]
async fn curl_without_the_ca_is_refused() {
    let (_p, url, _ca, _dir) = proxy().await;
    let mut cmd = std::process::Command::new("curl");
    // The system store only, which does not hold the test CA.
    cmd.args(["-sS", "--max-time", "20", &url]);
    let o = run(cmd).await;
    assert!(!o.status.success(), "curl must refuse an unknown CA");
    // curl's exit code 60: peer certificate cannot be authenticated with known CA certificates.
    assert_eq!(
        o.status.code(),
        Some(60),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[tokio::test]
async fn python_httpx_trusting_the_ca_gets_the_answer() {
    let py = common::peers::python();
    let (p, url, ca, _dir) = proxy().await;
    let script = r#"
import ssl, sys, httpx
ctx = ssl.create_default_context(cafile=sys.argv[2])
r = httpx.get(sys.argv[1], verify=ctx, timeout=20)
print(r.http_version, r.status_code, r.text)
"#;
    let mut cmd = py;
    cmd.arg("-c").arg(script).arg(&url).arg(&ca);
    let out = stdout_of(&run(cmd).await);
    let host = format!("host=localhost:{}", p.addr.port());
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(out.contains(&format!("sni=none;{host};alpn=none")), "{out}");
}

#[tokio::test]
async fn node_fetch_with_node_extra_ca_certs_gets_the_answer() {
    let node = common::peers::node();
    let (p, url, ca, _dir) = proxy().await;
    let mut cmd = node;
    cmd.env("NODE_EXTRA_CA_CERTS", &ca).arg("-e").arg(
        "fetch(process.argv[1]).then(async r => console.log(r.status, await r.text()))\
         .catch(e => { console.error(e, e.cause); process.exit(1); })",
    );
    cmd.arg(&url);
    let out = stdout_of(&run(cmd).await);
    let host = format!("host=localhost:{}", p.addr.port());
    assert!(out.starts_with("200 "), "{out}");
    assert!(out.contains(&format!("sni=none;{host};alpn=none")), "{out}");
}

//! A published Toxiproxy client (PyPI `toxiproxy-python`) drives tearline's control API over
//! the real relay: create a proxy, add latency, observe the delay, remove it, reset, delete.
//!
//! Needs `python3` with pip; the pinned client is installed into `tests/peers/` on first use.

use crate::common;
use std::net::SocketAddr;
use std::process::Stdio;

use crate::common::control::live::start_live;
use crate::common::control::{TEST_TIMEOUT, echo_server};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/toxiproxy_client/latency_roundtrip.py"
);

/// Runs the client script; returns its exit code and output.
async fn run_client(api: SocketAddr, upstream: SocketAddr, extra: &[&str]) -> (i32, String) {
    let child = tokio::process::Command::from(common::peers::python())
        .arg(SCRIPT)
        .arg(api.to_string())
        .arg(upstream.to_string())
        .args(extra)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match child.await {
        Ok(o) => o,
        Err(e) => panic!("cannot run python3 ({e}); install Python 3.10+"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(
        code, 3,
        "the Toxiproxy client is missing; run `tests/peers/provision.sh python`: {text}"
    );
    (code, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_python_client_adds_latency_observes_it_and_removes_it() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let upstream = echo_server().await;
        let (code, text) = run_client(live.addr, upstream, &[]).await;
        assert_eq!(code, 0, "{text}");
        assert!(text.starts_with("OK "), "{text}");
        println!("{text}");
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

const FULL_FLOW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/toxiproxy_client/full_flow.py"
);

/// `tearline proxy` started as `toxiproxy-server` is: the control API alone, on a free port.
/// Returns the child and the API address it printed.
async fn start_api_only(extra: &[&str]) -> (tokio::process::Child, SocketAddr) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(["proxy", "--api", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tearline proxy");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.expect("read stdout") {
        if let Some(addr) = line.strip_prefix("tearline proxy: control API on http://") {
            let addr = addr.parse().expect("API address");
            // Keep draining so the child never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return (child, addr);
        }
        seen.push(line);
    }
    panic!("tearline proxy exited without starting the API: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_client_runs_its_whole_flow_against_an_api_only_server() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (mut child, api) = start_api_only(&[]).await;
        let upstream = echo_server().await;
        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
        let busy_addr = busy.local_addr().expect("busy addr").to_string();
        let out = tokio::process::Command::from(common::peers::python())
            .arg(FULL_FLOW)
            .arg(api.to_string())
            .arg(upstream.to_string())
            .arg(&busy_addr)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("run python3");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.starts_with("OK "), "{text}");
        assert!(
            child.try_wait().expect("child status").is_none(),
            "server exited during the flow"
        );
        drop(busy);
        let _ = child.start_kill();
    })
    .await
    .expect("test timed out");
}

/// Seconds for 4 bytes to come back through `listen` (an echo upstream).
async fn round_trip(listen: &str) -> std::time::Duration {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(listen)
        .await
        .expect("connect through the proxy");
    let t0 = std::time::Instant::now();
    s.write_all(b"ping").await.expect("write");
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.expect("echo");
    assert_eq!(&buf, b"ping");
    t0.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_proxy_with_enabled_false_is_reported_down_and_enabling_keeps_its_faults() {
    use crate::common::control::call;
    use http::{Method, StatusCode};
    use serde_json::json;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let upstream = echo_server().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let profile = dir.path().join("p.toml");
        std::fs::write(
            &profile,
            format!(
                "[[proxy]]\nname = \"up\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{upstream}\"\n\n\
                 [[proxy]]\nname = \"down\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{upstream}\"\nenabled = false\n\n\
                 [[fault]]\nkind = \"latency\"\nproxy = \"down\"\nlatency_ms = 300\n"
            ),
        )
        .expect("write profile");
        let profile = profile.to_string_lossy().into_owned();
        let (mut child, api) = start_api_only(&["--profile", &profile]).await;

        let list = call(api, Method::GET, "/proxies", None).await.json();
        assert_eq!(list["up"]["enabled"], json!(true), "{list}");
        assert_eq!(list["down"]["enabled"], json!(false), "{list}");
        let up_listen = list["up"]["listen"].as_str().unwrap_or_default().to_owned();
        assert!(!up_listen.ends_with(":0"), "{list}");
        assert!(round_trip(&up_listen).await < std::time::Duration::from_millis(300));

        let r = call(
            api,
            Method::POST,
            "/proxies/down",
            Some(json!({"enabled": true})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["enabled"], json!(true));
        let down_listen = r.json()["listen"].as_str().unwrap_or_default().to_owned();
        assert!(!down_listen.ends_with(":0"), "{}", r.text());
        let took = round_trip(&down_listen).await;
        assert!(
            took >= std::time::Duration::from_millis(300),
            "the profile's 300 ms latency is not in force after enabling: {took:?}"
        );

        let r = call(api, Method::POST, "/reset", None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert!(round_trip(&down_listen).await < std::time::Duration::from_millis(300));
        let _ = child.start_kill();
    })
    .await
    .expect("test timed out");
}

const NODE_CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/peers/js/toxiproxy_client.mjs"
);

/// The published npm client (`toxiproxy-node-client`, pinned) runs version, create, list,
/// toxic add/update/get/remove, populate, reset and delete against the real runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_node_client_runs_its_whole_flow() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let upstream = echo_server().await;
        let out = tokio::process::Command::from(common::peers::node())
            .arg(NODE_CLIENT)
            .arg(live.addr.to_string())
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run node ({e}); install Node.js 20+"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{text}{err}");
        let steps: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let step = |name: &str| {
            steps
                .iter()
                .find(|s| s["step"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("no step {name} in {text}"))
        };
        use serde_json::json;
        let version = step("version")["version"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(
            version,
            format!("{{\"version\": \"{}\"}}\n", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(step("create")["enabled"], json!(true));
        assert_eq!(step("list")["names"], json!(["node"]));
        assert_eq!(
            step("add")["attributes"],
            json!({"latency": 50, "jitter": 0})
        );
        assert_eq!(
            step("update")["attributes"],
            json!({"latency": 75, "jitter": 0})
        );
        assert_eq!(step("update")["toxicity"], json!(0.5));
        assert_eq!(
            step("get")["attributes"],
            json!({"latency": 75, "jitter": 0})
        );
        assert_eq!(step("remove")["gone"], json!(true));
        assert_eq!(step("populate")["names"], json!(["pop"]));
        assert_eq!(step("delete")["names"], json!(["pop"]));
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

const PROFILE_FAULTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/toxiproxy_client/profile_faults.py"
);

/// The Python client on a proxy started from a profile: the profile's latency is listed as a
/// toxic marked `"source": "profile"` and acts, an API toxic adds to it, the profile's toxic
/// is not deleted alone, a proxy made through the API lists none, and `/reset` removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_client_sees_the_profiles_faults_as_toxics_and_reset_removes_them() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let upstream = echo_server().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let profile = dir.path().join("p.toml");
        std::fs::write(
            &profile,
            format!(
                "[[proxy]]\nname = \"svc\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{upstream}\"\n\n\
                 [[fault]]\nname = \"slow\"\nkind = \"latency\"\nlatency_ms = 300\n"
            ),
        )
        .expect("write profile");
        let profile = profile.to_string_lossy().into_owned();
        let (mut child, api) = start_api_only(&["--profile", &profile]).await;
        let out = tokio::process::Command::from(common::peers::python())
            .arg(PROFILE_FAULTS)
            .arg(api.to_string())
            .arg("svc")
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("run python3");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(3), "client missing: {text}");
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.starts_with("OK "), "{text}");
        let _ = child.start_kill();
    })
    .await
    .expect("test timed out");
}

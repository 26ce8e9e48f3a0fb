//! Starting tearline as `toxiproxy-server` is started: the real binary, under the name of the
//! entrypoint of Toxiproxy's image (`/toxiproxy`, a link, as deploy/Dockerfile.toxiproxy makes
//! it) with the image's command (`-host=0.0.0.0`) plus `-port` and `-config FILE` with a
//! Toxiproxy JSON file; and `tearline proxy --api localhost:PORT`. Docker does not run here, so
//! the image's command line is run directly.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use http::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::control::{call, echo_server};

/// A free loopback port (bound, then released for the child to take).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The child, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program args` and waits (by its stdout, not a clock) until the API listens.
fn start(program: &Path, args: &[&str]) -> Server {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tearline");
    let out = child.stdout.take().expect("stdout");
    let mut server = Server(child);
    let mut lines = BufReader::new(out).lines();
    for line in lines.by_ref().take(20) {
        let line = line.expect("stdout line");
        if line.contains("control API on") {
            // Keep reading: a closed stdout would fail the server's next line.
            std::thread::spawn(move || lines.for_each(drop));
            return server;
        }
    }
    let status = server.0.wait().ok();
    panic!("the API never reported listening (exit: {status:?})");
}

#[tokio::test]
async fn started_as_toxiproxys_image_entrypoint_it_serves_the_api_and_the_config_files_proxies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("toxiproxy");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tearline"), &link).expect("link");
    let echo = echo_server().await;
    let config = dir.path().join("toxiproxy.json");
    let proxies = json!([
        {"name": "redis", "listen": "127.0.0.1:0", "upstream": echo.to_string()},
        {"name": "off", "listen": "127.0.0.1:0", "upstream": echo.to_string(), "enabled": false}
    ]);
    std::fs::write(&config, proxies.to_string()).expect("write config");
    let port = free_port();
    let (p, c) = (
        format!("-port={port}"),
        format!("-config={}", config.display()),
    );
    let _server = start(&link, &["-host=0.0.0.0", &p, &c]);
    let api: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let r = call(api, Method::GET, "/version", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().starts_with("{\"version\": "), "{}", r.text());
    let all = call(api, Method::GET, "/proxies", None).await.json();
    assert_eq!(all["redis"]["enabled"], json!(true));
    assert_eq!(all["off"]["enabled"], json!(false));
    let listen = all["redis"]["listen"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut s = tokio::net::TcpStream::connect(&listen)
        .await
        .expect("connect");
    s.write_all(b"ping").await.expect("write");
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.expect("echo");
    assert_eq!(&buf, b"ping");
    // As toxiproxy-server on 0.0.0.0: any Host (a container reached through a port mapping).
    let host = [("host", "toxiproxy:8474")];
    let r = crate::common::control::call_with(api, Method::GET, "/proxies", &host, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

#[tokio::test]
async fn proxy_api_takes_a_host_name() {
    let port = free_port();
    let api_arg = format!("localhost:{port}");
    let _server = start(
        Path::new(env!("CARGO_BIN_EXE_tearline")),
        &["proxy", "--api", &api_arg],
    );
    let api: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let r = call(api, Method::GET, "/proxies", None).await;
    assert_eq!((r.status, r.json()), (StatusCode::OK, json!({})));
}

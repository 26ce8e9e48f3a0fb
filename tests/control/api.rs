//! Walks the whole Toxiproxy REST API over HTTP the way Toxiproxy's own api_test.go does:
//! create, list, conflicts, populate, enable/disable, toxics add/update/remove, toxicity,
//! invalid stream, reset, version — against the in-memory hub of `control_support`.

use crate::common;
use crate::common::control::{TEST_TIMEOUT, call, echo_server, is_up, start_api};
use http::{Method, StatusCode};
use serde_json::json;

async fn within<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out");
}

#[tokio::test]
async fn index_with_no_proxies_is_an_empty_object() {
    within(async {
        let api = start_api(|_| {}).await;
        let r = call(api.addr, Method::GET, "/proxies", None).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.json(), json!({}));
    })
    .await;
}

#[tokio::test]
async fn blank_name_or_upstream_gives_toxiproxys_missing_field_errors() {
    within(async {
        let api = start_api(|_| {}).await;
        let r = call(api.addr, Method::POST, "/proxies", Some(json!({}))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            r.json(),
            json!({"error": "missing required field: name", "status": 400})
        );
        let r = call(
            api.addr,
            Method::POST,
            "/proxies",
            Some(json!({"name": "test"})),
        )
        .await;
        assert_eq!(
            r.json(),
            json!({"error": "missing required field: upstream", "status": 400})
        );
    })
    .await;
}

#[tokio::test]
async fn create_binds_reports_real_address_lists_gets_and_deletes() {
    within(async {
        let api = start_api(|_| {}).await;
        let up = echo_server().await.to_string();
        let body = json!({"name": "mysql_master", "listen": "127.0.0.1:0", "upstream": up});
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let created = r.json();
        let listen = created["listen"].as_str().unwrap_or_default().to_owned();
        assert!(
            listen.starts_with("127.0.0.1:") && !listen.ends_with(":0"),
            "{listen}"
        );
        assert_eq!(created["enabled"], json!(true));
        assert_eq!(created["toxics"], json!([]));
        assert!(is_up(&listen).await);

        let list = call(api.addr, Method::GET, "/proxies", None).await.json();
        assert_eq!(list["mysql_master"], created);
        let one = call(api.addr, Method::GET, "/proxies/mysql_master", None).await;
        assert_eq!(one.status, StatusCode::OK);
        assert_eq!(one.json(), created);

        let d = call(api.addr, Method::DELETE, "/proxies/mysql_master", None).await;
        assert_eq!(d.status, StatusCode::NO_CONTENT);
        assert!(d.body.is_empty());
        assert!(!is_up(&listen).await);
        assert_eq!(
            call(api.addr, Method::GET, "/proxies", None).await.json(),
            json!({})
        );
        let again = call(api.addr, Method::DELETE, "/proxies/mysql_master", None).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND);
        assert_eq!(
            again.json(),
            json!({"error": "proxy not found", "status": 404})
        );
    })
    .await;
}

#[tokio::test]
async fn name_conflict_is_409_and_port_conflict_is_500_naming_the_address() {
    within(async {
        let api = start_api(|_| {}).await;
        let body = json!({"name": "a", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"});
        let first = call(api.addr, Method::POST, "/proxies", Some(body.clone()))
            .await
            .json();
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(
            r.json(),
            json!({"error": "proxy already exists", "status": 409})
        );

        let taken = first["listen"].as_str().unwrap_or_default();
        let body = json!({"name": "b", "listen": taken, "upstream": "127.0.0.1:1"});
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
        let msg = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(msg.starts_with(&format!("listen tcp {taken}: ")), "{msg}");
        assert_eq!(
            call(api.addr, Method::GET, "/proxies/b", None).await.status,
            StatusCode::NOT_FOUND
        );
    })
    .await;
}

#[tokio::test]
async fn disabled_proxy_keeps_its_listen_and_toggles_with_post_and_patch() {
    within(async {
        let api = start_api(|_| {}).await;
        // Find a free port, then release it, so the disabled proxy has a concrete address.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_default();
        let listen = format!("127.0.0.1:{port}");
        let body =
            json!({"name": "db", "listen": listen, "upstream": "127.0.0.1:1", "enabled": false});
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert_eq!(r.json()["enabled"], json!(false));
        assert_eq!(r.json()["listen"], json!(listen));
        assert!(!is_up(&listen).await);

        let r = call(
            api.addr,
            Method::POST,
            "/proxies/db",
            Some(json!({"enabled": true})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["enabled"], json!(true));
        assert!(is_up(&listen).await);

        let r = call(
            api.addr,
            Method::PATCH,
            "/proxies/db",
            Some(json!({"enabled": false})),
        )
        .await;
        assert_eq!(r.json()["enabled"], json!(false));
        assert!(!is_up(&listen).await);
        assert!(!api.hub.is_running("db"));

        // A client saving the whole document it read back (toxics included) is accepted.
        let mut doc = r.json();
        doc["enabled"] = json!(true);
        let r = call(api.addr, Method::POST, "/proxies/db", Some(doc)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert!(is_up(&listen).await);

        let r = call(
            api.addr,
            Method::PATCH,
            "/proxies/nope",
            Some(json!({"enabled": true})),
        )
        .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
    })
    .await;
}

#[tokio::test]
async fn upstream_change_on_a_running_proxy_applies_to_new_connections() {
    within(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let api = start_api(|_| {}).await;
        let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"});
        let listen = call(api.addr, Method::POST, "/proxies", Some(body))
            .await
            .json()["listen"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let up = echo_server().await.to_string();
        let r = call(
            api.addr,
            Method::PATCH,
            "/proxies/p",
            Some(json!({"upstream": up})),
        )
        .await;
        assert_eq!(r.json()["upstream"], json!(up));
        assert_eq!(r.json()["listen"], json!(listen));
        let mut s = tokio::net::TcpStream::connect(&listen)
            .await
            .expect("connect");
        s.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)
            .await
            .expect("echo through new upstream");
        assert_eq!(&buf, b"ping");
    })
    .await;
}

#[tokio::test]
async fn populate_checks_names_first_then_adds_or_keeps_in_order() {
    within(async {
        let api = start_api(|_| {}).await;
        let bad = json!([
            {"name": "one", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"},
            {"listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}
        ]);
        let r = call(api.addr, Method::POST, "/populate", Some(bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            r.json()["error"],
            json!("missing required field: name at proxy 2")
        );
        assert_eq!(
            call(api.addr, Method::GET, "/proxies", None).await.json(),
            json!({})
        );

        let good = json!([
            {"name": "one", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"},
            {"name": "two", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:2", "enabled": false}
        ]);
        let r = call(api.addr, Method::POST, "/populate", Some(good)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let proxies = r.json()["proxies"].as_array().cloned().unwrap_or_default();
        assert_eq!(proxies.len(), 2);
        assert_eq!(proxies[1]["enabled"], json!(false));

        // Same name, listen and upstream: kept as is, toxics included.
        let listen = proxies[0]["listen"].as_str().unwrap_or_default().to_owned();
        let t = json!({"type": "latency", "attributes": {"latency": 5}});
        call(api.addr, Method::POST, "/proxies/one/toxics", Some(t)).await;
        let again = json!([{"name": "one", "listen": listen, "upstream": "127.0.0.1:1"}]);
        let r = call(api.addr, Method::POST, "/populate", Some(again)).await;
        assert_eq!(
            r.json()["proxies"][0]["toxics"][0]["name"],
            json!("latency_downstream")
        );

        // A name repeated within one request: Toxiproxy handles the elements in order (the
        // second replaces the first, whose listen address differs once bound).
        let dup = json!([
            {"name": "x", "upstream": "127.0.0.1:1"},
            {"name": "x", "upstream": "127.0.0.1:2"}
        ]);
        let r = call(api.addr, Method::POST, "/populate", Some(dup)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
        let x = call(api.addr, Method::GET, "/proxies/x", None).await.json();
        assert_eq!(x["upstream"], json!("127.0.0.1:2"));
    })
    .await;
}

#[tokio::test]
async fn populate_with_a_bad_third_element_answers_500_and_keeps_and_lists_the_first_two() {
    within(async {
        let api = start_api(|_| {}).await;
        let body = json!([
            {"name": "one", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"},
            {"name": "two", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:2"},
            {"name": "three", "listen": "local373", "upstream": "127.0.0.1:3"}
        ]);
        let r = call(api.addr, Method::POST, "/populate", Some(body)).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.text());
        let doc = r.json();
        assert_eq!(
            doc["error"],
            json!("listen tcp: address local373: missing port in address")
        );
        assert_eq!(doc["status"], json!(500));
        let listed: Vec<&str> = doc["proxies"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(listed, ["one", "two"]);
        let all = call(api.addr, Method::GET, "/proxies", None).await.json();
        let names: Vec<&String> = all
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(names, ["one", "two"]);
        for p in ["one", "two"] {
            let listen = all[p]["listen"].as_str().unwrap_or_default();
            assert!(is_up(listen).await, "{p} listens on {listen}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_port_conflict_names_the_resolved_address_as_toxiproxy_does() {
    within(async {
        let api = start_api(|_| {}).await;
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
        let port = held.local_addr().expect("held port").port();
        let body = json!({"name": "test", "listen": format!("localhost:{port}"),
                          "upstream": "localhost:20001"});
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            r.json()["error"],
            json!(format!(
                "listen tcp 127.0.0.1:{port}: bind: address already in use"
            ))
        );
        // Go's http.Error: the JSON document and a line end, as text/plain.
        assert!(r.text().ends_with("}\n"), "{:?}", r.text());
        assert_eq!(
            r.headers.get("content-type").and_then(|v| v.to_str().ok()),
            Some("text/plain; charset=utf-8")
        );
    })
    .await;
}

#[tokio::test]
async fn every_api_answer_carries_a_toxiproxy_request_id() {
    within(async {
        let api = start_api(|_| {}).await;
        let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"});
        let calls = [
            (Method::GET, "/version", None),
            (Method::GET, "/proxies", None),
            (Method::POST, "/proxies", Some(body.clone())),
            (Method::POST, "/proxies", Some(body)),
            (Method::GET, "/proxies/nope", None),
            (Method::PUT, "/proxies", None),
            (Method::GET, "/nope", None),
            (Method::DELETE, "/proxies/p", None),
            (Method::POST, "/reset", None),
            (Method::GET, "/metrics", None),
        ];
        let mut seen = std::collections::HashSet::new();
        for (method, path, body) in calls {
            let r = call(api.addr, method.clone(), path, body).await;
            let id = r
                .headers
                .get("x-toxiproxy-request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let Some(id) = id else {
                panic!(
                    "{method} {path} ({}) has no X-Toxiproxy-Request-Id",
                    r.status
                );
            };
            assert_eq!(id.len(), 20, "an xid: {id}");
            assert!(seen.insert(id), "ids differ between answers");
        }
    })
    .await;
}

async fn proxy_with_echo(api: &common::control::Api, name: &str) -> String {
    let up = echo_server().await.to_string();
    let body = json!({"name": name, "listen": "127.0.0.1:0", "upstream": up});
    let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED);
    r.json()["listen"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn reset_enables_every_proxy_and_removes_every_toxic() {
    within(async {
        let api = start_api(|_| {}).await;
        let listen = proxy_with_echo(&api, "p").await;
        call(
            api.addr,
            Method::POST,
            "/proxies/p/toxics",
            Some(json!({"type": "latency", "attributes": {"latency": 100}})),
        )
        .await;
        call(
            api.addr,
            Method::PATCH,
            "/proxies/p",
            Some(json!({"enabled": false})),
        )
        .await;
        assert!(!is_up(&listen).await);
        let r = call(api.addr, Method::POST, "/reset", None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let p = call(api.addr, Method::GET, "/proxies/p", None).await.json();
        assert_eq!(p["enabled"], json!(true));
        assert_eq!(p["toxics"], json!([]));
        assert!(is_up(&listen).await);
        assert!(api.hub.chain("p").is_empty());
    })
    .await;
}

#[tokio::test]
async fn version_unknown_paths_and_wrong_methods() {
    within(async {
        let api = start_api(|_| {}).await;
        let r = call(api.addr, Method::GET, "/version", None).await;
        assert_eq!(r.status, StatusCode::OK);
        // Toxiproxy's bytes exactly: `{"version": "…"}` and a line end, nothing else.
        assert_eq!(
            r.text(),
            format!("{{\"version\": \"{}\"}}\n", env!("CARGO_PKG_VERSION"))
        );
        let r = call(api.addr, Method::GET, "/nope", None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = call(api.addr, Method::PUT, "/proxies", None).await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            r.headers.get("allow").and_then(|v| v.to_str().ok()),
            Some("GET, POST")
        );
        let r = call(api.addr, Method::GET, "/cuts", None).await;
        assert_eq!(r.json(), json!([]));
        let r = call(api.addr, Method::GET, "/findings", None).await;
        assert_eq!(r.json(), json!([]));
    })
    .await;
}

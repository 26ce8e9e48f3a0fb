//! The toxic half of Toxiproxy's API over HTTP, as Toxiproxy's api_test.go walks it: add with
//! defaults, conflicts, update (PATCH merges), remove, toxicity, invalid stream/type/attributes —
//! against the in-memory hub of `control_support`, whose fault chain must mirror the toxics.

use crate::common;
use crate::common::control::{TEST_TIMEOUT, call, echo_server, start_api};
use http::{Method, StatusCode};
use serde_json::json;
use tearline::vocab::Direction;

async fn within<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out");
}

async fn proxy_with_echo(api: &common::control::Api, name: &str) -> String {
    let up = echo_server().await.to_string();
    let body = json!({"name": name, "listen": "127.0.0.1:0", "upstream": up});
    let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED);
    r.json()["listen"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn toxics_are_added_read_back_with_defaults_and_reach_the_hub() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "mysql_master").await;
        let path = "/proxies/mysql_master/toxics";
        let t = json!({"name": "foobar", "type": "latency", "stream": "downstream", "toxicity": 1,
                       "attributes": {"latency": 100, "jitter": 10}});
        let r = call(api.addr, Method::POST, path, Some(t)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(
            r.json(),
            json!({"attributes": {"latency": 100, "jitter": 10}, "name": "foobar",
                   "type": "latency", "stream": "downstream", "toxicity": 1.0})
        );
        // Defaults: name <type>_<stream>, downstream, toxicity 1, all attributes 0; null attributes.
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"type": "latency", "stream": "upstream", "attributes": null})),
        )
        .await;
        assert_eq!(
            r.json(),
            json!({"attributes": {"latency": 0, "jitter": 0}, "name": "latency_upstream",
                   "type": "latency", "stream": "upstream", "toxicity": 1.0})
        );
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"name": "n", "type": "noop"})),
        )
        .await;
        assert_eq!(r.json()["stream"], json!("downstream"));
        assert_eq!(r.json()["attributes"], json!({}));
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"type": "bandwidth", "toxicity": 0.2, "attributes": {"rate": 64}})),
        )
        .await;
        assert_eq!(r.json()["toxicity"], json!(0.2));

        // Listing: upstream toxics first, then downstream, each in insertion order.
        let names: Vec<String> = call(api.addr, Method::GET, path, None)
            .await
            .json()
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            names,
            ["latency_upstream", "foobar", "n", "bandwidth_downstream"]
        );
        let proxy = call(api.addr, Method::GET, "/proxies/mysql_master", None)
            .await
            .json();
        assert_eq!(proxy["toxics"].as_array().map(Vec::len), Some(4));

        // The hub's chain mirrors the toxics (noop contributes nothing).
        assert_eq!(
            api.hub.chain("mysql_master"),
            vec![
                ("latency".to_owned(), Direction::Upstream),
                ("latency".to_owned(), Direction::Downstream),
                ("bandwidth".to_owned(), Direction::Downstream),
            ]
        );
        let one = call(
            api.addr,
            Method::GET,
            "/proxies/mysql_master/toxics/foobar",
            None,
        )
        .await;
        assert_eq!(one.json()["attributes"]["latency"], json!(100));
    })
    .await;
}

#[tokio::test]
async fn conflicting_toxic_names_are_409_even_across_streams() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "p").await;
        let path = "/proxies/p/toxics";
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"name": "foobar", "type": "latency", "stream": "upstream"})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"name": "foobar", "type": "slow_close", "stream": "downstream"})),
        )
        .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(
            r.json(),
            json!({"error": "toxic already exists", "status": 409})
        );
        // Default names differ by stream, so both defaults coexist.
        for stream in ["upstream", "downstream"] {
            let r = call(
                api.addr,
                Method::POST,
                path,
                Some(json!({"type": "timeout", "stream": stream})),
            )
            .await;
            assert_eq!(r.status, StatusCode::OK);
        }
        assert_eq!(api.hub.chain("p").len(), 3);
    })
    .await;
}

#[tokio::test]
async fn toxic_update_merges_attributes_and_keeps_absent_toxicity() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "p").await;
        let t = json!({"type": "latency", "attributes": {"latency": 100, "jitter": 10}});
        call(api.addr, Method::POST, "/proxies/p/toxics", Some(t)).await;
        let path = "/proxies/p/toxics/latency_downstream";
        let r = call(
            api.addr,
            Method::PATCH,
            path,
            Some(json!({"toxicity": 0.5, "attributes": {"latency": 1000}})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["toxicity"], json!(0.5));
        assert_eq!(
            r.json()["attributes"],
            json!({"latency": 1000, "jitter": 10})
        );
        let r = call(
            api.addr,
            Method::POST,
            path,
            Some(json!({"attributes": {"latency": 500}})),
        )
        .await;
        assert_eq!(r.json()["toxicity"], json!(0.5));
        assert_eq!(
            r.json()["attributes"],
            json!({"latency": 500, "jitter": 10})
        );
        // The whole document sent back unchanged is accepted; a changed stream is not.
        let mut doc = r.json();
        let r = call(api.addr, Method::PATCH, path, Some(doc.clone())).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        doc["stream"] = json!("upstream");
        let r = call(api.addr, Method::PATCH, path, Some(doc)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        // A rejected update leaves the toxic as it was.
        let r = call(
            api.addr,
            Method::PATCH,
            path,
            Some(json!({"attributes": {"latency": -1}})),
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            r.json()["error"],
            json!("bad request body: latency must be at least 0")
        );
        let now = call(api.addr, Method::GET, path, None).await.json();
        assert_eq!(now["attributes"]["latency"], json!(500));
        let r = call(
            api.addr,
            Method::PATCH,
            "/proxies/p/toxics/nope",
            Some(json!({})),
        )
        .await;
        assert_eq!(r.json(), json!({"error": "toxic not found", "status": 404}));
    })
    .await;
}

#[tokio::test]
async fn toxic_removal_updates_list_and_hub_and_unknown_names_are_404() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "p").await;
        call(
            api.addr,
            Method::POST,
            "/proxies/p/toxics",
            Some(json!({"type": "latency"})),
        )
        .await;
        assert_eq!(api.hub.chain("p").len(), 1);
        let r = call(
            api.addr,
            Method::DELETE,
            "/proxies/p/toxics/latency_downstream",
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(
            call(api.addr, Method::GET, "/proxies/p/toxics", None)
                .await
                .json(),
            json!([])
        );
        assert!(api.hub.chain("p").is_empty());
        let r = call(
            api.addr,
            Method::DELETE,
            "/proxies/p/toxics/latency_downstream",
            None,
        )
        .await;
        assert_eq!(r.json(), json!({"error": "toxic not found", "status": 404}));
        let r = call(api.addr, Method::GET, "/proxies/q/toxics", None).await;
        assert_eq!(r.json(), json!({"error": "proxy not found", "status": 404}));
    })
    .await;
}

#[tokio::test]
async fn invalid_stream_type_toxicity_field_and_attribute_are_400_naming_the_problem() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "p").await;
        let path = "/proxies/p/toxics";
        let r = call(api.addr, Method::POST, path, Some(json!({"type": "latency", "stream": "walrustream"}))).await;
        assert_eq!(
            r.json(),
            json!({"error": "stream was invalid, can be either upstream or downstream", "status": 400})
        );
        let r = call(api.addr, Method::POST, path, Some(json!({"type": "latncy"}))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let msg = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(msg.starts_with("invalid toxic type: 'latncy'; known: "), "{msg}");
        assert!(msg.contains("latency") && msg.contains("noop") && msg.contains("sse_cut"), "{msg}");
        let r = call(api.addr, Method::POST, path, Some(json!({"type": "latency", "toxicity": 1.5}))).await;
        assert_eq!(r.json()["error"], json!("bad request body: toxicity must be a number from 0 to 1, got 1.5"));
        let r = call(api.addr, Method::POST, path, Some(json!({"type": "latency", "colour": "red"}))).await;
        let msg = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(msg.contains("unknown field `colour`") && msg.contains("`attributes`"), "{msg}");
        let r = call(api.addr, Method::POST, path, Some(json!({"type": "latency", "attributes": {"delay": 1}}))).await;
        assert_eq!(
            r.json()["error"],
            json!("bad request body: unknown attribute 'delay' for toxic type 'latency'; known: latency, jitter")
        );
        let r = call(api.addr, Method::POST, "/proxies", Some(json!({"name": "x", "upstream": "nowhere"}))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.text().contains("invalid upstream address 'nowhere'"), "{}", r.text());
        assert!(api.hub.chain("p").is_empty());
    })
    .await;
}

/// toxiproxy-cli's session, call for call: create, toxic add of every Toxiproxy type with no
/// attributes (each reads back with Toxiproxy's own defaults: its toxics' Go struct fields, all
/// zero), inspect, toggle off and on.
#[tokio::test]
async fn toxiproxy_cli_session_gets_toxiproxys_answers_for_every_toxic_type() {
    within(async {
        let api = start_api(|_| {}).await;
        proxy_with_echo(&api, "redis").await;
        let defaults = [
            ("latency", json!({"latency": 0, "jitter": 0})),
            ("bandwidth", json!({"rate": 0})),
            ("slow_close", json!({"delay": 0})),
            ("timeout", json!({"timeout": 0})),
            ("reset_peer", json!({"timeout": 0})),
            (
                "slicer",
                json!({"average_size": 0, "size_variation": 0, "delay": 0}),
            ),
            ("limit_data", json!({"bytes": 0})),
            ("noop", json!({})),
        ];
        for (kind, attributes) in &defaults {
            // toxiproxy-cli toxic add -t TYPE -u (it sends an empty attribute object).
            let body = json!({"type": kind, "stream": "upstream", "toxicity": 1.0,
                              "attributes": {}});
            let r = call(api.addr, Method::POST, "/proxies/redis/toxics", Some(body)).await;
            assert_eq!(r.status, StatusCode::OK, "{kind}: {}", r.text());
            assert_eq!(
                r.json(),
                json!({"attributes": attributes, "name": format!("{kind}_upstream"),
                       "type": kind, "stream": "upstream", "toxicity": 1.0}),
                "{kind}"
            );
        }
        // toxiproxy-cli inspect: the proxy with its toxics in insertion order.
        let inspect = call(api.addr, Method::GET, "/proxies/redis", None).await;
        assert_eq!(inspect.status, StatusCode::OK);
        let doc = inspect.json();
        assert_eq!(doc["name"], json!("redis"));
        assert_eq!(doc["enabled"], json!(true));
        let types: Vec<&str> = doc["toxics"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["type"].as_str()).collect())
            .unwrap_or_default();
        let want: Vec<&str> = defaults.iter().map(|(k, _)| *k).collect();
        assert_eq!(types, want);
        // toxiproxy-cli toggle: POST the proxy with the opposite `enabled`, twice.
        for enabled in [false, true] {
            let r = call(
                api.addr,
                Method::POST,
                "/proxies/redis",
                Some(json!({"enabled": enabled})),
            )
            .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            assert_eq!(r.json()["enabled"], json!(enabled));
            assert_eq!(r.json()["toxics"].as_array().map(Vec::len), Some(8));
        }
    })
    .await;
}

//! `/metrics` is strict Prometheus text (0.0.4) and its counters match what the test did;
//! `/cuts` and `/findings` serve what the attached sources hold.

use std::sync::Arc;

use crate::common::control::prom::{get, parse};
use crate::common::control::{FakeCatalog, FakeHub, TEST_TIMEOUT, call, echo_server, start_with};
use http::{Method, StatusCode};
use serde_json::json;
use tearline::control::{ApiConfig, CutCount, CutsSource, FindingsSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn within<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out");
}

struct Cuts;
impl CutsSource for Cuts {
    fn cuts(&self) -> serde_json::Value {
        json!([{"proxy": "p", "class": "mid-value", "action": "reset", "offset": 42}])
    }
    fn counts(&self) -> Vec<CutCount> {
        vec![CutCount {
            class: "mid-value".into(),
            action: "reset".into(),
            count: 1,
        }]
    }
}

struct Findings;
impl FindingsSource for Findings {
    fn findings(&self) -> serde_json::Value {
        json!([{"kind": "torn-cut", "session": "s\"1"}])
    }
    fn counts(&self) -> Vec<(String, u64)> {
        vec![("torn-cut".into(), 1), ("cursor-ahead".into(), 2)]
    }
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let r = call(addr, Method::GET, "/metrics", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    r.text()
}

#[tokio::test]
async fn metrics_parse_strictly_and_count_bytes_connections_and_requests() {
    within(async {
        let hub = Arc::new(FakeHub::default());
        let mut config = ApiConfig::new(hub.clone(), Arc::new(FakeCatalog));
        config.cuts = Some(Arc::new(Cuts));
        config.findings = Some(Arc::new(Findings));
        let api = start_with(config, hub).await;

        // An empty scrape is already valid and names every family.
        let empty = parse(&scrape(api.addr).await).expect("valid exposition");
        for name in [
            "tearline_proxy_bytes_total",
            "tearline_proxy_connections_open",
            "tearline_proxy_connections_total",
            "tearline_proxy_cuts_total",
            "tearline_fault_activations_total",
            "tearline_proxy_residence_seconds",
            "tearline_cuts_total",
            "tearline_findings_total",
            "tearline_api_requests_total",
        ] {
            assert!(
                empty
                    .get(name)
                    .is_some_and(|f| f.help && !f.kind.is_empty()),
                "{name}"
            );
        }

        let up = echo_server().await.to_string();
        let body = json!({"name": "p\"q", "listen": "127.0.0.1:0", "upstream": up});
        let r = call(api.addr, Method::POST, "/proxies", Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED);
        let listen = r.json()["listen"].as_str().unwrap_or_default().to_owned();
        let again = json!({"name": "p\"q", "upstream": up});
        assert_eq!(
            call(api.addr, Method::POST, "/proxies", Some(again.clone()))
                .await
                .status,
            StatusCode::CONFLICT
        );
        assert_eq!(
            call(api.addr, Method::POST, "/proxies", Some(again))
                .await
                .status,
            StatusCode::CONFLICT
        );

        // Three connections, each sending 10_000 bytes that come back.
        for _ in 0..3 {
            let mut s = tokio::net::TcpStream::connect(&listen)
                .await
                .expect("connect");
            let data = vec![7u8; 10_000];
            s.write_all(&data).await.expect("write");
            s.shutdown().await.expect("shutdown");
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.expect("read");
            assert_eq!(back.len(), 10_000);
        }
        // The relay counts a connection when it ends; wait (bounded) until all three ended.
        let mut m = parse(&scrape(api.addr).await).expect("valid exposition");
        for _ in 0..200 {
            if get(&m, "tearline_proxy_connections_open", &[("proxy", "p\"q")]) == Some(0.0)
                && get(
                    &m,
                    "tearline_proxy_bytes_total",
                    &[("proxy", "p\"q"), ("direction", "downstream")],
                ) == Some(30_000.0)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            m = parse(&scrape(api.addr).await).expect("valid exposition");
        }
        let p = [("proxy", "p\"q")];
        assert_eq!(get(&m, "tearline_proxy_connections_total", &p), Some(3.0));
        assert_eq!(get(&m, "tearline_proxy_connections_open", &p), Some(0.0));
        for dir in ["upstream", "downstream"] {
            assert_eq!(
                get(
                    &m,
                    "tearline_proxy_bytes_total",
                    &[("proxy", "p\"q"), ("direction", dir)]
                ),
                Some(30_000.0),
                "{dir}"
            );
        }
        assert_eq!(
            get(&m, "tearline_proxy_residence_seconds_count", &p),
            Some(0.0)
        );
        assert_eq!(
            get(
                &m,
                "tearline_proxy_residence_seconds_bucket",
                &[("proxy", "p\"q"), ("le", "+Inf")]
            ),
            Some(0.0)
        );
        let req = |route: &str, status: &str| {
            get(
                &m,
                "tearline_api_requests_total",
                &[("route", route), ("status", status)],
            )
        };
        assert_eq!(req("ProxyCreate", "201"), Some(1.0));
        assert_eq!(req("ProxyCreate", "409"), Some(2.0));
        assert!(req("Metrics", "200").is_some_and(|n| n >= 1.0));
        assert_eq!(
            get(
                &m,
                "tearline_cuts_total",
                &[("class", "mid-value"), ("action", "reset")]
            ),
            Some(1.0)
        );
        assert_eq!(
            get(&m, "tearline_findings_total", &[("kind", "cursor-ahead")]),
            Some(2.0)
        );
        assert_eq!(
            get(&m, "tearline_findings_total", &[("kind", "torn-cut")]),
            Some(1.0)
        );
    })
    .await;
}

#[tokio::test]
async fn cuts_and_findings_endpoints_serve_the_attached_sources() {
    within(async {
        let hub = Arc::new(FakeHub::default());
        let mut config = ApiConfig::new(hub.clone(), Arc::new(FakeCatalog));
        config.cuts = Some(Arc::new(Cuts));
        config.findings = Some(Arc::new(Findings));
        let api = start_with(config, hub).await;
        let r = call(api.addr, Method::GET, "/cuts", None).await;
        assert_eq!(r.json(), Cuts.cuts());
        let r = call(api.addr, Method::GET, "/findings", None).await;
        assert_eq!(r.json(), Findings.findings());
        let r = call(api.addr, Method::POST, "/findings", None).await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    })
    .await;
}

#[test]
fn strict_parser_rejects_broken_expositions() {
    let bad = [
        "x 1",                                               // no final newline
        "# TYPE x counter\nx -1\n",                          // negative counter
        "# TYPE x counter\nx 1\n# TYPE y gauge\ny 1\nx 2\n", // not contiguous
        "# TYPE x counter\n# TYPE x counter\nx 1\n",         // second TYPE
        "x{a=\"1\" 1\n",                                     // unclosed labels
        "x{a=1} 1\n",                                        // unquoted value
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
        "x 1 2 3\n",
    ];
    for text in bad {
        assert!(parse(text).is_err(), "accepted: {text:?}");
    }
    assert!(parse("# HELP x a b c\n# TYPE x counter\nx{a=\"q\\\"\\n\"} 1\n").is_ok());
}

/// Toxiproxy's `-proxy-metrics` names and labels, its runtime metrics' process part, and the
/// connection-limit counter, over the real runtime: bytes through a proxy with a toxic that
/// drops some (received counts them, sent does not).
#[tokio::test]
async fn toxiproxy_proxy_and_process_metrics_are_served_beside_tearlines() {
    within(async {
        let live = crate::common::control::live::start_live().await;
        let up = echo_server().await;
        let listen = crate::common::control::live::create(live.addr, "db", up).await;
        let limit = json!({"name": "cap", "type": "limit_data", "stream": "downstream",
                           "attributes": {"bytes": 3}});
        let r = call(live.addr, Method::POST, "/proxies/db/toxics", Some(limit)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let mut c = tokio::net::TcpStream::connect(&listen)
            .await
            .expect("connect");
        c.write_all(b"hello").await.expect("write");
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got).await;
        assert_eq!(got, b"hel", "limit_data let 3 bytes through");
        let families = parse(&scrape(live.addr).await).expect("strict exposition");
        let upstream = up.to_string();
        let labels = |dir| {
            [
                ("direction", dir),
                ("listener", listen.as_str()),
                ("proxy", "db"),
                ("upstream", upstream.as_str()),
            ]
        };
        let rx = "toxiproxy_proxy_received_bytes_total";
        let tx = "toxiproxy_proxy_sent_bytes_total";
        assert_eq!(get(&families, rx, &labels("upstream")), Some(5.0));
        assert_eq!(get(&families, tx, &labels("upstream")), Some(5.0));
        assert_eq!(get(&families, tx, &labels("downstream")), Some(3.0));
        let echoed = get(&families, rx, &labels("downstream")).unwrap_or(0.0);
        assert!(
            echoed >= 3.0,
            "received downstream counts bytes before the toxic: {echoed}"
        );
        let over = "tearline_proxy_connections_over_limit_total";
        assert_eq!(get(&families, over, &[("proxy", "db")]), Some(0.0));
        for name in [
            "process_open_fds",
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
        ] {
            assert!(get(&families, name, &[]).is_some_and(|v| v > 0.0), "{name}");
        }
        live.shutdown.cancel();
    })
    .await;
}

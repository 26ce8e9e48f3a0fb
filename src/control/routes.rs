//! Toxiproxy's routes (same paths, methods and status codes) plus tearline's read endpoints,
//! dispatched to the [`Store`](super::store::Store) and the attached sources.
//!
//! Status codes as Toxiproxy: 200 for reads and updates and for adding a toxic, 201 for creating
//! a proxy and for populate, 204 for deletes and reset; a path that exists with another method
//! is 405 with `Allow`; an unknown path is 404.

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;

use super::ApiInner;
use super::errors::ApiError;
use super::metrics::{Scrape, render};
use super::model::{ProxyInput, ToxicInput};

/// One route of the API, with its path parameters (percent-decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/reset`
    Reset,
    /// `/proxies`
    Proxies,
    /// `/populate`
    Populate,
    /// `/proxies/{proxy}`
    Proxy(String),
    /// `/proxies/{proxy}/toxics`
    Toxics(String),
    /// `/proxies/{proxy}/toxics/{toxic}`
    Toxic(String, String),
    /// `/version`
    Version,
    /// `/cuts`
    Cuts,
    /// `/findings`
    Findings,
    /// `/metrics`
    Metrics,
}

/// Decodes `%XX` escapes; an invalid escape or non-UTF-8 result leaves the segment as is.
fn decode(seg: &str) -> String {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(hex) = seg.get(i + 1..i + 3)
            && hex.bytes().all(|c| c.is_ascii_hexdigit())
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| seg.to_owned())
}

impl Route {
    /// The route of a path, if any.
    pub fn parse(path: &str) -> Option<Route> {
        let rest = path.strip_prefix('/')?;
        let segs: Vec<&str> = rest.split('/').collect();
        if segs.iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(match segs.as_slice() {
            ["reset"] => Route::Reset,
            ["proxies"] => Route::Proxies,
            ["populate"] => Route::Populate,
            ["version"] => Route::Version,
            ["cuts"] => Route::Cuts,
            ["findings"] => Route::Findings,
            ["metrics"] => Route::Metrics,
            ["proxies", p] => Route::Proxy(decode(p)),
            ["proxies", p, "toxics"] => Route::Toxics(decode(p)),
            ["proxies", p, "toxics", t] => Route::Toxic(decode(p), decode(t)),
            _ => return None,
        })
    }

    /// The methods the route answers, as an `Allow` header value.
    pub fn allowed(&self) -> &'static str {
        match self {
            Route::Reset | Route::Populate => "POST",
            Route::Proxies | Route::Toxics(_) => "GET, POST",
            Route::Proxy(_) | Route::Toxic(..) => "GET, POST, PATCH, DELETE",
            Route::Version | Route::Cuts | Route::Findings | Route::Metrics => "GET",
        }
    }

    /// The handler's name (Toxiproxy's route names; ours for the extra endpoints), or `None`
    /// when the route does not answer `method`.
    pub fn handler(&self, method: &Method) -> Option<&'static str> {
        let m = method.as_str();
        Some(match (self, m) {
            (Route::Reset, "POST") => "ResetState",
            (Route::Proxies, "GET") => "ProxyIndex",
            (Route::Proxies, "POST") => "ProxyCreate",
            (Route::Populate, "POST") => "Populate",
            (Route::Proxy(_), "GET") => "ProxyShow",
            (Route::Proxy(_), "POST" | "PATCH") => "ProxyUpdate",
            (Route::Proxy(_), "DELETE") => "ProxyDelete",
            (Route::Toxics(_), "GET") => "ToxicIndex",
            (Route::Toxics(_), "POST") => "ToxicCreate",
            (Route::Toxic(..), "GET") => "ToxicShow",
            (Route::Toxic(..), "POST" | "PATCH") => "ToxicUpdate",
            (Route::Toxic(..), "DELETE") => "ToxicDelete",
            (Route::Version, "GET") => "Version",
            (Route::Cuts, "GET") => "Cuts",
            (Route::Findings, "GET") => "Findings",
            (Route::Metrics, "GET") => "Metrics",
            _ => return None,
        })
    }
}

/// A response with a body and content type.
pub fn respond(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn json<T: Serialize>(status: StatusCode, v: &T) -> Result<Response<Full<Bytes>>, ApiError> {
    let body = serde_json::to_vec(v).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding JSON: {e}"),
        )
    })?;
    Ok(respond(status, "application/json", Bytes::from(body)))
}

fn no_content() -> Response<Full<Bytes>> {
    respond(StatusCode::NO_CONTENT, "application/json", Bytes::new())
}

/// The error answer of `e` as Toxiproxy writes it (Go's `http.Error`): the JSON document and a
/// line end, as `text/plain`, with `X-Content-Type-Options: nosniff`.
pub fn error_response(e: &ApiError) -> Response<Full<Bytes>> {
    let body = Bytes::from(format!("{}\n", e.body()));
    let mut r = respond(e.status, "text/plain; charset=utf-8", body);
    r.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    r
}

/// The answer to `method` on `route`, which does not serve it: 405 with the methods it does
/// serve, in the body and in `Allow`.
pub fn method_not_allowed(route: &Route, method: &Method) -> Response<Full<Bytes>> {
    let mut r = error_response(&ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} not allowed; allowed: {}", route.allowed()),
    ));
    r.headers_mut().insert(
        header::ALLOW,
        header::HeaderValue::from_static(route.allowed()),
    );
    r
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_body)
}

/// Answers one request whose route and method are known to match.
pub async fn dispatch(
    api: &ApiInner,
    route: Route,
    method: &Method,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let store = &api.store;
    let m = method.as_str();
    match (route, m) {
        (Route::Reset, _) => store.reset().await.map(|()| no_content()),
        (Route::Proxies, "GET") => json(StatusCode::OK, &store.list().await),
        (Route::Proxies, _) => {
            let doc = store.create(parse::<ProxyInput>(&body)?).await?;
            json(StatusCode::CREATED, &doc)
        }
        (Route::Populate, _) => {
            let result = match parse::<Vec<ProxyInput>>(&body) {
                Ok(inputs) => store.populate(inputs).await,
                Err(e) => Err(e),
            };
            // Toxiproxy answers one document: the error (if any) next to the proxies handled
            // before it (`null` when none).
            let (docs, error) = match result {
                Ok((docs, error)) => (docs, error),
                Err(e) => (Vec::new(), Some(e)),
            };
            let proxies = if docs.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::to_value(&docs).unwrap_or_default()
            };
            match error {
                None => json(
                    StatusCode::CREATED,
                    &serde_json::json!({ "proxies": proxies }),
                ),
                Some(e) => {
                    let mut body = e.body();
                    body["proxies"] = proxies;
                    json(e.status, &body)
                }
            }
        }
        (Route::Proxy(p), "GET") => json(StatusCode::OK, &store.get(&p).await?),
        (Route::Proxy(p), "DELETE") => store.delete(&p).await.map(|()| no_content()),
        (Route::Proxy(p), _) => {
            // Toxiproxy looks the proxy up before reading the body.
            store.get(&p).await?;
            let doc = store.update(&p, parse::<ProxyInput>(&body)?).await?;
            json(StatusCode::OK, &doc)
        }
        (Route::Toxics(p), "GET") => json(StatusCode::OK, &store.toxics(&p).await?),
        (Route::Toxics(p), _) => {
            store.get(&p).await?;
            let doc = store.add_toxic(&p, parse::<ToxicInput>(&body)?).await?;
            json(StatusCode::OK, &doc)
        }
        (Route::Toxic(p, t), "GET") => json(StatusCode::OK, &store.toxic(&p, &t).await?),
        (Route::Toxic(p, t), "DELETE") => store.remove_toxic(&p, &t).await.map(|()| no_content()),
        (Route::Toxic(p, t), _) => {
            store.toxic(&p, &t).await?;
            let doc = store
                .update_toxic(&p, &t, parse::<ToxicInput>(&body)?)
                .await?;
            json(StatusCode::OK, &doc)
        }
        (Route::Version, _) => {
            // Toxiproxy's bytes exactly (`{"version": "…"}` and a line end); the server's name
            // is in the `Server` header, which Toxiproxy does not send.
            let mut r = respond(
                StatusCode::OK,
                "application/json;charset=utf-8",
                Bytes::from(format!(
                    "{{\"version\": \"{}\"}}\n",
                    env!("CARGO_PKG_VERSION")
                )),
            );
            r.headers_mut().insert(
                header::SERVER,
                header::HeaderValue::from_static(concat!("tearline/", env!("CARGO_PKG_VERSION"))),
            );
            Ok(r)
        }
        (Route::Cuts, _) => {
            let v = api
                .cuts
                .as_ref()
                .map_or_else(|| serde_json::json!([]), |c| c.cuts());
            json(StatusCode::OK, &v)
        }
        (Route::Findings, _) => {
            let v = api
                .findings
                .as_ref()
                .map_or_else(|| serde_json::json!([]), |f| f.findings());
            json(StatusCode::OK, &v)
        }
        (Route::Metrics, _) => {
            let proxies = api.hub.stats();
            let cuts = api.cuts.as_ref().map(|c| c.counts());
            let findings = api.findings.as_ref().map(|f| f.counts());
            let tracked = api.findings.as_ref().map(|f| f.tracked());
            let text = render(&Scrape {
                proxies: &proxies,
                cut_positions: cuts.as_deref(),
                findings: findings.as_deref(),
                audit_dropped: api.findings.as_ref().map(|f| f.dropped()),
                audit_tracked: tracked.as_deref(),
                audit_evicted: api.findings.as_ref().map(|f| f.evicted()),
                api: &api.counters,
            });
            Ok(respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                Bytes::from(text),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_with_decoded_names() {
        assert_eq!(Route::parse("/proxies"), Some(Route::Proxies));
        assert_eq!(
            Route::parse("/proxies/a%20b/toxics/t"),
            Some(Route::Toxic("a b".into(), "t".into()))
        );
        assert_eq!(Route::parse("/proxies/"), None);
        assert_eq!(Route::parse("//proxies"), None);
        assert_eq!(Route::parse("/proxies/a/b"), None);
        assert_eq!(
            Route::parse("/proxies/%zz"),
            Some(Route::Proxy("%zz".into()))
        );
        assert_eq!(
            Route::parse("/proxies/%ff"),
            Some(Route::Proxy("%ff".into()))
        );
        assert_eq!(Route::parse("/proxies/%"), Some(Route::Proxy("%".into())));
    }

    #[test]
    fn methods_map_to_toxiproxy_handlers() {
        let p = Route::Proxy("x".into());
        assert_eq!(p.handler(&Method::PATCH), Some("ProxyUpdate"));
        assert_eq!(p.handler(&Method::POST), Some("ProxyUpdate"));
        assert_eq!(p.handler(&Method::PUT), None);
        assert_eq!(Route::Reset.handler(&Method::GET), None);
    }
}

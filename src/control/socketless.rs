//! Requests answered without HTTP: the router and handlers of [`ApiState`] called directly
//! with a method, a path and a body. Exists for the fuzz targets and in-process drivers; the
//! answer is the one `serve_api` gives for the same request once headers (origin, token) and
//! body size have passed.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;

use super::ApiState;
use super::errors::ApiError;
use super::routes::{Route, dispatch, error_response, method_not_allowed};

impl ApiState {
    /// Answers `method path` with `body` as the server would after its header checks.
    #[doc(hidden)]
    pub async fn answer_direct(
        &self,
        method: &Method,
        path: &str,
        body: Bytes,
    ) -> Response<Full<Bytes>> {
        let Some(route) = Route::parse(path) else {
            return error_response(&ApiError::new(StatusCode::NOT_FOUND, "404 page not found"));
        };
        if route.handler(method).is_none() {
            return method_not_allowed(&route, method);
        }
        match dispatch(&self.inner, route, method, body).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    }
}

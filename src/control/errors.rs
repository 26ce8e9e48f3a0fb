//! Errors of the control API: [`ControlError`] for the server itself, [`ApiError`] for one
//! request's answer.
//!
//! An [`ApiError`] is rendered exactly as Toxiproxy renders its errors,
//! `{"error": "<message>", "status": <code>}`, and the messages Toxiproxy's clients compare
//! against (`proxy not found`, `proxy already exists`, `missing required field: name`, …) are
//! kept word for word; messages Toxiproxy leaves vague name the problem and the allowed values.

use http::StatusCode;

/// Failure of the API server as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Accepting on the API listener failed in a way that retrying cannot fix.
    #[error("control API listener failed")]
    Listener(#[source] std::io::Error),
}

/// One request's error answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The `error` text.
    pub message: String,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 400 `bad request body: <detail>` (Toxiproxy's `ErrBadRequestBody`).
    pub fn bad_body(detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            format!("bad request body: {detail}"),
        )
    }

    /// 400 `missing required field: <field>`.
    pub fn missing_field(field: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            format!("missing required field: {field}"),
        )
    }

    /// 404 `proxy not found`.
    pub fn proxy_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "proxy not found")
    }

    /// 409 `proxy already exists`.
    pub fn proxy_exists() -> Self {
        Self::new(StatusCode::CONFLICT, "proxy already exists")
    }

    /// 400 for a stream other than upstream/downstream.
    pub fn invalid_stream() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "stream was invalid, can be either upstream or downstream",
        )
    }

    /// 404 `toxic not found`.
    pub fn toxic_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "toxic not found")
    }

    /// 409: toxic `name` comes from the profile, so the API does not change it alone.
    pub fn profile_toxic(name: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            format!(
                "toxic '{name}' comes from the profile (\"source\": \"profile\"): change it in \
                 the profile (reloaded with --watch), or POST /reset to remove every profile fault"
            ),
        )
    }

    /// 409 `toxic already exists`.
    pub fn toxic_exists() -> Self {
        Self::new(StatusCode::CONFLICT, "toxic already exists")
    }

    /// The JSON body Toxiproxy sends for an error.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.message, "status": self.status.as_u16() })
    }
}

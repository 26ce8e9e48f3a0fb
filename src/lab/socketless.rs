//! The lab answering requests without a socket: one server state and its handler, called
//! directly with a request. Exists for the fuzz targets (the JSON-RPC intake) and in-process
//! drivers; the answer is the one a connection to [`super::serve`] would get.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::shared::{LlmState, Shared};
use super::sse_body::LabBody;
use super::{LabConfig, LabError, bugs, plain_feed, session, sse_body};

/// One lab server state, without a listener. Dropping it does not stop streams; call
/// [`DirectLab::shutdown`].
#[doc(hidden)]
pub struct DirectLab {
    shared: Arc<Shared>,
}

impl DirectLab {
    /// A lab with `config`, checked as [`super::serve`] checks it.
    pub fn new(config: LabConfig) -> Result<DirectLab, LabError> {
        if config.buffer == 0 {
            return Err(LabError::Config("buffer must hold at least one event"));
        }
        let shared = Arc::new(Shared {
            enc: sse_body::SseEncoder::new(config.line_ending),
            sessions: session::Sessions::new(
                config.max_sessions,
                config.buffer,
                config.buffer_bytes,
            )
            .with_id_style(config.ids),
            bugs: bugs::BugState::default(),
            plain: plain_feed::Feed::new(config.ids, config.line_ending),
            cfg: config,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            gate: super::hold::Gate::default(),
            llm: LlmState::default(),
        });
        Ok(DirectLab { shared })
    }

    /// Answers one request (must run inside a tokio runtime: streams spawn producers).
    pub async fn answer(&self, req: Request<Full<Bytes>>) -> Response<LabBody> {
        match super::router::handle(Arc::clone(&self.shared), req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }

    /// Ends every stream and waits for the producers to stop.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
    }
}

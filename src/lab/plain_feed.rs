//! The plain feed's fixed events (see [`super::plain`]): built once when the server starts,
//! held in the server's shared state and read by every GET on the plain path.
//!
//! Why apart from the handler: the feed is state the server owns (its ids are drawn once), the
//! handler is behaviour above it; the split keeps the server state from importing a handler.

use bytes::Bytes;
use serde_json::json;

use super::config::{IdStyle, LineEnding};
use super::ids::opaque_id;
use super::sse_body::SseEncoder;

/// Events in the plain feed.
pub const PLAIN_EVENTS: u64 = 16;

/// The fixed plain feed: ids and encoded events.
#[derive(Debug)]
pub struct Feed {
    ids: Vec<String>,
    pub(crate) events: Vec<Bytes>,
}

impl Feed {
    /// The feed for `style` ids and `eol` line endings.
    pub fn new(style: IdStyle, eol: LineEnding) -> Self {
        let enc = SseEncoder::new(eol);
        let ids: Vec<String> = (0..PLAIN_EVENTS)
            .map(|k| match style {
                IdStyle::Counter => k.to_string(),
                IdStyle::Opaque => opaque_id(),
            })
            .collect();
        let events = ids
            .iter()
            .enumerate()
            .map(|(k, id)| {
                let data =
                    json!({"tick": k, "of": PLAIN_EVENTS, "last": k as u64 + 1 == PLAIN_EVENTS});
                enc.message(Some(id), &[data.to_string().as_bytes()])
            })
            .collect();
        Feed { ids, events }
    }

    /// Index of the event named `id`.
    pub(crate) fn find(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|i| i == id.trim())
    }
}

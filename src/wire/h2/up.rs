//! The client→server side of the h2 observer: request heads (HPACK-decoded `HEADERS`), request
//! bodies (`DATA`, for the JSON-RPC id and the LLM request hash), `END_STREAM`.
//!
//! Invariants (besides those of `half`): a stream's `Request` (and `LlmRequest`) is held until
//! the frame carrying its `END_STREAM` is delivered, as HTTP/1.1 holds it until its body's last
//! byte; a request reset before its end reports nothing. Its facts are shared with the
//! downstream half from its head on (a server may answer before the body ends).

use std::sync::{Arc, OnceLock};

use super::half::H2Half;
use super::headers::Fields;
use crate::wire::http1::{BODY_LIMIT, ReqInfo, request_observations, rpc_request_id};
use crate::wire::http1_head::RequestHead;

/// A request whose body is being read.
pub(super) struct ReqBody {
    info: Arc<ReqInfo>,
    head: RequestHead,
    body: Vec<u8>,
    over: bool,
    /// An LLM route's API, with the hash and length of the whole body so far.
    llm: Option<(crate::vocab::LlmApi, Box<xxhash_rust::xxh3::Xxh3>, u64)>,
}

impl ReqBody {
    pub(super) fn held_bytes(&self) -> usize {
        self.body.capacity()
    }
}

impl H2Half {
    /// A decoded request head (or trailers) on `stream`.
    pub(super) fn up_headers(&mut self, stream: u32, fields: Fields, _end: u64) {
        if self.reqs.contains_key(&stream) || !fields.is_request() {
            return; // trailers: only their END_STREAM matters
        }
        let head = fields.request();
        let info = Arc::new(ReqInfo {
            seq: u64::from(stream),
            method: head.method.clone(),
            path: head.path.clone(),
            session: head.session.clone(),
            rpc_id: OnceLock::new(),
            resume: head.last_event_id.is_some(),
            llm: self
                .routes
                .api_of(&head.path)
                .filter(|_| head.method == "POST"),
            routes: self.routes.clone(),
        });
        if !self.shared.open(self.conn, stream, info.clone()) {
            return;
        }
        let llm = info
            .llm
            .map(|api| (api, Box::new(xxhash_rust::xxh3::Xxh3::new()), 0));
        self.reqs.insert(
            stream,
            ReqBody {
                info,
                head,
                body: Vec::new(),
                over: false,
                llm,
            },
        );
    }

    /// Request body bytes of `stream`.
    pub(super) fn up_data(&mut self, stream: u32, bytes: &[u8]) {
        let Some(r) = self.reqs.get_mut(&stream) else {
            return;
        };
        if let Some((_, h, len)) = r.llm.as_mut() {
            h.update(bytes);
            *len += bytes.len() as u64;
        }
        if r.body.len() + bytes.len() <= BODY_LIMIT {
            r.body.extend_from_slice(bytes);
        } else {
            r.over = true;
        }
    }

    /// `END_STREAM` from the client on `stream`, in a frame ending at raw offset `end`.
    pub(super) fn finish_request(&mut self, stream: u32, end: u64) {
        let Some(r) = self.reqs.remove(&stream) else {
            return;
        };
        let body = (!r.over && !r.body.is_empty()).then(|| bytes::Bytes::from(r.body));
        let _ = r.info.rpc_id.set(body.as_deref().and_then(rpc_request_id));
        let llm = r.llm.map(|(api, h, len)| (api, h.digest(), len));
        let (request, llm) = request_observations(self.conn, u64::from(stream), r.head, body, llm);
        self.out.hold(end, stream, request);
        if let Some(llm) = llm {
            self.out.hold(end, stream, llm);
        }
    }
}

//! Which call each leg of a stream carries, so that a cut on a resume leg (a `GET` with
//! `Last-Event-ID`, which names no call) is filed under the call whose stream it resumes, and
//! the cut timeline colours it by that call's outcome as it does a first-leg cut.
//!
//! A `POST`'s call is the JSON-RPC id of its body (the same text a cut point's `rpc_id`
//! holds); every event id delivered on a leg whose call is known names that call within the
//! leg's session; a resume leg's call is the call of the event id its `Last-Event-ID` names,
//! so chained resumes follow the first leg's call.
//!
//! Invariants: at most [`MAX_IDS`] event ids and [`MAX_LEGS`] legs are kept (a connection's
//! legs are dropped when it closes; the id table starts over when full), so a leg whose cursor
//! was forgotten stays without a call (uncoloured), never filed under a wrong one.

use std::collections::HashMap;

/// Event ids remembered at most (~100 bytes each).
pub const MAX_IDS: usize = 1 << 16;
/// Open legs remembered at most.
pub const MAX_LEGS: usize = 1 << 16;

/// The call of each leg and of each event id delivered on a leg with a known call.
#[derive(Debug, Default)]
pub struct LegCalls {
    /// `(conn, seq)` → (session, call).
    legs: HashMap<(u64, u64), (Option<String>, String)>,
    /// `(session, event id)` → call.
    ids: HashMap<(Option<String>, String), String>,
}

impl LegCalls {
    /// A request head was seen: a `POST` with a JSON-RPC id in its body starts a leg of that
    /// call; a `GET` with `Last-Event-ID` resumes the call that id was delivered for.
    pub fn request(
        &mut self,
        (conn, seq): (u64, u64),
        method: &str,
        session: Option<&String>,
        last_event_id: Option<&String>,
        body: Option<&[u8]>,
    ) {
        let call = match (method, last_event_id) {
            ("POST", _) => body.and_then(rpc_request_id),
            ("GET", Some(id)) => self.ids.get(&(session.cloned(), id.clone())).cloned(),
            _ => None,
        };
        if let Some(call) = call
            && self.legs.len() < MAX_LEGS
        {
            self.legs.insert((conn, seq), (session.cloned(), call));
        }
    }

    /// An event with id `id` was delivered on leg `(conn, seq)`.
    pub fn event(&mut self, leg: (u64, u64), id: &str) {
        let Some((session, call)) = self.legs.get(&leg) else {
            return;
        };
        if self.ids.len() >= MAX_IDS {
            self.ids.clear();
        }
        self.ids
            .insert((session.clone(), id.to_owned()), call.clone());
    }

    /// The call leg `(conn, seq)` carries, if known.
    pub fn call_of(&self, leg: (u64, u64)) -> Option<&str> {
        self.legs.get(&leg).map(|(_, call)| call.as_str())
    }

    /// Connection `conn` closed: its legs end.
    pub fn closed(&mut self, conn: u64) {
        self.legs.retain(|(c, _), _| *c != conn);
    }
}

/// The JSON-RPC id of a request body, as JSON text (`7`, `"a"`); `None` for a notification,
/// a response or a body that is not one JSON-RPC request.
fn rpc_request_id(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let o = v.as_object()?;
    o.get("method")?;
    o.get("id").map(ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(legs: &mut LegCalls, leg: (u64, u64), session: &str, id: u64) {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
        legs.request(
            leg,
            "POST",
            Some(&session.to_owned()),
            None,
            Some(body.as_bytes()),
        );
    }

    fn resume(legs: &mut LegCalls, leg: (u64, u64), session: &str, cursor: &str) {
        legs.request(
            leg,
            "GET",
            Some(&session.to_owned()),
            Some(&cursor.to_owned()),
            None,
        );
    }

    #[test]
    fn a_resume_leg_carries_the_call_of_the_stream_it_resumes_and_chains_follow() {
        let mut legs = LegCalls::default();
        post(&mut legs, (1, 0), "s", 7);
        post(&mut legs, (2, 0), "s", 8);
        legs.event((1, 0), "e1");
        legs.event((2, 0), "f1");
        legs.closed(1);
        resume(&mut legs, (3, 0), "s", "e1");
        assert_eq!(legs.call_of((3, 0)), Some("7"));
        legs.event((3, 0), "e2");
        legs.closed(3);
        resume(&mut legs, (4, 1), "s", "e2");
        assert_eq!(legs.call_of((4, 1)), Some("7"), "a resume of a resume");
        assert_eq!(legs.call_of((2, 0)), Some("8"));
    }

    #[test]
    fn a_cursor_of_another_session_or_never_delivered_names_no_call() {
        let mut legs = LegCalls::default();
        post(&mut legs, (1, 0), "s", 7);
        legs.event((1, 0), "e1");
        resume(&mut legs, (2, 0), "other", "e1");
        resume(&mut legs, (3, 0), "s", "e9");
        assert_eq!(legs.call_of((2, 0)), None);
        assert_eq!(legs.call_of((3, 0)), None);
        // A notification names no call; a closed connection's legs are gone.
        legs.request((5, 0), "POST", None, None, Some(br#"{"method":"x"}"#));
        assert_eq!(legs.call_of((5, 0)), None);
        legs.closed(1);
        assert_eq!(legs.call_of((1, 0)), None);
    }
}

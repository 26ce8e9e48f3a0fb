//! Rules `cursor-ahead` and `cursor-behind`: the client's `Last-Event-ID` on a resume, against
//! what the stream delivered.
//!
//! Rules (precise), judged once, when the resume opens (its cursor mapped to one stream):
//! - `cursor-ahead` (seed 004) iff the cursor names an id the stream owns but never delivered
//!   whole: the torn event's (its `id:` line reached the client, the event did not). Evidence:
//!   the raw offset, class, bytes and `data:` line of the cut, and the last id fully delivered.
//! - `cursor-behind` iff an event delivered after the cursor's event exists, unless the cursor
//!   lies inside the window a `reset` cut may have kept from the client: the events the cut leg
//!   delivered after its own cursor less than `rst_unread` before the reset (a client's kernel
//!   and buffers discard what it had not read at an RST, so a conformant client can resume
//!   from any of them, or from the newest event written before the window). A stream-scoped
//!   reset on HTTP/2 (`RST_STREAM`) opens no window: it follows the stream's bytes in order
//!   on a live connection, and the client's h2 stack hands on what came before it. Events written
//!   longer before the reset were read: a cursor behind them is stale, and the events the
//!   server sends again are the `replay-duplicate`s it causes. A cursor inside the window rolls
//!   the stream back to it (`Stream::roll_back`: what followed is owed again). A cursor equal
//!   to the stream's last id is nothing.
//! - Either way the rule marks the resume leg's cursor wrong in the ledger
//!   (`Resume::cursor_wrong`): the replay verdict then explains a re-sent event by the cursor,
//!   not by the server.
//!
//! State: none.

use crate::audit::finding::{FindingCut, FindingKind};
use crate::audit::ledger::Ledger;
use crate::audit::rule::{ResumeOpened, Rule};
use crate::audit::stream::Torn;

/// The cursor rule.
#[derive(Debug, Default)]
pub struct Cursor;

impl Rule for Cursor {
    fn name(&self) -> &'static str {
        "cursor"
    }

    fn on_resume_leg(&mut self, l: &mut Ledger, r: &ResumeOpened<'_>) {
        let Some(stream) = l.streams.get(&r.key) else {
            return;
        };
        let cursor = r.cursor;
        let last = stream.last_event_id.clone();
        let finding = match r.entry {
            None => {
                // The id is owned by this stream but not delivered: it is the torn event's.
                let t = stream.torn.clone().unwrap_or_else(|| Torn {
                    id: Some(cursor.to_owned()),
                    cut: FindingCut {
                        torn_bytes: Some(0),
                        ..FindingCut::default()
                    },
                    raw_offset: 0,
                });
                let mut f = l
                    .finding(FindingKind::CursorAhead, r.key, r.now)
                    .ids(vec![cursor.to_owned()])
                    .offsets(vec![t.raw_offset])
                    .detail(format!(
                        "Last-Event-ID {cursor} names an event cut after {} byte(s); the last \
                         fully delivered id was {}",
                        t.cut.torn_bytes.unwrap_or(0),
                        last.as_deref().unwrap_or("(none)")
                    ));
                f.cut = t.cut;
                f
            }
            Some(ordinal) => {
                let after = stream.ids_between(Some(ordinal), r.snapshot);
                // After a reset cut the client may never have read what the cut leg delivered
                // (its kernel may discard unread bytes): a cursor inside that window is not
                // behind; the replay is judged from it.
                let unread_ok = r.unread.is_some_and(|(from, through)| {
                    from.is_none_or(|f| ordinal >= f) && ordinal <= through
                });
                if after.is_empty() || unread_ok {
                    return;
                }
                l.finding(FindingKind::CursorBehind, r.key, r.now)
                    .ids(vec![cursor.to_owned(), last.clone().unwrap_or_default()])
                    .detail(format!(
                        "Last-Event-ID {cursor} is {} delivered event(s) behind the last \
                         delivered id {}; the client had them (ids {} … {}{}), so what a \
                         replay from its cursor sends again duplicates them",
                        after.len(),
                        last.as_deref().unwrap_or("-"),
                        after.first().map_or("-", |a| a.1.as_str()),
                        after.last().map_or("-", |a| a.1.as_str()),
                        if r.unread.is_some() {
                            "; those written longer than rst_unread before the reset were read"
                        } else {
                            ""
                        }
                    ))
            }
        };
        if let Some(resume) = l
            .legs
            .get_mut(&(r.conn, r.seq))
            .and_then(|g| g.resume.as_mut())
        {
            resume.cursor_wrong = true;
        }
        l.emit(finding);
    }
}

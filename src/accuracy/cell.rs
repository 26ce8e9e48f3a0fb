//! The accuracy matrix: one [`Cell`] is a scenario (a server bug, an eviction answer, a client
//! bug, or the EventSource-like client), an id style, a line ending and a cut action.
//!
//! Invariant: [`matrix`] lists every combination exactly once, in a stable order, so a seed and
//! a cell index name a run reproducibly.

use crate::lab::bugs::{IdStyle, ServerBug};
use crate::lab::{LineEnding, OnEvicted};
use crate::vocab::CutAction;

/// What is wrong (or right) in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The lab with this server bug (`None`: a correct replay), the strict client.
    Server(ServerBug),
    /// A small ring that evicts the cursor, answered per this mode (`Error`: HTTP 410).
    Evicted(OnEvicted),
    /// A correct lab and the strict client with the `stale-cursor` bug (its resume is cut too).
    StaleCursor,
    /// The plain-SSE endpoint and the EventSource-like client, with a 404 side request.
    EventSource,
    /// A correct lab and this many strict clients at once, one session and one identical call
    /// each, every call's stream cut once: sessions that count their ids, request ids and
    /// results alike (`replay --sessions N`).
    Sessions(usize),
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 13] = [
        Scenario::Server(ServerBug::None),
        Scenario::Evicted(OnEvicted::Error),
        Scenario::Server(ServerBug::Reorder),
        Scenario::Server(ServerBug::DropAfterReplay),
        Scenario::Server(ServerBug::Duplicate),
        Scenario::Server(ServerBug::SharedStore),
        Scenario::Server(ServerBug::LoseFinal),
        Scenario::Evicted(OnEvicted::Fresh),
        Scenario::Evicted(OnEvicted::ReplayFromOldest),
        Scenario::StaleCursor,
        Scenario::EventSource,
        Scenario::Sessions(4),
        Scenario::Sessions(16),
    ];

    /// A short label.
    pub fn label(self) -> String {
        match self {
            Scenario::Server(ServerBug::None) => "clean".to_owned(),
            Scenario::Server(b) => b.as_str().to_owned(),
            Scenario::Evicted(OnEvicted::Error) => "evicted-410".to_owned(),
            Scenario::Evicted(OnEvicted::Fresh) => "evicted-fresh".to_owned(),
            Scenario::Evicted(OnEvicted::ReplayFromOldest) => "evicted-from-oldest".to_owned(),
            Scenario::StaleCursor => "stale-cursor".to_owned(),
            Scenario::EventSource => "eventsource".to_owned(),
            Scenario::Sessions(n) => format!("sessions-{n}"),
        }
    }

    /// Whether the server and the client are both correct (only `torn-cut` and
    /// `replay-exact` may be reported).
    pub fn is_clean(self) -> bool {
        matches!(
            self,
            Scenario::Server(ServerBug::None) | Scenario::EventSource | Scenario::Sessions(_)
        )
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The scenario.
    pub scenario: Scenario,
    /// Event id style.
    pub ids: IdStyle,
    /// Line ending of the lab's SSE output.
    pub eol: LineEnding,
    /// How the proxy ends the cut connection.
    pub action: CutAction,
}

impl Cell {
    /// `scenario/ids/eol/action`.
    pub fn label(&self) -> String {
        let eol = match self.eol {
            LineEnding::Lf => "lf",
            LineEnding::Crlf => "crlf",
        };
        format!(
            "{}/{}/{eol}/{}",
            self.scenario.label(),
            self.ids.as_str(),
            self.action.as_str()
        )
    }
}

/// Every cell: scenarios × id styles × line endings × cut actions.
pub fn matrix() -> Vec<Cell> {
    let mut out = Vec::new();
    for scenario in Scenario::ALL {
        for ids in [IdStyle::Counter, IdStyle::Opaque] {
            for eol in [LineEnding::Lf, LineEnding::Crlf] {
                for action in [CutAction::Reset, CutAction::Fin, CutAction::CleanEnd] {
                    out.push(Cell {
                        scenario,
                        ids,
                        eol,
                        action,
                    });
                }
            }
        }
    }
    out
}

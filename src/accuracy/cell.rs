//! The accuracy matrix: one [`Cell`] is a scenario (a server bug, an eviction answer, a client
//! bug, or the EventSource-like client), an id style, a line ending, a cut action and the
//! transport (HTTP/1.1, or h2c with the cut's scope and the clients' connection count).
//!
//! Why a transport dimension: on HTTP/2 several calls share a connection and a cut may end one
//! stream or the whole connection; the audit must reach the same verdicts as on HTTP/1.1.
//!
//! Invariant: [`matrix`] and [`h2_matrix`] list every combination exactly once, in a stable
//! order, so a seed and a cell index name a run reproducibly.

use crate::fault::h2::CutScope;
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

/// How the clients reach the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// HTTP/1.1, a connection per request in flight.
    H1,
    /// h2c by prior knowledge: every client of the run shares a pool of `connections`
    /// connections (its sessions multiplexed on them), and the cut ends `scope`.
    H2 {
        /// What a cut ends: the stream (through the stream relay) or the connection.
        scope: CutScope,
        /// Connections in the clients' shared pool.
        connections: usize,
    },
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
    /// How the proxy ends the cut connection (or stream).
    pub action: CutAction,
    /// HTTP/1.1 or h2c.
    pub transport: Transport,
}

impl Cell {
    /// `scenario/ids/eol/action`.
    pub fn label(&self) -> String {
        let eol = match self.eol {
            LineEnding::Lf => "lf",
            LineEnding::Crlf => "crlf",
        };
        let h2 = match self.transport {
            Transport::H1 => String::new(),
            Transport::H2 { scope, connections } => {
                let scope = match scope {
                    CutScope::Stream => "stream",
                    CutScope::Connection => "conn",
                };
                format!("/h2-{scope}-x{connections}")
            }
        };
        format!(
            "{}/{}/{eol}/{}{h2}",
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
                        transport: Transport::H1,
                    });
                }
            }
        }
    }
    out
}

/// The scenarios of the h2 cells: every one but the EventSource-like client (it speaks
/// HTTP/1.1 only) and 16 sessions (4 already multiplex several calls per connection).
fn h2_scenarios() -> impl Iterator<Item = Scenario> {
    Scenario::ALL
        .into_iter()
        .filter(|s| !matches!(s, Scenario::EventSource | Scenario::Sessions(16)))
}

/// Every h2 cell: scenarios × id styles × line endings × (stream scope: reset, clean-end;
/// connection scope: reset, fin, clean-end — `fin` always ends the connection on HTTP/2) ×
/// connection counts (one, and for several sessions also two, so sessions share connections
/// both ways).
pub fn h2_matrix() -> Vec<Cell> {
    let cuts = [
        (CutScope::Stream, CutAction::Reset),
        (CutScope::Stream, CutAction::CleanEnd),
        (CutScope::Connection, CutAction::Reset),
        (CutScope::Connection, CutAction::Fin),
        (CutScope::Connection, CutAction::CleanEnd),
    ];
    let mut out = Vec::new();
    for scenario in h2_scenarios() {
        let counts: &[usize] = match scenario {
            Scenario::Sessions(_) => &[1, 2],
            _ => &[1],
        };
        for ids in [IdStyle::Counter, IdStyle::Opaque] {
            for eol in [LineEnding::Lf, LineEnding::Crlf] {
                for (scope, action) in cuts {
                    for &connections in counts {
                        out.push(Cell {
                            scenario,
                            ids,
                            eol,
                            action,
                            transport: Transport::H2 { scope, connections },
                        });
                    }
                }
            }
        }
    }
    out
}

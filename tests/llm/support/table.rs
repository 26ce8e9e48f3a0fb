//! What an SDK did with one run, in the README's words, and the README table "what your SDK
//! does with a cut stream" built from those words.
//!
//! Invariants: a run's description depends only on its [`Outcome`], the same client's complete
//! answer (the no-fault run) and the number of requests the lab received for it — never on
//! timings — so the table is the same on every machine; the table lists every client in
//! [`clients`] order and every truncation kind in [`Kind::ALL`] order.

use std::collections::BTreeMap;

use super::drivers::{Client, Mode, Outcome, Sdk, clients};

/// The truncation kinds of the matrix (issue 27's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// RST when the response's first byte arrives: no answer began (the case SDKs retry).
    ResetBeforeResponse,
    /// RST after the response head and the answer's opening events, before the first delta:
    /// the answer began, the client holds no token.
    ResetBeforeFirstToken,
    /// A clean end of the body (chunked terminator) after every delta, before the completion
    /// signal.
    CleanBeforeSignal,
    /// A clean end of the body inside a `data:` line (of a text delta, or of tool-call
    /// arguments).
    CleanMidData,
    /// RST inside a delta.
    Reset,
    /// FIN inside a delta, without the chunked terminator.
    Fin,
    /// The stream stops inside a delta and stays open.
    Stall,
    /// A clean end after the completion signal, before the terminal event (`[DONE]`,
    /// `message_stop`; Responses has none after `response.completed`).
    AfterSignal,
    /// A clean end between two events of a tool call's arguments (tool calls only).
    MidToolArgs,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::ResetBeforeResponse,
        Kind::ResetBeforeFirstToken,
        Kind::CleanBeforeSignal,
        Kind::CleanMidData,
        Kind::Reset,
        Kind::Fin,
        Kind::Stall,
        Kind::AfterSignal,
        Kind::MidToolArgs,
    ];

    /// The column heading.
    pub fn title(self) -> &'static str {
        match self {
            Kind::ResetBeforeResponse => "RST before the response",
            Kind::ResetBeforeFirstToken => "RST after the headers, before the first token",
            Kind::CleanBeforeSignal => "clean end before the completion signal",
            Kind::CleanMidData => "clean end mid-`data:` line",
            Kind::Reset => "RST",
            Kind::Fin => "FIN, no chunk terminator",
            Kind::Stall => "stall",
            Kind::AfterSignal => "cut after the completion signal",
            Kind::MidToolArgs => "clean end mid tool-call arguments",
        }
    }

    /// Whether the kind applies to runs of `mode`.
    pub fn applies(self, mode: Mode) -> bool {
        self != Kind::MidToolArgs || mode == Mode::Tool
    }
}

/// A complete answer (the client's no-fault run), which a cut run is compared with.
#[derive(Debug, Clone)]
pub struct Full {
    pub text: String,
    pub args: Option<serde_json::Value>,
    pub finish: Option<String>,
}

impl Full {
    pub fn of(o: &Outcome) -> Full {
        Full {
            text: o.text.clone(),
            args: o.tool.as_ref().and_then(|t| t.value()),
            finish: o.finish.clone(),
        }
    }
}

/// An error type as the table shows it: the SDK's own classes bare, others with a mark.
fn error_name(kind: &str, sdk_error: bool) -> String {
    if sdk_error {
        format!("`{kind}`")
    } else {
        format!("`{kind}`†")
    }
}

/// What the app got from one run, in a few words (see the README legend).
pub fn describe(o: &Outcome, full: &Full, mode: Mode, requests: u64) -> String {
    let mut s = if o.hung {
        "hangs".to_owned()
    } else if let Some(r) = &o.raised {
        let name = error_name(&r.kind, r.sdk_error);
        match r.via.as_str() {
            "error-part" => format!("error part {name}"),
            "abort-part" => "abort part (its timeout)".to_owned(),
            _ => format!("raises {name}"),
        }
    } else {
        let mut wrong = Vec::new();
        if o.finish != full.finish {
            match &o.finish {
                None => wrong.push("no finish reason".to_owned()),
                Some(f) => wrong.push(format!("finish `{f}`")),
            }
        }
        match mode {
            Mode::Text => {
                if o.text != full.text {
                    wrong.push("text cut".to_owned());
                }
            }
            Mode::Tool => match &o.tool {
                None => wrong.push("tool call dropped".to_owned()),
                Some(t) if t.invalid => wrong.push("call marked invalid".to_owned()),
                Some(t) => match t.value() {
                    None => wrong.push("arguments invalid JSON".to_owned()),
                    Some(v) if Some(&v) != full.args.as_ref() => {
                        wrong.push("arguments valid JSON, altered".to_owned())
                    }
                    Some(_) => {}
                },
            },
        }
        if wrong.is_empty() {
            "complete".to_owned()
        } else {
            format!("**accepted**: {}", wrong.join(", "))
        }
    };
    if requests > 1 {
        s.push_str(&format!(" (retried: {requests} requests)"));
    }
    s
}

/// One described run, keyed for the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub mode: Mode,
    pub client: Client,
    pub kind: Kind,
}

/// The README table: one table per mode, a row per client, a column per kind.
pub fn markdown(cells: &BTreeMap<Key, String>) -> String {
    let mut out = String::new();
    for mode in Mode::ALL {
        let kinds: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|k| k.applies(mode))
            .collect();
        out.push_str(match mode {
            Mode::Text => "**Text answers**\n\n",
            Mode::Tool => "\n**Tool calls**\n\n",
        });
        out.push_str("| SDK | call |");
        for k in &kinds {
            out.push_str(&format!(" {} |", k.title()));
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---|".repeat(kinds.len()));
        out.push('\n');
        for client in clients() {
            out.push_str(&format!("| {} | {} |", client.sdk.package(), client.call()));
            for kind in &kinds {
                let key = Key {
                    mode,
                    client,
                    kind: *kind,
                };
                let cell = cells.get(&key).map_or("–", String::as_str);
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
    }
    out
}

/// The SDKs whose rows the table has (for the legend).
pub fn packages() -> Vec<&'static str> {
    let mut v: Vec<Sdk> = clients().iter().map(|c| c.sdk).collect();
    v.dedup();
    v.into_iter().map(Sdk::package).collect()
}

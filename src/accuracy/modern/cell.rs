//! The MCP 2026-07-28 accuracy matrix: one [`ModernCell`] is a client (a real SDK client
//! driven by an app script, or one of tearline's load-client policies), a workload (what the
//! app does: repeat identical calls, distinct calls, retry a failed call with or without the
//! `Idempotency-Key` marker, retry it with other arguments, give up), the tool (idempotent `progress` or NOT idempotent
//! `append`) and where the scripted cut falls (in a progress event while the tool still runs,
//! in the result event after it finished, or in a JSON response body).
//!
//! Invariants: [`matrix`] lists every meaningful combination exactly once in a stable order
//! (tearline's clients have no app layer: only `repeat` and `distinct`); [`quick`] is a fixed
//! subset covering every client, workload and cut spot, for the test suite; [`h2_quick`] the
//! same over h2c for tearline's clients.

use crate::load::Policy;

/// Who makes the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `@modelcontextprotocol/client` 2.4 pinned to 2026-07-28 (`tests/peers/js/app_driver.mjs`).
    TsSdk,
    /// PyPI `mcp` 2.3 with `mode="2026-07-28"` (`tests/peers/py/app_driver.py`).
    PySdk,
    /// The same Python app over h2c: its httpx client built with `http2=True, http1=False`
    /// (prior knowledge; the SDK's requests multiplex on one connection).
    PySdkH2,
    /// tearline's load client with this policy, in process.
    Tearline(Policy),
    /// tearline's load client with this policy over h2c (prior knowledge, one pooled
    /// connection its calls multiplex on), in process.
    TearlineH2(Policy),
}

impl Client {
    /// Every client.
    pub const ALL: [Client; 5] = [
        Client::TsSdk,
        Client::PySdk,
        Client::Tearline(Policy::Strict),
        Client::Tearline(Policy::Naive),
        Client::Tearline(Policy::Retry),
    ];

    /// A short label (`ts`, `py`, `strict`, …).
    pub fn label(self) -> &'static str {
        match self {
            Client::TsSdk => "ts",
            Client::PySdk => "py",
            Client::PySdkH2 => "py-h2",
            Client::Tearline(p) => p.as_str(),
            Client::TearlineH2(Policy::Strict) => "strict-h2",
            Client::TearlineH2(Policy::Naive) => "naive-h2",
            Client::TearlineH2(Policy::Retry) => "retry-h2",
        }
    }
}

/// What the app does with its calls (see the driver scripts' docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The same tool with the same arguments, call after call; a failed call is not re-sent
    /// by the app (tearline's strict and retry policies re-send by themselves).
    Repeat,
    /// Every call's arguments distinct.
    Distinct,
    /// `Repeat` with an app-level retry layer re-sending a failed call once, unmarked.
    Retry,
    /// `Retry`, the layer marking each logical call with an `Idempotency-Key`.
    RetryMarked,
    /// `Distinct` with an app-level retry layer re-sending a failed call once, unmarked and
    /// with other arguments (`attempt: <n>` added): no identical call ever follows.
    RetryChanged,
    /// `Repeat`, stopping at the first failed call.
    GiveUp,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 6] = [
        Workload::Repeat,
        Workload::Distinct,
        Workload::Retry,
        Workload::RetryMarked,
        Workload::RetryChanged,
        Workload::GiveUp,
    ];

    /// The driver scripts' name of the workload.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Repeat => "repeat",
            Workload::Distinct => "distinct",
            Workload::Retry => "retry",
            Workload::RetryMarked => "retry-marked",
            Workload::RetryChanged => "retry-changed",
            Workload::GiveUp => "give-up",
        }
    }
}

/// The tool the calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `progress`: idempotent and read-only, `PROGRESS_N` notifications 40 ms apart, then the
    /// result (a cut in a progress event falls while the tool still runs).
    Progress,
    /// `append`: NOT idempotent; its side effect first, then one progress notification and a
    /// padded result.
    Append,
}

/// Progress notifications of the `progress` tool per call.
pub const PROGRESS_N: u64 = 3;

impl Tool {
    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Progress => "progress",
            Tool::Append => "append",
        }
    }

    /// The arguments every call sends (before a distinct workload adds `item`).
    pub fn args(self) -> serde_json::Value {
        match self {
            Tool::Progress => serde_json::json!({"n": PROGRESS_N, "interval": 40}),
            Tool::Append => serde_json::json!({"amount": 1, "pad": 2048}),
        }
    }

    /// The index of the result event in a call's SSE stream (2026-07-28 streams carry no
    /// priming event).
    pub fn result_event(self) -> u64 {
        match self {
            Tool::Progress => PROGRESS_N,
            Tool::Append => 1,
        }
    }
}

/// Where the scripted cut falls in the cut call's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spot {
    /// In a progress event of the call's SSE stream (for `progress`, before the tool finished).
    ProgressEvent,
    /// In the result event (the tool has finished: a lost acknowledgement).
    ResultEvent,
    /// In the JSON response body (the lab answers calls with one JSON body; the tool finished).
    JsonBody,
}

impl Spot {
    /// Every spot.
    pub const ALL: [Spot; 3] = [Spot::ProgressEvent, Spot::ResultEvent, Spot::JsonBody];

    /// A short label.
    pub fn as_str(self) -> &'static str {
        match self {
            Spot::ProgressEvent => "progress-event",
            Spot::ResultEvent => "result-event",
            Spot::JsonBody => "json-body",
        }
    }
}

/// One cell of the 2026-07-28 matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModernCell {
    /// Who calls.
    pub client: Client,
    /// What the app does.
    pub workload: Workload,
    /// Which tool.
    pub tool: Tool,
    /// Where the cut falls.
    pub spot: Spot,
}

/// Logical calls per run; the cut falls in the second one's first attempt, so identical calls
/// come before and after it.
pub const CALLS: u64 = 4;
/// The logical call whose first attempt is cut (0-based).
pub const CUT_CALL: u64 = 1;

impl ModernCell {
    /// `client/workload/tool/spot`.
    pub fn label(&self) -> String {
        format!(
            "2026/{}/{}/{}/{}",
            self.client.label(),
            self.workload.as_str(),
            self.tool.name(),
            self.spot.as_str()
        )
    }
}

/// Every cell: SDK clients × every workload, tearline's policies × `repeat` and `distinct`,
/// each × tools × spots.
pub fn matrix() -> Vec<ModernCell> {
    cells_of(&Client::ALL)
}

/// The h2 cells: tearline's policies over h2c × `repeat` and `distinct` × tools × spots, and
/// the Python SDK's app over h2c × every workload × tools × spots. (The TypeScript SDK's
/// fetch (undici) has no h2c.)
pub fn h2_matrix() -> Vec<ModernCell> {
    cells_of(&[
        Client::PySdkH2,
        Client::TearlineH2(Policy::Strict),
        Client::TearlineH2(Policy::Naive),
        Client::TearlineH2(Policy::Retry),
    ])
}

fn cells_of(clients: &[Client]) -> Vec<ModernCell> {
    let mut out = Vec::new();
    for &client in clients {
        let workloads: &[Workload] = match client {
            Client::TsSdk | Client::PySdk | Client::PySdkH2 => &Workload::ALL,
            Client::Tearline(_) | Client::TearlineH2(_) => &[Workload::Repeat, Workload::Distinct],
        };
        for &workload in workloads {
            for tool in [Tool::Progress, Tool::Append] {
                for spot in Spot::ALL {
                    out.push(ModernCell {
                        client,
                        workload,
                        tool,
                        spot,
                    });
                }
            }
        }
    }
    out
}

/// The test suite's subset: every client, workload, tool and spot at least once, the cases of
/// the issue first (identical calls after a cut, unmarked and marked app re-sends, a re-send
/// with other arguments, a give-up, a re-executed `append`).
pub fn quick() -> Vec<ModernCell> {
    use Client::*;
    use Spot::*;
    use Workload::*;
    let cell = |client, workload, tool, spot| ModernCell {
        client,
        workload,
        tool,
        spot,
    };
    vec![
        cell(TsSdk, Repeat, Tool::Progress, ProgressEvent),
        cell(TsSdk, RetryMarked, Tool::Append, ResultEvent),
        cell(TsSdk, Retry, Tool::Append, JsonBody),
        cell(TsSdk, Retry, Tool::Append, ProgressEvent),
        cell(TsSdk, RetryChanged, Tool::Append, ProgressEvent),
        cell(PySdk, RetryChanged, Tool::Progress, ResultEvent),
        cell(PySdk, Repeat, Tool::Append, JsonBody),
        cell(PySdk, Retry, Tool::Progress, ResultEvent),
        cell(PySdk, RetryMarked, Tool::Append, ProgressEvent),
        cell(PySdk, GiveUp, Tool::Progress, ProgressEvent),
        cell(PySdk, Distinct, Tool::Append, ResultEvent),
        cell(
            Tearline(Policy::Strict),
            Repeat,
            Tool::Progress,
            ProgressEvent,
        ),
        cell(Tearline(Policy::Strict), Distinct, Tool::Append, JsonBody),
        cell(Tearline(Policy::Naive), Repeat, Tool::Append, ResultEvent),
        cell(Tearline(Policy::Retry), Repeat, Tool::Append, ProgressEvent),
        cell(Tearline(Policy::Retry), Distinct, Tool::Progress, JsonBody),
    ]
}

/// The test suite's h2c subset of [`h2_matrix`]: every h2 client and spot at least once,
/// tearline's clients in both their workloads, together every kind the era's truth can
/// require (`torn-cut`, `abandoned`, `unproven-resend` with its visible facet, `reissued`,
/// `reexecuted`), `append` cut in all three spots (the cells the relay's cut record, released
/// ahead of the queued bytes' observations, used to miss), and the Python SDK's app re-sending
/// with and without the marker and giving up.
pub fn h2_quick() -> Vec<ModernCell> {
    use Spot::*;
    use Workload::*;
    let cell = |policy, workload, tool, spot| ModernCell {
        client: Client::TearlineH2(policy),
        workload,
        tool,
        spot,
    };
    let py = |workload, tool, spot| ModernCell {
        client: Client::PySdkH2,
        workload,
        tool,
        spot,
    };
    vec![
        py(RetryMarked, Tool::Append, ProgressEvent),
        py(Retry, Tool::Progress, JsonBody),
        py(GiveUp, Tool::Append, ResultEvent),
        cell(Policy::Strict, Repeat, Tool::Append, ResultEvent),
        cell(Policy::Strict, Distinct, Tool::Progress, JsonBody),
        cell(Policy::Strict, Distinct, Tool::Append, JsonBody),
        cell(Policy::Naive, Distinct, Tool::Append, ProgressEvent),
        cell(Policy::Naive, Repeat, Tool::Progress, ProgressEvent),
        cell(Policy::Retry, Repeat, Tool::Append, JsonBody),
        cell(Policy::Retry, Distinct, Tool::Append, ProgressEvent),
        cell(Policy::Retry, Repeat, Tool::Progress, ResultEvent),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_lists_each_cell_once_and_quick_is_part_of_it() {
        let all = matrix();
        let labels: std::collections::BTreeSet<String> = all.iter().map(|c| c.label()).collect();
        assert_eq!(labels.len(), all.len());
        assert_eq!(all.len(), (2 * 6 + 3 * 2) * 2 * 3);
        assert_eq!(h2_matrix().len(), (6 + 3 * 2) * 2 * 3);
        for c in quick() {
            assert!(labels.contains(&c.label()), "{}", c.label());
        }
    }

    #[test]
    fn the_h2_quick_subset_is_part_of_the_h2_matrix_and_covers_every_client_and_spot() {
        let all: std::collections::BTreeSet<String> =
            h2_matrix().iter().map(|c| c.label()).collect();
        let quick = h2_quick();
        for c in &quick {
            assert!(all.contains(&c.label()), "{}", c.label());
        }
        for client in [
            Client::TearlineH2(Policy::Strict),
            Client::TearlineH2(Policy::Naive),
            Client::TearlineH2(Policy::Retry),
            Client::PySdkH2,
        ] {
            assert!(
                quick.iter().any(|c| c.client == client),
                "{}",
                client.label()
            );
        }
        for spot in Spot::ALL {
            assert!(
                quick
                    .iter()
                    .any(|c| c.tool == Tool::Append && c.spot == spot),
                "append cut in {}",
                spot.as_str()
            );
        }
        for workload in [Workload::Repeat, Workload::Distinct] {
            assert!(quick.iter().any(|c| c.workload == workload));
        }
    }
}

//! The five LLM SDKs as the tests drive them: which client (SDK × API × call style) exists, the
//! job each run is, and the batch runner that hands every job of one SDK to ONE driver process
//! (tests/peers/{js,py}/llm_*: the SDK is loaded once per matrix, not once per run) and reads
//! back one JSON line per job.
//!
//! Invariants: every job gets exactly one [`Outcome`] or the run fails naming the jobs without
//! one; a driver process is bounded by [`BATCH_LIMIT`] and killed when dropped; at most
//! `parallel` runs of one SDK are in flight at once (five SDKs run side by side).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::peers;

/// One published SDK package (and its driver script).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sdk {
    PyOpenai,
    PyAnthropic,
    JsOpenai,
    JsAnthropic,
    JsVercel,
}

impl Sdk {
    /// The package and version the driver loads (as pinned in tests/peers).
    pub fn package(self) -> &'static str {
        match self {
            Sdk::PyOpenai => "PyPI `openai` 3.57.0",
            Sdk::PyAnthropic => "PyPI `anthropic` 2.15.0",
            Sdk::JsOpenai => "npm `openai` 7.59.0",
            Sdk::JsAnthropic => "npm `@anthropic-ai/sdk` 1.15.0",
            Sdk::JsVercel => "npm `ai` 7.0.173",
        }
    }

    fn script(self) -> &'static str {
        match self {
            Sdk::PyOpenai => "py/llm_openai.py",
            Sdk::PyAnthropic => "py/llm_anthropic.py",
            Sdk::JsOpenai => "js/llm_openai.mjs",
            Sdk::JsAnthropic => "js/llm_anthropic.mjs",
            Sdk::JsVercel => "js/llm_vercel.mjs",
        }
    }

    fn command(self) -> std::process::Command {
        let mut cmd = match self {
            Sdk::PyOpenai | Sdk::PyAnthropic => peers::python(),
            _ => peers::node(),
        };
        cmd.current_dir(peers::dir()).arg(self.script());
        cmd
    }
}

/// An API the lab serves (and the request path tearline recognises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    Chat,
    Responses,
    Messages,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }
}

/// How the app reads the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Style {
    /// Iterates the raw event stream and adds up deltas itself.
    Raw,
    /// The SDK's accumulating helper (`get_final_*` / `final*()`).
    Helper,
    /// Vercel `streamText`, reading `fullStream`.
    StreamText,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::Raw => "raw",
            Style::Helper => "helper",
            Style::StreamText => "stream-text",
        }
    }
}

/// What the app asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Text,
    Tool,
}

impl Mode {
    pub const ALL: [Mode; 2] = [Mode::Text, Mode::Tool];
    pub fn name(self) -> &'static str {
        match self {
            Mode::Text => "text",
            Mode::Tool => "tool",
        }
    }
}

/// One way an app calls a model: SDK × API × call style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Client {
    pub sdk: Sdk,
    pub api: Api,
    pub style: Style,
}

impl Client {
    /// How the README names the call, e.g. `messages.stream().get_final_message()`.
    pub fn call(self) -> &'static str {
        use {Api::*, Sdk::*, Style::*};
        match (self.sdk, self.api, self.style) {
            (PyOpenai, Chat, Raw) => "`chat.completions.create(stream=True)`, iterated",
            (PyOpenai, Chat, Helper) => "`chat.completions.stream()` → `get_final_completion()`",
            (PyOpenai, Responses, Raw) => "`responses.create(stream=True)`, iterated",
            (PyOpenai, Responses, Helper) => "`responses.stream()` → `get_final_response()`",
            (PyAnthropic, Messages, Raw) => "`messages.create(stream=True)`, iterated",
            (PyAnthropic, Messages, Helper) => "`messages.stream()` → `get_final_message()`",
            (JsOpenai, Chat, Raw) => "`chat.completions.create({stream: true})`, iterated",
            (JsOpenai, Chat, Helper) => "`chat.completions.stream()` → `finalChatCompletion()`",
            (JsOpenai, Responses, Raw) => "`responses.create({stream: true})`, iterated",
            (JsOpenai, Responses, Helper) => "`responses.stream()` → `finalResponse()`",
            (JsAnthropic, Messages, Raw) => "`messages.create({stream: true})`, iterated",
            (JsAnthropic, Messages, Helper) => "`messages.stream()` → `finalMessage()`",
            (JsVercel, Chat, StreamText) => "`streamText` + `openai.chat()`, `fullStream`",
            (JsVercel, Responses, StreamText) => {
                "`streamText` + `openai.responses()`, `fullStream`"
            }
            (JsVercel, Messages, StreamText) => "`streamText` + `anthropic()`, `fullStream`",
            _ => "(no such call)",
        }
    }
}

/// Every client the tests drive (15: the five SDKs with each API and call style they
/// have).
pub fn clients() -> Vec<Client> {
    use {Api::*, Sdk::*, Style::*};
    let mut v = Vec::new();
    for sdk in [PyOpenai, JsOpenai] {
        for api in [Chat, Responses] {
            for style in [Raw, Helper] {
                v.push(Client { sdk, api, style });
            }
        }
    }
    for sdk in [PyAnthropic, JsAnthropic] {
        for style in [Raw, Helper] {
            v.push(Client {
                sdk,
                api: Messages,
                style,
            });
        }
    }
    for api in [Chat, Responses, Messages] {
        v.push(Client {
            sdk: JsVercel,
            api,
            style: StreamText,
        });
    }
    v
}

/// One run: a client asks `base` for a text or a tool call, with the SDK's `timeout` option and
/// the driver's watchdog.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: usize,
    pub base: String,
    pub client: Client,
    pub mode: Mode,
    pub timeout_ms: u64,
    pub deadline_ms: u64,
    /// HTTP/2 with prior knowledge (h2c): the Python drivers hand the SDK an
    /// `httpx.Client(http2=True, http1=False)`; the Node drivers have no such switch.
    pub h2: bool,
}

/// A tool call as the SDK handed it to the app.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ToolSeen {
    pub name: Option<String>,
    /// A JSON string, or the object the SDK parsed it into.
    pub arguments: serde_json::Value,
    /// Whether the arguments are (or parse as) a JSON object.
    pub parsed: bool,
    /// Vercel's `invalid` flag.
    #[serde(default)]
    pub invalid: bool,
}

impl ToolSeen {
    /// The arguments as a JSON value (a string is parsed; `None` when it does not parse).
    pub fn value(&self) -> Option<serde_json::Value> {
        match &self.arguments {
            serde_json::Value::String(s) => serde_json::from_str(s).ok(),
            v => Some(v.clone()),
        }
    }
}

/// An error the SDK raised (or handed over as a stream part).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Raised {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    pub cause: Option<String>,
    /// Whether it belongs to the SDK's own error hierarchy (what its docs tell apps to catch).
    pub sdk_error: bool,
    /// `throw`, `error-part` or `abort-part`.
    pub via: String,
}

/// What the SDK gave the app in one run (one driver line).
#[derive(Debug, Clone, Deserialize)]
pub struct Outcome {
    pub id: usize,
    pub text: String,
    pub tool: Option<ToolSeen>,
    pub tool_calls: u32,
    pub finish: Option<String>,
    pub raised: Option<Raised>,
    pub hung: bool,
    pub events: u64,
    /// The requests the run's HTTP/2 client started (each attempt, the SDK's re-sends
    /// included, whether or not all its bytes left); `None` on HTTP/1.1.
    #[serde(default)]
    pub requests: Option<u64>,
    pub elapsed_ms: u64,
}

/// The longest one driver process may take for its whole batch.
pub const BATCH_LIMIT: Duration = Duration::from_secs(180);

/// Runs every job, each SDK's jobs in one driver process (the processes side by side, each with
/// at most `parallel` runs in flight); returns the outcome of each job by id.
pub async fn run_jobs(jobs: &[Job], parallel: usize) -> BTreeMap<usize, Outcome> {
    run_jobs_with_env(jobs, parallel, &[]).await
}

/// [`run_jobs`] with `env` set for the drivers (e.g. planted API keys).
pub async fn run_jobs_with_env(
    jobs: &[Job],
    parallel: usize,
    env: &[(&str, &str)],
) -> BTreeMap<usize, Outcome> {
    let mut by_sdk: BTreeMap<Sdk, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        by_sdk.entry(j.client.sdk).or_default().push(j);
    }
    let runs = by_sdk
        .into_iter()
        .map(|(sdk, jobs)| run_batch(sdk, jobs, parallel, env));
    let mut out = BTreeMap::new();
    for batch in futures_util::future::join_all(runs).await {
        out.extend(batch);
    }
    let missing: Vec<usize> = jobs
        .iter()
        .map(|j| j.id)
        .filter(|id| !out.contains_key(id))
        .collect();
    assert!(missing.is_empty(), "no outcome for jobs {missing:?}");
    out
}

async fn run_batch(
    sdk: Sdk,
    jobs: Vec<&Job>,
    parallel: usize,
    env: &[(&str, &str)],
) -> BTreeMap<usize, Outcome> {
    let mut input = String::new();
    for j in &jobs {
        let line = serde_json::json!({
            "id": j.id,
            "base": j.base,
            "api": j.client.api.name(),
            "mode": j.mode.name(),
            "style": j.client.style.name(),
            "timeout_ms": j.timeout_ms,
            "deadline_ms": j.deadline_ms,
            "h2": j.h2,
        });
        input.push_str(&line.to_string());
        input.push('\n');
    }
    let mut cmd = tokio::process::Command::from(sdk.command());
    cmd.envs(env.iter().copied())
        .arg("--jobs")
        .arg(parallel.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{sdk:?} driver does not start: {e}"));
    let mut stdin = child.stdin.take().expect("driver stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write the jobs");
    drop(stdin);
    // Drained beside stdout, so a chatty driver never blocks on a full pipe.
    let mut stderr = child.stderr.take().expect("driver stderr");
    let errors = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut stderr, &mut buf).await;
        buf
    });
    let stdout = child.stdout.take().expect("driver stdout");
    let read = async {
        let mut lines = BufReader::new(stdout).lines();
        let mut out = BTreeMap::new();
        while let Ok(Some(line)) = lines.next_line().await {
            let o: Outcome = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{sdk:?} driver printed a bad line ({e}): {line}"));
            out.insert(o.id, o);
        }
        out
    };
    let out = tokio::time::timeout(BATCH_LIMIT, read)
        .await
        .unwrap_or_else(|_| panic!("{sdk:?} driver did not finish its batch in {BATCH_LIMIT:?}"));
    let status = child.wait().await.expect("driver exit");
    let errors = errors.await.unwrap_or_default();
    assert!(
        status.success(),
        "{sdk:?} driver failed ({status}): {}",
        String::from_utf8_lossy(&errors)
    );
    out
}

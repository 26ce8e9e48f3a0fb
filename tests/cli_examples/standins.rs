//! What a test must change for an example to run here, declared once, each with its reason:
//! the addresses it binds or talks to, the durations that would take minutes, the files it
//! names, the environment it assumes; and the exit code each example must end with.
//!
//! Invariants: an example is changed only by these tables (every rewrite is a row with its
//! why); every address it talks to resolves to a stand-in on 127.0.0.1 this test started;
//! every address it binds is 127.0.0.1 port 0 (the command announces what it got).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Who answers an address an example talks to: started for that example alone (in its
/// directory, stopped after it), so no example's load slows or fails another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIn {
    /// `tearline serve` (plain HTTP): the lab, and "your MCP server".
    Lab,
    /// `tearline proxy` in front of its own lab (no faults).
    Proxy,
    /// `tearline serve --tls-self-signed`: an HTTPS origin.
    TlsLab,
    /// `tearline proxy --tls-self-signed --upstream-tls` in front of its own TLS lab.
    TlsProxy,
}

/// Addresses in example lines (outside a bind flag), the stand-in for each, and why.
#[rustfmt::skip]
pub const ADDRESSES: [(&str, StandIn, &str); 12] = [
    ("//PROXY:8931/", StandIn::Proxy, "the README's agents name their proxy PROXY"),
    ("//proxy:8931/", StandIn::Proxy, "`load --help`'s agent names its proxy `proxy`"),
    ("//PROXY/", StandIn::Proxy, "the README's LLM section names the proxy PROXY"),
    ("127.0.0.1:7000", StandIn::Proxy, "the examples' proxy listens on 7000"),
    ("localhost:7443", StandIn::TlsProxy, "the HTTPS proxy of `proxy --help` listens on 7443"),
    ("127.0.0.1:8080", StandIn::Lab, "\"a service on 8080\", \"your own MCP server\""),
    ("localhost:8080", StandIn::Lab, "the same service by name"),
    ("127.0.0.1:8931", StandIn::Lab, "the lab's default address (or the server the example started with `&`)"),
    ("127.0.0.1:8443", StandIn::TlsLab, "the HTTPS lab of `serve --help`"),
    ("https://localhost:8931/", StandIn::TlsLab, "an HTTPS lab (`serve --tls-self-signed`) on the lab's default port"),
    ("api.example.com:443", StandIn::TlsLab, "an HTTPS origin on the internet: no internet in tests; the stand-in's certificate names localhost, trusted through SSL_CERT_FILE as a system root would be"),
    ("api.openai.com:443", StandIn::TlsLab, "the same, for the README's LLM provider"),
];

/// Flags whose value is an address the example binds: rewritten to 127.0.0.1 port 0 (tests
/// bind port 0 only; the command announces the address it got, which the probe uses).
pub const BIND_FLAGS: [&str; 3] = ["--listen", "--api", "-host"];

/// Commands whose defaults bind a fixed port or talk to one, and what is appended when the
/// example leaves the default: `(command, flag it lacks, appended, why)`.
#[rustfmt::skip]
pub const DEFAULTS: [(&str, &str, &str, &str); 4] = [
    ("serve", "--listen", "--listen 127.0.0.1:0", "the lab's default address is 127.0.0.1:8931"),
    ("proxy", "--api", "--api 127.0.0.1:0", "the control API's default address is 127.0.0.1:8474"),
    ("toxiproxy-server", "-port", "-port 0", "toxiproxy-server's default port is 8474"),
    ("load", "--target", "--target http://{lab}/mcp", "the default target is the lab's default address"),
];

/// Durations above this are shortened to [`SHORT_DURATION`]: `--duration 20s|30s|60s` would
/// take minutes of the suite; the flag, its parsing and the run's shape are what the example
/// shows.
pub const LONGEST_DURATION_S: u64 = 5;
/// See [`LONGEST_DURATION_S`].
pub const SHORT_DURATION: &str = "2s";

/// Environment every example gets: `(name, value, why)`; `{home}` and `{ca}` are this test's
/// directories.
#[rustfmt::skip]
pub const ENV: [(&str, &str, &str); 5] = [
    ("HOME", "{home}", "the local CA lives in ~/.local/share/tearline/ca: a fresh home, never the user's"),
    ("SSL_CERT_FILE", "{ca}", "the system roots the HTTPS stand-in is trusted by (rustls-native-certs reads it)"),
    ("K", "1", "the README's agents run on machines K=1 … 4: this is machine 1"),
    ("OPENAI_API_KEY", "sk-stand-in", "`--api-key-env OPENAI_API_KEY`: the lab accepts any key"),
    ("NO_COLOR", "1", "plain output to parse"),
];

/// Files examples name, written before any example runs (`name`, what it is): copied into an
/// example's directory when its line names them. `profiles/` is the checkout's (the README's
/// commands run from a checkout).
#[rustfmt::skip]
pub const WRITTEN_FILES: [(&str, &str); 5] = [
    ("my.toml", "the user's own profile: a copy of profiles/reset-250ms.toml"),
    ("my-llm-cuts.toml", "the user's LLM profile: a copy of profiles/llm-truncation.toml"),
    ("my-proxies.toml", "two named [[proxy]] on port 0 in front of a lab"),
    ("toxiproxy.json", "a Toxiproxy config: one proxy on port 0 in front of a lab"),
    ("server-ca.pem", "the CA of the HTTPS lab (tearline's local CA)"),
];

/// Files examples name that short real runs make (while the first examples run; an example
/// naming one waits for them): `out` is `tearline replay --seed 1 --out out` plus four load
/// agents (out/agent-1 … 4) through a proxy with the reset-250ms profile.
#[rustfmt::skip]
pub const SAVED_FILES: [(&str, &str); 10] = [
    ("out", "the replay's report directory, and the agents' in out/agent-1 … 4"),
    ("report.json", "out/report.json"),
    ("tearline-report", "tearline-report/20261130T030405Z/report.json: out/report.json"),
    ("A.hlog", "out/agent-1/report.hlog"),
    ("B.hlog", "out/agent-2/report.hlog"),
    ("load-a", "load-a/report.hlog: out/agent-1/report.hlog"),
    ("load-b", "load-b/report.hlog: out/agent-2/report.hlog"),
    ("proxy-a", "proxy-a/cuts.jsonl and findings.jsonl: the logs of the proxy the agents ran through"),
    ("cuts.jsonl", "proxy-a/cuts.jsonl"),
    ("findings.jsonl", "proxy-a/findings.jsonl"),
];

/// Exit codes other than 0: `(command, text in the line, codes, why)`; the first match wins.
#[rustfmt::skip]
pub const EXITS: [(&str, &str, &[i32], &str); 4] = [
    ("replay", "silent-loss>0", &[99], "the lab's seed-004 server makes the naive client lose calls silently: the threshold fails, the README's story"),
    ("report show", "silent-loss>0", &[99], "the saved report is a replay's: its naive client lost calls silently"),
    ("", "max(", &[0, 99], "a latency threshold: its verdict is this machine's; it must be evaluated (never 2)"),
    ("", "p99", &[0, 99], "a latency threshold: its verdict is this machine's; it must be evaluated (never 2)"),
];

/// The `host[:port]` inside an [`ADDRESSES`] key (`//PROXY/` → `PROXY`).
fn host_port(from: &str) -> &str {
    let rest = from.split_once("//").map_or(from, |(_, r)| r);
    rest.trim_end_matches('/')
}

/// What stands for `from`'s host and port: the stand-in's address, by name (`localhost`) where
/// the example names a host (its certificate names localhost, not the IP).
fn stand_in_host_port(from: &str, to: SocketAddr) -> String {
    let host = host_port(from).split(':').next().unwrap_or("");
    if host.parse::<std::net::IpAddr>().is_ok() || host.eq_ignore_ascii_case("proxy") {
        to.to_string()
    } else {
        format!("localhost:{}", to.port())
    }
}

/// The subcommand of a `tearline …` line (`report show` for report's), or "".
pub fn command_of(words: &[String]) -> String {
    let mut it = words
        .iter()
        .skip(1)
        .filter(|w| !w.starts_with('-'))
        .map(String::as_str);
    match it.next() {
        Some("report") => format!("report {}", it.next().unwrap_or("")),
        Some(c) => c.to_owned(),
        None => String::new(),
    }
}

/// The line as this test runs it: a comment dropped, binds on port 0, addresses on the
/// stand-ins (`at` starts the one asked for, or says why it could not; `started`: the address
/// of a server the example started with `&`, standing for the lab's default address), long
/// durations shortened, fixed-port defaults overridden.
pub fn rewrite(
    line: &str,
    mut at: impl FnMut(StandIn) -> Result<SocketAddr, String>,
    started: Option<SocketAddr>,
) -> Result<String, String> {
    let mut words: Vec<String> = line
        .trim_end_matches('&')
        .split(' ')
        .take_while(|w| !w.starts_with('#'))
        .map(str::to_owned)
        .collect();
    for i in 1..words.len() {
        let flag = words[i - 1].clone();
        let w = &mut words[i];
        if BIND_FLAGS.contains(&flag.as_str()) && w != "off" {
            *w = if flag == "-host" {
                "127.0.0.1"
            } else {
                "127.0.0.1:0"
            }
            .to_owned();
            continue;
        }
        if flag == "--duration"
            && tearline::units::parse_duration(w).is_ok_and(|d| d.as_secs() > LONGEST_DURATION_S)
        {
            *w = SHORT_DURATION.to_owned();
            continue;
        }
        for (from, stand_in, _) in ADDRESSES {
            if w.contains(from) {
                let to = match (stand_in, started) {
                    (StandIn::Lab, Some(s)) if from == "127.0.0.1:8931" => s,
                    _ => at(stand_in)?,
                };
                let to = from.replace(host_port(from), &stand_in_host_port(from, to));
                *w = w.replace(from, &to);
            }
        }
    }
    while words.last().is_some_and(String::is_empty) {
        words.pop();
    }
    let command = command_of(&crate::text::shell_words(&words.join(" ")));
    let end = words
        .iter()
        .position(|w| w.starts_with('>'))
        .unwrap_or(words.len());
    for (cmd, lacks, add, _) in DEFAULTS {
        if command == cmd && !words.iter().any(|w| w == lacks) {
            let add = if add.contains("{lab}") {
                add.replace("{lab}", &at(StandIn::Lab)?.to_string())
            } else {
                add.to_owned()
            };
            words.insert(end, add);
        }
    }
    Ok(words.join(" "))
}

/// The exit codes an example must end with (its original line).
pub fn exits(line: &str) -> &'static [i32] {
    let command = command_of(&crate::text::shell_words(line));
    EXITS
        .iter()
        .find(|(cmd, text, _, _)| (cmd.is_empty() || command == *cmd) && line.contains(text))
        .map_or(&[0], |(_, _, codes, _)| codes)
}

/// Writes [`WRITTEN_FILES`].
pub fn write_static_files(skel: &Path, checkout: &Path, lab: SocketAddr, ca: &Path) {
    let copy = |from: PathBuf, to: &str| {
        std::fs::copy(&from, skel.join(to))
            .unwrap_or_else(|e| panic!("copy {} to {to}: {e}", from.display()));
    };
    copy(checkout.join("profiles/reset-250ms.toml"), "my.toml");
    copy(
        checkout.join("profiles/llm-truncation.toml"),
        "my-llm-cuts.toml",
    );
    copy(ca.to_path_buf(), "server-ca.pem");
    let proxies = format!(
        "[[proxy]]\nname = \"api\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{lab}\"\n\n\
         [[proxy]]\nname = \"events\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{lab}\"\n\n\
         [[fault]]\nkind = \"latency\"\nproxy = \"api\"\nlatency_ms = 5\n"
    );
    std::fs::write(skel.join("my-proxies.toml"), proxies).expect("write my-proxies.toml");
    let json = format!(
        r#"[{{"name": "api", "listen": "127.0.0.1:0", "upstream": "{lab}", "enabled": true}}]"#
    );
    std::fs::write(skel.join("toxiproxy.json"), json).expect("write toxiproxy.json");
}

//! Command-line surface of `tearline proxy`: parse, bind, serve until SIGINT/SIGTERM.
//!
//! Invariants: every bad input is reported as one [`CliError`] naming the flag or address at
//! fault (main.rs prints it on one line and exits 2); the listen address is bound before
//! anything is served; the seed in use (given or random) is printed once at start.

pub mod profile_watch;
pub mod stack;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use crate::proxy::{ProxyConfig, ProxyError, ProxySpec};
use stack::Observe;

pub use crate::units::{parse_duration, parse_size};

/// Relay TCP from a listen address to an upstream, through faults.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  # Relay local port 7000 to a service on 8080
  tearline proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080

  # A named proxy with a fixed seed (every fault decision reproducible) and a connection cap
  tearline proxy --name api --listen 127.0.0.1:7000 --upstream localhost:8080 \\
      --seed 42 --max-connections 500

  # Small buffers (faults see smaller chunks), quick drain on Ctrl-C
  tearline proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080 \\
      --buffer-size 4KiB --drain-timeout 500ms

Sizes accept B, KiB, MiB (and K, M, KB, MB); durations accept ms, s, m.
  # The documents' test (one SSE cut per stream, 250 ms outage) in front of your server
  tearline proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080 \\
      --profile profiles/reset-250ms.toml --cuts-log cuts.jsonl --findings-log findings.jsonl

  # Several named proxies from a profile, control API off
  tearline proxy --profile my-proxies.toml --api off

  # The control API alone, no proxies yet (as `toxiproxy-server`): clients create them
  tearline proxy --api 127.0.0.1:8474

  # Edit the profile while it runs: each saved, valid change applies without dropping a
  # connection; an invalid one is reported as FILE:LINE:COL and the old profile stays
  tearline proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:8080 \\
      --profile my.toml --watch

  # HTTPS upstream: clients speak plain HTTP to tearline, tearline speaks TLS to the server
  tearline proxy --listen 127.0.0.1:7000 --upstream api.example.com:443 --upstream-tls

  # TLS on both sides, with a certificate from tearline's local CA (the line to trust it is
  # printed); cuts end the client's TLS session without close_notify unless --tls-fin says so
  tearline proxy --listen 127.0.0.1:7443 --upstream 127.0.0.1:8443 --upstream-tls \\
      --upstream-ca server-ca.pem --tls-self-signed --profile profiles/reset-250ms.toml

  # The same keeping HTTP/1.1 on both sides: clients get h2 only if the upstream picks it,
  # and --upstream-alpn pins what the upstream is offered
  tearline proxy --listen 127.0.0.1:7443 --upstream 127.0.0.1:8443 --upstream-tls \\
      --upstream-ca server-ca.pem --tls-self-signed --upstream-alpn http/1.1

The control API (Toxiproxy-compatible, plus /cuts, /findings, /metrics) listens on
127.0.0.1:8474 unless --api says otherwise; browser-originated requests and unknown Host
names are refused. A non-loopback --api needs --api-token (or --api-insecure-no-token).
Sizes accept B, KiB, MiB (and K, M, KB, MB); durations accept ms, s, m.
SIGINT/SIGTERM stop accepting, let open connections drain for --drain-timeout, then close;
the audit's summary is printed at the end.")]
pub struct Args {
    /// Address to listen on (ip:port). Without it, --upstream and a profile, only the control
    /// API starts (no proxies; create them through it, as with toxiproxy-server).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub listen: Option<SocketAddr>,
    /// Upstream to relay to (host:port). Required with --listen.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_upstream)]
    pub upstream: Option<String>,
    /// Proxy name (logs, metrics, seed derivation).
    #[arg(long, default_value = "proxy")]
    pub name: String,
    /// Read buffer per direction (largest chunk).
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size)]
    pub buffer_size: usize,
    /// Memory the read buffers of all busy directions share: with many busy connections each
    /// buffer shrinks below --buffer-size (to 4 KiB at least). Idle directions hold none.
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = parse_size)]
    pub read_budget: usize,
    /// Upstream connect timeout.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Connections served at once per proxy; one more is reset at once, counted in
    /// tearline_proxy_connections_over_limit_total and logged (the first). Default: what the
    /// open-file limit allows ((ulimit -n - 256) / 2; the soft limit is raised to the hard one
    /// at start, as toxiproxy-server's Go runtime does).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// How long open connections may finish after SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Byte budget of each direction's delay queue (data a fault holds back). Throughput
    /// through a latency L is at most SIZE / L (256 MiB: ~2.5 GiB/s through 100 ms).
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size)]
    pub max_inflight: usize,
    /// Memory budget of each proxy across its connections (0 = none): while over it, queues
    /// stop filling (backpressure) and new connections are refused (RST, logged).
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
    pub max_buffered: usize,
    /// Seed of every random fault decision (default: the profile's, else random; printed).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Fault profile (TOML): faults for this proxy, or named proxies with their faults.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// Reload --profile when the file changes, without dropping connections: faults, phases
    /// and outages are replaced; an invalid edit is reported (file:line:col) and ignored.
    #[arg(long, requires = "profile")]
    pub watch: bool,
    /// Control API address, or `off`.
    #[arg(long, value_name = "ADDR|off", default_value = "127.0.0.1:8474", value_parser = parse_api)]
    pub api: ApiAddr,
    /// Bearer token the control API requires.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TEARLINE_API_TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<String>,
    /// Serve a non-loopback --api without a token: anyone who can reach the address can
    /// reconfigure the proxy. Logged as a warning at start.
    #[arg(long)]
    pub api_insecure_no_token: bool,
    /// A `Host` name the control API accepts besides localhost, loopback addresses and the
    /// address it was reached on (repeatable; others are refused as DNS rebinding); `*` accepts
    /// any, as toxiproxy-server does (the `toxiproxy-server` start uses it with a non-loopback
    /// -host, e.g. in a container).
    #[arg(long, value_name = "NAME")]
    pub api_allow_host: Vec<String>,
    /// Create proxies from a Toxiproxy JSON file at start (the body of `POST /populate`, as
    /// `toxiproxy-server -config FILE`): `[{"name": …, "listen": …, "upstream": …,
    /// "enabled": …}]`. As Toxiproxy, a file that cannot be read or applied is logged and the
    /// server keeps running with the proxies it could create.
    #[arg(long, value_name = "FILE", requires = "api")]
    pub populate: Option<std::path::PathBuf>,
    /// Always copy through user space, even where nothing needs the bytes (by default a
    /// direction with an opaque stream and no byte-editing fault is relayed with splice(2)).
    #[arg(long)]
    pub no_splice: bool,
    /// Pipe capacity per zero-copy direction (the kernel may grant less; below 64 KiB that
    /// direction copies).
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub pipe_size: usize,
    /// Parse HTTP/SSE (positions, audit) or relay bytes only.
    #[arg(long, value_enum, default_value_t = Observe::Http)]
    pub observe: Observe,
    /// Append every cut record to this JSONL file.
    #[arg(long, value_name = "FILE")]
    pub cuts_log: Option<std::path::PathBuf>,
    /// Append every audit finding to this JSONL file.
    #[arg(long, value_name = "FILE")]
    pub findings_log: Option<std::path::PathBuf>,
    /// How long a cut call may wait for its answer, a resume or a proven re-send before the
    /// audit reports it `abandoned` (lost); at shutdown every such call is reported whatever it
    /// waited.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub abandon_after: std::time::Duration,
    /// Observations the audit queues at most (each is an event, a request, a cut, …; ~250
    /// bytes). The relay never waits for the audit: beyond this, observations are dropped and
    /// the streams they belonged to are reported not judged (`unknown`), never judged from
    /// what was left.
    #[arg(long, value_name = "N", default_value_t = crate::audit::AuditConfig::default().queue,
          value_parser = parse_audit_queue)]
    pub audit_queue: usize,
    /// After a TCP reset, events written less than this long before it may be unread by the
    /// client (discarded with its buffers): a resume from inside that window is judged from its
    /// cursor; a resume behind older events is a stale cursor (see README, "What a reset
    /// discards").
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_duration)]
    pub rst_unread: std::time::Duration,
    /// Declare an LLM route tearline does not recognise by itself: requests to PATH (a prefix
    /// when it ends in `*`) speak API (`chat-completions`, `responses`, `messages`), e.g.
    /// `--llm-route '/gen/*=chat-completions'`; repeatable, before the profile's `[[llm_route]]`.
    #[arg(long, value_name = "PATH=API", value_parser = crate::wire::llm_routes::parse_route)]
    pub llm_route: Vec<(String, crate::vocab::LlmApi)>,
    /// TLS to the upstream and/or for the clients.
    #[command(flatten)]
    pub tls: crate::cmd::tls::ProxyTlsArgs,
}

/// `--audit-queue`: 1 to 2^26 observations (~16 GB at the top; the default is 65,536).
fn parse_audit_queue(s: &str) -> Result<usize, String> {
    const MAX: usize = 1 << 26;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{s}` is not a queue size: give a number of observations from 1 to {MAX} \
             (default 65536)"
        )),
    }
}

/// The control API's address, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiAddr(pub Option<SocketAddr>);

fn parse_api(s: &str) -> Result<ApiAddr, String> {
    if s == "off" {
        return Ok(ApiAddr(None));
    }
    parse_addr(s).map(|a| ApiAddr(Some(a)))
}

/// Errors of `tearline proxy`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Binding or serving failed.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// A flag the single-proxy form needs is absent.
    #[error("missing {0}")]
    Missing(&'static str),
    /// No proxy would listen and the control API is off.
    #[error(
        "nothing to serve: give --listen and --upstream, a --profile with enabled proxies, or leave the control API on (it starts with no proxies and creates them on request)"
    )]
    NothingToServe,
    /// The signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// The profile is unreadable or invalid.
    #[error(transparent)]
    Profile(#[from] crate::profile::ProfileError),
    /// `--listen`/`--upstream` given with a profile that names its own proxies: one of the two
    /// would be ignored.
    #[error(
        "{profile} defines {count} [[proxy]] with their own listen and upstream addresses, so \
         --listen and --upstream would be ignored: drop them, or drop the [[proxy]] tables to \
         apply the profile's faults to --listen → --upstream"
    )]
    FlagsBesideProfileProxies {
        /// The profile's name or path.
        profile: String,
        /// Its proxies.
        count: usize,
    },
    /// A profile's proxy has an unusable listen address.
    #[error("proxy '{proxy}': listen address '{listen}' is not ip:port")]
    ProfileListen {
        /// The proxy.
        proxy: String,
        /// The address as written.
        listen: String,
    },
    /// A non-loopback control API without a token.
    #[error(
        "the control API on {0} is reachable from other machines: give --api-token TOKEN (clients send Authorization: Bearer TOKEN), bind it to 127.0.0.1, or pass --api-insecure-no-token to serve it open"
    )]
    ApiNeedsToken(SocketAddr),
    /// The control API could not bind.
    #[error(
        "cannot bind the control API on {addr} (use --api ADDR to move it, --api off to disable it)"
    )]
    ApiBind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A proxy could not be registered with the control API.
    #[error("control API: {0}")]
    Api(#[source] crate::control::errors::ApiError),
    /// The findings log could not be opened.
    #[error("--findings-log")]
    FindingsLog(#[source] crate::audit::AuditError),
    /// The cut log could not be opened.
    #[error("--cuts-log")]
    CutLog(#[source] crate::wire::record::CutLogError),
    /// A TLS flag could not be turned into a configuration.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

impl Args {
    /// The single proxy these arguments describe (`--listen`, `--upstream` and the limits),
    /// with `seed` resolved.
    pub fn spec(&self, seed: u64) -> Result<ProxySpec, CliError> {
        let listen = self.listen.ok_or(CliError::Missing(
            "--listen ADDR (example: --listen 127.0.0.1:7000)",
        ))?;
        let upstream = self.upstream.clone().ok_or(CliError::Missing(
            "--upstream HOST:PORT (example: --upstream 127.0.0.1:8080)",
        ))?;
        Ok(ProxySpec {
            listen,
            config: self.config(upstream, seed),
            faults: Vec::new(),
        })
    }

    /// The limits of these arguments applied to a proxy named by them, to `upstream`.
    pub fn config(&self, upstream: String, seed: u64) -> ProxyConfig {
        ProxyConfig {
            name: self.name.clone(),
            upstream,
            buffer_size: self.buffer_size,
            read_budget: self.read_budget,
            connect_timeout: self.connect_timeout,
            max_connections: self
                .max_connections
                .map_or_else(crate::proxy::fd_limit::default_max_connections, |n| {
                    n as usize
                }),
            drain_timeout: self.drain_timeout,
            max_inflight_bytes: self.max_inflight,
            max_buffered_bytes: self.max_buffered as u64,
            seed,
            tls: crate::tls::ProxyTls::default(),
            zero_copy: !self.no_splice,
            pipe_size: self.pipe_size,
        }
    }
}

/// Runs `tearline proxy` until SIGINT or SIGTERM, then drains.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    check_api_exposure(&args)?;
    let files = crate::proxy::fd_limit::raise_to_hard();
    tracing::debug!(open_file_limit = ?files, "open-file limit");
    let profile = match &args.profile {
        Some(path) => Some(crate::profile::load(path)?),
        None => None,
    };
    let seed = args
        .seed
        .or(profile.as_ref().and_then(|p| p.seed))
        .unwrap_or_else(rand::random);
    let mut proxies = Vec::new();
    match &profile {
        Some(p) if !p.proxies.is_empty() => {
            if args.listen.is_some() || args.upstream.is_some() {
                return Err(CliError::FlagsBesideProfileProxies {
                    profile: p.origin.clone(),
                    count: p.proxies.len(),
                });
            }
            for def in &p.proxies {
                let listen = parse_addr(&def.listen).map_err(|_| CliError::ProfileListen {
                    proxy: def.name.clone(),
                    listen: def.listen.clone(),
                })?;
                let mut config = args.config(def.upstream.clone(), seed);
                config.name = def.name.clone();
                let spec = ProxySpec {
                    listen,
                    config,
                    faults: p.factories_for(Some(&def.name)),
                };
                proxies.push((spec, Some(def.name.clone()), def.enabled));
            }
        }
        // Neither a proxy nor a profile: the control API alone (Toxiproxy's server role).
        None if args.listen.is_none() && args.upstream.is_none() => {}
        _ => {
            let mut spec = args.spec(seed)?;
            if let Some(p) = &profile {
                spec.faults = p.factories_for(None);
            }
            proxies.push((spec, None, true));
        }
    }
    for (spec, _, _) in &mut proxies {
        spec.config.tls = args.tls.build(spec.listen.ip())?;
    }
    let mut llm_routes = args.llm_route.clone();
    llm_routes.extend(profile.iter().flat_map(|p| p.llm_routes.iter().cloned()));
    stack::serve(stack::Stack {
        proxies,
        profile,
        watch: args.watch.then(|| args.profile.clone()).flatten(),
        template: args.config(String::new(), seed),
        seed,
        observe: args.observe,
        api: args.api.0,
        api_token: args.api_token.clone(),
        api_allow_hosts: args.api_allow_host.clone(),
        populate: args.populate.clone(),
        cuts_log: args.cuts_log.clone(),
        findings_log: args.findings_log.clone(),
        abandon_after: args.abandon_after,
        audit_queue: args.audit_queue,
        rst_unread: args.rst_unread,
        llm_routes: std::sync::Arc::new(crate::wire::llm_routes::LlmRoutes::new(llm_routes)),
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// A control API other machines can reach needs a token, or the explicit opt-out (warned).
fn check_api_exposure(args: &Args) -> Result<(), CliError> {
    let Some(addr) = args.api.0 else {
        return Ok(());
    };
    let has_token = args.api_token.as_ref().is_some_and(|t| !t.is_empty());
    if addr.ip().is_loopback() || has_token {
        return Ok(());
    }
    if !args.api_insecure_no_token {
        return Err(CliError::ApiNeedsToken(addr));
    }
    tracing::warn!(
        %addr,
        "CONTROL API OPEN WITHOUT A TOKEN on a non-loopback address (--api-insecure-no-token): \
         anyone who can reach it can reconfigure or stop every proxy"
    );
    Ok(())
}

/// An `ip:port` or `host:port` address; a host name resolves as Go resolves one to listen on
/// (its first IPv4 address, else its first): `localhost:8474` is `127.0.0.1:8474`.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let bad = |why: String| {
        format!(
            "'{s}' is not a host:port address ({why}; example: localhost:7000 or 127.0.0.1:7000)"
        )
    };
    let found: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .collect();
    crate::control::listen::prefer_ipv4(&found)
        .ok_or_else(|| bad("it resolves to no address".to_owned()))
}

fn parse_upstream(s: &str) -> Result<String, String> {
    let bad = || format!("'{s}' is not a host:port address (example: 127.0.0.1:8080)");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_api_needs_a_token_or_the_explicit_opt_out() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let parse = |extra: &[&str]| {
            let mut argv = vec!["proxy"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).expect("arguments parse").args
        };
        let open = parse(&["--api", "0.0.0.0:8474"]);
        let err = check_api_exposure(&open).expect_err("refused without a token");
        assert!(err.to_string().contains("--api-token"), "{err}");
        let empty = parse(&["--api", "0.0.0.0:8474", "--api-token", ""]);
        assert!(
            check_api_exposure(&empty).is_err(),
            "an empty token is no token"
        );
        assert!(check_api_exposure(&parse(&["--api", "0.0.0.0:8474", "--api-token", "s"])).is_ok());
        let opt_out = parse(&["--api", "0.0.0.0:8474", "--api-insecure-no-token"]);
        assert!(check_api_exposure(&opt_out).is_ok());
        assert!(check_api_exposure(&parse(&["--api", "127.0.0.1:8474"])).is_ok());
        assert!(check_api_exposure(&parse(&["--api", "[::1]:8474"])).is_ok());
        assert!(check_api_exposure(&parse(&["--api", "off"])).is_ok());
    }

    #[test]
    fn upstream_needs_host_and_port() {
        assert!(parse_upstream("localhost:8080").is_ok());
        assert!(parse_upstream("[::1]:8080").is_ok());
        assert!(parse_upstream("localhost").is_err());
        assert!(parse_upstream(":80").is_err());
        assert!(parse_upstream("h:99999").is_err());
    }
}

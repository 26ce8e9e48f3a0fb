//! Command-line surface of `tearline proxy`: parse, bind, serve until SIGINT/SIGTERM.
//!
//! Invariants: every bad input is reported as one [`CliError`] naming the flag or address at
//! fault (main.rs prints it on one line and exits 2); the listen address is bound before
//! anything is served; the seed in use (given or random) is printed once at start.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ProxyConfig, ProxyError, ProxySpec};

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
SIGINT/SIGTERM stop accepting, let open connections drain for --drain-timeout, then close.")]
pub struct Args {
    /// Address to listen on (ip:port). Required unless a profile names its proxies.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub listen: Option<SocketAddr>,
    /// Upstream to relay to (host:port). Required unless a profile names its proxies.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_upstream)]
    pub upstream: Option<String>,
    /// Proxy name (logs, metrics, seed derivation).
    #[arg(long, default_value = "proxy")]
    pub name: String,
    /// Read buffer per direction (largest chunk).
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size)]
    pub buffer_size: usize,
    /// Upstream connect timeout.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Connections served at once.
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// How long open connections may finish after SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Byte budget of each direction's delay queue (data a fault holds back).
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = parse_size)]
    pub max_inflight: usize,
    /// Seed of every random fault decision (random when absent; printed at start).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
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
    /// The signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
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
            connect_timeout: self.connect_timeout,
            max_connections: self.max_connections as usize,
            drain_timeout: self.drain_timeout,
            max_inflight_bytes: self.max_inflight,
            seed,
        }
    }
}

/// Runs `tearline proxy` until SIGINT or SIGTERM, then drains.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    serve(vec![args.spec(seed)?], seed).await
}

/// Binds every proxy (all or none), prints the seed and addresses, serves until SIGINT or
/// SIGTERM, then drains. The place a profile's proxies (with their faults) are started from.
pub async fn serve(specs: Vec<ProxySpec>, seed: u64) -> Result<ExitCode, CliError> {
    let bound = super::bind_all(specs).await?;
    println!("tearline proxy: seed {seed}");
    for (l, p) in &bound {
        if let Ok(addr) = l.local_addr() {
            println!(
                "tearline proxy: {} listening on {addr} → {}",
                p.name(),
                p.upstream()
            );
        }
    }
    let shutdown = CancellationToken::new();
    spawn_signal_watch(shutdown.clone())?;
    super::run_bound(bound, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// Cancels `shutdown` at the first SIGINT or SIGTERM.
pub fn spawn_signal_watch(shutdown: CancellationToken) -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(CliError::Signals)?;
        let mut int = signal(SignalKind::interrupt()).map_err(CliError::Signals)?;
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            tracing::info!("signal received; draining");
            shutdown.cancel();
        });
    }
    #[cfg(not(unix))]
    {
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                shutdown.cancel();
            }
        });
    }
    Ok(())
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not an ip:port address (example: 127.0.0.1:7000)"))
}

fn parse_upstream(s: &str) -> Result<String, String> {
    let bad = || format!("'{s}' is not a host:port address (example: 127.0.0.1:8080)");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(s.to_owned())
}

/// Parses `64KiB`, `1MiB`, `4096`, `8K`, `2MB` (binary multiples) into bytes.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64KiB, 1MiB)"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        _ => {
            return Err(format!(
                "'{s}' has an unknown size unit (use B, KiB, MiB, GiB)"
            ));
        }
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))?;
    if bytes == 0 {
        return Err(format!("'{s}' must be at least 1 byte"));
    }
    Ok(bytes)
}

/// Parses `250ms`, `5s`, `2m` (a bare number is seconds) into a duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 250ms, 5s, 2m)"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" | "min" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!("'{s}' has an unknown duration unit (use ms, s, m)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12parsecs").is_err());
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("5h").is_err());
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

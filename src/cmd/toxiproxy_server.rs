//! `tearline toxiproxy-server`: the command line of `toxiproxy-server`, so a compose file or a
//! Testcontainers module can swap the image and keep its command (`-host 0.0.0.0 -config
//! /config/toxiproxy.json`). The binary started under the name `toxiproxy-server` (a link, as
//! in deploy/Dockerfile.toxiproxy) behaves the same.
//!
//! Flags as Go's `flag` package reads them (`-flag value`, `-flag=value`, `--flag`; booleans
//! alone or `=true|false`): `-host` (default `localhost`), `-port` (8474), `-config FILE`,
//! `-seed N`, `-proxy-metrics`, `-runtime-metrics` (accepted: tearline always serves both),
//! `-version`, `-help`. They become `tearline proxy --api HOST:PORT [--populate FILE]
//! [--seed N]`; a non-loopback host is served as toxiproxy-server serves it — no token, any
//! `Host` — and says so in a warning.

use std::net::ToSocketAddrs;
use std::process::ExitCode;

use clap::Parser;

use super::proxy::{Args, CliError, run as run_proxy};

/// The toxiproxy-server settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// `-host`.
    pub host: String,
    /// `-port`.
    pub port: String,
    /// `-config`.
    pub config: Option<String>,
    /// `-seed`.
    pub seed: Option<u64>,
    /// `-version`.
    pub version: bool,
    /// `-help` / `-h`.
    pub help: bool,
}

/// Usage text, as `toxiproxy-server -help` lists its flags.
pub const USAGE: &str = "Usage of toxiproxy-server (tearline):
  -config string
    \tJSON file containing proxies to create on startup
  -host string
    \tHost for toxiproxy's API to listen on (default \"localhost\")
  -port string
    \tPort for toxiproxy's API to listen on (default \"8474\")
  -proxy-metrics
    \tenable toxiproxy-specific prometheus metrics (always on in tearline)
  -runtime-metrics
    \tenable runtime-related prometheus metrics (always on in tearline)
  -seed int
    \tSeed for randomizing toxics with
  -version
    \tprint the version";

/// Parses toxiproxy-server's flags; the error names the flag and what was wrong.
pub fn parse(args: &[String]) -> Result<Flags, String> {
    let mut f = Flags {
        host: "localhost".to_owned(),
        port: "8474".to_owned(),
        config: None,
        seed: None,
        version: false,
        help: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(format!(
                "unexpected argument '{arg}' (toxiproxy-server takes only flags; see -help)"
            ));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag, None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("flag needs an argument: -{name}"))
        };
        let boolean = |v: &Option<String>| match v.as_deref() {
            None | Some("true" | "1" | "t" | "T" | "TRUE" | "True") => Ok(true),
            Some("false" | "0" | "f" | "F" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(format!("invalid boolean value \"{other}\" for -{name}")),
        };
        match name {
            "host" => f.host = value(name)?,
            "port" => f.port = value(name)?,
            "config" => f.config = Some(value(name)?).filter(|c| !c.is_empty()),
            "seed" => {
                let v = value(name)?;
                // Go reads an int64; a negative seed keeps its bits.
                let seed = v
                    .parse::<u64>()
                    .or_else(|_| v.parse::<i64>().map(|s| s as u64))
                    .map_err(|_| format!("invalid value \"{v}\" for flag -seed: not an integer"))?;
                f.seed = Some(seed);
            }
            "proxy-metrics" | "runtime-metrics" => {
                boolean(&inline)?;
            }
            "version" => f.version = boolean(&inline)?,
            "help" | "h" => f.help = true,
            other => {
                return Err(format!(
                    "flag provided but not defined: -{other} (toxiproxy-server flags: -host, \
                     -port, -config, -seed, -proxy-metrics, -runtime-metrics, -version)"
                ));
            }
        }
    }
    Ok(f)
}

/// Whether `host` names only loopback addresses (then the API keeps tearline's protections).
fn is_loopback(host: &str) -> bool {
    (host, 0)
        .to_socket_addrs()
        .map(|mut a| a.all(|a| a.ip().is_loopback()))
        .unwrap_or(false)
}

/// The `tearline proxy` arguments these flags mean.
pub fn proxy_args(f: &Flags) -> Result<Args, String> {
    let host = if f.host.contains(':') && !f.host.starts_with('[') {
        format!("[{}]", f.host)
    } else {
        f.host.clone()
    };
    let mut argv = vec![
        "proxy".to_owned(),
        "--api".to_owned(),
        format!("{host}:{}", f.port),
    ];
    if let Some(c) = &f.config {
        argv.extend(["--populate".to_owned(), c.clone()]);
    }
    if let Some(s) = f.seed {
        argv.extend(["--seed".to_owned(), s.to_string()]);
    }
    if !is_loopback(&f.host) {
        argv.extend([
            "--api-insecure-no-token".to_owned(),
            "--api-allow-host".to_owned(),
            "*".to_owned(),
        ]);
    }
    Proxy::try_parse_from(argv)
        .map(|p| p.args)
        .map_err(|e| e.to_string())
}

/// `tearline proxy`'s arguments as a command line of their own.
#[derive(Debug, Parser)]
struct Proxy {
    #[command(flatten)]
    args: Args,
}

/// Runs toxiproxy-server's command line: prints the version or usage, or serves the API.
pub async fn run(args: Vec<String>) -> Result<ExitCode, CliError> {
    let flags = match parse(&args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return Ok(ExitCode::from(2));
        }
    };
    if flags.version {
        println!(
            "toxiproxy-server version {} (tearline)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(ExitCode::SUCCESS);
    }
    if flags.help {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    match proxy_args(&flags) {
        Ok(a) => run_proxy(a).await,
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::from(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn gos_flag_forms_are_read() {
        let f = parse(&args(
            "-host=0.0.0.0 --port 9000 -config /c.json -seed -3 -proxy-metrics",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.host, "0.0.0.0");
        assert_eq!(f.port, "9000");
        assert_eq!(f.config.as_deref(), Some("/c.json"));
        assert_eq!(f.seed, Some(-3i64 as u64));
        let d = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((d.host.as_str(), d.port.as_str()), ("localhost", "8474"));
    }

    #[test]
    fn unknown_flags_and_missing_values_are_named() {
        let e = parse(&args("-listen x")).err().unwrap_or_default();
        assert!(
            e.starts_with("flag provided but not defined: -listen"),
            "{e}"
        );
        let e = parse(&args("-port")).err().unwrap_or_default();
        assert_eq!(e, "flag needs an argument: -port");
    }

    #[test]
    fn the_flags_become_a_proxy_command_line() {
        let f = parse(&args("-host localhost -port 8474 -config p.json -seed 7"))
            .unwrap_or_else(|e| panic!("{e}"));
        let a = proxy_args(&f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.api.0.map(|s| s.to_string()).as_deref(),
            Some("127.0.0.1:8474")
        );
        assert_eq!(a.seed, Some(7));
        assert!(a.populate.is_some() && !a.api_insecure_no_token);
        let f = parse(&args("-host 0.0.0.0")).unwrap_or_else(|e| panic!("{e}"));
        let a = proxy_args(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(a.api_insecure_no_token);
        assert_eq!(a.api_allow_host, ["*"]);
    }
}

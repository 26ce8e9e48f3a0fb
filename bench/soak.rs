//! Reliability benches: soak, churn, SSE fan-out and hostile peers against the real `tearline`
//! binary (a separate process, so its RSS, fds and threads are the proxy's alone). Each prints
//! its figures and exits by itself; sizes are parameters so a short run is possible.
//!
//! ```text
//! cargo bench --bench soak -- stream  [--mib 10240] [--conns 4] [--edits 1000]
//! cargo bench --bench soak -- churn   [--conns 1000000] [--parallel 128]
//! cargo bench --bench soak -- sse     [--streams N] [--event-mib 4] [--events 1]
//!                                     [--open-parallel 0] [--sock-buf-kib 256]
//!                                     [--proxy-arg=--read-budget=16MiB]…
//! cargo bench --bench soak -- hostile [--secs 30] [--per-kind 100]
//! cargo bench --bench soak -- all     (every bench with its short defaults: --quick)
//! ```
//! `--quick` shrinks every size to a smoke run. Exit status 1 if a bench's check failed.

#[path = "soak/churn.rs"]
mod churn;
#[path = "soak/common.rs"]
mod common;
#[path = "soak/hostile.rs"]
mod hostile;
#[path = "soak/sse.rs"]
mod sse;
#[path = "soak/sse_server.rs"]
mod sse_server;
#[path = "soak/stream.rs"]
mod stream;

use common::Args;

fn main() {
    let argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let args = Args::new(&argv[..]);
    let which = argv.first().map(String::as_str).unwrap_or("all");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let ok = rt.block_on(async {
        match which {
            "stream" => stream::run(&args).await,
            "churn" => churn::run(&args).await,
            "sse" => sse::run(&args).await,
            "hostile" => hostile::run(&args).await,
            // Hidden: the sse bench's upstream server, run by it as a child process.
            "sse-server" => sse_server::run(&args).await,
            "all" => {
                let quick = Args::new(&["--quick".to_owned()]);
                let a = stream::run(&quick).await;
                let b = churn::run(&quick).await;
                let c = sse::run(&quick).await;
                let d = hostile::run(&quick).await;
                a && b && c && d
            }
            other => {
                eprintln!("unknown bench {other:?}: stream, churn, sse, hostile or all");
                false
            }
        }
    });
    std::process::exit(if ok { 0 } else { 1 });
}

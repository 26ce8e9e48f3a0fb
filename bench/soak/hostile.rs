//! Hostile peers against the proxy (both sides), the control API and the lab: slowloris
//! (a byte of a head every second), endless headers, garbage, half-open connections, and a
//! server that dribbles its response. While they run, probes check that normal requests through
//! the proxy, to the API and to the lab are still answered, each within 2 s. Prints each process's RSS
//! start / peak / end and how many hostile connections each server closed by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::common::{self, Args, Filler, RssPeak, mib, verdict};

/// An upstream that answers `/ok` at once and dribbles `/slow` one byte a second.
async fn upstream(listener: TcpListener) {
    while let Ok((mut s, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
                if req.len() > 1 << 20 {
                    return;
                }
            }
            if req.starts_with(b"GET /slow") {
                for b in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".iter() {
                    if s.write_all(&[*b]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            } else {
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            }
        });
    }
}

#[derive(Clone, Copy, Debug)]
enum Attack {
    Slowloris,
    EndlessHeaders,
    Garbage,
    HalfOpen,
    SlowUpstream,
}

/// Runs one hostile connection until `stop`; true if the server closed it first.
async fn attack(port: u16, kind: Attack, seed: u64, stop: CancellationToken) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await else {
        return true;
    };
    let mut f = Filler::new(seed);
    let mut junk = vec![0u8; 4096];
    let mut sink = [0u8; 4096];
    let head: &[u8] = b"GET /slow HTTP/1.1\r\nHost: x\r\n";
    let mut i = 0usize;
    loop {
        let step = async {
            match kind {
                Attack::Slowloris => {
                    let b = head.get(i % head.len()).copied().unwrap_or(b'x');
                    s.write_all(&[b]).await.is_ok() && {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        true
                    }
                }
                Attack::EndlessHeaders => {
                    let line: &[u8] = if i == 0 {
                        head
                    } else {
                        b"X-Endless: aaaaaaaaaaaaaaaa\r\n"
                    };
                    s.write_all(line).await.is_ok() && {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        true
                    }
                }
                Attack::Garbage => {
                    f.fill(&mut junk);
                    s.write_all(&junk).await.is_ok() && {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        true
                    }
                }
                Attack::HalfOpen => {
                    if i == 0 {
                        let _ = s.shutdown().await;
                    }
                    matches!(s.read(&mut sink).await, Ok(n) if n > 0)
                }
                Attack::SlowUpstream => {
                    if i == 0 {
                        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
                            .await
                            .is_ok()
                    } else {
                        matches!(s.read(&mut sink).await, Ok(n) if n > 0)
                    }
                }
            }
        };
        tokio::select! {
            () = stop.cancelled() => return false,
            alive = step => if !alive { return true },
        }
        i += 1;
    }
}

/// Probes `check` every 200 ms until `stop`: (answered, failed, worst latency).
async fn probe<F, Fut>(check: F, stop: CancellationToken) -> (u64, u64, Duration)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let (mut ok, mut bad, mut worst) = (0, 0, Duration::ZERO);
    while !stop.is_cancelled() {
        let t = Instant::now();
        if check().await {
            ok += 1;
        } else {
            bad += 1;
        }
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (ok, bad, worst)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}"#;

pub async fn run(args: &Args) -> bool {
    let secs = args.num("secs", 30, 10);
    let per = args.num("per-kind", 100, 50);
    println!("== hostile peers: {per} connections per attack and target, {secs} s");
    let up = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let up_port = up.local_addr().expect("addr").port();
    tokio::spawn(upstream(up));
    let (listen, api, lab_port) = (
        common::free_port(),
        common::free_port(),
        common::free_port(),
    );
    let proxy = common::proxy(listen, up_port, api, &[]).await;
    let lab_addr = format!("127.0.0.1:{lab_port}");
    let lab = common::spawn(&["serve", "--listen", &lab_addr]);
    common::wait_http(lab_port).await;
    let (p0, l0) = (
        common::proc_stats(proxy.pid()).0,
        common::proc_stats(lab.pid()).0,
    );
    let (ppeak, lpeak) = (RssPeak::start(proxy.pid()), RssPeak::start(lab.pid()));
    let stop = CancellationToken::new();
    let targets = [("proxy", listen), ("api", api), ("lab", lab_port)];
    let kinds = [
        Attack::Slowloris,
        Attack::EndlessHeaders,
        Attack::Garbage,
        Attack::HalfOpen,
    ];
    let closed = Arc::new(AtomicU64::new(0));
    let mut attackers = Vec::new();
    let mut rows = Vec::new();
    for (name, port) in targets {
        for kind in kinds
            .iter()
            .copied()
            .chain((name == "proxy").then_some(Attack::SlowUpstream))
        {
            let counter = Arc::new(AtomicU64::new(0));
            rows.push((name, kind, counter.clone()));
            for i in 0..per {
                let (stop, counter, closed) = (stop.clone(), counter.clone(), closed.clone());
                attackers.push(tokio::spawn(async move {
                    if attack(port, kind, i, stop).await {
                        counter.fetch_add(1, Ordering::Relaxed);
                        closed.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
        }
    }
    let probes = [
        tokio::spawn(probe(
            move || async move { common::http(listen, "GET", "/ok", "", "").await.0 == 200 },
            stop.clone(),
        )),
        tokio::spawn(probe(
            move || async move { common::http(api, "GET", "/version", "", "").await.0 == 200 },
            stop.clone(),
        )),
        tokio::spawn(probe(
            move || async move {
                let h = "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n";
                common::http(lab_port, "POST", "/mcp", h, INIT).await.0 == 200
            },
            stop.clone(),
        )),
    ];
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.cancel();
    for a in attackers {
        let _ = a.await;
    }
    let mut ok = true;
    for ((name, _), p) in targets.iter().zip(probes) {
        let (good, bad, worst) = p.await.unwrap_or((0, 1, Duration::ZERO));
        ok &= verdict(
            &format!("{name} still serves"),
            bad == 0 && good > 0 && worst < Duration::from_secs(2),
            &format!("{good} probes answered, {bad} failed, slowest {worst:.2?} (limit 2 s)"),
        );
    }
    for (name, kind, counter) in &rows {
        println!(
            "  {name:5} {:15} closed by the server: {}/{per}",
            format!("{kind:?}"),
            counter.load(Ordering::Relaxed)
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (p1, pfds, _) = common::proc_stats(proxy.pid());
    let (l1, lfds, _) = common::proc_stats(lab.pid());
    println!(
        "  proxy RSS start {:.1} MiB, peak {:.1} MiB, end {:.1} MiB, fds after {pfds}",
        mib(p0),
        mib(ppeak.peak()),
        mib(p1)
    );
    println!(
        "  lab   RSS start {:.1} MiB, peak {:.1} MiB, end {:.1} MiB, fds after {lfds}",
        mib(l0),
        mib(lpeak.peak()),
        mib(l1)
    );
    ok &= verdict(
        "bounded memory",
        ppeak.peak() < p0 + 256 * 1024 && lpeak.peak() < l0 + 256 * 1024,
        "proxy and lab peaks within 256 MiB of their start",
    );
    ok
}

//! Soak: bytes checksummed both ways (an echo server) through latency + jitter, bandwidth,
//! slicer and a stall that resumes, while a task makes live API edits. Checks: 0 bytes altered
//! either way, every edit answered; prints proxy RSS start / peak / end.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use xxhash_rust::xxh3::Xxh3;

use super::common::{self, Args, Filler, RssPeak, mib, verdict};

const BLOCK: usize = 64 * 1024;

/// Echoes every connection; returns nothing (the client compares what came back).
async fn echo_server(listener: TcpListener) {
    while let Ok((s, _)) = listener.accept().await {
        tokio::spawn(async move {
            let _ = s.set_nodelay(true);
            let (mut r, mut w) = s.into_split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
            let _ = w.shutdown().await;
        });
    }
}

/// Sends `bytes` of filler and reads the echo; (sent hash, echoed hash, echoed bytes).
async fn one(port: u16, seed: u64, bytes: u64) -> (u64, u64, u64) {
    let s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect proxy");
    let _ = s.set_nodelay(true);
    let (mut r, mut w) = s.into_split();
    let writer = tokio::spawn(async move {
        let mut f = Filler::new(seed);
        let mut h = Xxh3::new();
        let mut buf = vec![0u8; BLOCK];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(BLOCK as u64) as usize;
            f.fill(&mut buf[..n]);
            h.update(&buf[..n]);
            if w.write_all(&buf[..n]).await.is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = w.shutdown().await;
        h.digest()
    });
    let mut h = Xxh3::new();
    let mut got = 0u64;
    let mut buf = vec![0u8; BLOCK];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        got += n as u64;
    }
    let sent = writer.await.unwrap_or(0);
    (sent, h.digest(), got)
}

pub async fn run(args: &Args) -> bool {
    let total_mib = args.num("mib", 10 * 1024, 256);
    let conns = args.num("conns", 4, 4).max(1);
    let edits = args.num("edits", 1000, 1000);
    println!(
        "== stream soak: {total_mib} MiB each way over {conns} connections, {edits} live edits"
    );
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let up_port = upstream.local_addr().expect("addr").port();
    tokio::spawn(echo_server(upstream));
    let (listen, api) = (common::free_port(), common::free_port());
    // `--proxy-arg=FLAG` passes a flag to the proxy; the queue budget defaults to 64 MiB per
    // direction (the bandwidth toxic is slower than a release build's relay, so the upstream
    // queues fill to it: the RSS peak is ≈ conns × this budget).
    let mut proxy_args: Vec<&str> = args.all("proxy-arg");
    if !proxy_args.iter().any(|a| a.starts_with("--max-inflight")) {
        proxy_args.extend(["--max-inflight", "64MiB"]);
    }
    let proxy = common::proxy(listen, up_port, api, &proxy_args).await;
    let toxics = [
        r#"{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":5,"jitter":2}}"#,
        r#"{"name":"bw","type":"bandwidth","stream":"upstream","attributes":{"rate":400000}}"#,
        r#"{"name":"slice","type":"slicer","stream":"downstream","attributes":{"average_size":4096,"size_variation":1024,"delay":0}}"#,
        r#"{"name":"stall","type":"stall","stream":"upstream","attributes":{"at_byte":1048576,"duration_ms":300}}"#,
    ];
    for t in toxics {
        common::api(api, "POST", "/proxies/proxy/toxics", t).await;
    }
    let rss0 = common::proc_stats(proxy.pid()).0;
    let peak = RssPeak::start(proxy.pid());
    let start = Instant::now();
    let per = total_mib * 1024 * 1024 / conns;
    let runs: Vec<_> = (0..conns)
        .map(|i| tokio::spawn(one(listen, 0x5eed + i, per)))
        .collect();
    // Live edits while the bytes flow: latency changes, an unrelated toxic added and removed.
    let live = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let live_edits = live.clone();
    let editor = tokio::spawn(async move {
        let mut done = 0u64;
        let mut failed = 0u64;
        for i in 0..edits {
            let (m, path, body) = match i % 3 {
                0 => (
                    "POST",
                    "/proxies/proxy/toxics/lat".to_owned(),
                    format!(r#"{{"attributes":{{"latency":{},"jitter":2}}}}"#, 4 + i % 3),
                ),
                1 => (
                    "POST",
                    "/proxies/proxy/toxics".to_owned(),
                    r#"{"name":"extra","type":"latency","stream":"upstream","attributes":{"latency":1}}"#.to_owned(),
                ),
                _ => ("DELETE", "/proxies/proxy/toxics/extra".to_owned(), String::new()),
            };
            let (status, _) = common::http(api, m, &path, "", &body).await;
            if (200..300).contains(&status) {
                done += 1;
                live_edits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            } else {
                failed += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (done, failed)
    });
    let mut ok = true;
    let mut moved = 0u64;
    let mut altered = 0u64;
    for r in runs {
        let (sent, echoed, got) = r.await.unwrap_or((0, 1, 0));
        moved += got;
        if sent != echoed || got != per {
            altered += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let during = live.load(std::sync::atomic::Ordering::Relaxed);
    let (done, failed) = editor.await.unwrap_or((0, edits));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss1, fds, threads) = common::proc_stats(proxy.pid());
    println!(
        "  moved {:.0} MiB each way in {secs:.1} s ({:.1} MiB/s each way); edits answered {done} ({during} while bytes flowed), refused {failed}",
        moved as f64 / 1048576.0,
        moved as f64 / 1048576.0 / secs
    );
    println!(
        "  proxy RSS start {:.1} MiB, peak {:.1} MiB, end {:.1} MiB; fds {fds}, threads {threads}",
        mib(rss0),
        mib(peak.peak()),
        mib(rss1)
    );
    ok &= verdict(
        "bytes",
        altered == 0,
        &format!(
            "{altered} of {conns} connections altered or short (sent hash = echoed hash, full length)"
        ),
    );
    ok &= verdict(
        "edits",
        failed == 0 && done == edits,
        &format!("{done}/{edits} answered 2xx"),
    );
    ok
}

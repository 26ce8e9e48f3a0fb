//! LLM token streams through the observer and the audit: `cargo bench --bench llm_stream`.
//!
//! Traffic: one streamed Chat Completions answer of `EVENTS` chunks of ~100 bytes each
//! (`data: {"id":…,"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}`),
//! one HTTP chunk per event (as servers flush per token), then the finish chunk and
//! `data: [DONE]`, answering `POST /v1/chat/completions`.
//!
//! Part 1, one core, in process: the HTTP observer fed 64 KiB reads (`-- --read N` for N-byte
//! reads; a paced stream's reads hold one event, ~106 bytes), each delivered at once, its
//! observations going to (a) nowhere, (b) the auditor, whose ledger applies each read's
//! observations on the same thread right after it (a query drains its queue: nothing is
//! dropped, and the count of dropped observations is printed to show it); the same bytes
//! answering `/mcp` (a plain SSE stream: no LLM reader) for comparison. Prints events/s by the
//! wall clock and per CPU-second of the thread (getrusage). Goal: ≥ 1,000,000 events/s per
//! core, i.e. per CPU-second, through the observer (and with the audit).
//!
//! Part 2, through the proxy on loopback, in the same run: a server writing the whole answer as
//! fast as the socket takes it, a client reading it all; the proxy relaying bytes only
//! (`--observe bytes`, spliced), bytes copied through user space (`--no-splice`) and with the
//! HTTP/SSE observer feeding the audit and the cut book (`--observe http`), alternated, best of
//! `ROUNDS`. Prints events/s and the ratios. Saturated like this, the observing proxy's one core
//! runs at the observer's own rate (part 1), while the relays parse nothing: the ratio says how
//! far a parser is from a memory copy, not what observing costs a gateway (part 3 does). Server,
//! proxy and client run in separate runtimes of one worker thread each (three processes'
//! worth); the audit's worker task shares the proxy's thread, and the observations it had to
//! drop (its queue full) are printed.
//!
//! Part 3, paced, in the same run: `--streams` concurrent answers (default 256) of `--tokens`
//! events each (default 150) at `--rate` events/s per stream (default 50, a model's usual
//! token rate), the server writing one event per tick, through a proxy with `--observe bytes`
//! and one with `--observe http` + audit at the same time (each on its own thread, so both meet
//! the same moment of a shared machine); the CPU time (getrusage, user + system) of each
//! proxy's thread per event relayed, and their ratio: what observing costs a gateway that is not
//! saturated (the audit's worker task shares that thread, so its cost is counted). Goal: the
//! observing proxy relays ≥ 0.85× the events per CPU-second of the relay.
//!
//! `-- --interleave N` runs part 1 as N answers fed one event per read in turn (the cache a
//! proxy relaying N paced answers works with); `-- --events N` changes the answer's length
//! (default 1,000,000), `-- --rounds N` the rounds (default 5; part 1 runs at most 3);
//! `-- --part N` runs part N alone; `-- --streams 0` skips part 3.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tearline::audit::{AuditConfig, Auditor};
use tearline::control::sources::CutBook;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::http1::observer_pair;
use tearline::wire::observe::FanOut;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

struct Discard;

impl ObservationSink for Discard {
    fn record(&self, obs: Observation) {
        black_box(obs);
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn request(path: &str) -> Vec<u8> {
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The response in the pieces a server writes: the head, one HTTP chunk per event, then the
/// finish chunk, `[DONE]` and the last chunk together.
fn response_pieces(events: usize) -> Vec<Vec<u8>> {
    let words = [
        " tear", " line", " lab", " token", " is", " here", " now", " ok",
    ];
    let chunk = |event: &str| {
        let mut c = format!("{:x}\r\n", event.len()).into_bytes();
        c.extend_from_slice(event.as_bytes());
        c.extend_from_slice(b"\r\n");
        c
    };
    let mut out = vec![b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec()];
    for k in 0..events {
        out.push(chunk(&format!(
            "data: {{\"id\":\"chatcmpl-b1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}},\"finish_reason\":null}}]}}\n\n",
            words[k % words.len()]
        )));
    }
    let mut tail = chunk(
        "data: {\"id\":\"chatcmpl-b1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    tail.extend_from_slice(&chunk("data: [DONE]\n\n"));
    tail.extend_from_slice(b"0\r\n\r\n");
    out.push(tail);
    out
}

/// The whole response (see [`response_pieces`]).
fn response(events: usize) -> Vec<u8> {
    response_pieces(events).concat()
}

/// Best events/s over `rounds` runs of `f`: by the wall clock, and per CPU-second of this
/// thread (getrusage), the "per core" figure, which other processes on a shared machine do not
/// lower the way they lower the wall-clock one.
fn best(rounds: usize, events: usize, mut f: impl FnMut()) -> (f64, f64) {
    let (mut wall, mut cpu) = (Duration::MAX, Duration::MAX);
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), thread_cpu());
        f();
        wall = wall.min(t.elapsed());
        cpu = cpu.min(thread_cpu().saturating_sub(c).max(Duration::from_micros(1)));
    }
    (
        events as f64 / wall.as_secs_f64(),
        events as f64 / cpu.as_secs_f64(),
    )
}

/// Feeds the observer pair; `after_read` runs after each read is delivered (the audit's
/// drain, so its bounded queue never overflows and every observation is applied in the time).
fn observe(path: &str, down: &[u8], sink: Arc<dyn ObservationSink>, after_read: &dyn Fn()) {
    let up = request(path);
    let (mut u, mut d) = observer_pair(1, sink);
    u.observe(&up);
    u.delivered_through(up.len() as u64);
    let mut at = 0u64;
    for c in down.chunks(arg("--read", 64 * 1024).max(1)) {
        black_box(d.observe(c));
        at += c.len() as u64;
        d.delivered_through(at);
        after_read();
    }
    d.eof();
}

/// Feeds `streams` observer pairs (connections 1..=streams) one event-sized read each in turn,
/// as a proxy relaying that many paced answers sees them: each read finds its connection's
/// state out of the cache the other streams used.
fn observe_interleaved(
    streams: usize,
    tokens: usize,
    sink: &Arc<dyn ObservationSink>,
    after_read: &dyn Fn(),
) {
    let up = request("/v1/chat/completions");
    let pieces = response_pieces(tokens);
    let mut conns: Vec<_> = (1..=streams as u64)
        .map(|id| {
            let (mut u, d) = observer_pair(id, sink.clone());
            u.observe(&up);
            u.delivered_through(up.len() as u64);
            (u, d, 0u64)
        })
        .collect();
    for p in &pieces {
        for (_, d, at) in &mut conns {
            black_box(d.observe(p));
            *at += p.len() as u64;
            d.delivered_through(*at);
            after_read();
        }
    }
    for (_, d, _) in &mut conns {
        d.eof();
    }
}

fn part1(events: usize, rounds: usize) {
    let streams = arg("--interleave", 0);
    if streams > 0 {
        return part1_interleaved(streams, events, rounds);
    }
    let down = response(events);
    println!(
        "Part 1: one core, {events} events of ~{} bytes ({:.1} MB), reads of {} bytes",
        down.len() / events,
        down.len() as f64 / 1e6,
        arg("--read", 64 * 1024).max(1)
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let plain = best(rounds, events, || {
            observe("/mcp", &down, Arc::new(Discard), &|| {})
        });
        let llm = best(rounds, events, || {
            observe("/v1/chat/completions", &down, Arc::new(Discard), &|| {})
        });
        let mut dropped = 0;
        let audited = best(rounds, events, || {
            let a = Arc::new(Auditor::new(AuditConfig::default()));
            // The ledger applies each read's observations on this thread (a query drains the
            // queue), so the figure is observer + audit on one core, nothing dropped.
            let drain = || {
                black_box(a.loss_affected());
            };
            observe("/v1/chat/completions", &down, a.clone(), &drain);
            black_box(a.counts());
            dropped += a.dropped();
        });
        println!("  {:<40} {:>12} {:>16}", "", "events/s", "per CPU-second");
        for (name, (wall, cpu)) in [
            ("observer, plain SSE stream (path /mcp)", plain),
            ("observer, LLM stream (LLM reader)", llm),
            ("observer + audit, LLM stream", audited),
        ] {
            println!("  {name:<40} {wall:>12.0} {cpu:>16.0}");
        }
        println!(
            "  goal: >= 1,000,000 events per CPU-second through the observer (and with the audit)"
        );
        println!("  observations the audit dropped (queue full): {dropped} (must be 0)");
    });
}

/// Part 1 with `--interleave N`: N answers of `events / N` events, one event per read, the
/// streams taking turns.
fn part1_interleaved(streams: usize, events: usize, rounds: usize) {
    let tokens = (events / streams).max(1);
    let events = tokens * streams;
    println!(
        "Part 1, interleaved: {streams} answers of {tokens} events, one event per read, the answers taking turns"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let discard: Arc<dyn ObservationSink> = Arc::new(Discard);
        let llm = best(rounds, events, || {
            observe_interleaved(streams, tokens, &discard, &|| {})
        });
        let audited = best(rounds, events, || {
            let a = Arc::new(Auditor::new(AuditConfig::default()));
            let sink: Arc<dyn ObservationSink> = a.clone();
            let drain = || {
                black_box(a.loss_affected());
            };
            observe_interleaved(streams, tokens, &sink, &drain);
            black_box(a.counts());
        });
        println!("  {:<40} {:>12} {:>16}", "", "events/s", "per CPU-second");
        for (name, (wall, cpu)) in [
            ("observer, LLM stream (LLM reader)", llm),
            ("observer + audit, LLM stream", audited),
        ] {
            println!("  {name:<40} {wall:>12.0} {cpu:>16.0}");
        }
    });
}

fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Reads the request (head and the small body); false if the peer went away first.
async fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = vec![0u8; 4096];
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() < 200 {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

async fn server(listener: TcpListener, body: Arc<Vec<u8>>) {
    while let Ok((mut s, _)) = listener.accept().await {
        let body = body.clone();
        tokio::spawn(async move {
            let _ = s.set_nodelay(true);
            if !read_request(&mut s).await {
                return;
            }
            for c in body.chunks(256 * 1024) {
                if s.write_all(c).await.is_err() {
                    return;
                }
            }
            let _ = s.shutdown().await;
        });
    }
}

/// One client request through `addr`; returns the response bytes read.
async fn client(addr: SocketAddr) -> usize {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let _ = s.set_nodelay(true);
    s.write_all(&request("/v1/chat/completions"))
        .await
        .expect("send");
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0;
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

/// Answers each request with `pieces`, one piece per tick of `period` (the head at once).
async fn paced_server(listener: TcpListener, pieces: Arc<Vec<Vec<u8>>>, period: Duration) {
    while let Ok((mut s, _)) = listener.accept().await {
        let pieces = pieces.clone();
        tokio::spawn(async move {
            let _ = s.set_nodelay(true);
            if !read_request(&mut s).await {
                return;
            }
            let mut tick = tokio::time::interval(period);
            for p in pieces.iter() {
                tick.tick().await;
                if s.write_all(p).await.is_err() {
                    return;
                }
            }
            let _ = s.shutdown().await;
        });
    }
}

/// How a bench proxy relays.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `--observe bytes`: splice, no user-space copy.
    Bytes,
    /// `--observe bytes --no-splice`: copied through user space, nothing parsed.
    Copied,
    /// `--observe http`: the HTTP/SSE observer and the LLM reader, the audit and the cut book.
    Http,
}

/// A proxy on `rt` in front of `origin` in `mode` (observing as `tearline proxy` does: its cut
/// book, then the audit).
fn start_proxy(
    rt: &Runtime,
    origin: SocketAddr,
    mode: Mode,
    stop: &CancellationToken,
) -> (SocketAddr, Option<Arc<Auditor>>) {
    rt.block_on(async {
        let mut cfg = ProxyConfig::new("bench", origin.to_string());
        cfg.drain_timeout = Duration::from_secs(1);
        cfg.zero_copy = mode != Mode::Copied;
        let p = Proxy::new(cfg);
        let auditor = (mode == Mode::Http).then(|| Arc::new(Auditor::new(AuditConfig::default())));
        if let Some(a) = &auditor {
            // The sinks `tearline proxy --observe http` gives a proxy: its cut book, then the
            // audit (see `cmd::proxy::stack`).
            let sinks: Vec<Arc<dyn ObservationSink>> =
                vec![Arc::new(CutBook::new("bench")), a.clone()];
            p.observe_http(Arc::new(FanOut(sinks)));
        }
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = l.local_addr().expect("addr");
        tokio::spawn(proxy::run(l, p, stop.clone()));
        (a, auditor)
    })
}

/// CPU time (user + system) the calling thread has used.
fn thread_cpu() -> Duration {
    // SAFETY: `getrusage` writes only the `rusage` it is given, which is plain old data.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return Duration::ZERO;
        }
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the one worker thread of `rt` (the proxy's, where its tasks run).
fn worker_cpu(rt: &Runtime) -> Duration {
    rt.block_on(async { tokio::spawn(async { thread_cpu() }).await })
        .unwrap_or(Duration::ZERO)
}

fn part3(streams: usize, tokens: usize, rate: usize, rounds: usize) {
    let pieces = Arc::new(response_pieces(tokens));
    let whole: usize = pieces.iter().map(Vec::len).sum();
    let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let server_rt = runtime("paced-server");
    // One proxy per thread, both relaying at once: the two modes share the machine's moment
    // (its load, its scheduling), and each thread's CPU time is its proxy's alone.
    let proxy_rts = [runtime("paced-bytes"), runtime("paced-http")];
    let client_rt = runtime("paced-client");
    let origin = server_rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = l.local_addr().expect("addr");
        tokio::spawn(paced_server(l, pieces.clone(), period));
        a
    });
    let stop = CancellationToken::new();
    let bytes = start_proxy(&proxy_rts[0], origin, Mode::Bytes, &stop);
    let http = start_proxy(&proxy_rts[1], origin, Mode::Http, &stop);
    println!(
        "Part 3: paced, {streams} concurrent answers of {tokens} events at {rate} events/s each through each proxy at once, proxy thread CPU per event"
    );
    let events = (streams * tokens) as f64;
    let names = [
        "proxy, --observe bytes",
        "proxy, --observe http (LLM reader + audit)",
    ];
    let mut cpu_total = [Duration::ZERO; 2];
    for round in 1..=rounds {
        let cpu0 = proxy_rts.each_ref().map(worker_cpu);
        let t = Instant::now();
        let got = client_rt.block_on(async {
            let all: Vec<_> = [bytes.0, http.0]
                .into_iter()
                .flat_map(|addr| (0..streams).map(move |_| tokio::spawn(client(addr))))
                .collect();
            let mut got = Vec::new();
            for c in all {
                got.push(c.await.unwrap_or(0));
            }
            got
        });
        let wall = t.elapsed();
        assert!(
            got.iter().all(|&n| n == whole),
            "every client received the whole answer"
        );
        let mut per_event = [0f64; 2];
        for i in 0..2 {
            let cpu = worker_cpu(&proxy_rts[i]).saturating_sub(cpu0[i]);
            cpu_total[i] += cpu;
            per_event[i] = cpu.as_secs_f64() / events;
            println!(
                "  round {round}: {:<44} {:>7.2} µs CPU per event ({:.1} % of a core over {:.1} s)",
                names[i],
                per_event[i] * 1e6,
                cpu.as_secs_f64() / wall.as_secs_f64() * 100.0,
                wall.as_secs_f64()
            );
        }
        println!(
            "  round {round}: events per CPU-second, http / bytes: {:.2}x",
            per_event[0] / per_event[1]
        );
    }
    println!(
        "  all {rounds} rounds: observing costs {:.2}x the relay's CPU per event (events per CPU-second: {:.2}x bytes, goal >= 0.85)",
        cpu_total[1].as_secs_f64() / cpu_total[0].as_secs_f64(),
        cpu_total[0].as_secs_f64() / cpu_total[1].as_secs_f64()
    );
    if let Some(a) = &http.1 {
        println!(
            "  audit findings: {:?} (none expected); observations dropped: {}",
            a.counts(),
            a.dropped()
        );
    }
    stop.cancel();
}

fn part2(events: usize, rounds: usize) {
    let body = Arc::new(response(events));
    let server_rt = runtime("bench-server");
    let proxy_rt = runtime("bench-proxy");
    let client_rt = runtime("bench-client");
    let origin = server_rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = l.local_addr().expect("addr");
        tokio::spawn(server(l, body.clone()));
        a
    });
    let stop = CancellationToken::new();
    let (bytes_addr, _) = start_proxy(&proxy_rt, origin, Mode::Bytes, &stop);
    let (copied_addr, _) = start_proxy(&proxy_rt, origin, Mode::Copied, &stop);
    let (http_addr, auditor) = start_proxy(&proxy_rt, origin, Mode::Http, &stop);
    let addrs = [bytes_addr, copied_addr, http_addr];
    println!(
        "Part 2: through the proxy on loopback, {events} events ({:.1} MB) per answer, best of {rounds}",
        body.len() as f64 / 1e6
    );
    let mut best = [Duration::MAX; 3];
    for _ in 0..rounds {
        for (i, &addr) in addrs.iter().enumerate() {
            let t = Instant::now();
            let n = client_rt.block_on(client(addr));
            let e = t.elapsed();
            assert_eq!(n, body.len(), "the client received the whole answer");
            best[i] = best[i].min(e);
        }
    }
    let rate = |d: Duration| events as f64 / d.as_secs_f64();
    let (bytes, copied, http) = (rate(best[0]), rate(best[1]), rate(best[2]));
    println!(
        "  {:<52} {:>12.0} events/s",
        "proxy, --observe bytes", bytes
    );
    println!(
        "  {:<52} {:>12.0} events/s",
        "proxy, --observe bytes --no-splice (copied)", copied
    );
    println!(
        "  {:<52} {:>12.0} events/s   {:.2}x bytes, {:.2}x copied",
        "proxy, --observe http (LLM reader + audit)",
        http,
        http / bytes,
        http / copied
    );
    if let Some(a) = auditor {
        let counts = a.counts();
        println!("  audit findings over the run: {counts:?} (none expected: every answer whole)");
        println!(
            "  observations the audit dropped (queue full): {} of {} rounds' worth",
            a.dropped(),
            rounds
        );
    }
    stop.cancel();
}

fn main() {
    let events = arg("--events", 1_000_000);
    let rounds = arg("--rounds", 5);
    // `--part N` runs part N alone (0, the default: all three).
    let part = arg("--part", 0);
    if part == 0 || part == 1 {
        part1(events, rounds.min(3));
    }
    if part == 0 || part == 2 {
        part2(events, rounds);
    }
    let streams = arg("--streams", 256);
    if streams > 0 && (part == 0 || part == 3) {
        part3(streams, arg("--tokens", 150), arg("--rate", 50), rounds);
    }
}

//! The pump carries out fault plans exactly: delays, splits, drops, cuts (RST and FIN),
//! deadlines, slow EOFs, and fault changes on live connections.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::proxy::faults::{Act, scripted};
use crate::common::proxy::*;
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// A proxy whose server connections come to the test, with one scripted fault.
async fn setup(dir: Direction, acts: &[Act]) -> (Running, TcpStream, TcpStream) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |_| {}).await;
    p.proxy.set_faults(scripted(dir, acts));
    let client = TcpStream::connect(p.addr).await.unwrap();
    let server = accepted.recv().await.unwrap();
    (p, client, server)
}

fn payload(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    Gen::new(n as u64).fill(&mut v);
    v
}

#[tokio::test]
async fn delay_holds_the_first_byte_and_keeps_order() {
    timeout(Duration::from_secs(10), async {
        let (_p, mut client, mut server) = setup(
            Direction::Downstream,
            &[Act::Delay(Duration::from_millis(200))],
        )
        .await;
        let data = payload(1 << 20);
        let sent = Instant::now();
        let d2 = data.clone();
        tokio::spawn(async move {
            server.write_all(&d2).await.unwrap();
            server.shutdown().await.unwrap();
            let _ = server.read(&mut [0u8; 1]).await;
        });
        let mut first = [0u8; 1];
        client.read_exact(&mut first).await.unwrap();
        assert!(sent.elapsed() >= Duration::from_millis(200));
        let (rest, err) = read_until_end(&mut client).await;
        assert_eq!(err, None);
        assert_eq!(first[0], data[0]);
        assert_eq!(&rest[..], &data[1..]);
    })
    .await
    .unwrap();
}

/// Reading continues while delayed bytes wait: 32 MiB in 64 KiB chunks through 100 ms of
/// latency takes about 100 ms more than without, not 512 × 100 ms.
#[tokio::test]
async fn delay_does_not_serialise_chunks() {
    timeout(Duration::from_secs(30), async {
        let (_p, mut client, mut server) = setup(
            Direction::Downstream,
            &[Act::Delay(Duration::from_millis(100))],
        )
        .await;
        let total = 32u64 << 20;
        let started = Instant::now();
        let sender = tokio::spawn(async move {
            let s = send_random(&mut server, total, 1, 65_536).await.unwrap();
            server.shutdown().await.unwrap();
            s
        });
        let got = recv_all(&mut client, 2).await.unwrap();
        assert_eq!(got, sender.await.unwrap());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "latency was applied chunk after chunk: {:?}",
            started.elapsed()
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn split_slices_arrive_in_order_and_complete() {
    timeout(Duration::from_secs(10), async {
        let (_p, mut client, mut server) = setup(
            Direction::Upstream,
            &[Act::Split(7, Duration::from_micros(50))],
        )
        .await;
        let data = payload(20_000);
        client.write_all(&data).await.unwrap();
        client.shutdown().await.unwrap();
        let (got, err) = read_until_end(&mut server).await;
        assert_eq!(err, None);
        assert_eq!(got, data);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn dropped_range_is_missing_and_nothing_else() {
    timeout(Duration::from_secs(10), async {
        let (_p, mut client, mut server) =
            setup(Direction::Downstream, &[Act::Drop(100, 300)]).await;
        let data = payload(100_000);
        let d2 = data.clone();
        tokio::spawn(async move {
            for part in d2.chunks(150) {
                server.write_all(part).await.unwrap();
            }
            server.shutdown().await.unwrap();
            let _ = server.read(&mut [0u8; 1]).await;
        });
        let (got, err) = read_until_end(&mut client).await;
        assert_eq!(err, None);
        let mut want = data[..100].to_vec();
        want.extend_from_slice(&data[300..]);
        assert_eq!(got, want);
    })
    .await
    .unwrap();
}

async fn cut_case(
    action: CutAction,
    delay: Option<Duration>,
) -> (Vec<u8>, Option<std::io::ErrorKind>, Vec<u8>) {
    let mut acts = vec![Act::Cut(5_000, action)];
    if let Some(d) = delay {
        acts.insert(0, Act::Delay(d));
    }
    let (_p, mut client, mut server) = setup(Direction::Downstream, &acts).await;
    let data = payload(64 * 1024);
    server.write_all(&data).await.unwrap();
    let (got, err) = read_until_end(&mut client).await;
    // The upstream side is closed too.
    let (_, _) = read_until_end(&mut server).await;
    (got, err, data)
}

#[tokio::test]
async fn reset_cut_gives_econnreset_after_exactly_n_bytes() {
    timeout(Duration::from_secs(10), async {
        let (got, err, data) = cut_case(CutAction::Reset, None).await;
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        assert_eq!(got, data[..5_000]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn fin_cut_gives_clean_eof_after_exactly_n_bytes() {
    timeout(Duration::from_secs(10), async {
        let (got, err, data) = cut_case(CutAction::Fin, None).await;
        assert_eq!(err, None);
        assert_eq!(got, data[..5_000]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn cut_after_delayed_slices_delivers_them_first() {
    timeout(Duration::from_secs(10), async {
        let started = Instant::now();
        let (got, err, data) = cut_case(CutAction::Fin, Some(Duration::from_millis(150))).await;
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert_eq!(err, None);
        assert_eq!(got, data[..5_000]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn deadline_cuts_an_idle_connection() {
    timeout(Duration::from_secs(10), async {
        let started = Instant::now();
        let (p, mut client, _server) = setup(
            Direction::Downstream,
            &[Act::Deadline(Duration::from_millis(150), CutAction::Reset)],
        )
        .await;
        let (got, err) = read_until_end(&mut client).await;
        assert!(got.is_empty());
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        assert!(started.elapsed() >= Duration::from_millis(150));
        let cuts = p.proxy.stats().snapshot().cuts;
        assert!(cuts.contains(&(CutAction::Reset, 1)), "{cuts:?}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn slow_eof_is_passed_on_late() {
    timeout(Duration::from_secs(10), async {
        let (_p, mut client, mut server) = setup(
            Direction::Upstream,
            &[Act::SlowEof(Duration::from_millis(200))],
        )
        .await;
        client.write_all(b"last words").await.unwrap();
        let sent = Instant::now();
        client.shutdown().await.unwrap();
        let (got, err) = read_until_end(&mut server).await;
        assert!(sent.elapsed() >= Duration::from_millis(200));
        assert_eq!((got.as_slice(), err), (&b"last words"[..], None));
    })
    .await
    .unwrap();
}

/// Faults change 200 times on a live echo connection (delays, splits, none) while a
/// checksummed stream flows: every byte arrives once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_changes_on_live_connections_lose_and_reorder_nothing() {
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
        let s = TcpStream::connect(p.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let total = 16u64 << 20;
        let writer = tokio::spawn(async move {
            let sum = send_random(&mut w, total, 9, 30_000).await.unwrap();
            w.shutdown().await.unwrap();
            sum
        });
        let proxy = p.proxy.clone();
        let toggler = tokio::spawn(async move {
            for i in 0..200u32 {
                let dir = if i % 2 == 0 {
                    Direction::Upstream
                } else {
                    Direction::Downstream
                };
                let acts = match i % 4 {
                    0 => vec![Act::Delay(Duration::from_millis(u64::from(i % 3)))],
                    1 => vec![Act::Split(1_000 + i as usize, Duration::ZERO)],
                    2 => vec![],
                    _ => vec![
                        Act::Delay(Duration::from_micros(300)),
                        Act::Split(4_096, Duration::ZERO),
                    ],
                };
                proxy.set_faults(scripted(dir, &acts));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            proxy.set_faults(Vec::new());
        });
        let got = recv_all(&mut r, 4).await.unwrap();
        toggler.await.unwrap();
        assert_eq!(got, writer.await.unwrap());
        assert!(p.proxy.fault_generation() >= 200);
    })
    .await
    .unwrap();
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

#[tokio::test]
async fn sink_receives_open_cut_and_close() {
    timeout(Duration::from_secs(10), async {
        let (server_addr, mut accepted) = accepting_server().await;
        let p = start_proxy(server_addr, |_| {}).await;
        let rec = Arc::new(Recorder::default());
        p.proxy.set_sink(Some(rec.clone()));
        p.proxy.set_faults(scripted(
            Direction::Downstream,
            &[Act::Cut(10, CutAction::Fin)],
        ));
        let mut client = TcpStream::connect(p.addr).await.unwrap();
        let mut server = accepted.recv().await.unwrap();
        server.write_all(&[1u8; 100]).await.unwrap();
        let (got, _) = read_until_end(&mut client).await;
        assert_eq!(got.len(), 10);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !rec
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|o| matches!(o, Observation::ConnClosed { .. }))
        {
            assert!(Instant::now() < deadline, "no ConnClosed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let obs = rec.0.lock().unwrap().clone();
        assert!(
            matches!(obs[0], Observation::ConnOpened { conn: 0, ref proxy } if proxy == "test")
        );
        match &obs[1] {
            Observation::Cut {
                conn,
                direction,
                action,
                point,
            } => {
                assert_eq!(
                    (*conn, *direction, *action),
                    (0, Direction::Downstream, CutAction::Fin)
                );
                assert_eq!(point.raw_offset, 10);
            }
            other => panic!("expected a cut, got {other:?}"),
        }
        assert_eq!(obs[2], Observation::ConnClosed { conn: 0 });
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn reset_cut_delivers_every_byte_before_the_cut_to_a_slow_reader() {
    timeout(Duration::from_secs(20), async {
        const CUT: usize = 1_609_511;
        let (_p, mut client, mut server) = setup(
            Direction::Downstream,
            &[Act::Cut(CUT as u64, CutAction::Reset)],
        )
        .await;
        let data = payload(4 << 20);
        let sent = data.clone();
        // The server may block once the proxy stops reading after the cut: never awaited.
        tokio::spawn(async move { server.write_all(&sent).await });
        // The client reads late, so the bytes before the cut are still queued in the proxy's
        // socket when the cut is decided; a bare SO_LINGER 0 would discard them.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (got, err) = read_until_end(&mut client).await;
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        assert_eq!(got.len(), CUT);
        assert!(got == data[..CUT], "bytes before the cut differ");
    })
    .await
    .unwrap();
}

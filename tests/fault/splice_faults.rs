//! Faults and the zero-copy path over real loopback sockets: a live fault change hands a
//! direction to the copying path and back without losing or reordering a byte, and cuts on the
//! zero-copy path land at their exact byte offset (and the cut record says so).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::proxy::*;
use tearline::fault::FaultFactory;
use tearline::fault::common::{Common, Factory};
use tearline::fault::latency::LatencyConfig;
use tearline::fault::limit_data::LimitDataConfig;
use tearline::fault::reset::{ResetConfig, ResetTrigger};
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tearline::wire::{CutPoint, Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const MIB: u64 = 1024 * 1024;

fn down() -> Common {
    Common {
        direction: Direction::Downstream,
        probability: 1.0,
    }
}

fn latency(ms: u64) -> Arc<dyn FaultFactory> {
    Factory::shared(
        down(),
        LatencyConfig {
            latency: Duration::from_millis(ms),
            jitter: Duration::ZERO,
        },
    )
}

/// Keeps the cut records.
#[derive(Default)]
struct Cuts(Mutex<Vec<(CutAction, CutPoint)>>);

impl ObservationSink for Cuts {
    fn record(&self, obs: Observation) {
        if let Observation::Cut { action, point, .. } = obs {
            self.0.lock().unwrap().push((action, point));
        }
    }
}

/// Reads `n` bytes into `sum`; with `n = None`, reads to EOF.
async fn read_into(r: &mut TcpStream, sum: &mut Sum, n: Option<u64>) {
    let mut buf = vec![0u8; 128 * 1024];
    let mut left = n.unwrap_or(u64::MAX);
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let k = r.read(&mut buf[..want]).await.unwrap();
        if k == 0 {
            assert!(n.is_none(), "EOF with {left} bytes still expected");
            return;
        }
        sum.feed(&buf[..k]);
        left -= k as u64;
    }
}

/// The server streams 64 MiB; a latency fault is added live after 8 MiB and removed after
/// 24 MiB. The client gets every byte in order (one checksum over the whole stream), and the
/// zero-copy path carried the stream before the change and after the removal, but (beyond
/// what was in flight in the pipe at the edit) not while the fault was on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_fault_change_switches_paths_without_losing_or_reordering_a_byte() {
    timeout(Duration::from_secs(60), async {
        let (server_addr, mut accepted) = accepting_server().await;
        let p = start_proxy(server_addr, |_| {}).await;
        let mut client = TcpStream::connect(p.addr).await.unwrap();
        let mut server = accepted.recv().await.unwrap();
        let total = 64 * MIB;
        let sender = tokio::spawn(async move {
            let sum = send_random(&mut server, total, 99, 100_000).await.unwrap();
            server.shutdown().await.unwrap();
            sum
        });
        let stats = p.proxy.stats();
        let mut got = Sum::default();
        read_into(&mut client, &mut got, Some(8 * MIB)).await;
        p.proxy.set_faults(vec![latency(1)]);
        let at_add = stats.bytes_spliced();
        assert!(
            at_add >= 8 * MIB,
            "only {at_add} bytes spliced before the fault"
        );
        read_into(&mut client, &mut got, Some(16 * MIB)).await;
        let at_remove = stats.bytes_spliced();
        p.proxy.set_faults(Vec::new());
        // The pump sees the edit at its next splice: up to one pipe-full may be spliced in after
        // `set_faults`, and the pipe drained before the copying path takes over.
        let pipe = tearline::proxy::ProxyConfig::new("t", "127.0.0.1:9").pipe_size as u64;
        assert!(
            at_remove - at_add <= 2 * pipe,
            "{} bytes went zero-copy while the latency fault was on (pipe {pipe})",
            at_remove - at_add
        );
        read_into(&mut client, &mut got, None).await;
        let sent = sender.await.unwrap();
        assert_eq!(got.len(), total);
        assert_eq!(
            got, sent,
            "bytes were lost or reordered across the switches"
        );
        let at_end = stats.bytes_spliced();
        assert!(
            at_end > at_remove + 16 * MIB,
            "the zero-copy path did not resume: {at_end} spliced, {at_remove} at removal"
        );
        assert_eq!(stats.snapshot().bytes_downstream, total);
        assert_eq!(stats.bytes_buffered(), 0);
    })
    .await
    .unwrap();
}

/// A proxy with `fault` downstream and a cut recorder; the server pushes `push` bytes (then
/// idles, keeping the connection open). Returns what the client received, how its read ended,
/// the cut records and the bytes spliced.
async fn cut_case(
    fault: Arc<dyn FaultFactory>,
    push: u64,
) -> (
    u64,
    Option<std::io::ErrorKind>,
    Vec<(CutAction, CutPoint)>,
    u64,
) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |_| {}).await;
    let cuts = Arc::new(Cuts::default());
    p.proxy.set_sink(Some(cuts.clone()));
    p.proxy.set_faults(vec![fault]);
    let mut client = TcpStream::connect(p.addr).await.unwrap();
    let mut server = accepted.recv().await.unwrap();
    let pusher = tokio::spawn(async move {
        let _ = send_random(&mut server, push, 31, 100_000).await;
        // Keep the socket open: the end the client sees is the cut's.
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let err = loop {
        match client.read(&mut buf).await {
            Ok(0) => break None,
            Ok(n) => got += n as u64,
            Err(e) => break Some(e.kind()),
        }
    };
    pusher.abort();
    let records = cuts.0.lock().unwrap().clone();
    (got, err, records, p.proxy.stats().bytes_spliced())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_reset_on_the_splice_path_lands_at_its_offset_and_the_record_says_so() {
    timeout(Duration::from_secs(30), async {
        let n = 5 * MIB + 4321;
        let fault = Factory::shared(
            down(),
            ResetConfig {
                trigger: ResetTrigger::Bytes(n),
                outage: None,
            },
        );
        let (got, err, cuts, spliced) = cut_case(fault, 16 * MIB).await;
        assert_eq!(got, n, "the client received a different prefix");
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        assert_eq!(cuts.len(), 1, "{cuts:?}");
        assert_eq!(cuts[0].0, CutAction::Reset);
        assert_eq!(cuts[0].1.raw_offset, n, "the cut record's offset");
        assert_eq!(
            spliced,
            n - 1,
            "all but the cut's last byte go zero-copy; the chunk holding it is copied"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_data_on_the_splice_path_ends_with_a_fin_after_exactly_its_bytes() {
    timeout(Duration::from_secs(30), async {
        let n = 3 * MIB + 1;
        let fault = Factory::shared(down(), LimitDataConfig { bytes: n });
        let (got, err, cuts, spliced) = cut_case(fault, 8 * MIB).await;
        assert_eq!(got, n);
        assert_eq!(err, None, "a FIN, not a reset");
        assert_eq!(cuts.len(), 1, "{cuts:?}");
        assert_eq!(cuts[0].0, CutAction::Fin);
        assert_eq!(cuts[0].1.raw_offset, n);
        assert_eq!(spliced, n - 1);
    })
    .await
    .unwrap();
}

/// A timed reset fires while the direction is zero-copy and idle: the record's offset is
/// exactly what the client had received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_reset_on_the_splice_path_records_the_delivered_offset() {
    timeout(Duration::from_secs(30), async {
        let fault = Factory::shared(
            down(),
            ResetConfig {
                trigger: ResetTrigger::After(Duration::from_millis(1000)),
                outage: None,
            },
        );
        let push = 2 * MIB + 17;
        let (got, err, cuts, spliced) = cut_case(fault, push).await;
        assert_eq!(got, push, "every byte pushed before the deadline arrives");
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        assert_eq!(cuts.len(), 1, "{cuts:?}");
        assert_eq!(cuts[0].1.raw_offset, push);
        assert_eq!(
            spliced, push,
            "a time-only fault leaves the whole stream zero-copy"
        );
    })
    .await
    .unwrap();
}

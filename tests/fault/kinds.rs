//! Pure tests of each fault kind: the plans they make for simulated chunks (paused tokio time,
//! no sockets). Socket-level effects are in `fault_sockets.rs`.

use std::sync::Arc;
use std::time::Duration;

use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::fault::{Chunk, ConnRng, Fault, FaultFactory, Plan, conn_rng};
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tokio::time::Instant;

fn factory(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    let def = FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())));
    match build(&def) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

/// Feeds `chunks` (lengths) arriving at the given instants through one fault; returns the plans.
struct Driver {
    fault: Box<dyn Fault>,
    rng: ConnRng,
    offset: u64,
    plan: Plan,
    buf: Vec<u8>,
}

impl Driver {
    fn new(f: &Arc<dyn FaultFactory>, seed: u64) -> Driver {
        let mut rng = conn_rng(seed, "test", 0);
        let fault = f
            .instantiate(&mut rng, Instant::now())
            .expect("probability 1 fires");
        Driver {
            fault,
            rng,
            offset: 0,
            plan: Plan::default(),
            buf: vec![0; 1 << 20],
        }
    }

    /// One chunk of `len` bytes arriving now; returns (slices as (start, end, at), cut).
    fn chunk(
        &mut self,
        len: usize,
    ) -> (Vec<(usize, usize, Instant)>, Option<tearline::fault::Cut>) {
        let now = Instant::now();
        self.plan.reset(len, now);
        let chunk = Chunk {
            bytes: &self.buf[..len],
            offset: self.offset,
            arrived: now,
            direction: Direction::Downstream,
            positions: None,
        };
        self.fault.on_chunk(&chunk, &mut self.plan, &mut self.rng);
        self.offset += len as u64;
        let slices = self
            .plan
            .slices()
            .iter()
            .map(|s| (s.start, s.end, s.at))
            .collect();
        (slices, self.plan.cut())
    }
}

fn assert_ordered_and_contiguous(slices: &[(usize, usize, Instant)], len: usize) {
    let mut pos = 0;
    let mut last: Option<Instant> = None;
    for &(start, end, at) in slices {
        assert_eq!(start, pos, "slices must be contiguous");
        assert!(end > start, "empty slice");
        if let Some(l) = last {
            assert!(at >= l, "departure times must not decrease");
        }
        last = Some(at);
        pos = end;
    }
    assert_eq!(pos, len, "every byte planned");
}

#[tokio::test(start_paused = true)]
async fn latency_delays_each_chunk_and_keeps_order() {
    let f = factory(&[
        ("kind", s("latency")),
        ("latency_ms", i(100)),
        ("jitter_ms", i(30)),
    ]);
    let mut d = Driver::new(&f, 1);
    let mut last = None;
    for _ in 0..200 {
        let now = Instant::now();
        let (slices, cut) = d.chunk(1000);
        assert!(cut.is_none());
        assert_ordered_and_contiguous(&slices, 1000);
        let at = slices[0].2;
        if let Some(l) = last {
            assert!(at >= l, "a later chunk never leaves before an earlier one");
        }
        // Within latency ± jitter of arrival, unless held back to keep order.
        assert!(at >= now + Duration::from_millis(70));
        assert!(at <= now + Duration::from_millis(130) || Some(at) == last);
        last = Some(at);
        tokio::time::advance(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn latency_without_jitter_is_exact_and_does_not_cap_throughput() {
    let f = factory(&[("kind", s("latency")), ("latency_ms", i(100))]);
    let mut d = Driver::new(&f, 1);
    let start = Instant::now();
    // 1,000 chunks of 64 KiB arriving within 1 ms: all leave 100 ms after arrival, none later.
    for _ in 0..1000 {
        let (slices, _) = d.chunk(65536);
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].2, start + Duration::from_millis(100));
    }
    let eof = d.fault.on_eof(Instant::now());
    assert_eq!(eof, start + Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn bandwidth_holds_the_rate_within_ten_percent_over_two_seconds() {
    let rate = 8_000_000u64;
    let f = factory(&[("kind", s("bandwidth")), ("rate", i(rate as i64))]);
    let mut d = Driver::new(&f, 1);
    let start = Instant::now();
    let end = start + Duration::from_secs(2);
    let mut delivered = 0u64;
    // Offer 64 KiB chunks far faster than the rate; count bytes whose departure is within 2 s.
    while Instant::now() < end {
        let (slices, _) = d.chunk(65536);
        assert_ordered_and_contiguous(&slices, 65536);
        for &(a, b, at) in &slices {
            assert!(b - a <= 80_000, "slices are about 10 ms of traffic");
            if at < end {
                delivered += (b - a) as u64;
            }
        }
        // The source blocks until its chunk's last slice has left (backpressure).
        let last = slices.last().map(|s| s.2).unwrap_or(start);
        tokio::time::advance(last.saturating_duration_since(Instant::now())).await;
    }
    let expected = rate * 2;
    let lo = expected * 9 / 10;
    let hi = expected * 11 / 10;
    assert!(
        (lo..=hi).contains(&delivered),
        "delivered {delivered}, expected {expected} ± 10%"
    );
}

#[tokio::test(start_paused = true)]
async fn bandwidth_is_smooth_at_a_low_rate() {
    let f = factory(&[("kind", s("bandwidth")), ("rate", i(1000))]);
    let mut d = Driver::new(&f, 1);
    let start = Instant::now();
    let (slices, _) = d.chunk(100);
    assert_ordered_and_contiguous(&slices, 100);
    assert_eq!(slices.len(), 10, "10-byte slices (10 ms at 1,000 B/s)");
    assert_eq!(slices[9].2, start + Duration::from_millis(90));
}

#[tokio::test(start_paused = true)]
async fn slicer_never_exceeds_the_slice_and_spaces_slices() {
    let f = factory(&[
        ("kind", s("slicer")),
        ("average_size", i(100)),
        ("size_variation", i(40)),
        ("delay_us", i(500)),
    ]);
    let mut d = Driver::new(&f, 3);
    for len in [1, 99, 140, 141, 4096, 65536] {
        let (slices, _) = d.chunk(len);
        assert_ordered_and_contiguous(&slices, len);
        for w in slices.windows(2) {
            assert!(w[1].2 >= w[0].2 + Duration::from_micros(500));
        }
        for &(a, b, _) in &slices {
            assert!(b - a <= 140, "slice of {} bytes", b - a);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn slow_close_holds_the_eof() {
    let f = factory(&[("kind", s("slow_close")), ("delay_ms", i(750))]);
    let mut d = Driver::new(&f, 1);
    let (slices, _) = d.chunk(10);
    assert_eq!(slices, vec![(0, 10, Instant::now())]);
    let now = Instant::now();
    assert_eq!(d.fault.on_eof(now), now + Duration::from_millis(750));
}

#[tokio::test(start_paused = true)]
async fn timeout_drops_everything_then_closes() {
    let opened = Instant::now();
    let f = factory(&[("kind", s("timeout")), ("timeout_ms", i(500))]);
    let mut d = Driver::new(&f, 1);
    for _ in 0..10 {
        let (slices, cut) = d.chunk(4096);
        assert!(slices.is_empty(), "a blackhole forwards nothing");
        assert!(cut.is_none());
    }
    let deadline = d.fault.deadline().expect("closes after the timeout");
    assert_eq!(deadline.at, opened + Duration::from_millis(500));
    assert_eq!(deadline.action, CutAction::Fin);

    let never = factory(&[("kind", s("timeout")), ("timeout_ms", i(0))]);
    let d = Driver::new(&never, 1);
    assert!(d.fault.deadline().is_none(), "timeout 0 never closes");
}

/// Feeds chunks of `sizes` until a cut; returns the stream offset of the cut and its action.
fn cut_offset(d: &mut Driver, sizes: &[usize]) -> Option<(u64, CutAction, Option<Duration>)> {
    for &len in sizes.iter().cycle().take(10_000) {
        let before = d.offset;
        let (slices, cut) = d.chunk(len);
        if let Some(c) = cut {
            let delivered: usize = slices.iter().map(|s| s.1 - s.0).sum();
            assert_eq!(delivered, c.at, "bytes before the cut are delivered");
            return Some((before + c.at as u64, c.action, c.outage));
        }
    }
    None
}

#[tokio::test(start_paused = true)]
async fn reset_cuts_after_exactly_n_bytes_on_any_chunk() {
    for n in [0u64, 1, 999, 1000, 1001, 123_457] {
        let f = factory(&[("kind", s("reset")), ("bytes", i(n as i64))]);
        let mut d = Driver::new(&f, 1);
        let got = cut_offset(&mut d, &[1000, 7, 4096]);
        assert_eq!(got, Some((n, CutAction::Reset, None)), "n = {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn reset_in_a_range_draws_a_uniform_offset_and_carries_the_outage() {
    let f = factory(&[
        ("kind", s("reset")),
        ("range", toml::Value::Array(vec![i(10_000), i(20_000)])),
        ("outage_ms", i(250)),
    ]);
    let mut offsets = Vec::new();
    for seed in 0..200 {
        let mut d = Driver::new(&f, seed);
        let (at, action, outage) = cut_offset(&mut d, &[1500]).expect("fires");
        assert!((10_000..=20_000).contains(&at));
        assert_eq!(action, CutAction::Reset);
        assert_eq!(outage, Some(Duration::from_millis(250)));
        offsets.push(at);
    }
    let mean = offsets.iter().sum::<u64>() / offsets.len() as u64;
    assert!((14_000..=16_000).contains(&mean), "mean offset {mean}");
    // Most cuts fall after the first chunk (1,500 bytes): not only on the first chunk.
    assert!(offsets.iter().all(|o| *o > 1500));
}

#[tokio::test(start_paused = true)]
async fn reset_after_a_time_sets_a_deadline() {
    let opened = Instant::now();
    let f = factory(&[("kind", s("reset")), ("after_ms", i(300))]);
    let d = Driver::new(&f, 1);
    let dl = d.fault.deadline().expect("deadline");
    assert_eq!(
        (dl.at, dl.action),
        (opened + Duration::from_millis(300), CutAction::Reset)
    );
}

#[tokio::test(start_paused = true)]
async fn limit_data_fins_after_exactly_n_bytes() {
    for n in [0u64, 5, 4096, 100_000] {
        let f = factory(&[("kind", s("limit_data")), ("bytes", i(n as i64))]);
        let mut d = Driver::new(&f, 1);
        assert_eq!(
            cut_offset(&mut d, &[4096, 3]),
            Some((n, CutAction::Fin, None)),
            "n = {n}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn stall_at_a_byte_holds_the_rest_then_resumes() {
    let f = factory(&[
        ("kind", s("stall")),
        ("at_byte", i(1500)),
        ("duration_ms", i(400)),
    ]);
    let mut d = Driver::new(&f, 1);
    let t0 = Instant::now();
    let (a, _) = d.chunk(1000);
    assert_eq!(a, vec![(0, 1000, t0)]);
    let (b, _) = d.chunk(1000);
    let until = t0 + Duration::from_millis(400);
    assert_eq!(b, vec![(0, 500, t0), (500, 1000, until)]);
    tokio::time::advance(Duration::from_millis(100)).await;
    let (c, _) = d.chunk(1000);
    assert_eq!(
        c,
        vec![(0, 1000, until)],
        "bytes arriving during the stall wait for its end"
    );
    tokio::time::advance(Duration::from_millis(400)).await;
    let (e, _) = d.chunk(1000);
    assert_eq!(
        e,
        vec![(0, 1000, Instant::now())],
        "then forwarding resumes"
    );
}

#[tokio::test(start_paused = true)]
async fn stall_after_a_time_holds_the_window() {
    let t0 = Instant::now();
    let f = factory(&[
        ("kind", s("stall")),
        ("after_ms", i(100)),
        ("duration_ms", i(200)),
    ]);
    let mut d = Driver::new(&f, 1);
    let (a, _) = d.chunk(10);
    assert_eq!(a[0].2, t0);
    tokio::time::advance(Duration::from_millis(150)).await;
    let (b, _) = d.chunk(10);
    assert_eq!(b[0].2, t0 + Duration::from_millis(300));
    tokio::time::advance(Duration::from_millis(200)).await;
    let (c, _) = d.chunk(10);
    assert_eq!(c[0].2, Instant::now());
}

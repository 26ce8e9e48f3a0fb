//! Live edits of one direction's chain, on paused tokio time: what each stateful kind keeps
//! when it was added to a live connection and another fault is then added on the same
//! direction — whether the connection saw every edit or only the last one (it was idle).

use std::time::Duration;

use super::*;
use crate::fault::bandwidth::BandwidthConfig;
use crate::fault::common::{Common, Factory, KindConfig};
use crate::fault::idle::IdleConfig;
use crate::fault::latency::LatencyConfig;
use crate::fault::limit_data::LimitDataConfig;
use crate::fault::reset::{ResetConfig, ResetTrigger};
use crate::fault::stall::{StallConfig, StallTrigger};
use crate::fault::timeout::TimeoutConfig;
use crate::fault::{Chunk, Plan, conn_rng, named};
use crate::proxy::{Proxy, ProxyConfig};
use crate::vocab::CutAction;

fn shared<C: KindConfig>(config: C, probability: f64) -> Arc<dyn FaultFactory> {
    let common = Common {
        direction: Direction::Downstream,
        probability,
    };
    Factory::shared(common, config)
}

fn timeout(ms: u64, probability: f64) -> Arc<dyn FaultFactory> {
    shared(
        TimeoutConfig {
            timeout: Duration::from_millis(ms),
        },
        probability,
    )
}

fn latency(ms: u64) -> Arc<dyn FaultFactory> {
    shared(
        LatencyConfig {
            latency: Duration::from_millis(ms),
            jitter: Duration::ZERO,
        },
        1.0,
    )
}

/// A list published at `now`: every fault starts then.
fn list_at(generation: u64, list: &[Arc<dyn FaultFactory>], now: Instant) -> Published {
    Published {
        generation,
        factories: list.to_vec().into(),
        since: vec![now; list.len()].into(),
    }
}

fn build(list: &[Arc<dyn FaultFactory>], rng: &mut ConnRng, now: Instant) -> Chain {
    let stats = Stats::new();
    let mut c = Chain::new(0);
    c.rebuild(
        &list_at(0, list, now),
        Direction::Downstream,
        rng,
        (now, 0),
        &stats,
    );
    c
}

#[test]
fn an_unrelated_addition_keeps_a_timeout_deadline_and_a_changed_one_keeps_its_start() {
    let stats = Stats::new();
    let mut rng = conn_rng(1, "p", 0);
    let t0 = Instant::now();
    let mut c = build(&[named("t", timeout(2000, 1.0))], &mut rng, t0);
    let later = t0 + Duration::from_millis(1500);
    let list = [named("t", timeout(2000, 1.0)), named("l", latency(5))];
    let dir = Direction::Downstream;
    c.rebuild(&list_at(1, &list, later), dir, &mut rng, (later, 0), &stats);
    assert_eq!(c.faults.len(), 2);
    let at = c.faults[0].deadline().map(|d| d.at);
    assert_eq!(at, Some(t0 + Duration::from_millis(2000)));
    let list = [named("t", timeout(3000, 1.0))];
    c.rebuild(&list_at(2, &list, later), dir, &mut rng, (later, 0), &stats);
    assert_eq!(c.faults.len(), 1);
    let at = c.faults[0].deadline().map(|d| d.at);
    assert_eq!(at, Some(t0 + Duration::from_millis(3000)));
}

#[test]
fn the_probability_draw_is_kept_when_the_probability_changes() {
    let stats = Stats::new();
    let t0 = Instant::now();
    // Find a connection whose draw lies between 0.3 and 0.5.
    let (mut rng, mut c) = (0..1000)
        .map(|i| {
            let mut rng = conn_rng(9, "p", i);
            let c = build(&[named("t", timeout(50, 0.5))], &mut rng, t0);
            (rng, c)
        })
        .find(|(_, c)| c.members[0].draw.is_some_and(|d| (0.3..0.5).contains(&d)))
        .expect("a draw in [0.3, 0.5) among 1000 connections");
    let draw = c.members[0].draw;
    assert_eq!(c.faults.len(), 1, "0.5 > draw fires");
    for (g, p) in [(1, 0.29), (2, 0.6), (3, 0.31), (4, 0.2)] {
        let list = [named("t", timeout(50, p))];
        let dir = Direction::Downstream;
        c.rebuild(&list_at(g, &list, t0), dir, &mut rng, (t0, 0), &stats);
        assert_eq!(c.members[0].draw, draw, "never rolled again");
        let fires = draw.is_some_and(|d| d < p);
        assert_eq!(c.faults.len(), usize::from(fires), "probability {p}");
    }
}

#[test]
fn removed_faults_drop_and_unnamed_ones_match_by_kind_and_rank() {
    let stats = Stats::new();
    let mut rng = conn_rng(1, "p", 0);
    let t0 = Instant::now();
    let a = timeout(100, 1.0);
    let mut c = build(&[Arc::clone(&a), latency(1)], &mut rng, t0);
    let ids: Vec<String> = c.members.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids, ["downstream:timeout#0", "downstream:latency#0"]);
    let later = t0 + Duration::from_millis(50);
    let dir = Direction::Downstream;
    c.rebuild(&list_at(1, &[a], later), dir, &mut rng, (later, 0), &stats);
    assert_eq!(c.faults.len(), 1);
    assert_eq!(c.faults[0].kind(), "timeout");
    let at = c.faults[0].deadline().map(|d| d.at);
    assert_eq!(at, Some(t0 + Duration::from_millis(100)));
}

/// Where the stateful kind under test stands after the edits.
struct Outcome {
    /// When the kind was added (the first edit).
    added: Instant,
    chain: Chain,
}

/// A live connection whose chain is empty; at +1 s the kind `k` is added through the proxy's
/// fault list, at +2.5 s a latency on the same direction. The connection refreshes its chain
/// at every edit (`every_edit`) or only after the last one (it was idle), in both cases at
/// stream offset 1000 (its first 1000 bytes passed before the kind was added).
async fn live_add_then_neighbour(k: Arc<dyn FaultFactory>, every_edit: bool) -> Outcome {
    let proxy = Proxy::new(ProxyConfig::new("p", "127.0.0.1:1"));
    let stats = Stats::new();
    let mut rng = conn_rng(3, "p", 0);
    let dir = Direction::Downstream;
    let mut chain = Chain::new(proxy.published().generation);
    tokio::time::advance(Duration::from_secs(1)).await;
    let added = Instant::now();
    proxy.set_faults(vec![named("k", Arc::clone(&k))]);
    if every_edit {
        let now = Instant::now();
        chain.rebuild(&proxy.published(), dir, &mut rng, (now, 1000), &stats);
    }
    tokio::time::advance(Duration::from_millis(1500)).await;
    proxy.set_faults(vec![named("k", k), named("n", latency(5))]);
    let now = Instant::now();
    chain.rebuild(&proxy.published(), dir, &mut rng, (now, 1000), &stats);
    assert_eq!(chain.faults.len(), 2, "the kind and its neighbour");
    Outcome { added, chain }
}

fn deadline(o: &Outcome) -> Option<Instant> {
    o.chain.faults[0].deadline().map(|d| d.at)
}

/// Runs one chunk of `len` bytes at stream offset `offset`, arrived at `at`, through the kind.
fn run_chunk(o: &mut Outcome, offset: u64, len: usize, at: Instant) -> Plan {
    let bytes = vec![b'x'; len];
    let chunk = Chunk {
        bytes: &bytes,
        offset,
        arrived: at,
        direction: Direction::Downstream,
        positions: None,
    };
    let mut plan = Plan::default();
    plan.reset(len, at);
    let mut rng = conn_rng(4, "p", 0);
    o.chain.faults[0].on_chunk(&chunk, &mut plan, &mut rng);
    plan
}

const S2: Duration = Duration::from_secs(2);

#[tokio::test(start_paused = true)]
async fn a_timeout_added_live_closes_at_its_own_time_after_a_neighbour_is_added() {
    for every_edit in [true, false] {
        let o = live_add_then_neighbour(timeout(2000, 1.0), every_edit).await;
        assert_eq!(
            deadline(&o),
            Some(o.added + S2),
            "refreshed at every edit: {every_edit}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_reset_after_ms_added_live_fires_at_its_own_time_after_a_neighbour_is_added() {
    let reset = ResetConfig {
        trigger: ResetTrigger::After(S2),
        outage: None,
    };
    for every_edit in [true, false] {
        let o = live_add_then_neighbour(shared(reset, 1.0), every_edit).await;
        assert_eq!(
            deadline(&o),
            Some(o.added + S2),
            "refreshed at every edit: {every_edit}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_added_live_counts_from_its_addition_after_a_neighbour_is_added() {
    let idle = IdleConfig {
        idle: S2,
        action: CutAction::Fin,
    };
    for every_edit in [true, false] {
        let o = live_add_then_neighbour(shared(idle, 1.0), every_edit).await;
        assert_eq!(
            deadline(&o),
            Some(o.added + S2),
            "refreshed at every edit: {every_edit}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_timed_stall_added_live_stalls_at_its_own_time_after_a_neighbour_is_added() {
    let stall = StallConfig {
        trigger: StallTrigger::After(S2),
        duration: Duration::from_millis(500),
    };
    for every_edit in [true, false] {
        let mut o = live_add_then_neighbour(shared(stall, 1.0), every_edit).await;
        let inside = o.added + Duration::from_millis(2100);
        let plan = run_chunk(&mut o, 1000, 10, inside);
        let left = plan.slices().first().map(|s| s.at);
        let want = o.added + Duration::from_millis(2500);
        assert_eq!(left, Some(want), "refreshed at every edit: {every_edit}");
    }
}

#[tokio::test(start_paused = true)]
async fn byte_counting_kinds_added_live_count_from_the_bytes_after_their_addition() {
    let limit = shared(LimitDataConfig { bytes: 100 }, 1.0);
    let reset = shared(
        ResetConfig {
            trigger: ResetTrigger::Bytes(100),
            outage: None,
        },
        1.0,
    );
    for (kind, factory) in [("limit_data", limit), ("reset", reset)] {
        for every_edit in [true, false] {
            let mut o = live_add_then_neighbour(Arc::clone(&factory), every_edit).await;
            let now = Instant::now();
            let plan = run_chunk(&mut o, 1000, 300, now);
            let cut = plan.cut().map(|c| c.at);
            assert_eq!(
                cut,
                Some(100),
                "{kind}, refreshed at every edit: {every_edit}"
            );
        }
    }
    let stall = shared(
        StallConfig {
            trigger: StallTrigger::AtByte(100),
            duration: Duration::from_millis(500),
        },
        1.0,
    );
    let mut o = live_add_then_neighbour(stall, false).await;
    let now = Instant::now();
    let plan = run_chunk(&mut o, 1000, 300, now);
    let split: Vec<usize> = plan.slices().iter().map(|s| s.start).collect();
    assert_eq!(
        split,
        [0, 100],
        "the stall falls 100 bytes after its addition"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bandwidth_added_live_keeps_its_queue_when_a_neighbour_is_added() {
    let proxy = Proxy::new(ProxyConfig::new("p", "127.0.0.1:1"));
    let stats = Stats::new();
    let mut rng = conn_rng(3, "p", 0);
    let dir = Direction::Downstream;
    let mut chain = Chain::new(proxy.published().generation);
    let bw = shared(BandwidthConfig { rate: 1000 }, 1.0);
    proxy.set_faults(vec![named("bw", Arc::clone(&bw))]);
    let t1 = Instant::now();
    chain.rebuild(&proxy.published(), dir, &mut rng, (t1, 0), &stats);
    let mut o = Outcome { added: t1, chain };
    // 1000 bytes at 1000 B/s: the last slice leaves just before +1 s.
    let first = run_chunk(&mut o, 0, 1000, t1);
    let Some(end) = first.slices().last().map(|s| s.at) else {
        panic!("no slices");
    };
    assert!(end > t1 + Duration::from_millis(900) && end < t1 + Duration::from_secs(1));
    tokio::time::advance(Duration::from_millis(100)).await;
    proxy.set_faults(vec![named("bw", bw), named("n", latency(5))]);
    let now = Instant::now();
    o.chain
        .rebuild(&proxy.published(), dir, &mut rng, (now, 1000), &stats);
    // The next 1000 bytes queue behind the first (a restarted bucket would end ~1 s after
    // the edit, at +1.1 s).
    let second = run_chunk(&mut o, 1000, 1000, now);
    let end2 = second.slices().last().map(|s| s.at);
    assert_eq!(end2, Some(end + Duration::from_secs(1)));
}

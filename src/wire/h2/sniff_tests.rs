//! The sniffing observer pair (h2c told from HTTP/1.1 by the client's first bytes) against the
//! plain h2 pair, with the reads and their order as a real connection gives them: an h2 server
//! sends its `SETTINGS` on accept, so the server's first bytes often reach the proxy before the
//! client's preface, or between two reads of it. Whatever the order and the splits, the
//! sniffing pair must say exactly what the h2 pair says of the same bytes.

use std::sync::Arc;

use super::tests::{Keep, Points, by_direction, conversation, run};
use super::*;
use crate::wire::llm_routes::LlmRoutes;
use crate::wire::{Observation, WireObserver};

/// Length of the server's first frame in [`conversation`] (`SETTINGS` with one setting).
const SERVER_SETTINGS: usize = 9 + 6;

/// Feeds `bytes[from..to]` to `o` as reads split at the absolute offsets `cuts`, each read
/// delivered at once, collecting the run points as [`super::tests::feed`] does.
fn feed_span(
    o: &mut dyn WireObserver,
    bytes: &[u8],
    (from, to): (usize, usize),
    cuts: &[usize],
    points: &mut Points,
) {
    let mut ends: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|&c| c > from && c < to)
        .collect();
    ends.sort_unstable();
    ends.dedup();
    ends.push(to);
    let mut start = from;
    for end in ends {
        if end <= start {
            continue;
        }
        if let Some(p) = o.observe(&bytes[start..end]) {
            for r in &p.runs {
                let seq = p.stream_at(r.start).map(|s| s.seq).unwrap_or(u64::MAX);
                for k in r.start..r.end {
                    let payload = r.payload_offset + (k - r.start) as u64;
                    points.push(((start + k) as u64, seq, r.class, r.event_index, payload));
                }
            }
        }
        o.delivered_through(end as u64);
        start = end;
    }
}

/// The sniffing pair on [`conversation`]: the client's first `client_first` bytes, then the
/// server's first `server_first` bytes, then the rest of the client's, then the rest of the
/// server's; each side's reads split at `up_cuts` / `down_cuts`.
fn sniffed(
    (client_first, server_first): (usize, usize),
    up_cuts: &[usize],
    down_cuts: &[usize],
) -> (Vec<Observation>, Vec<Observation>, Points) {
    let (c, s) = conversation();
    let (c, s) = (&c.bytes, &s.bytes);
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = observer_pair_sniffed(1, sink.clone(), LlmRoutes::known());
    let mut points = Vec::new();
    feed_span(&mut *up, c, (0, client_first), up_cuts, &mut Vec::new());
    feed_span(&mut *down, s, (0, server_first), down_cuts, &mut points);
    feed_span(
        &mut *up,
        c,
        (client_first, c.len()),
        up_cuts,
        &mut Vec::new(),
    );
    feed_span(
        &mut *down,
        s,
        (server_first, s.len()),
        down_cuts,
        &mut points,
    );
    up.eof();
    down.eof();
    let (ups, downs) = by_direction(sink.take());
    (ups, downs, points)
}

/// What the plain h2 pair says of [`conversation`].
fn reference() -> (Vec<Observation>, Vec<Observation>, Points) {
    let (c, s) = conversation();
    run(&c.bytes, &s.bytes, &[], &[])
}

#[test]
fn a_server_settings_before_the_client_preface_leaves_every_response_and_event_observed() {
    let (ups, downs, points) = sniffed((0, SERVER_SETTINGS), &[], &[]);
    let want = reference();
    assert!(
        downs
            .iter()
            .any(|o| matches!(o, Observation::Response { seq: 1, .. })),
        "the server's side is observed: {downs:?}"
    );
    assert!(
        downs.iter().any(|o| matches!(
            o,
            Observation::StreamEnd {
                seq: 1,
                clean: true,
                ..
            }
        )),
        "{downs:?}"
    );
    assert_eq!((ups, downs, points), want);
}

#[test]
fn a_preface_split_around_the_server_settings_is_observed_as_h2c() {
    // The preface's first 10 bytes, the server's SETTINGS, then the rest one byte at a time.
    let ones: Vec<usize> = (11..PREFACE.len() + 20).collect();
    assert_eq!(sniffed((10, SERVER_SETTINGS), &ones, &[4, 9]), reference());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    #[test]
    fn the_sniffed_pair_says_what_the_h2_pair_says_whatever_the_reads_and_their_order(
        client_first in 0..=PREFACE.len(),
        server_first in 0..=SERVER_SETTINGS,
        up in proptest::collection::vec(0usize..400, 0..6),
        down in proptest::collection::vec(0usize..600, 0..10),
    ) {
        proptest::prop_assert_eq!(sniffed((client_first, server_first), &up, &down), reference());
    }
}

#[test]
fn a_connection_whose_tls_said_h2_is_announced_as_h2_not_h2c() {
    let (c, _) = conversation();
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = observer_pair_sniffed(1, sink.clone(), LlmRoutes::known());
    up.negotiated(crate::vocab::WireProtocol::H2);
    down.negotiated(crate::vocab::WireProtocol::H2);
    feed_span(
        &mut *up,
        &c.bytes,
        (0, c.bytes.len()),
        &[5],
        &mut Vec::new(),
    );
    let protocols: Vec<_> = sink
        .take()
        .into_iter()
        .filter_map(|o| match o {
            Observation::Protocol { protocol, .. } => Some(protocol),
            _ => None,
        })
        .collect();
    assert_eq!(protocols, [crate::vocab::WireProtocol::H2]);
}

use super::*;

#[test]
fn plain_and_classifying_feeds_dispatch_the_same_events() {
    let input = b"id: 1\ndata: a\r\n\r\n: c\ndata: b\n\n";
    let mut plain = Vec::new();
    let mut s = SseScanner::new();
    s.feed(input, &mut |e| plain.push(e.data.to_vec()));
    let mut classified = Vec::new();
    let mut c = SseScanner::default();
    let mut out = Classified::default();
    c.feed_classified(
        input,
        &mut |e, _| {
            classified.push(e.data.to_vec());
            false
        },
        &mut out,
    );
    assert_eq!(plain, classified);
    assert_eq!(s.last_event_id(), c.last_event_id());
}

#[test]
fn value_end_at_feed_end_stays_pending_until_the_next_byte() {
    let mut s = SseScanner::new();
    let mut out = Classified::default();
    s.feed_classified(b"data: ab", &mut |_, _| false, &mut out);
    assert_eq!(
        out.runs.last().map(|r| r.end),
        Some(8),
        "point 8 is pending"
    );
    s.feed_classified(b"\n", &mut |_, _| false, &mut out);
    let r = out.run_at(8).copied();
    assert_eq!(r.map(|r| r.class), Some(SseClass::BeforeEol));
    s.feed_classified(b"data: c", &mut |_, _| false, &mut out);
    s.flush_pending(&mut out);
    assert_eq!(out.run_at(16).map(|r| r.class), Some(SseClass::MidValue));
}

#[test]
fn facts_carry_pending_and_committed_ids_and_data_line() {
    let mut s = SseScanner::new();
    let mut out = Classified::default();
    s.feed_classified(
        b"id: 1\ndata: a\n\nid: 2\ndata: x\ndata: yz",
        &mut |_, _| false,
        &mut out,
    );
    let r = *out
        .run_at(out.runs.last().map_or(0, |r| r.end) - 1)
        .expect("run");
    let f = out.facts[r.facts as usize];
    assert_eq!(out.pending_id(&f), Some("2"));
    assert_eq!(out.last_id(&f), "1");
    assert_eq!(f.data_line, 2);
    assert_eq!(f.block_start, 15);
}

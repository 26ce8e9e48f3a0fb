//! The WHATWG SSE scanner against hand-written expectations from the spec, under every chunking:
//! whole, 1-byte pieces, and split at every offset; plus a proptest over random streams and
//! random chunkings. Expected values are written from PROTOCOL.md, not from the scanner.

use proptest::prelude::*;
use tearline::wire::SseClass;
use tearline::wire::sse::SseScanner;
use tearline::wire::sse_class::Classified;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Ev {
    ty: String,
    data: Vec<u8>,
    id: Option<String>,
    last: String,
}

fn ev(ty: &str, data: &str, id: Option<&str>, last: &str) -> Ev {
    Ev {
        ty: ty.into(),
        data: data.as_bytes().to_vec(),
        id: id.map(Into::into),
        last: last.into(),
    }
}

fn msg(data: &str) -> Ev {
    ev("message", data, None, "")
}

/// Everything observable after feeding `pieces` and finishing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    events: Vec<Ev>,
    last_event_id: String,
    retry: Option<u64>,
    classes: Vec<(SseClass, u64)>,
}

fn run(pieces: &[&[u8]]) -> Outcome {
    let mut s = SseScanner::new();
    let mut events = Vec::new();
    let mut out = Classified::default();
    for p in pieces {
        s.feed_classified(
            p,
            &mut |e, _| {
                events.push(Ev {
                    ty: e.event_type.into(),
                    data: e.data.to_vec(),
                    id: e.id.map(Into::into),
                    last: e.last_event_id.into(),
                });
                false
            },
            &mut out,
        );
    }
    s.flush_pending(&mut out);
    s.finish(&mut |_| panic!("finish never dispatches"));
    let mut classes = Vec::new();
    for r in &out.runs {
        assert_eq!(r.start, classes.len() as u64, "runs are contiguous");
        for _ in r.start..r.end {
            classes.push((r.class, r.event_index));
        }
    }
    Outcome {
        events,
        last_event_id: s.last_event_id().into(),
        retry: s.retry(),
        classes,
    }
}

/// Runs `input` whole, in 1-byte pieces and split at every offset; all must agree.
fn scan(input: &[u8]) -> Outcome {
    let whole = run(&[input]);
    assert_eq!(
        whole.classes.len(),
        input.len() + 1,
        "every cut point is classified"
    );
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes), whole, "1-byte pieces");
    for k in 0..=input.len() {
        assert_eq!(run(&[&input[..k], &input[k..]]), whole, "split at {k}");
    }
    whole
}

fn events(input: &str) -> Vec<Ev> {
    scan(input.as_bytes()).events
}

#[test]
fn whatwg_stock_example_joins_three_data_lines() {
    assert_eq!(
        events("data: YHOO\ndata: +2\ndata: 10\n\n"),
        vec![msg("YHOO\n+2\n10")]
    );
}

#[test]
fn whatwg_test_stream_example_fires_three_events() {
    let out = scan(b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n");
    assert_eq!(
        out.events,
        vec![
            ev("message", "first event", Some("1"), "1"),
            ev("message", "second event", Some(""), ""),
            ev("message", " third event", None, ""),
        ]
    );
    assert_eq!(out.last_event_id, "");
}

#[test]
fn whatwg_empty_data_example_yields_empty_and_newline_and_discards_the_tail() {
    assert_eq!(
        events("data\n\ndata\ndata\n\ndata:"),
        vec![msg(""), msg("\n")]
    );
}

#[test]
fn one_optional_space_after_colon_is_stripped() {
    assert_eq!(
        events("data:test\n\ndata: test\n\ndata:  two\n\n"),
        vec![msg("test"), msg("test"), msg(" two")]
    );
}

#[test]
fn crlf_lf_and_lone_cr_line_endings_are_equivalent() {
    let want = vec![msg("a\nb"), msg("c")];
    assert_eq!(events("data: a\ndata: b\n\ndata: c\n\n"), want);
    assert_eq!(events("data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"), want);
    assert_eq!(events("data: a\rdata: b\r\rdata: c\r\r"), want);
    assert_eq!(events("data: a\r\ndata: b\n\rdata: c\r\n\n"), want);
}

#[test]
fn crlf_split_across_feeds_is_one_line_end() {
    let out = run(&[b"data: a\r", b"\n", b"data: b\r", b"\n\r", b"\n"]);
    assert_eq!(out.events, vec![msg("a\nb")]);
}

#[test]
fn cr_at_end_of_stream_ends_its_line_and_dispatches() {
    assert_eq!(events("data: a\n\r"), vec![msg("a")]);
}

#[test]
fn bom_is_stripped_once_even_when_split() {
    assert_eq!(events("\u{feff}data: a\n\n"), vec![msg("a")]);
    let out = run(&[b"\xef", b"\xbb", b"\xbfdata: a\n\n"]);
    assert_eq!(out.events, vec![msg("a")]);
    // A second BOM is content: the field name becomes "\u{feff}data", an unknown field.
    assert_eq!(
        events("\u{feff}\u{feff}data: a\n\ndata: b\n\n"),
        vec![msg("b")]
    );
}

#[test]
fn partial_bom_is_content() {
    // EF BB then 'x': not a BOM; the bytes start an unknown field name.
    let out = scan(b"\xef\xbbdata: a\n\ndata: b\n\n");
    assert_eq!(out.events, vec![msg("b")]);
}

#[test]
fn comments_are_ignored() {
    assert_eq!(
        events(": hello\ndata: x\n: keepalive\n\n:\n\n"),
        vec![msg("x")]
    );
}

#[test]
fn names_are_case_sensitive_and_unknown_fields_ignored() {
    assert_eq!(events("Data: x\n\n"), vec![]);
    assert_eq!(
        events("foo: bar\ndata: x\nDATA: y\nevents: z\n\n"),
        vec![msg("x")]
    );
}

#[test]
fn line_without_colon_is_a_field_with_empty_value() {
    assert_eq!(events("data\n\n"), vec![msg("")]);
    assert_eq!(events("data\ndata\n\n"), vec![msg("\n")]);
}

#[test]
fn event_field_sets_type_for_one_event_only() {
    assert_eq!(
        events("event: add\ndata: 1\n\nevent:\ndata: 2\n\ndata: 3\n\n"),
        vec![ev("add", "1", None, ""), msg("2"), msg("3")]
    );
}

#[test]
fn id_with_nul_is_ignored_and_empty_id_resets() {
    assert_eq!(
        events("id: 1\ndata: a\n\ndata: b\nid: x\0y\n\nid\ndata: c\n\n"),
        vec![
            ev("message", "a", Some("1"), "1"),
            ev("message", "b", None, "1"),
            ev("message", "c", Some(""), ""),
        ]
    );
}

#[test]
fn ids_are_sticky_across_events() {
    assert_eq!(
        events("id: 7\ndata: a\n\ndata: b\n\n"),
        vec![
            ev("message", "a", Some("7"), "7"),
            ev("message", "b", None, "7")
        ]
    );
}

#[test]
fn empty_data_dispatches_nothing_but_commits_the_id() {
    let out = scan(b"id: 9\n\nretry: 5\n\n");
    assert_eq!(out.events, vec![]);
    assert_eq!(out.last_event_id, "9");
}

#[test]
fn retry_accepts_only_ascii_digits() {
    assert_eq!(scan(b"retry: 1500\n\n").retry, Some(1500));
    assert_eq!(scan(b"retry: 15x\n\n").retry, None);
    assert_eq!(scan(b"retry: \n\n").retry, None);
    assert_eq!(scan(b"retry: -1\n\n").retry, None);
    assert_eq!(scan(b"retry:1000\nretry: 2a\n").retry, Some(1000));
}

#[test]
fn incomplete_event_at_eof_is_discarded_and_its_id_not_committed() {
    let out = scan(b"data: a\n\nid: 2\ndata: b\n");
    assert_eq!(out.events, vec![msg("a")]);
    assert_eq!(out.last_event_id, "");
}

#[test]
fn pending_id_and_partial_event_track_the_event_in_progress() {
    let mut s = SseScanner::new();
    let mut n = 0;
    s.feed(b": c\n", &mut |_| n += 1);
    assert!(!s.has_partial_event());
    s.feed(b"da", &mut |_| n += 1);
    assert!(s.has_partial_event());
    s.feed(b"ta: x\nid: 4", &mut |_| n += 1);
    assert_eq!(s.pending_id(), None, "the id line is not complete yet");
    s.feed(b"2\n", &mut |_| n += 1);
    assert_eq!(s.pending_id(), Some("42"));
    assert_eq!(s.last_event_id(), "");
    s.feed(b"\n", &mut |_| n += 1);
    assert_eq!((n, s.events_dispatched()), (1, 1));
    assert_eq!(s.pending_id(), None);
    assert_eq!(s.last_event_id(), "42");
    assert!(!s.has_partial_event());
}

#[test]
fn four_mib_event_over_three_data_lines_is_reassembled_under_any_chunking() {
    let line = |c: u8, n: usize| vec![c; n];
    let (a, b, c) = (
        line(b'a', 1_400_000),
        line(b'b', 1_400_001),
        line(b'c', 1_394_303),
    );
    let mut input = b"id: 42\n".to_vec();
    for (i, l) in [&a, &b, &c].into_iter().enumerate() {
        input.extend_from_slice(b"data: ");
        input.extend_from_slice(l);
        input.extend_from_slice(if i == 1 { b"\r\n" } else { b"\n" });
    }
    input.extend_from_slice(b"\n");
    let mut want = a.clone();
    want.push(b'\n');
    want.extend_from_slice(&b);
    want.push(b'\n');
    want.extend_from_slice(&c);
    let check = |pieces: Vec<&[u8]>| {
        let out = run(&pieces);
        assert_eq!(out.events.len(), 1);
        assert!(out.events[0].data == want, "data reassembled");
        assert_eq!(out.last_event_id, "42");
        out.classes
    };
    let whole = check(vec![&input]);
    assert_eq!(check(input.chunks(1).collect()), whole);
    assert_eq!(check(input.chunks(4093).collect()), whole);
    let third = input.len() / 3;
    assert_eq!(
        check(vec![
            &input[..third],
            &input[third..2 * third],
            &input[2 * third..]
        ]),
        whole
    );
}

fn classes(input: &str) -> Vec<(SseClass, u64)> {
    scan(input.as_bytes()).classes
}

#[test]
fn classes_of_lf_and_crlf_events_follow_the_design_table() {
    use SseClass::*;
    let mut want = vec![(Boundary, 0)];
    // "data: a\n\n"
    want.extend([FieldName; 4].map(|c| (c, 0)));
    want.extend([
        (AfterColon, 0),
        (AfterColon, 0),
        (BeforeEol, 0),
        (BeforeDispatch, 0),
    ]);
    want.push((Boundary, 1));
    // "id: 7\n"
    want.extend([
        (FieldName, 1),
        (FieldName, 1),
        (AfterColon, 1),
        (AfterColon, 1),
    ]);
    want.extend([(BeforeEol, 1), (AfterId, 1)]);
    // "data: bc\r\n\r\n"
    want.extend([FieldName; 4].map(|c| (c, 1)));
    want.extend([
        (AfterColon, 1),
        (AfterColon, 1),
        (MidValue, 1),
        (BeforeEol, 1),
    ]);
    want.extend([
        (CrLf, 1),
        (BeforeDispatch, 1),
        (DispatchCrLf, 2),
        (Boundary, 2),
    ]);
    assert_eq!(classes("data: a\n\nid: 7\ndata: bc\r\n\r\n"), want);
}

#[test]
fn classes_mark_mid_id_comments_and_mid_utf8() {
    use SseClass::*;
    let c: Vec<SseClass> = classes("data: x\n\n: k\nid: ab\ndata: \u{e9}z\n\n")
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    // after "data: x\n\n" (10 points incl. 0), the comment ": k\n"
    assert_eq!(&c[10..14], &[FieldName, FieldName, FieldName, Boundary]);
    // "id: ab\n"
    assert_eq!(
        &c[14..21],
        &[
            FieldName, FieldName, AfterColon, AfterColon, MidId, BeforeEol, AfterId
        ]
    );
    // "data: " then C3 A9 'z' '\n' '\n'
    assert_eq!(
        &c[27..32],
        &[MidUtf8, MidValue, BeforeEol, BeforeDispatch, Boundary]
    );
}

#[test]
fn priming_event_cut_points_are_priming() {
    use SseClass::*;
    let c: Vec<SseClass> = classes("id: p\ndata:\n\ndata: x\n\n")
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    let mut want = vec![Boundary, FieldName, FieldName];
    want.extend([Priming; 10]);
    want.push(Boundary);
    assert_eq!(&c[..14], &want[..]);
    assert_eq!(
        &c[18..],
        &[AfterColon, AfterColon, BeforeEol, BeforeDispatch, Boundary]
    );
}

#[test]
fn bom_cut_points_are_bom() {
    use SseClass::*;
    let c = classes("\u{feff}data: a\n\n");
    assert_eq!(&c[..4], &[(Boundary, 0), (Bom, 0), (Bom, 0), (Boundary, 0)]);
}

#[test]
fn cut_points_after_the_final_response_are_after_final() {
    let input = b"data: n\n\ndata: final\n\ndata: late\n\n";
    let mut s = SseScanner::new();
    let mut out = Classified::default();
    s.feed_classified(input, &mut |e, _| e.data == b"final", &mut out);
    let last = out.runs.last().expect("runs");
    assert_eq!(last.class, SseClass::AfterFinal);
    // the final event's dispatching LF is the first after-final point
    let first = out
        .runs
        .iter()
        .find(|r| r.class == SseClass::AfterFinal)
        .expect("after-final run");
    assert_eq!(first.start, 22);
    assert_eq!(last.end as usize, input.len() + 1);
}

fn arb_stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"data".to_vec()),
        Just(b"id: ".to_vec()),
        Just(b"id".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"retry: ".to_vec()),
        Just(b":".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xef\xbb\xbf".to_vec()),
        Just("\u{e9}\u{1f600}".as_bytes().to_vec()),
        Just(b"\0".to_vec()),
        prop::collection::vec(any::<u8>(), 0..6),
        "[a-z0-9 ]{0,8}".prop_map(|s| s.into_bytes()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn chunking_never_changes_events_or_classes(
        input in arb_stream(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let whole = run(&[&input]);
        prop_assert_eq!(whole.classes.len(), input.len() + 1);
        let mut offs: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        offs.sort_unstable();
        let mut pieces = Vec::new();
        let mut prev = 0;
        for o in offs {
            pieces.push(&input[prev..o]);
            prev = o;
        }
        pieces.push(&input[prev..]);
        prop_assert_eq!(run(&pieces), whole);
    }
}

//! The lab server's wire knobs over raw sockets: line endings, chunking and keep-alive change
//! how the same events are framed, never what they say.

use crate::common::lab_client::{ACCEPT_BOTH, JSON, Lab, call, scan, within};
use tearline::lab::{Chunking, LabConfig, LineEnding};

/// The chunks of one `tool` call on a fresh server.
async fn call_chunks(cfg: LabConfig, tool: &str, args: &str) -> Vec<Vec<u8>> {
    let lab = Lab::start(cfg).await;
    let sid = lab.session(&[]).await;
    let mut c = lab.connect().await;
    let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
    let r = c.request("POST", "/mcp", &h, &call(1, tool, args)).await;
    assert_eq!(r.status, 200);
    lab.stop().await;
    r.chunks
}

/// The chunks of one `progress` call (n = `n`, `interval` ms) on a fresh server.
async fn progress_chunks(cfg: LabConfig, n: u64, interval: u64) -> Vec<Vec<u8>> {
    let lab = Lab::start(cfg).await;
    let sid = lab.session(&[]).await;
    let mut c = lab.connect().await;
    let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
    let args = format!(r#"{{"n":{n},"interval":{interval}}}"#);
    let r = c
        .request("POST", "/mcp", &h, &call(1, "progress", &args))
        .await;
    assert_eq!(r.status, 200);
    lab.stop().await;
    r.chunks
}

fn with(f: impl FnOnce(&mut LabConfig)) -> LabConfig {
    let mut cfg = LabConfig::default();
    f(&mut cfg);
    cfg
}

#[tokio::test]
async fn crlf_output_is_lf_output_with_every_line_ending_doubled() {
    within(async {
        let lf = progress_chunks(LabConfig::default(), 4, 0).await;
        let crlf = progress_chunks(with(|c| c.line_ending = LineEnding::Crlf), 4, 0).await;
        assert_eq!(lf.len(), crlf.len());
        for (a, b) in lf.iter().zip(&crlf) {
            let expanded: Vec<u8> = a
                .iter()
                .flat_map(|&x| {
                    if x == b'\n' {
                        vec![b'\r', b'\n']
                    } else {
                        vec![x]
                    }
                })
                .collect();
            assert_eq!(&expanded, b);
        }
    })
    .await;
}

#[tokio::test]
async fn per_line_chunking_sends_one_chunk_per_line_with_the_same_bytes() {
    within(async {
        let events = progress_chunks(LabConfig::default(), 3, 0).await;
        let lines = progress_chunks(with(|c| c.chunking = Chunking::PerLine), 3, 0).await;
        assert_eq!(events.concat(), lines.concat());
        let line_count = events.concat().iter().filter(|&&b| b == b'\n').count();
        assert_eq!(lines.len(), line_count);
        assert!(
            lines
                .iter()
                .all(|l| l.ends_with(b"\n") && l[..l.len() - 1].iter().all(|&b| b != b'\n'))
        );
    })
    .await;
}

#[tokio::test]
async fn coalesce_chunking_keeps_the_bytes_in_fewer_or_equal_chunks() {
    within(async {
        let events = progress_chunks(LabConfig::default(), 30, 0).await;
        let merged = progress_chunks(with(|c| c.chunking = Chunking::Coalesce), 30, 0).await;
        assert_eq!(events.concat(), merged.concat());
        assert!(merged.len() <= events.len());
        assert!(
            merged.iter().all(|c| c.ends_with(b"\n\n")),
            "chunks hold whole events"
        );
    })
    .await;
}

#[tokio::test]
async fn keepalive_comments_fill_idle_gaps_without_changing_events() {
    within(async {
        let plain = progress_chunks(LabConfig::default(), 2, 150).await;
        let cfg = with(|c| c.keepalive = Some(std::time::Duration::from_millis(20)));
        let kept = progress_chunks(cfg, 2, 150).await;
        let comment = b": keepalive\n\n".to_vec();
        assert!(kept.iter().filter(|c| **c == comment).count() >= 2);
        let events: Vec<Vec<u8>> = kept.into_iter().filter(|c| *c != comment).collect();
        assert_eq!(events, plain);
    })
    .await;
}

#[tokio::test]
async fn lf_and_crlf_output_parse_identically_with_the_project_scanner() {
    within(async {
        let blob = r#"{"size":50000,"lines":3}"#;
        let lf = call_chunks(LabConfig::default(), "blob", blob).await;
        for (ending, chunking) in [
            (LineEnding::Crlf, Chunking::PerEvent),
            (LineEnding::Crlf, Chunking::PerLine),
            (LineEnding::Lf, Chunking::PerLine),
            (LineEnding::Crlf, Chunking::Coalesce),
        ] {
            let cfg = with(|c| {
                c.line_ending = ending;
                c.chunking = chunking;
            });
            let other = call_chunks(cfg, "blob", blob).await;
            assert_eq!(scan(&lf), scan(&other), "{ending:?} {chunking:?}");
            // Byte-at-a-time feeding dispatches the same events.
            let bytes: Vec<Vec<u8>> = other.concat().into_iter().map(|b| vec![b]).collect();
            assert_eq!(scan(&lf), scan(&bytes), "{ending:?} {chunking:?} bytewise");
        }
        let events = scan(&lf);
        assert_eq!(events.len(), 5, "priming, 3 progress, result");
        assert_eq!(
            (events[0].id.as_deref(), events[0].data.as_slice()),
            (Some("1-0"), &b""[..])
        );
    })
    .await;
}

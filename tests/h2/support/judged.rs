//! The audit's verdict on a proxied run, read the way a user of `tearline proxy --audit` would:
//! once every connection the proxy opened has closed (so no observation is still on its way),
//! the run is finished and the findings are listed by kind.
//!
//! Why: the peers' own logs say what happened on the wire; the findings say what tearline
//! concluded from watching it. A stream cut must give `torn-cut` and the resume's verdict and
//! nothing else on conformant peers, so the checks here compare the whole list of kinds.

use std::time::Duration;

use tearline::audit::{Finding, FindingKind};
use tearline::wire::Observation;
use tokio::time::Instant;

use super::route::Hop;

/// Waits (at most `limit`) until every connection the proxy opened has closed, then finishes
/// the audit and returns its findings. Panics, naming the observations, if one stays open.
pub async fn settled(hop: &Hop, limit: Duration) -> Vec<Finding> {
    let deadline = Instant::now() + limit;
    loop {
        let obs = hop.observations();
        let opened = obs
            .iter()
            .filter(|o| matches!(o, Observation::ConnOpened { .. }))
            .count();
        let closed = obs
            .iter()
            .filter(|o| matches!(o, Observation::ConnClosed { .. }))
            .count();
        if opened > 0 && closed >= opened {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{opened} connections opened, {closed} closed after {limit:?}: {obs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hop.auditor.finish();
    hop.auditor.findings()
}

/// The kinds of `findings`, sorted by name.
pub fn kinds(findings: &[Finding]) -> Vec<&'static str> {
    let mut k: Vec<&'static str> = findings.iter().map(|f| f.kind.as_str()).collect();
    k.sort_unstable();
    k
}

/// Asserts that the findings are exactly `want` (kind names, any order), showing them all if
/// not.
pub fn exactly(what: &str, findings: &[Finding], want: &[&str]) {
    let mut want = want.to_vec();
    want.sort_unstable();
    assert!(
        kinds(findings) == want,
        "{what}: the audit should find exactly {want:?}; it found:\n{findings:#?}"
    );
}

/// The findings of `kind`.
pub fn of(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind == kind).collect()
}

//! Every truncation kind × client (SDK × API × call style) × text/tool answer through tearline:
//! the cut lands where the kind says, the raw-iterating clients (faithful witnesses of what
//! reached them) agree with what the kind leaves on the wire, and what each SDK did is the
//! README's table "what your SDK does with a cut stream".

use std::collections::BTreeMap;

use crate::support::drivers::Style;
use crate::support::matrix::{self, Matrix};
use crate::support::table::{self, Key, Kind};

/// Runs in flight per SDK driver.
const PARALLEL: usize = 8;

fn report(m: &Matrix) -> String {
    let mut cells = BTreeMap::new();
    for c in &m.cells {
        let full = &m.full[&(c.key.client, c.key.mode)];
        cells.insert(
            c.key.clone(),
            table::describe(&c.outcome, full, c.key.mode, c.requests),
        );
    }
    table::markdown(&cells)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_truncation_kind_reaches_every_sdk_where_it_should() {
    let (lab, stop) = crate::sdk::lab().await;
    let m = matrix::run(lab, |_: &Key| true, PARALLEL).await;
    for c in &m.cells {
        let at = format!(
            "{:?}: {:?} fault {:?} cuts {:?}",
            c.key, c.outcome, c.fault, c.cuts
        );
        assert_eq!(
            c.cuts.len() as u64,
            u64::from(c.fault.is_some()) * c.requests,
            "{at}"
        );
        if c.key.client.style == Style::Raw && !c.outcome.hung {
            let signal_seen = c.key.kind == Kind::AfterSignal;
            assert_eq!(c.outcome.finish.is_some(), signal_seen, "{at}");
        }
    }
    eprintln!("{}", report(&m));
    stop.cancel();
}

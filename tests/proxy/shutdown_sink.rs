//! The end of the shutdown drain, as the observation sink hears it (issue 34 item 6): when the
//! drain timeout ends with connections still open, the sink is told `closing` before the
//! proxy resets them (the audit judges what is open while it is); when every connection
//! drained in time, or the proxy was stopped (disabled first, as the control API does) rather
//! than the run ended, nothing is announced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::proxy::*;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// What the sink heard, in order: `closing` and `closed <conn>`.
#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl Heard {
    fn list(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl ObservationSink for Heard {
    fn record(&self, obs: Observation) {
        if let Observation::ConnClosed { conn } = obs {
            self.0.lock().unwrap().push(format!("closed {conn}"));
        }
    }

    fn closing(&self) {
        self.0.lock().unwrap().push("closing".to_owned());
    }
}

/// A proxy to an echo server with `drain`, its sink, and one open connection through it.
async fn open_one(drain: Duration) -> (Running, Arc<Heard>, TcpStream) {
    let echo = echo_server().await;
    let p = start_proxy(echo, |c| c.drain_timeout = drain).await;
    let heard = Arc::new(Heard::default());
    p.proxy.set_sink(Some(heard.clone()));
    let mut open = TcpStream::connect(p.addr).await.unwrap();
    open.write_all(b"a").await.unwrap();
    let mut one = [0u8; 1];
    open.read_exact(&mut one).await.unwrap();
    (p, heard, open)
}

#[tokio::test]
async fn the_sink_hears_closing_before_the_drain_timeout_resets_what_is_left() {
    timeout(Duration::from_secs(10), async {
        let (p, heard, _open) = open_one(Duration::from_millis(200)).await;
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
        assert_eq!(heard.list(), ["closing", "closed 0"]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn no_closing_when_every_connection_drained_in_time() {
    timeout(Duration::from_secs(10), async {
        let (p, heard, mut open) = open_one(Duration::from_secs(5)).await;
        p.shutdown.cancel();
        open.shutdown().await.unwrap();
        let mut rest = Vec::new();
        let _ = open.read_to_end(&mut rest).await;
        p.task.await.unwrap().unwrap();
        assert_eq!(heard.list(), ["closed 0"]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn no_closing_when_the_proxy_was_disabled_before_it_stopped() {
    timeout(Duration::from_secs(10), async {
        let (p, heard, _open) = open_one(Duration::from_millis(200)).await;
        p.proxy.set_enabled(false);
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
        assert_eq!(heard.list(), ["closed 0"]);
    })
    .await
    .unwrap();
}

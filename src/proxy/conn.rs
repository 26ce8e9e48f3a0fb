//! One accepted connection: (hold during an outage,) connect upstream, run both pumps, close
//! both sockets the way the outcome requires.
//!
//! Invariants:
//! - An upstream that refuses or does not answer within the connect timeout ends the client
//!   with FIN (Toxiproxy's way; a fault's outage refusal and a kill reset instead).
//! - The task owns both sockets; pumps only borrow halves, so every close is decided here:
//!   both EOFs → plain close; a cut or kill → RST (SO_LINGER 0) or FIN to the client and the
//!   upstream closed; an I/O error on one side → RST on the other.
//! - The per-connection RNG is `conn_rng(seed, name, id)`: it instantiates the initial
//!   factories in list order (both directions), then seeds one stream per direction, which the
//!   direction's faults draw from and which instantiates the factories of later generations.
//! - `connections_open` and `bytes_buffered` return to their former values when the task ends.
//! - TLS (either side, see `tls_hook`): the pumps run on `tokio::io::split` halves of the TLS
//!   streams (the copying path); a plain connection keeps its TCP halves. A cut ends a TLS
//!   client session with or without `close_notify` as `ProxyTls::end_of` says, which is what
//!   the cut record carries.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::try_join;
use rand::SeedableRng;
use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until, timeout};

use super::chain::{Chain, identities};
use super::pump::{Pump, Side, Stop};
use super::splice::SpliceHalf;
use super::state::{KillSignal, Proxy};
use crate::fault::{ConnRng, conn_rng};
use crate::tls::{Stream, TlsEnd};
use crate::vocab::CutAction;
use crate::vocab::Direction;
use crate::vocab::OutageMode;
use crate::vocab::WireProtocol;
use crate::wire::{Observation, WireObserver};

/// How long a reset cut waits for the peer to acknowledge the bytes before the cut point.
const RESET_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Closes `stream` with RST: SO_LINGER 0, then drop.
pub(crate) fn reset(stream: TcpStream) {
    // If setting the option fails the drop still closes the socket (with FIN).
    let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// Closes `stream` with FIN, as Toxiproxy closes the client of an unreachable upstream: what
/// the client already sent is read and discarded first (closing with unread bytes makes the
/// kernel send RST instead), then the write side is shut down.
fn close_fin(stream: TcpStream) {
    discard_unread(&stream);
    let _ = SockRef::from(&stream).shutdown(std::net::Shutdown::Write);
    drop(stream);
}

/// Serves one accepted connection to its end.
pub(crate) async fn serve(proxy: Arc<Proxy>, client: TcpStream, id: u64, kill: Arc<KillSignal>) {
    // Its sockets in the process's descriptor budget, which pipes may not take.
    let _sockets = super::fd_limit::budget().hold_sockets();
    let hold = async {
        while let Some((until, mode)) = proxy.outage() {
            if mode == OutageMode::Refuse {
                return false;
            }
            sleep_until(until).await;
        }
        true
    };
    let served = tokio::select! {
        biased;
        () = kill.token.cancelled() => false,
        ok = hold => ok,
    };
    if !served {
        proxy.stats().refused();
        tracing::debug!("reset: proxy disabled or in outage while the connection waited");
        reset(client);
        return;
    }
    let upstream_addr = proxy.upstream();
    let connect = timeout(
        proxy.config().connect_timeout,
        TcpStream::connect(upstream_addr.as_str()),
    );
    let upstream = tokio::select! {
        biased;
        () = kill.token.cancelled() => None,
        r = connect => match r {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!(upstream = %upstream_addr, error = %e, "upstream connect failed; client closed (FIN)");
                None
            }
            Err(_) => {
                tracing::warn!(upstream = %upstream_addr, timeout = ?proxy.config().connect_timeout, "upstream connect timed out; client closed (FIN)");
                None
            }
        },
    };
    let Some(upstream) = upstream else {
        proxy.stats().refused();
        if kill.token.is_cancelled() {
            reset(client);
        } else {
            close_fin(client);
        }
        return;
    };
    // --- TLS hook: handshakes agreeing on ALPN (no-ops for a plain proxy) ---
    let tls = super::tls_hook::handshakes(&proxy, client, upstream, &upstream_addr);
    let streams = tokio::select! {
        biased;
        () = kill.token.cancelled() => None,
        s = tls => s,
    };
    let Some((client, upstream)) = streams else {
        proxy.stats().refused();
        return;
    };
    relay(proxy, client, upstream, id, &kill).await;
}

async fn relay(
    proxy: Arc<Proxy>,
    mut client: Stream,
    mut upstream: Stream,
    id: u64,
    kill: &KillSignal,
) {
    let _ = client.tcp().set_nodelay(true);
    let _ = upstream.tcp().set_nodelay(true);
    let stats = proxy.stats();
    stats.conn_opened();
    let sink = proxy.sink();
    if let Some(s) = &sink {
        s.record(Observation::ConnOpened {
            conn: id,
            proxy: proxy.name().to_owned(),
        });
    }
    tracing::info!(upstream = %peer_of(upstream.tcp()), tls_client = client.is_tls(), tls_upstream = upstream.is_tls(), "open");
    let started = Instant::now();

    let (up_obs, down_obs) = proxy.observers(id);
    let protocol = if !up_obs.is_opaque() && super::h2::wanted(&proxy.published()) {
        tokio::select! {
            biased;
            () = kill.token.cancelled() => None,
            p = timeout(SNIFF_LIMIT, sniff_h2(&client, &upstream)) => p.ok().flatten(),
        }
    } else {
        None
    };
    if let Some(protocol) = protocol {
        drop((up_obs, down_obs));
        tracing::debug!(protocol = protocol.as_str(), "h2 stream relay");
        if let Some(s) = &sink {
            s.record(Observation::Protocol { conn: id, protocol });
        }
        let observer: Box<dyn super::h2::observer::FrameObserver> = match &sink {
            Some(s) => Box::new(super::h2::observer::Watched::new(
                id,
                s.clone(),
                proxy.llm_routes(),
                protocol,
            )),
            None => Box::new(super::h2::observer::Blind::default()),
        };
        let work = async {
            match (&mut client, &mut upstream) {
                (Stream::Plain(c), Stream::Plain(u)) => {
                    super::h2::relay(&proxy, id, observer, c.split(), u.split()).await
                }
                (c, u) => {
                    super::h2::relay(
                        &proxy,
                        id,
                        observer,
                        tokio::io::split(c),
                        tokio::io::split(u),
                    )
                    .await
                }
            }
        };
        let outcome = tokio::select! {
            biased;
            () = kill.token.cancelled() => Outcome::Killed(kill.action()),
            r = work => match r {
                Ok(()) => Outcome::Done,
                Err(Stop::Cut(a)) => Outcome::Cut(a),
                Err(Stop::Io(side, e)) => Outcome::Broken(side, e),
            },
        };
        finish(proxy, client, upstream, outcome, (id, started), (0, 0)).await;
        return;
    }
    let (mut up_obs, mut down_obs) = (up_obs, down_obs);
    if let Some(p) = client.protocol() {
        // What TLS agreed with the client, which the observers' bytes alone cannot tell.
        up_obs.negotiated(p);
        down_obs.negotiated(p);
    }
    let (up_chain, down_chain, up_rng, down_rng) = build_chains(&proxy, id);
    let up_bytes = AtomicU64::new(0);
    let down_bytes = AtomicU64::new(0);
    let halves = Halves {
        proxy: &proxy,
        id,
        kill,
        chains: (up_chain, down_chain, up_rng, down_rng),
        observers: (up_obs, down_obs),
        bytes: (&up_bytes, &down_bytes),
    };
    let outcome = match (&mut client, &mut upstream) {
        (Stream::Plain(c), Stream::Plain(u)) => halves.run(c.split(), u.split()).await,
        // TLS streams take the copying path through `tokio::io::split` halves.
        (c, u) => halves.run(tokio::io::split(c), tokio::io::split(u)).await,
    };
    let bytes = (
        up_bytes.load(Ordering::Relaxed),
        down_bytes.load(Ordering::Relaxed),
    );
    finish(proxy, client, upstream, outcome, (id, started), bytes).await;
}

/// Closes both sockets as `outcome` requires and records the end of connection `id`.
async fn finish(
    proxy: Arc<Proxy>,
    client: Stream,
    upstream: Stream,
    outcome: Outcome,
    (id, started): (u64, Instant),
    (bytes_up, bytes_down): (u64, u64),
) {
    let stats = proxy.stats();
    let sink = proxy.sink();
    let how = match outcome {
        Outcome::Done => "closed",
        Outcome::Cut(a) => {
            if a == CutAction::Reset {
                // A cut's bytes must all reach the peer before the RST discards the queue.
                let (c, u) = tokio::join!(
                    super::sendq::drained(client.tcp(), RESET_DRAIN_LIMIT),
                    super::sendq::drained(upstream.tcp(), RESET_DRAIN_LIMIT)
                );
                if !(c && u) {
                    tracing::debug!(
                        "peer did not read the bytes before the cut in time; reset anyway"
                    );
                }
            }
            let end = proxy.config().tls.end_of(a);
            close_as(client, upstream, a, end).await;
            a.as_str()
        }
        Outcome::Killed(a) => {
            let end = proxy.config().tls.end_of(a);
            close_as(client, upstream, a, end).await;
            "killed"
        }
        Outcome::Broken(side, e) => {
            tracing::debug!(?side, error = %e, "i/o error; other side reset");
            reset(client.into_tcp());
            reset(upstream.into_tcp());
            "broken"
        }
    };
    stats.conn_closed();
    if let Some(s) = &sink {
        s.record(Observation::ConnClosed { conn: id });
    }
    tracing::info!(
        how,
        bytes_up,
        bytes_down,
        ms = started.elapsed().as_millis() as u64,
        "close"
    );
}

/// What the two pumps of one connection need besides their socket halves.
struct Halves<'a> {
    proxy: &'a Arc<Proxy>,
    id: u64,
    kill: &'a KillSignal,
    chains: (Chain, Chain, ConnRng, ConnRng),
    observers: (Box<dyn WireObserver>, Box<dyn WireObserver>),
    bytes: (&'a AtomicU64, &'a AtomicU64),
}

impl<'a> Halves<'a> {
    /// Runs both directions on `(client read, client write)` and `(upstream read, upstream
    /// write)` until both ended, one failed or was cut, or the connection was killed.
    ///
    /// Not an `async fn`: the pumps are built here and the returned future holds each of them
    /// once. An `async fn` would keep its argument (`self`, 800 bytes) and a `Pump::run(self)`
    /// its pump (688 bytes) twice for the connection's whole life (the compiler does not reuse
    /// the storage of a moved argument): the connection's `serve` future measured 6,112 bytes
    /// that way and 3,056 this way (`-Zprint-type-sizes`), 30 MB less at 10,000 connections.
    fn run<CR, CW, UR, UW>(
        self,
        (cr, cw): (CR, CW),
        (ur, uw): (UR, UW),
    ) -> impl std::future::Future<Output = Outcome> + 'a
    where
        CR: AsyncRead + SpliceHalf + Unpin + 'a,
        CW: AsyncWrite + SpliceHalf + Unpin + 'a,
        UR: AsyncRead + SpliceHalf + Unpin + 'a,
        UW: AsyncWrite + SpliceHalf + Unpin + 'a,
    {
        let (up_chain, down_chain, up_rng, down_rng) = self.chains;
        let (up_obs, down_obs) = self.observers;
        let (up_bytes, down_bytes) = self.bytes;
        let mut up = Pump::new(
            self.proxy,
            self.id,
            Direction::Upstream,
            cr,
            uw,
            up_chain,
            up_rng,
            up_obs,
            up_bytes,
        );
        let mut down = Pump::new(
            self.proxy,
            self.id,
            Direction::Downstream,
            ur,
            cw,
            down_chain,
            down_rng,
            down_obs,
            down_bytes,
        );
        let kill = self.kill;
        async move {
            tokio::select! {
                biased;
                () = kill.token.cancelled() => Outcome::Killed(kill.action()),
                r = try_join(up.run(), down.run()) => match r {
                    Ok(((), ())) => Outcome::Done,
                    Err(Stop::Cut(a)) => Outcome::Cut(a),
                    Err(Stop::Io(side, e)) => Outcome::Broken(side, e),
                },
            }
        }
    }
}

enum Outcome {
    Done,
    Cut(CutAction),
    Killed(CutAction),
    Broken(Side, std::io::Error),
}

/// `tls_end` says how a TLS client session ends (ignored for a plain client and for a reset,
/// which never sends `close_notify`).
async fn close_as(
    mut client: Stream,
    upstream: Stream,
    action: CutAction,
    tls_end: Option<TlsEnd>,
) {
    match action {
        CutAction::Reset => {
            reset(client.into_tcp());
            reset(upstream.into_tcp());
        }
        CutAction::Fin | CutAction::CleanEnd => {
            // The client may be gone already; its FIN then has no one to reach.
            let _ = client.end(tls_end.unwrap_or(TlsEnd::Truncated)).await;
            drop(upstream);
            tokio::spawn(linger(client.into_tcp()));
        }
    }
}

/// How long a FIN-closed client socket is still read (and what arrives discarded) before it
/// is dropped, and how many bytes at most.
const LINGER_LIMIT: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 << 20;

/// Reads and discards what the client sends after a FIN cut until it closes too, at most
/// [`LINGER_LIMIT`] / [`LINGER_BYTES`] ("lingering close", as HTTP servers do). Why: a socket
/// closed while its peer still writes answers that data with RST, and a client stack that
/// sees its write fail may drop the connection before it decodes what it already received —
/// an HTTP/2 client with another request in flight then loses responses the wire delivered,
/// and an orderly FIN cut arrives as a reset.
async fn linger(mut tcp: TcpStream) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 8192];
    let mut seen = 0usize;
    let deadline = tokio::time::Instant::now() + LINGER_LIMIT;
    while seen < LINGER_BYTES {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen += n,
            _ => break,
        }
    }
}

/// Reads and discards what the client already sent: closing a socket with unread bytes makes
/// the kernel send RST, which would turn an orderly FIN cut into a reset.
fn discard_unread(s: &TcpStream) {
    let mut buf = [0u8; 8192];
    for _ in 0..128 {
        match s.try_read(&mut buf) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// The protocol of a connection that speaks h2, found before any byte is relayed: TLS ALPN
/// `h2`, or a plain client whose first bytes are the h2 preface (read with `peek`, so the
/// pumps still get every byte when it is not). `None` as soon as the client's first bytes
/// differ or it ends, or a plain server speaks first with anything but an h2 `SETTINGS` frame
/// (an h2 server sends its SETTINGS at once; a server-first protocol is not HTTP/2).
async fn sniff_h2(client: &Stream, upstream: &Stream) -> Option<WireProtocol> {
    use crate::wire::h2::{FrameHeader, FrameType, PREFACE};
    let tcp = match client {
        Stream::Tls(t) => {
            let alpn = match &**t {
                tokio_rustls::TlsStream::Server(s) => s.get_ref().1.alpn_protocol(),
                tokio_rustls::TlsStream::Client(c) => c.get_ref().1.alpn_protocol(),
            };
            return (alpn == Some(b"h2")).then_some(WireProtocol::H2);
        }
        Stream::Plain(tcp) => tcp,
    };
    // A TLS upstream's first bytes are records (session tickets), which say nothing.
    let mut watch_server = matches!(upstream, Stream::Plain(_));
    let mut buf = [0u8; PREFACE.len()];
    // A preface or SETTINGS header split across segments is rare; its rest is awaited a
    // bounded while.
    for _ in 0..SNIFF_WAITS {
        let first = tokio::select! {
            r = tcp.peek(&mut buf) => Some(r.ok()?),
            r = upstream.tcp().readable(), if watch_server => {
                r.ok()?;
                None
            }
        };
        match first {
            Some(n) => {
                if n == 0 || buf[..n] != PREFACE[..n] {
                    return None;
                }
                if n == PREFACE.len() {
                    return Some(WireProtocol::H2c);
                }
            }
            None => {
                let mut head = [0u8; 9];
                let n = upstream.tcp().peek(&mut head).await.ok()?;
                if n == 9 {
                    let h = FrameHeader::parse(&head)?;
                    if h.kind != FrameType::Settings || h.stream != 0 || h.len % 6 != 0 {
                        return None;
                    }
                    watch_server = false;
                    continue;
                }
                if n == 0 {
                    return None;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// How many times `sniff_h2` looks again at a partial preface (about 1 ms apart).
const SNIFF_WAITS: usize = 200;

/// How long a silent client may take to send its first bytes before the connection goes to
/// the pumps without the h2 relay (an h2 client sends its preface at once; a silent one must
/// not keep byte faults' deadlines, which run in the pumps, from firing).
const SNIFF_LIMIT: Duration = Duration::from_secs(2);

fn peer_of(s: &TcpStream) -> String {
    s.peer_addr()
        .map_or_else(|_| "?".to_owned(), |a: SocketAddr| a.to_string())
}

/// Instantiates the current factories for connection `id` and derives the direction RNGs.
fn build_chains(proxy: &Proxy, id: u64) -> (Chain, Chain, ConnRng, ConnRng) {
    let cfg = proxy.config();
    let mut rng = conn_rng(cfg.seed, &cfg.name, id);
    let list = proxy.published();
    let now = Instant::now();
    let mut up = Chain::new(list.generation);
    let mut down = Chain::new(list.generation);
    for (f, fault_id) in list.factories.iter().zip(identities(&list.factories)) {
        let chain = match f.direction() {
            Direction::Upstream => &mut up,
            Direction::Downstream => &mut down,
        };
        chain.add(&**f, fault_id, &mut rng, (now, 0), proxy.stats());
    }
    let up_rng = ConnRng::from_rng(&mut rng);
    let down_rng = ConnRng::from_rng(&mut rng);
    (up, down, up_rng, down_rng)
}

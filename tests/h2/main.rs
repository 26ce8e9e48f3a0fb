//! Real HTTP/2 peers through `tearline proxy`: Node's own `http2` (client and server, h2c and
//! h2 over TLS), Python `httpx` with `http2=True`, Go's `net/http` (h2 over TLS: Debian's Go
//! 1.19 has no h2c in its standard library), curl with nghttp2, and headless Chromium's
//! `EventSource` over HTTPS (h2 by ALPN). Each pair runs direct and through the proxy, and every
//! outcome is judged against what the peers themselves logged (JSON lines, see
//! `tests/peers/*/h2_sse_*`). The peers install themselves (`tests/peers/provision.sh`).
//!
//! The HTTP/2 fault kinds (`goaway`, `hold_headers`, `flow_stall`, `refuse_streams`) between
//! these peers are in `kind_*`, one file per kind, each judged by the peers' logs and by a real
//! auditor behind the proxy. With no h2 fault the proxy observes h2 on its byte pumps
//! (`pump_observed`): every stream, event and end, and a clean audit.
//!
//! One executable, one module per concern, so the test build links one binary.

#[path = "../peers/mod.rs"]
mod peers;

mod connection_cut;
mod kind_common;
mod kind_flow;
mod kind_goaway;
mod kind_hold;
mod kind_refuse;
mod pairs;
mod pump_observed;
mod stream_cut;
mod support;

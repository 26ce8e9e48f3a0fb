"""Drives tearline's control API with the published Toxiproxy client `toxiproxy-python`.

Usage: python3 latency_roundtrip.py API_HOST:API_PORT UPSTREAM_HOST:PORT [--no-delay-check]

Creates a proxy to UPSTREAM (an echo server), adds a 300 ms downstream latency toxic, observes
that a round trip through the proxy takes at least that long, removes the toxic, observes that
the delay is gone, then resets and deletes the proxy. Exits 0 and prints "OK" on success,
1 on a failed check, 3 when the client package is missing.
"""

import socket
import sys
import time

try:
    from toxiproxy import Toxiproxy
except ImportError as e:  # the test reports this text
    print("toxiproxy-python is not importable (%s): install it with "
          "`python3 -m pip install toxiproxy-python`" % e)
    sys.exit(3)

LATENCY_MS = 300


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def round_trip(listen):
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        start = time.monotonic()
        s.sendall(b"ping")
        got = b""
        while len(got) < 4:
            chunk = s.recv(4 - len(got))
            if not chunk:
                fail("connection closed after %r" % got)
            got += chunk
        elapsed = time.monotonic() - start
    if got != b"ping":
        fail("echo returned %r" % got)
    return elapsed


def main():
    if len(sys.argv) < 3:
        fail("usage: latency_roundtrip.py API_HOST:PORT UPSTREAM_HOST:PORT")
    api_host, api_port = sys.argv[1].rsplit(":", 1)
    upstream = sys.argv[2]
    check_delay = "--no-delay-check" not in sys.argv

    server = Toxiproxy()
    server.update_api_consumer(api_host, int(api_port))
    if not server.running():
        fail("API not reachable at %s" % sys.argv[1])
    if not server.version():
        fail("no version")

    proxy = server.create(upstream=upstream, name="tearline_py")
    if proxy.listen.endswith(":0"):
        fail("listen not resolved: %s" % proxy.listen)
    if "tearline_py" not in server.proxies():
        fail("proxy not listed")

    base = round_trip(proxy.listen)

    proxy.add_toxic(type="latency", attributes={"latency": LATENCY_MS})
    toxics = proxy.toxics()
    if "latency_downstream" not in toxics:
        fail("toxic not listed: %r" % list(toxics))
    if toxics["latency_downstream"].attributes.get("latency") != LATENCY_MS:
        fail("toxic attributes: %r" % toxics["latency_downstream"].attributes)
    delayed = round_trip(proxy.listen)

    proxy.destroy_toxic("latency_downstream")
    if proxy.toxics():
        fail("toxic not removed")
    after = round_trip(proxy.listen)

    if check_delay:
        if delayed < LATENCY_MS / 1000.0:
            fail("round trip with latency took %.3f s, expected >= %.3f s" % (delayed, LATENCY_MS / 1000.0))
        if after >= LATENCY_MS / 1000.0:
            fail("round trip after removal took %.3f s" % after)

    proxy.disable()
    if server.get_proxy("tearline_py").enabled:
        fail("proxy still enabled")
    server.reset()
    if not server.get_proxy("tearline_py").enabled:
        fail("reset did not enable the proxy")
    server.destroy_all()
    if server.proxies():
        fail("proxies left after destroy_all")

    print("OK base=%.4f delayed=%.4f after=%.4f" % (base, delayed, after))


main()

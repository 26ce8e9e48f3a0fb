"""Drives tearline's control API with the published Toxiproxy client `toxiproxy-python` on a
proxy started from a profile whose fault `slow` (latency, 300 ms downstream) acts on it.

Usage: python3 profile_faults.py API_HOST:API_PORT PROXY_NAME UPSTREAM_HOST:PORT

Checks: the profile's fault is listed as a toxic (client and raw JSON, with "source":
"profile") and acts; a toxic added through the API is listed after it without "source" and
acts too (the delays add up); the profile's toxic cannot be deleted alone (409); a proxy made
through the API lists no profile toxic; `reset` removes every toxic, the profile's included,
and the delay with it. Exits 0 and prints "OK" on success, 1 on a failed check, 3 when the
client package is missing.
"""

import socket
import sys
import time

try:
    from toxiproxy import Toxiproxy
    from toxiproxy.api import APIConsumer
except ImportError as e:  # the test reports this text
    print("toxiproxy-python is not importable (%s): install it with "
          "`python3 -m pip install toxiproxy-python`" % e)
    sys.exit(3)

PROFILE_MS = 300
API_MS = 200


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


def raw_toxics(name):
    return APIConsumer.get("/proxies/%s/toxics" % name).json()


def main():
    if len(sys.argv) < 4:
        fail("usage: profile_faults.py API_HOST:PORT PROXY_NAME UPSTREAM_HOST:PORT")
    api_host, api_port = sys.argv[1].rsplit(":", 1)
    name = sys.argv[2]
    upstream = sys.argv[3]

    server = Toxiproxy()
    server.update_api_consumer(api_host, int(api_port))
    if not server.running():
        fail("API not reachable at %s" % sys.argv[1])
    proxy = server.get_proxy(name)
    if proxy is None:
        fail("the profile's proxy %r is not listed: %r" % (name, server.proxies()))

    # The profile's fault, through the client and in the raw documents.
    toxics = proxy.toxics()
    if list(toxics) != ["slow"]:
        fail("the profile's fault is not listed as a toxic: %r" % list(toxics))
    slow = toxics["slow"]
    if slow.type != "latency" or slow.stream != "downstream" or slow.toxicity != 1.0:
        fail("profile toxic fields: %r" % vars(slow))
    if slow.attributes != {"latency_ms": PROFILE_MS}:
        fail("profile toxic attributes: %r" % slow.attributes)
    listed = APIConsumer.get("/proxies").json()[name]["toxics"]
    if [t.get("source") for t in listed] != ["profile"]:
        fail("GET /proxies does not mark the profile's toxic: %r" % listed)
    one = APIConsumer.get("/proxies/%s/toxics/slow" % name).json()
    if one.get("source") != "profile":
        fail("GET /proxies/%s/toxics/slow: %r" % (name, one))
    took = round_trip(proxy.listen)
    if took < PROFILE_MS / 1000.0:
        fail("the profile's latency is not in force: %.3f s" % took)

    # A toxic added through the API acts after the profile's, which stays.
    proxy.add_toxic(type="latency", name="extra", attributes={"latency": API_MS})
    raw = raw_toxics(name)
    if [(t["name"], t.get("source")) for t in raw] != [("slow", "profile"), ("extra", None)]:
        fail("profile and API toxics: %r" % raw)
    took = round_trip(proxy.listen)
    if took < (PROFILE_MS + API_MS) / 1000.0:
        fail("profile and API latencies do not add up: %.3f s" % took)

    # The profile's toxic is not deleted alone: 409, which the client raises.
    try:
        proxy.destroy_toxic("slow")
        fail("deleting the profile's toxic was accepted")
    except Exception as e:  # the client's exception for a 409
        if "comes from the profile" not in str(e):
            fail("deleting the profile's toxic: %r" % e)
    if "slow" not in proxy.toxics():
        fail("the profile's toxic disappeared after a refused delete")

    # A proxy made through the API lists no profile toxic.
    plain = server.create(upstream=upstream, name="plain", listen="127.0.0.1:0")
    if plain.toxics():
        fail("a proxy made through the API lists toxics: %r" % raw_toxics("plain"))

    # reset: every toxic goes, the profile's included, and its delay with it.
    if not server.reset():
        fail("reset failed")
    proxy = server.get_proxy(name)
    if proxy.toxics() or raw_toxics(name):
        fail("toxics left after reset: %r" % raw_toxics(name))
    took = round_trip(proxy.listen)
    if took >= PROFILE_MS / 1000.0:
        fail("the profile's latency acts after reset: %.3f s" % took)

    print("OK profile toxic listed, acting, kept on delete and removed by reset")


if __name__ == "__main__":
    main()

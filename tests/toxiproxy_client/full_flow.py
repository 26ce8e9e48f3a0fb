"""The whole Toxiproxy client flow against an empty `tearline proxy` (API only, no proxies).

Usage: python3 full_flow.py API_HOST:API_PORT UPSTREAM_HOST:PORT BUSY_HOST:PORT

UPSTREAM is an echo server; BUSY is a port some other process holds. Uses the published client
`toxiproxy-python`; where it has no method (toxic update, `/populate`) it sends the request
through the client's own HTTP layer (`APIConsumer`), as its users do. Steps: create, list,
toxics add/update/remove (each observed through the relay), disable/enable, reset, populate
(keep, replace, busy port), delete. Exits 0 and prints "OK" on success, 1 on a failed check,
3 when the client package is missing.
"""

import socket
import sys
import time

try:
    from toxiproxy import Toxiproxy
    from toxiproxy.api import APIConsumer
    from toxiproxy.exceptions import ProxyExists
except ImportError as e:  # the test reports this text
    print("toxiproxy-python is not importable (%s)" % e)
    sys.exit(3)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def split(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def round_trip(listen):
    """Seconds for 4 bytes to come back through the proxy."""
    with socket.create_connection(split(listen), timeout=10) as s:
        start = time.monotonic()
        s.sendall(b"ping")
        got = b""
        while len(got) < 4:
            chunk = s.recv(4 - len(got))
            if not chunk:
                fail("connection through %s closed after %r" % (listen, got))
            got += chunk
    check(got == b"ping", "echo returned %r" % got)
    return time.monotonic() - start


def refused(listen):
    """True when nothing accepts on `listen` (a disabled proxy closes its listener)."""
    try:
        with socket.create_connection(split(listen), timeout=2) as s:
            s.sendall(b"x")
            return s.recv(1) == b""
    except OSError:
        return True


def main():
    if len(sys.argv) < 4:
        fail("usage: full_flow.py API UPSTREAM BUSY")
    api_host, api_port = split(sys.argv[1])
    upstream, busy = sys.argv[2], sys.argv[3]

    server = Toxiproxy()
    server.update_api_consumer(api_host, api_port)
    check(server.running(), "API not reachable at %s" % sys.argv[1])
    check(server.proxies() == {}, "server not empty at start: %r" % server.proxies())

    # create, list
    web = server.create(upstream=upstream, name="web")
    check(not web.listen.endswith(":0"), "listen not resolved: %s" % web.listen)
    check(web.enabled, "new proxy not enabled")
    check(list(server.proxies()) == ["web"], "list: %r" % list(server.proxies()))
    try:
        server.create(upstream=upstream, name="web")
        fail("second create with the same name succeeded")
    except ProxyExists:
        pass
    base = round_trip(web.listen)

    # toxics: add, update, remove — each observed on the wire
    web.add_toxic(type="latency", attributes={"latency": 200})
    toxics = web.toxics()
    check(list(toxics) == ["latency_downstream"], "toxics: %r" % list(toxics))
    check(toxics["latency_downstream"].attributes.get("latency") == 200, "attributes")
    slow = round_trip(web.listen)
    check(slow >= 0.2, "latency 200 ms: round trip took %.3f s" % slow)
    r = APIConsumer.post("/proxies/web/toxics/latency_downstream",
                         json={"attributes": {"latency": 500}})
    check(r.status_code == 200, "toxic update: HTTP %d %s" % (r.status_code, r.text))
    check(r.json()["attributes"]["latency"] == 500, "update answer: %s" % r.text)
    check(web.get_toxic("latency_downstream").attributes["latency"] == 500, "update not listed")
    slower = round_trip(web.listen)
    check(slower >= 0.5, "latency 500 ms: round trip took %.3f s" % slower)
    check(web.destroy_toxic("latency_downstream"), "toxic delete")
    check(web.toxics() == {}, "toxic not removed")
    fast = round_trip(web.listen)
    check(fast < 0.2, "after removal: round trip took %.3f s" % fast)

    # disable / enable
    web.disable()
    check(not server.get_proxy("web").enabled, "still enabled after disable")
    check(refused(web.listen), "disabled proxy still relays")
    web.enable()
    check(server.get_proxy("web").enabled, "not enabled after enable")
    round_trip(web.listen)

    # reset: re-enables every proxy and removes every toxic
    web.add_toxic(type="latency", attributes={"latency": 300})
    web.disable()
    check(server.reset(), "reset")
    after_reset = server.get_proxy("web")
    check(after_reset.enabled, "reset did not enable")
    check(web.toxics() == {}, "reset left toxics")
    check(round_trip(web.listen) < 0.3, "reset left the latency in force")

    # populate: same name/listen/upstream is kept with its toxics; a new one is added
    web.add_toxic(type="latency", name="keep_me", attributes={"latency": 1})
    body = [{"name": "web", "listen": web.listen, "upstream": upstream},
            {"name": "api", "listen": "127.0.0.1:0", "upstream": upstream}]
    r = APIConsumer.post("/populate", json=body)
    check(r.status_code == 201, "populate: HTTP %d %s" % (r.status_code, r.text))
    docs = r.json()["proxies"]
    check([d["name"] for d in docs] == ["web", "api"], "populate answer: %s" % r.text)
    check([t["name"] for t in docs[0]["toxics"]] == ["keep_me"], "kept proxy lost its toxics")
    api_listen = docs[1]["listen"]
    round_trip(api_listen)
    check(sorted(server.proxies()) == ["api", "web"], "after populate: %r" % list(server.proxies()))

    # populate onto a busy port: Toxiproxy's 500, the proxies handled before it returned and kept
    body = [{"name": "extra", "listen": "127.0.0.1:0", "upstream": upstream},
            {"name": "clash", "listen": busy, "upstream": upstream}]
    r = APIConsumer.post("/populate", json=body)
    check(r.status_code == 500, "busy port: HTTP %d %s" % (r.status_code, r.text))
    err = r.json()
    check(err["error"] == "listen tcp %s: bind: address already in use" % busy, "error: %s" % r.text)
    check(err["status"] == 500, "status field: %s" % r.text)
    check([d["name"] for d in err["proxies"]] == ["extra"], "partial proxies: %s" % r.text)
    names = sorted(server.proxies())
    check(names == ["api", "extra", "web"], "after busy populate: %r" % names)

    # populate with another listen address replaces the proxy (toxics gone)
    r = APIConsumer.post("/populate", json=[{"name": "web", "listen": "127.0.0.1:0", "upstream": upstream}])
    check(r.status_code == 201, "replace: HTTP %d %s" % (r.status_code, r.text))
    new_web = r.json()["proxies"][0]
    check(new_web["listen"] != web.listen, "not replaced: %s" % r.text)
    check(new_web["toxics"] == [], "replaced proxy kept toxics: %s" % r.text)
    check(refused(web.listen), "old listener of the replaced proxy still open")
    round_trip(new_web["listen"])

    # delete
    server.destroy_all()
    check(server.proxies() == {}, "proxies left after delete: %r" % list(server.proxies()))
    check(refused(new_web["listen"]), "deleted proxy still listening")

    print("OK base=%.4f slow=%.4f slower=%.4f fast=%.4f" % (base, slow, slower, fast))


main()

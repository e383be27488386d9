#!/usr/bin/env python3
"""bench-egress.py - a 10 MB download through the egress proxy against the same download direct,
both on loopback, interleaved in the same run (scripts/bench --only egress runs it).

The upstream is a separate process serving 10 MiB from memory on 127.0.0.1. The proxy is the
real one: `vestibule-mcp egress-proxy` started as the server starts it (listener on fd 3, record
file on fd 4, ready pipe on fd 5), with VESTIBULE_EGRESS_ALLOW / _PIN equivalents pinning
bench.vst.test to the upstream. The client (raw sockets, recv_into one buffer, so its own cost
is small and the same for every path) downloads: direct; through the proxy with CONNECT (how
https goes); through the proxy as an absolute-URI GET (how plain http goes). Prints one JSON
object: medians, p95s and the ratios proxy/direct.

Usage: bench-egress.py VESTIBULE_MCP [ROUNDS]
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

SIZE = 10 * 1024 * 1024
BIN = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 20

UPSTREAM = r'''
import socket, sys, threading
body = b"x" * %d
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0)); ls.listen(64)
print(ls.getsockname()[1], flush=True)
def serve(c):
    try:
        d = b""
        while b"\r\n\r\n" not in d:
            b = c.recv(4096)
            if not b: return
            d += b
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %%d\r\nConnection: close\r\n\r\n" %% len(body) + body)
    finally:
        c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
''' % SIZE

up = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
port = int(up.stdout.readline())

# the proxy, started the way src/egress/session.c starts it
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
pport = ls.getsockname()[1]
rec = os.memfd_create("bench-egress-records")
rd, wr = os.pipe()
def fds():
    os.dup2(ls.fileno(), 3); os.dup2(rec, 4); os.dup2(wr, 5)
proxy = subprocess.Popen([BIN, "egress-proxy", "--allow", "bench.vst.test", "--ports", "443,80",
                          "--pin", "bench.vst.test=127.0.0.1:%d" % port],
                         preexec_fn=fds, close_fds=False, env={"LANG": "C.UTF-8"})
os.close(wr)
ls.close()
assert os.read(rd, 1) == b"R", "the egress proxy did not start"

buf = bytearray(1 << 20)
def fetch(connect_to, first, then=None):
    t0 = time.perf_counter()
    s = socket.create_connection(connect_to)
    s.sendall(first)
    got = b""
    if then is not None:  # CONNECT: read the 200, then speak to the host
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
        s.sendall(then)
    n = 0
    view = memoryview(buf)
    while True:
        k = s.recv_into(view)
        if k == 0: break
        n += k
    s.close()
    ms = (time.perf_counter() - t0) * 1000
    assert n >= SIZE, "short download: %d bytes" % n
    return ms

GET = b"GET /big HTTP/1.1\r\nHost: bench.vst.test\r\n\r\n"
paths = {
    "direct": lambda: fetch(("127.0.0.1", port), GET),
    "proxy_connect": lambda: fetch(("127.0.0.1", pport), b"CONNECT bench.vst.test:443 HTTP/1.1\r\n\r\n", GET),
    "proxy_get": lambda: fetch(("127.0.0.1", pport), b"GET http://bench.vst.test/big HTTP/1.1\r\nHost: bench.vst.test\r\n\r\n"),
}
for f in paths.values():  # warm-up
    f()
ms = {k: [] for k in paths}
for _ in range(ROUNDS):
    for k, f in paths.items():
        ms[k].append(f())
proxy.terminate(); proxy.wait(5)
up.kill(); up.wait()

def st(v):
    v = sorted(v)
    return {"p50_ms": round(statistics.median(v), 2), "p95_ms": round(v[min(len(v) - 1, int(0.95 * len(v)))], 2),
            "mb_per_s_p50": round(SIZE / 1e6 / (statistics.median(v) / 1000), 1)}
out = {"bytes": SIZE, "rounds": ROUNDS, "paths": {k: st(v) for k, v in ms.items()}}
d = statistics.median(ms["direct"])
out["ratio_p50"] = {k: round(statistics.median(v) / d, 3) for k, v in ms.items() if k != "direct"}
# paired: each round's proxy time over the same round's direct time
out["ratio_paired_median"] = {k: round(statistics.median([a / b for a, b in zip(v, ms["direct"])]), 3)
                              for k, v in ms.items() if k != "direct"}
print(json.dumps(out))

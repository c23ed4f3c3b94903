"""Work bounds: /symbol and /maps run on the agent's lookup thread, at most
PULLPROF_MAX_LOOKUPS of them queued or running; heap profiles at most
PULLPROF_MAX_HEAP_PROFILES waiting or building. One more gets 429 with
Retry-After and a message naming the setting; meanwhile the HTTP thread
keeps answering everyone else (checked by order of events, not by time: a
/status request is answered while the long lookup is still in flight).
Stopping the agent under a running lookup ends it."""
import os
import random
import subprocess
import threading
import time

from pptest import Host, curl, eq, ok, run, text_range

PREFIX = "/debug/pprof"
# As many addresses as fit under /symbol's body limit (4 MiB by default).
N_ADDRS = 250000


def symbol_body(pid, path, seed=7):
    lo, hi = text_range(pid)
    rnd = random.Random(seed)
    body = "+".join(hex(rnd.randrange(lo, hi)) for _ in range(N_ADDRS))
    with open(path, "w") as f:
        f.write(body)
    return len(body)


def post_in_background(url, path):
    """curl --data-binary @path in a thread; returns (thread, result)."""
    res = {}

    def go():
        # No "Expect: 100-continue": curl would then report the interim
        # 100 as the status of a connection cut before its answer.
        p = subprocess.run(["curl", "-s", "-m", "300", "-o", "-", "-w",
                            "\n%{http_code}", "-H", "Expect:",
                            "--data-binary", f"@{path}", url],
                           capture_output=True, text=True)
        body, _, code = p.stdout.rpartition("\n")
        res["status"] = int(code or 0)
        res["body"] = body
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, res


def wait_running(base, n=1, timeout=60):
    """Until /status shows n lookups queued or running."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        lk = curl(f"{base}/status").json()["lookups"]
        if lk["queued"] + lk["running"] >= n:
            return lk
        time.sleep(0.02)
    return None


def test_lookups(tmp="/tmp"):
    h = Host(env={"PULLPROF_MAX_LOOKUPS": "1"})
    port = h.start()
    base = f"http://127.0.0.1:{port}{PREFIX}"
    path = f"{tmp}/pp_bounds_symbol_{h.p.pid}"
    size = symbol_body(h.p.pid, path)
    ok(size < 4 << 20, f"the address list fits the body limit ({size} bytes)")

    st = curl(f"{base}/status").json()
    eq(st["config"]["max_lookups"], 1, "status: config.max_lookups")
    eq(st["lookups"]["max"], 1, "status: lookups.max")

    t, res = post_in_background(f"{base}/symbol", path)
    lk = wait_running(base)
    ok(lk is not None, "status shows the long lookup queued or running", lk)
    # While it runs: the HTTP thread answers others...
    answered = curl(f"{base}/status")
    eq(answered.status, 200, "/status is answered while the lookup runs")
    eq(curl(f"{base}/healthz").body, b"ok\n", "/healthz too")
    # ... the probe and bad lists need no lookup ...
    eq(curl(f"{base}/symbol").body, b"num_symbols: 1\n",
       "GET /symbol (the probe) is answered at once")
    eq(curl(f"{base}/symbol?0x10+zz").status, 400,
       "a bad address list is a 400 even when the lookups are busy")
    # ... and one more lookup is refused, with when to come back.
    for what in ("symbol?0x1000", "maps"):
        r = curl(f"{base}/{what}")
        eq(r.status, 429, f"/{what} while the lookup is busy: 429")
        eq(r.headers.get("retry-after"), "1", f"/{what}: Retry-After: 1")
        ok(b"PULLPROF_MAX_LOOKUPS" in r.body,
           f"/{what}: the message names PULLPROF_MAX_LOOKUPS", r.body)
    still = t.is_alive()
    ok(still, "the long lookup was still in flight through all of that")
    t.join(300)
    eq(res.get("status"), 200, "the long lookup is answered 200")
    lines = res.get("body", "").splitlines()
    eq(lines[:1], ["num_symbols: 1"], "its first line")
    # Addresses in libc's text: nearly all fall in a named function.
    ok(len(lines) - 1 > N_ADDRS * 0.9,
       f"it names most of the {N_ADDRS} addresses", len(lines) - 1)
    lk = curl(f"{base}/status").json()["lookups"]
    ok(lk["refused"] >= 2 and lk["done"] >= 1 and lk["queued"] == 0
       and lk["running"] == 0, "status counts: done, refused; idle", lk)
    eq(curl(f"{base}/maps").status, 200, "/maps again once it is idle")

    # Stop while a lookup runs: the request ends, the host lives. Other
    # addresses than the first list's, which are all cached by now: that
    # list again is answered in about 0.1 s, and on a loaded machine the
    # lookup was done (200) before the stop reached the agent. New
    # addresses take seconds of the lookup thread's CPU (about 7 s on a
    # quiet machine) against the stop's few milliseconds.
    symbol_body(h.p.pid, path, seed=8)
    t, res = post_in_background(f"{base}/symbol", path)
    ok(wait_running(base) is not None, "a second long lookup runs")
    eq(h.cmd("stop", timeout=120), "ok", "stop while a lookup runs")
    t.join(120)
    ok(not t.is_alive() and res.get("status") in (0, 503),
       "the lookup ends with 503 or a closed connection", res.get("status"))
    ok(h.alive(), "host alive after the stop")
    ok(not [n for n in h.threads() if n.startswith("pullprof")],
       "no pullprof thread is left", h.threads())
    eq(h.quit(), 0, "host exits 0")
    os.unlink(path)


def test_body_limit():
    h = Host(env={"PULLPROF_MAX_BODY_BYTES": "2048"})
    port = h.start()
    base = f"http://127.0.0.1:{port}{PREFIX}"
    eq(curl(f"{base}/status").json()["config"]["max_body_bytes"], 2048,
       "status: config.max_body_bytes")
    small = "+".join(["0x1000"] * 290)  # 2029 bytes
    big = "+".join(["0x1000"] * 300)    # 2099 bytes
    r = curl(f"{base}/symbol", "--data-binary", small)
    eq(r.status, 200, f"a {len(small)}-byte body under a 2048 limit: 200")
    r = curl(f"{base}/symbol", "--data-binary", big)
    eq(r.status, 413, f"a {len(big)}-byte body over a 2048 limit: 413")
    ok(b"PULLPROF_MAX_BODY_BYTES" in r.body and b"2048" in r.body,
       "the 413 names the limit and the setting", r.body)
    r = curl(f"{base}/symbol", "-H", "Transfer-Encoding: chunked",
             "--data-binary", big)
    eq(r.status, 413, "the same body chunked (no length announced): 413")
    eq(curl(f"{base}/healthz").status, 200, "the agent answers on")
    eq(h.quit(), 0, "host exits 0")


def test_heap_profiles():
    h = Host(env={"PULLPROF_MAX_HEAP_PROFILES": "2"})
    port = h.start()
    base = f"http://127.0.0.1:{port}{PREFIX}"
    st = curl(f"{base}/status").json()
    eq(st["config"]["max_heap_profiles"], 2, "status: config.max_heap_profiles")
    waiting = []
    for _ in range(2):
        res = {}
        th = threading.Thread(target=lambda res=res: res.setdefault(
            "r", curl(f"{base}/heap?seconds=5", timeout=60)), daemon=True)
        th.start()
        waiting.append((th, res))
    deadline = time.time() + 60
    while (curl(f"{base}/status").json()["heap"]["pending_requests"] < 2
           and time.time() < deadline):
        time.sleep(0.02)
    r = curl(f"{base}/heap")
    eq(r.status, 429, "a third heap profile while two wait: 429")
    # As for CPU windows: when the first waiting profile is due (the
    # deltas asked for 5 s, opened moments ago).
    ok(r.headers.get("retry-after") in ("1", "2", "3", "4", "5", "6"),
       "with Retry-After: when the first waiting delta is due (1..6 s)",
       r.headers.get("retry-after"))
    ok(b"PULLPROF_MAX_HEAP_PROFILES" in r.body,
       "the message names PULLPROF_MAX_HEAP_PROFILES", r.body)
    for i, (th, res) in enumerate(waiting):
        th.join(60)
        eq(res.get("r") and res["r"].status, 200,
           f"waiting heap profile {i + 1} arrives")
    eq(curl(f"{base}/heap").status, 200, "and one more once they are done")
    eq(h.quit(), 0, "host exits 0")


run([test_lookups, test_body_limit, test_heap_profiles])

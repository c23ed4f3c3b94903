"""The viewer (<prefix>/ui/) and the index page's live status, in a real
headless Chromium driven over the DevTools protocol (tests/integration/cdp.py)
against real processes: tests/cpu/burn for a CPU flame graph with a known hot
function, tests/heap/heapwork for the heap views. Clicks, hovers and keys are
real input events; every console error or uncaught exception in the pages
fails the test. Screenshots go to tests/integration/artifacts/ in the build
tree. The ui routing (redirect, assets, traversal) is checked with curl.

Chromium is required: without it the test fails (CI installs it with
scripts/deps.sh --test)."""
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
import traceback

from pptest import (BUILD, NO_HEAP_WHY, Host, Proc, curl, eq, ok, sanitized,
                    skip)

from cdp import Browser, CDPError, find_chromium

BURN = os.path.join(BUILD, "tests", "cpu", "burn")
WORK = os.path.join(BUILD, "tests", "heap", "heapwork")
ART = os.path.join(BUILD, "tests", "integration", "artifacts")
PREFIX = "/debug/pprof"

browser = None
burn = None
burn_port = None


def shot(name):
    path = browser.screenshot(os.path.join(ART, f"viewer-{name}.png"))
    print(f"# screenshot: {path}", flush=True)
    return path


def js(expr):
    return browser.evaluate(expr)


def viewer(port, prefix=PREFIX):
    url = f"http://127.0.0.1:{port}{prefix}/ui/"
    ok(browser.navigate(url), f"the viewer loads ({url})")
    ok(js("typeof window.pullprofViewer === 'object'"),
       "viewer.js ran (window.pullprofViewer)")


def wait_loaded(what, timeout=60):
    state = browser.wait("['ready', 'error'].includes(document.body.dataset.state)"
                         " && document.body.dataset.state", timeout)
    ok(state == "ready", f"{what}: the flame graph is drawn",
       f"state {state!r}; error shown: {js('pullprofViewer.error')!r}")
    return state == "ready"


def frame_centre(name):
    b = js(f"pullprofViewer.frameBox({json.dumps(name)})")
    if not b:
        return None, None
    return b, (b["x"] + b["w"] / 2, b["y"] + b["h"] / 2)


def start_burn():
    global burn, burn_port
    burn = Proc([BURN, "1", "600"],
                env={"PULLPROF_LISTEN": "127.0.0.1:0",
                     "PULLPROF_MAX_SECONDS": "20",
                     "PULLPROF_MAX_CPU_WINDOWS": "1"}, stdin=False)
    m = burn.wait_line(burn.out_lines, r"^port (\d+)", timeout=10)
    burn_port = int(m.group(1)) if m else None
    return burn_port


# ---- routing (no browser) ----------------------------------------------------

def test_routing():
    h = Host()
    port = h.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{port}{PREFIX}"
    try:
        r = curl(base + "/ui")
        eq(r.status, 302, "ui: redirect")
        eq(r.header("location"), f"{PREFIX}/ui/", "ui: to ui/")
        r = curl(base + "/ui/")
        eq(r.status, 200, "ui/: 200")
        eq(r.header("content-type"), "text/html; charset=utf-8", "ui/: html")
        ok('src="viewer.js"' in r.text and 'href="viewer.css"' in r.text,
           "ui/ loads its script and style relatively")
        ok("default-src 'none'" in (r.header("content-security-policy") or ""),
           "ui/ has a content security policy", r.headers)
        for name, ctype in (("viewer.js", "text/javascript; charset=utf-8"),
                            ("viewer.css", "text/css; charset=utf-8"),
                            ("index.html", "text/html; charset=utf-8")):
            r = curl(f"{base}/ui/{name}")
            eq((r.status, r.header("content-type")), (200, ctype),
               f"ui/{name}: 200 {ctype}")
            ok(len(r.body) > 500, f"ui/{name} has a body")
        r = curl(f"{base}/ui/viewer.js", "-I")
        eq(r.status, 200, "HEAD ui/viewer.js: 200")
        r = curl(f"{base}/ui/viewer.js", "-X", "POST")
        eq(r.status, 405, "POST ui/viewer.js: 405")
        bad = ("ui/../status", "ui/%2e%2e/status", "ui/%2E%2E/index.html",
               "ui/x/../../", "ui/x/../../status", "ui/..%2fstatus",
               "ui/%2e%2e%2fstatus", "ui//viewer.js", "ui/./viewer.js",
               "ui/nope.js", "ui/ui/index.html", "ui/viewer.js/",
               "ui/VIEWER.JS", "uix", "ui.js", "ui/%00", "ui/index.html%00",
               "ui/../../../../etc/passwd")
        for b in bad:
            r = curl(f"{base}/{b}", "--path-as-is")
            eq(r.status, 404, f"{b}: 404")
            ok(b"<html" not in r.body and b"function" not in r.body,
               f"{b}: no file served")
        r = curl(base + "/")
        ok('href="ui/">ui/</a>' in r.text and "flame graph viewer" in r.text,
           "the index lists ui/ with its description", r.text[-3000:])
        st = curl(base + "/status").json()
        ok("ui" in st["requests"]["by_endpoint"], "status counts ui requests")
        below = [b for b in bad if b.startswith("ui/")]
        eq(st["requests"]["by_endpoint"]["ui"]["4xx"], len(below) + 1,
           "status counts the 404s below ui/ (and the 405) under ui")
    finally:
        h.quit()
    # Another prefix: the redirect follows it.
    h = Host()
    port = h.start("127.0.0.1:0", prefix="/p")
    try:
        r = curl(f"http://127.0.0.1:{port}/p/ui")
        eq((r.status, r.header("location")), (302, "/p/ui/"),
           "ui redirect under another prefix")
        eq(curl(f"http://127.0.0.1:{port}/p/ui/viewer.css").status, 200,
           "ui assets under another prefix")
    finally:
        h.quit()


# ---- the browser -----------------------------------------------------------------

class Abort(Exception):
    """Stops the file: nothing after it can run."""


def test_browser():
    global browser
    exe = find_chromium()
    if not ok(exe, "chromium is installed (scripts/deps.sh --test installs it)"):
        raise Abort()
    try:
        browser = Browser(exe)
    except CDPError as e:
        ok(False, "chromium runs headless with the DevTools protocol", e)
        raise Abort() from e
    ok(browser.port > 0, "chromium runs headless with the DevTools protocol")
    port = start_burn()
    if not ok(port, "burn started with the agent", burn and burn.stderr_text()):
        raise Abort()


def test_cpu_flame_graph():
    viewer(burn_port)
    eq(js("document.body.dataset.state"), "idle", "the viewer starts idle")
    ok(js("document.getElementById('cpu-options').hidden === false"),
       "CPU is the default choice, its options shown")
    browser.click("input[name=kind][value=profile]")
    browser.type_into("#seconds", "2")
    browser.type_into("#hz", "250")
    browser.click("#fetch")
    ok(browser.wait("document.body.dataset.state === 'loading'", 5) or
       js("document.body.dataset.state") == "ready",
       "the page says it is sampling")
    progress = js("document.getElementById('progress').textContent")
    if not wait_loaded("CPU"):
        shot("cpu-failed")
        return
    ok("Fetched" in js("document.getElementById('progress').textContent"),
       "progress says what was fetched", progress)
    names = js("pullprofViewer.names()")
    ok("burn_heavy" in names and "burn_light" in names,
       "the hot functions are in the flame graph", names)
    eq(js("pullprofViewer.focus"), "all", "not zoomed: the root is in focus")
    meta = js("document.getElementById('meta').textContent")
    ok(re.search(r"cpu \(nanoseconds\) total", meta), "summary names the value",
       meta)
    eq(js("document.getElementById('value-type').selectedOptions[0].textContent"),
       "cpu (nanoseconds)", "CPU shows cpu time by default")
    # Downloads of the same profile by id.
    hrefs = js("Array.from(document.querySelectorAll('#downloads a'))"
               ".map(a => a.getAttribute('href'))")
    ok(hrefs and all(re.match(r"^\.\./profile\?id=\d+&format=\w+&sample_index=cpu$", h)
                     for h in hrefs),
       "download links carry the profile id and the value shown", hrefs)
    fmts = {re.search(r"format=(\w+)", h).group(1) for h in hrefs or []}
    ok({"pprof", "folded", "text"} <= fmts, "pprof, folded and text links", fmts)
    for h in hrefs or []:
        r = curl(f"http://127.0.0.1:{burn_port}{PREFIX}/ui/{h}")
        eq(r.status, 200, f"download {h}: 200")
        if "format=pprof" in h:
            ok(r.body[:2] == b"\x1f\x8b", "the pprof download is gzipped")
        if "format=folded" in h:
            ok("burn_heavy" in r.text, "the folded download has burn_heavy")
    shot("cpu")

    # Hover: the tooltip names function, file:line, value and percent.
    box, (x, y) = frame_centre("burn_heavy")
    ok(box and box["w"] > 100, "burn_heavy is a wide frame", box)
    browser.mouse("mouseMoved", x, y)
    tip = browser.wait("!document.getElementById('tip').hidden && "
                       "document.getElementById('tip').innerText", 5) or ""
    ok(tip.startswith("burn_heavy"), "hover: the tooltip names the function", tip)
    ok(re.search(r"tests/cpu/burn\.c:\d+", tip), "hover: file:line", tip)
    ok(re.search(r"\d+(\.\d+)? (ms|s) · \d+(\.\d+)?% of the total", tip),
       "hover: value and percent", tip)
    shot("cpu-hover")

    # Click (a real mouse event at the frame) zooms into it.
    browser.click_at(x, y)
    ok(browser.wait("pullprofViewer.focus === 'burn_heavy'", 5),
       "click: zoomed into burn_heavy", js("pullprofViewer.focus"))
    eq(js("document.getElementById('graph').dataset.focus"), "burn_heavy",
       "the canvas says what is in focus")
    box2, _ = frame_centre("burn_heavy")
    width = js("document.getElementById('graph').getBoundingClientRect().width")
    ok(box2 and abs(box2["w"] - width) < 2, "the zoomed frame spans the width",
       (box2, width))
    ok(frame_centre("burn_light")[0] is None,
       "its sibling burn_light is out of view")
    ok(js("!document.getElementById('reset').disabled && "
          "!document.getElementById('back').disabled"),
       "Back and Reset are enabled")
    ok("burn_heavy" in js("document.getElementById('crumbs').textContent"),
       "the breadcrumbs show the path")
    shot("cpu-zoomed")
    # Escape on the canvas resets the zoom (keyboard).
    browser.key("Escape", "Escape", 27)
    ok(browser.wait("pullprofViewer.focus === 'all'", 5), "Escape resets the zoom")
    # Zoom again and use the Back button.
    _, (x, y) = frame_centre("burn_light")
    browser.click_at(x, y)
    ok(browser.wait("pullprofViewer.focus === 'burn_light'", 5),
       "click: zoomed into burn_light")
    browser.click("#back")
    ok(browser.wait("pullprofViewer.focus === 'all'", 5), "Back zooms out")
    # The keyboard alone: down the heaviest path, Enter zooms.
    js("document.getElementById('graph').focus()")
    for _ in range(12):
        browser.key("ArrowDown", "ArrowDown", 40)
    eq(js("pullprofViewer.selected"), "burn_heavy",
       "keyboard: ArrowDown follows the heaviest callee to burn_heavy")
    ok("burn_heavy" in js("document.getElementById('announce').textContent"),
       "keyboard: the chosen frame is announced")
    browser.key("ArrowRight", "ArrowRight", 39)
    eq(js("pullprofViewer.selected"), "burn_light", "keyboard: ArrowRight")
    browser.key("Enter", "Enter", 13)
    ok(browser.wait("pullprofViewer.focus === 'burn_light'", 5),
       "keyboard: Enter zooms")
    browser.key("Escape", "Escape", 27)
    ok(browser.wait("pullprofViewer.focus === 'all'", 5),
       "keyboard: Escape resets")

    # Search: highlight and matched share.
    browser.type_into("#search", "burn_l.ght")
    ok(browser.wait("pullprofViewer.matched > 0", 5), "search matches")
    total, matched = js("pullprofViewer.total"), js("pullprofViewer.matched")
    ok(0 < matched < total, "search: a share of the total", (matched, total))
    text = js("document.getElementById('match').textContent")
    pct = 100 * matched / total
    shown = re.search(r"([\d.]+)% of the total", text)
    ok(shown and abs(float(shown.group(1)) - pct) < 0.006,
       "search: the page shows the matched share", (text, pct))
    box, (x, y) = frame_centre("burn_light")
    pixel = js(f"""(() => {{
        const c = document.getElementById('graph');
        const r = c.getBoundingClientRect(), d = window.devicePixelRatio || 1;
        const p = c.getContext('2d').getImageData(
            Math.round(({x} - r.left + 0) * d), Math.round(({box['y']} - r.top + 2) * d), 1, 1).data;
        const m = getComputedStyle(document.documentElement).getPropertyValue('--match').trim();
        return {{pixel: Array.from(p.slice(0, 3)), match: m}};
    }})()""")
    hexed = "#%02x%02x%02x" % tuple(pixel["pixel"])
    eq(hexed, pixel["match"], "search: the matching frame is drawn highlighted")
    ok(js("document.querySelector('#top tbody tr.hit') !== null"),
       "search: the table marks the match")
    shot("cpu-search")
    # The top table: burn_heavy has the largest flat value.
    first = js("document.querySelector('#top tbody tr').dataset.name")
    eq(first, "burn_heavy", "top functions: burn_heavy first by flat")
    browser.click("th button[data-sort=cum]")
    ok(js("document.querySelector('th button[data-sort=cum]')"
          ".getAttribute('aria-pressed')") == "true", "sort by cum")
    # Selecting a row with the keyboard highlights that function.
    js("document.querySelector('#top tbody tr[data-name=burn_heavy]').focus()")
    browser.key("Enter", "Enter", 13)
    ok(browser.wait("document.getElementById('search').value === '^burn_heavy$'", 5),
       "Enter on a table row searches that function")
    browser.type_into("#search", "")
    ok(browser.wait("pullprofViewer.matched === 0 && "
                    "document.getElementById('match').textContent === ''", 5),
       "an empty search clears the highlight")
    # Dark color scheme.
    browser.color_scheme("dark")
    browser.evaluate("new Promise(r => requestAnimationFrame(() => r(1)))")
    bg = js("getComputedStyle(document.body).backgroundColor")
    ok(bg != "rgb(255, 255, 255)", "dark scheme: a dark background", bg)
    shot("cpu-dark")
    browser.color_scheme("light")


def test_errors_shown():
    viewer(burn_port)
    # The form takes the agent's own limits from status.
    ok(browser.wait("document.getElementById('seconds').max === '20'", 5),
       "the form's longest window is the agent's (PULLPROF_MAX_SECONDS=20)")
    eq(js("document.getElementById('hz').value"), "100",
       "the form's rate is the agent's default")
    # One window at most: hold it with curl, then the page's fetch gets 429.
    held = {}
    t = threading.Thread(target=lambda: held.setdefault("r", curl(
        f"http://127.0.0.1:{burn_port}{PREFIX}/profile?seconds=6")))
    t.start()
    deadline = time.time() + 5
    while time.time() < deadline:
        st = curl(f"http://127.0.0.1:{burn_port}{PREFIX}/status").json()
        if st["cpu"]["windows_open"] >= 1:
            break
        time.sleep(0.05)
    browser.click("input[name=kind][value=profile]")
    browser.type_into("#seconds", "2")
    browser.click("#fetch")
    state = browser.wait("document.body.dataset.state === 'error'", 15)
    ok(state, "an agent's 4xx puts the page in the error state")
    err = js("document.getElementById('error').innerText") or ""
    ok("429" in err and "already running" in err,
       "the error shows the status and the agent's reason", err)
    ok(re.search(r"retry in \d+ s", err), "and the agent's Retry-After", err)
    ok(js("document.getElementById('error').getAttribute('role')") == "alert",
       "the error is announced (role=alert)")
    shot("error")
    t.join()
    eq(held["r"].status, 200, "the window held meanwhile was answered")


def test_heap_flame_graph():
    w = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0", "PULLPROF_HEAP_RATE": "4096"},
             exe=WORK)
    m = re.match(r"port (\d+)", w.ready)
    if not ok(m, "heapwork started", w.ready):
        return
    port = int(m.group(1))
    try:
        line = w.cmd("accuracy", timeout=120)
        ok(line.startswith("truth"), "heapwork allocated", line)
        viewer(port)
        browser.click("input[name=kind][value=heap]")
        ok(js("document.getElementById('heap-options').hidden === false &&"
              " document.getElementById('cpu-options').hidden"),
           "heap: the sample index is offered, the CPU options hidden")
        js("document.getElementById('heap-index').focus()")
        browser.evaluate("document.getElementById('heap-index').value = "
                         "'inuse_space'")
        browser.click("#fetch")
        if not wait_loaded("heap"):
            shot("heap-failed")
            return
        eq(js("document.getElementById('value-type').selectedOptions[0]"
              ".textContent"), "inuse_space (bytes)", "heap: inuse_space shown")
        if sanitized():
            skip("heap flame graph contents", NO_HEAP_WHY)
            return
        names = js("pullprofViewer.names()")
        ok({"hw_small_objects", "hw_large_blocks", "hw_mixed_sizes"} <= set(names),
           "heap: the allocating functions are in the flame graph", names)
        _, (x, y) = frame_centre("hw_large_blocks")
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait("!document.getElementById('tip').hidden && "
                           "document.getElementById('tip').innerText", 5) or ""
        ok(re.search(r"\d+(\.\d+)? (MiB|KiB) · \d+(\.\d+)?% of the total", tip),
           "heap hover: bytes and percent", tip)
        hrefs = js("Array.from(document.querySelectorAll('#downloads a'))"
                   ".map(a => a.getAttribute('href'))") or []
        ok(any(re.match(r"^\.\./heap\?id=\d+&format=pprof&sample_index=inuse_space$", h)
               for h in hrefs), "heap: a pprof download link by id", hrefs)
        r = curl(f"http://127.0.0.1:{port}{PREFIX}/ui/" +
                 next(h for h in hrefs if "format=folded" in h))
        ok(r.status == 200 and "hw_large_blocks" in r.text,
           "heap: the folded download has the allocating functions", r)
        shot("heap")
        # Another value of the same profile, chosen in the page.
        js("(() => { const s = document.getElementById('value-type');"
           " s.value = String(Array.from(s.options).findIndex(o =>"
           " o.textContent.startsWith('alloc_objects')));"
           " s.dispatchEvent(new Event('change')); })()")
        eq(js("document.getElementById('value-type').selectedOptions[0]"
              ".textContent"), "alloc_objects (count)", "heap: switch the value")
        ok("hw_small_objects" in js("pullprofViewer.names()"),
           "alloc_objects: hw_small_objects drawn")
        # Allocations, alloc_space.
        browser.click("input[name=kind][value=allocs]")
        eq(js("document.getElementById('heap-index').value"), "alloc_space",
           "allocs: alloc_space preselected")
        browser.click("#fetch")
        if wait_loaded("allocs"):
            eq(js("document.getElementById('value-type').selectedOptions[0]"
                  ".textContent"), "alloc_space (bytes)", "allocs: alloc_space")
            ok("hw_small_objects" in js("pullprofViewer.names()"),
               "allocs: hw_small_objects drawn")
            shot("allocs")
    finally:
        w.quit(timeout=30)


def test_wall_flame_graph():
    """A wall-clock profile and a thread dump in the page: each thread state
    is a frame of its own, coloured, above the stacks spent in it."""
    p = Proc([os.path.join(BUILD, "tests", "threads", "waiters"), "nap", "10"],
             env={"PULLPROF_LISTEN": "127.0.0.1:0"}, stdout_lines=True)
    try:
        port = int(p.wait_line(p.out_lines, r"^port (\d+)", timeout=20).group(1))
        p.wait_line(p.out_lines, r"^ready", timeout=30)
        viewer(port)
        browser.click("input[name=kind][value=wall]")
        ok(js("document.getElementById('cpu-options').hidden === false && "
              "document.getElementById('heap-options').hidden"),
           "wall: seconds and hz offered, the heap options hidden")
        browser.type_into("#seconds", "2")
        browser.type_into("#hz", "200")
        browser.click("#fetch")
        if not wait_loaded("wall"):
            shot("wall-failed")
            return
        eq(js("document.getElementById('value-type').selectedOptions[0]"
              ".textContent"), "wall (nanoseconds)", "wall: wall time shown")
        names = js("pullprofViewer.names()")
        ok({"state: sleeping", "state: running", "nap", "burn"} <= set(names),
           "wall: the states are frames, with nap and burn below them", names)
        box, (x, y) = frame_centre("state: sleeping")
        ok(box and box["w"] > 50, "the sleeping state is a wide frame", box)
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait("!document.getElementById('tip').hidden && "
                           "document.getElementById('tip').innerText", 5) or ""
        ok(tip.startswith("state: sleeping") and
           re.search(r"\d+(\.\d+)? (ms|s) · \d+(\.\d+)?% of the total", tip),
           "hover: the state's wall time and share", tip)
        shot("wall")
        browser.click("input[name=kind][value=goroutine]")
        ok(js("document.getElementById('cpu-options').hidden"),
           "threads now: nothing to choose")
        browser.click("#fetch")
        if wait_loaded("goroutine"):
            names = js("pullprofViewer.names()")
            ok("state: sleeping" in names and "_IO_fgets" in names,
               "threads now: the dump's stacks under their state", names)
            shot("threads")
    finally:
        p.stop()


def test_index_live_status():
    url = f"http://127.0.0.1:{burn_port}{PREFIX}/"
    ok(browser.navigate(url), "the index loads")
    ok(js("document.querySelector('a[href=\"ui/\"]') !== null"),
       "the index links the viewer")
    ok(browser.wait("document.body.dataset.live === 'ok'", 10),
       "the index fetched the live status")
    up1 = js("document.querySelector('[data-key=uptime]').textContent")
    ok(re.match(r"^(\d+[dhm] )*\d+s$", up1), "uptime is shown", up1)
    heap = js("document.querySelector('[data-key=heap_inuse]').textContent")
    ok(re.search(r"B$|off$", heap), "heap in use is shown", heap)
    shot("index")
    time.sleep(4.2)
    up2 = js("document.querySelector('[data-key=uptime]').textContent")
    ok(up2 != up1, "the status refreshes by itself", (up1, up2))
    # The agent goes away: the page says so and keeps the last values.
    burn.stop()
    ok(browser.wait("document.body.dataset.live === 'error'", 15),
       "a failed status fetch is shown")
    note = js("document.getElementById('live-note').textContent")
    ok("unavailable" in note and "retrying" in note, "the note says it retries",
       note)
    eq(js("document.querySelector('[data-key=uptime]').textContent"), up2,
       "the last values stay")
    shot("index-offline")


# A small profile in the JSON layout of ?format=json with every kind of frame:
# inlined lines, an unknown address, a synthetic frame, recursion, a sample
# with no stack and one with a negative value (left out).
SMALL = {
    "sample_types": [{"type": "samples", "unit": "count"},
                     {"type": "cpu", "unit": "nanoseconds"}],
    "default_sample_type": 1,
    "period_type": {"type": "cpu", "unit": "nanoseconds"}, "period": 10000000,
    "time_nanos": 1763712000000000000, "duration_nanos": 5000000000,
    "comments": ["hand-made"],
    "functions": [
        {"name": "main", "system_name": "main", "file": "/src/m.c", "start_line": 1},
        {"name": "outer", "system_name": "outer", "file": "/src/m.c", "start_line": 10},
        {"name": "inlined_helper", "system_name": "inlined_helper",
         "file": "/src/h.h", "start_line": 3},
        {"name": "rec", "system_name": "rec", "file": "/src/r.c", "start_line": 5},
        {"name": "[pullprof: lost samples (ring full)]", "system_name": "",
         "file": "", "start_line": 0},
        {"name": "<b>html</b>", "system_name": "x", "file": "", "start_line": 0},
    ],
    "mappings": [{"start": "0x400000", "limit": "0x500000", "offset": "0x0",
                  "path": "/usr/bin/m", "build_id": "ab12"}],
    "locations": [
        {"address": "0x401000", "mapping": 0, "lines": [{"function": 0, "line": 3}]},
        # outer with inlined_helper inlined into it: innermost first.
        {"address": "0x402000", "mapping": 0,
         "lines": [{"function": 2, "line": 4}, {"function": 1, "line": 12}]},
        {"address": "0x403000", "mapping": 0, "lines": [{"function": 3, "line": 7}]},
        {"address": "0x7f00dead", "mapping": -1, "lines": []},
        {"address": "", "mapping": -1, "lines": [{"function": 4, "line": 0}]},
        {"address": "0x404000", "mapping": 0, "lines": [{"function": 5, "line": 1}]},
    ],
    "samples": [
        {"locations": [1, 0], "values": [6, 60000000], "labels": []},
        {"locations": [2, 2, 2, 0], "values": [3, 30000000], "labels": []},
        {"locations": [3, 0], "values": [1, 10000000], "labels": []},
        {"locations": [4], "values": [2, 20000000], "labels": []},
        {"locations": [5, 0], "values": [1, 10000000], "labels": []},
        {"locations": [], "values": [1, 10000000], "labels": []},
        {"locations": [0], "values": [-5, -50000000], "labels": []},
    ],
    "totals": [9, 90000000],
}


def test_model_from_file():
    """The profile model as the viewer reads it, from a hand-made file; the
    agent has another prefix, which the page's relative URLs follow."""
    h = Host(env={"PULLPROF_CPU_HZ": "97"})
    port = h.start("127.0.0.1:0", prefix="/x/y")
    try:
        viewer(port, "/x/y")
        ok(browser.wait("document.getElementById('hz').value === '97'", 5),
           "under another prefix the page reads the agent's status")
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write('{"samples": []}')
            browser.set_files("#file", [bad])
            ok(browser.wait("document.body.dataset.state === 'error'", 10),
               "a JSON file that is not a profile is an error")
            ok("not a pullprof JSON profile" in (js("pullprofViewer.error") or ""),
               "the error says why", js("pullprofViewer.error"))
            path = os.path.join(d, "small.json")
            with open(path, "w") as f:
                json.dump(SMALL, f)
            browser.set_files("#file", [path])
            if not wait_loaded("hand-made profile"):
                return
        eq(js("document.getElementById('value-type').value"), "1",
           "default_sample_type is shown first")
        eq(js("pullprofViewer.total"), 140000000,
           "the total leaves the negative sample out")
        ok("1 sample with a negative value left out" in
           js("document.getElementById('meta').textContent"),
           "and says so")
        names = set(js("pullprofViewer.names()"))
        want = {"all", "main", "outer", "inlined_helper", "rec", "0x7f00dead",
                "[pullprof: lost samples (ring full)]", "<b>html</b>"}
        eq(sorted(names), sorted(want), "every kind of frame is drawn")
        ok(js("document.querySelector('#graph-wrap b') === null"),
           "names are text, never markup")

        def row(name):
            b = js(f"pullprofViewer.frameBox({json.dumps(name)})")
            return round((b["y"] - js("document.getElementById('graph')"
                                      ".getBoundingClientRect().top")) / 18)
        eq([row(n) for n in ("all", "main", "outer", "inlined_helper")],
           [0, 1, 2, 3], "root at the top; an inlined function below the one "
           "it was inlined into")
        eq(row("[pullprof: lost samples (ring full)]"), 1,
           "a synthetic frame alone is a root's child")
        rec = js("(() => { const r = Array.from(document.querySelectorAll("
                 "'#top tbody tr')).find(t => t.dataset.name === 'rec');"
                 " return Array.from(r.cells).map(c => c.textContent); })()")
        eq(rec[:4], ["30.0 ms", "21.43%", "30.0 ms", "21.43%"],
           "recursion: flat and cumulative counted once per sample")
        main_row = js("(() => { const r = Array.from(document.querySelectorAll("
                      "'#top tbody tr')).find(t => t.dataset.name === 'main');"
                      " return Array.from(r.cells).map(c => c.textContent); })()")
        eq(main_row[2:4], ["110 ms", "78.57%"], "main's cumulative value")
        _, (x, y) = frame_centre("0x7f00dead")
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait("!document.getElementById('tip').hidden && "
                           "document.getElementById('tip').innerText", 5) or ""
        ok(tip.startswith("0x7f00dead") and "not symbolized" in tip,
           "an unknown address is shown as its address", tip)
        # Searching a nested match counts it once.
        browser.type_into("#search", "main|outer")
        eq(js("pullprofViewer.matched"), 110000000,
           "search: nested matches are counted once")
        ok("78.57%" in js("document.getElementById('match').textContent"),
           "search: the share of the total")
        js("(() => { const s = document.getElementById('value-type');"
           " s.value = '0'; s.dispatchEvent(new Event('change')); })()")
        eq(js("pullprofViewer.total"), 14, "another value: samples (count)")
        ok(js("document.getElementById('downloads').textContent") == "",
           "a file has no download links")
        shot("model")
    finally:
        h.quit()


def large_profile(path, frames=50000, seed=7):
    """A synthetic profile with `frames` distinct frames in its flame graph:
    a random call tree over 4000 function names, one location per frame,
    one sample per leaf."""
    rnd = random.Random(seed)
    fn_count = 4000
    functions = [{"name": f"ns::module{i % 97}::function_{i}", "system_name": f"f{i}",
                  "file": f"/src/module{i % 97}.cc", "start_line": 10 + i % 500}
                 for i in range(fn_count)]
    locations, samples = [], []
    # Grow the tree breadth-first with a branching factor that shrinks with
    # depth, so it is both wide and deep (up to ~60 levels).
    parent_of = [-1]
    depth = [0]
    locations.append({"address": "0x400000", "mapping": 0,
                      "lines": [{"function": 0, "line": 11}]})
    kids = [[]]
    i = 0
    while len(locations) < frames:
        p = rnd.randrange(len(locations)) if rnd.random() < 0.3 else \
            max(0, len(locations) - 1 - rnd.randrange(50))
        if depth[p] >= 60:
            continue
        n = len(locations)
        locations.append({"address": hex(0x400000 + 16 * n), "mapping": 0,
                          "lines": [{"function": (n * 7919) % fn_count,
                                     "line": 20 + n % 300}]})
        parent_of.append(p)
        depth.append(depth[p] + 1)
        kids.append([])
        kids[p].append(n)
        i += 1
    # Frames under one parent must have different names to stay distinct.
    for p, ks in enumerate(kids):
        seen = set()
        for k in ks:
            f = locations[k]["lines"][0]["function"]
            while f in seen:
                f = (f + 1) % fn_count
            seen.add(f)
            locations[k]["lines"][0]["function"] = f
    for n in range(len(locations)):
        if kids[n] and rnd.random() < 0.8:
            continue
        stack = []
        while n >= 0:
            stack.append(n)
            n = parent_of[n]
        v = rnd.randrange(1, 50)
        samples.append({"locations": stack, "values": [v, v * 10000000],
                        "labels": []})
    prof = {
        "sample_types": [{"type": "samples", "unit": "count"},
                         {"type": "cpu", "unit": "nanoseconds"}],
        "default_sample_type": 1,
        "period_type": {"type": "cpu", "unit": "nanoseconds"},
        "period": 10000000, "time_nanos": 1763712000000000000,
        "duration_nanos": 30000000000, "comments": ["synthetic: test_viewer.py"],
        "functions": functions,
        "mappings": [{"start": "0x400000", "limit": "0x2000000", "offset": "0x0",
                      "path": "/usr/bin/big", "build_id": "ab12"}],
        "locations": locations, "samples": samples,
        "totals": [sum(s["values"][0] for s in samples),
                   sum(s["values"][1] for s in samples)],
    }
    with open(path, "w") as f:
        json.dump(prof, f)
    return prof


def test_large_profile():
    """50,000 frames: opened from a file (the same code path as a fetch after
    the JSON is parsed). The times are printed, not asserted (DESIGN.md:
    speed is measured, never a timed assertion)."""
    # A page of its own origin: any loaded viewer works for a file.
    h = Host()
    port = h.start("127.0.0.1:0")
    try:
        viewer(port)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "large.json")
            prof = large_profile(path)
            size = os.path.getsize(path)
            t0 = time.time()
            browser.set_files("#file", [path])
            loaded = wait_loaded("50k frames", timeout=120)
            wall = time.time() - t0
        if not loaded:
            return
        frames = js("pullprofViewer.frames")
        ok(frames >= 50000, "the flame graph holds 50,000 frames", frames)
        t = js("pullprofViewer.timings")
        drawn = int(js("document.getElementById('graph').dataset.frames"))
        renders = js("(() => { const t = []; for (let i = 0; i < 10; i++)"
                     " t.push(pullprofViewer.render()); return t; })()")
        builds = sorted(js("(() => { const t = []; for (let i = 0; i < 5; i++)"
                           " t.push(pullprofViewer.rebuild().buildMs);"
                           " return t; })()"))
        searches = []
        for q in ("function_1", "module3::", "no-such-function", ""):
            js(f"(() => {{ const s = document.getElementById('search');"
               f" s.value = {json.dumps(q)}; s.dispatchEvent(new Event('input')); }})()")
            searches.append((q, js("pullprofViewer.timings.searchMs")))
        # Zoom into a frame two levels down, by a real click.
        box = js("(() => { const c = document.getElementById('graph');"
                 " const r = c.getBoundingClientRect();"
                 " return {x: r.left + r.width / 3, y: r.top + 2 * 18 + 8}; })()")
        browser.click_at(box["x"], box["y"])
        zoomed = browser.wait("pullprofViewer.zoomed", 5)
        ok(zoomed, "50k frames: a click zooms")
        zt = js("pullprofViewer.timings.renderMs")
        # Hover cost: 200 mouse moves across the graph.
        t1 = time.time()
        for k in range(200):
            browser.mouse("mouseMoved", 20 + k * 6, box["y"] + (k % 10) * 18)
        hover = (time.time() - t1) / 200 * 1000
        shot("large")
        print(f"# 50k-frame profile: {len(prof['locations'])} locations, "
              f"{len(prof['samples'])} samples, JSON {size / 1e6:.1f} MB", flush=True)
        print(f"# file chosen -> drawn: {wall * 1000:.0f} ms (read + parse + "
              f"build + first draw); build {t['buildMs']:.1f} ms (5 more: "
              f"median {builds[2]:.1f}, min {builds[0]:.1f}); first draw "
              f"{t['renderMs']:.1f} ms ({drawn} frames wide enough to draw)",
              flush=True)
        print(f"# redraw: median {sorted(renders)[len(renders) // 2]:.1f} ms, "
              f"max {max(renders):.1f} ms; zoomed draw {zt:.1f} ms; mouse move "
              f"with tooltip (CDP round trip included) {hover:.1f} ms", flush=True)
        print("# search (match + share + redraw): " + ", ".join(
            f"{q!r} {ms:.1f} ms" for q, ms in searches), flush=True)
    finally:
        h.quit()


def test_no_console_errors():
    browser.pump()
    eq(browser.errors, [], "no console errors or exceptions in any page")


def teardown():
    if browser:
        browser.close()
    if burn:
        burn.stop()


def main():
    import pptest
    tests = [test_routing, test_browser, test_cpu_flame_graph, test_errors_shown,
             test_heap_flame_graph, test_wall_flame_graph,
             test_model_from_file, test_large_profile,
             test_index_live_status,
             test_no_console_errors]
    try:
        for t in tests:
            try:
                t()
            except Abort:
                break
            except Exception:  # noqa: BLE001 - report anything
                ok(False, f"{t.__name__} raised", traceback.format_exc())
                if t is test_browser:
                    break
    finally:
        teardown()
    print(f"1..{pptest._count}", flush=True)
    sys.exit(1 if pptest._failed else 0)


main()

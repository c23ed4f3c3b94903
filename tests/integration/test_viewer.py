"""The viewer (<prefix>/ui/) and the index page's live status, in a real
headless Chromium driven over the DevTools protocol (tests/integration/cdp.py)
against real processes: tests/cpu/burn for a CPU flame graph with a known hot
function, tests/heap/heapwork for the heap views, tests/threads/waiters for
wall-clock time, tests/capture/capturework for a CPU timeline whose threads
burn in different functions at different times. Clicks, hovers, keys and
the timeline's brushing are real input events; every console error or
uncaught exception in the pages fails the test. Screenshots go to tests/integration/artifacts/ in the build
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

import pptest
from pptest import (BUILD, NO_CPU_TRUTH_WHY, NO_HEAP_WHY, SANITIZER, Host, Proc,
                    curl, eq, ok, sanitized, skip, until)

from cdp import Browser, CDPError, find_chromium

BURN = os.path.join(BUILD, "tests", "cpu", "burn")
WORK = os.path.join(BUILD, "tests", "heap", "heapwork")
CAPTUREWORK = os.path.join(BUILD, "tests", "capture", "capturework")
ART = os.path.join(BUILD, "tests", "integration", "artifacts")
PREFIX = "/debug/pprof"
# The viewer's scripts (web/ui/): ES modules, viewer.js the entry.
MODULES = ("viewer.js", "state.js", "format.js", "agent.js", "model.js",
           "draw.js", "chart.js", "flame.js", "timeline.js", "tables.js",
           "profile.js", "form.js", "recent.js", "address.js")

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
        ok('type="module"' in r.text, "ui/ loads viewer.js as an ES module")
        for name, ctype in ([(m, "text/javascript; charset=utf-8")
                             for m in MODULES] +
                            [("viewer.css", "text/css; charset=utf-8"),
                             ("index.html", "text/html; charset=utf-8")]):
            r = curl(f"{base}/ui/{name}")
            eq((r.status, r.header("content-type")), (200, ctype),
               f"ui/{name}: 200 {ctype}")
            # (a module may be small: agent.js is a few hundred bytes)
            ok(len(r.body) > (100 if name in MODULES[1:] else 500),
               f"ui/{name} has a body")
            if name.endswith(".js"):
                # What each module imports is served too.
                for dep in re.findall(r'^import .* from "\./([\w.]+)";$',
                                      r.text, re.M):
                    ok(dep in MODULES, f"ui/{name} imports {dep}, served")
        # No web file is longer than 800 lines.
        for name in MODULES + ("viewer.css", "index.html"):
            n = curl(f"{base}/ui/{name}").text.count("\n")
            ok(n <= 800, f"ui/{name}: {n} lines, at most 800")
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


def test_no_favicon_request():
    """Neither page makes the browser ask for /favicon.ico (a 404 and a
    console error): each declares its icon inline. Each page is loaded
    first on an origin of its own (Chromium asks an origin for its icon
    once), and everything it loaded or failed to load is looked at."""
    w = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0"}, exe=WORK)
    m = re.match(r"port (\d+)", w.ready)
    if not ok(m, "heapwork started (a second origin)", w.ready):
        return
    try:
        for what, port, path in (("viewer", burn_port, "/ui/"),
                                 ("index", int(m.group(1)), "/")):
            browser.requests.clear()
            browser.failed_loads.clear()
            url = f"http://127.0.0.1:{port}{PREFIX}{path}"
            ok(browser.navigate(url), f"{what}: loads, first on its origin")
            icon = js("(document.querySelector('link[rel~=icon]') || {})"
                      ".href || ''")
            ok(icon.startswith("data:"), f"{what}: declares its icon inline",
               icon)
            # The icon is asked for after the load event, if at all: the
            # live status fetch, which comes later, is the mark.
            browser.wait("performance.getEntriesByType('resource').some("
                         "e => e.name.endsWith('/status'))", 10)
            time.sleep(0.5)
            browser.pump()
            eq([u for u in browser.requests if "favicon" in u], [],
               f"{what}: no request for /favicon.ico")
            eq(browser.failed_loads, [],
               f"{what}: no failed load (a 404 in the console)")
    finally:
        w.quit()


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
        ok(js("document.getElementById('timeline').hidden"),
           "heap: no timeline")
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
        check_wall_timeline()
        browser.click("input[name=kind][value=goroutine]")
        ok(js("document.getElementById('cpu-options').hidden"),
           "threads now: nothing to choose")
        browser.click("#fetch")
        if wait_loaded("goroutine"):
            names = js("pullprofViewer.names()")
            ok("state: sleeping" in names and "_IO_fgets" in names,
               "threads now: the dump's stacks under their state", names)
            ok(js("document.getElementById('timeline').hidden"),
               "threads now: no timeline")
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
        {"name": "[pullprof: lost samples, the ring was full]", "system_name": "",
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
        ok(js("document.getElementById('timeline').hidden") and
           js("pullprofViewer.timeline") is None,
           "a profile without a timeline shows none")
        eq(js("pullprofViewer.total"), 140000000,
           "the total leaves the negative sample out")
        ok("1 sample with a negative value left out" in
           js("document.getElementById('meta').textContent"),
           "and says so")
        names = set(js("pullprofViewer.names()"))
        want = {"all", "main", "outer", "inlined_helper", "rec", "0x7f00dead",
                "[pullprof: lost samples, the ring was full]", "<b>html</b>"}
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
        eq(row("[pullprof: lost samples, the ring was full]"), 1,
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


# ---- the timeline ------------------------------------------------------------------

def label_of(sample, key):
    for lab in sample.get("labels") or []:
        if lab["key"] == key:
            return lab.get("str", lab.get("num"))
    return None


def check_timeline_json(prof, what, seconds):
    """The timeline of a CPU or wall window's JSON, against its samples."""
    tl = prof.get("timeline")
    if not ok(isinstance(tl, dict), f"{what}: the JSON has a timeline", list(prof)):
        return None
    eq(sorted(tl), ["end_ns", "events", "over", "start_ns"],
       f"{what}: the timeline's members")
    span = tl["end_ns"] - tl["start_ns"]
    ok(seconds * 1e9 <= span < seconds * 1e9 + 0.5e9,
       f"{what}: the timeline spans the {seconds} s window", span)
    ev = tl["events"]
    ok(ev and all(isinstance(e, list) and len(e) == 5 and
                  all(isinstance(x, int) for x in e) for e in ev),
       f"{what}: events are arrays of five integers", ev[:3])
    n = len(prof["samples"])
    eq([e for e in ev if not 0 <= e[2] < n], [],
       f"{what}: every event's sample index is one of the samples")
    eq([e for e in ev if not 0 <= e[0] <= span], [],
       f"{what}: every event's time is within [0, end_ns - start_ns]")
    times = [e[0] for e in ev] or [0]
    ok(min(times) < span / 4 and max(times) > span * 3 / 4,
       f"{what}: times are from the window's start, over all of it",
       (min(times), max(times), span))
    eq(tl["over"], 0, f"{what}: no sample past the timeline's bound")
    # Every record is an event: a sample's values are the sums of its
    # events' count (a weight: 1, or more for a CPU timer's overruns) and
    # nanoseconds.
    sums = [[0, 0] for _ in range(n)]
    for _, _, si, count, value in ev:
        sums[si][0] += count
        sums[si][1] += value
    eq([i for i, s in enumerate(prof["samples"]) if s["values"][:2] != sums[i]],
       [], f"{what}: each sample's count and time are the sums of its events'")
    eq(sum(e[3] for e in ev), prof["totals"][0],
       f"{what}: the events' counts add up to the samples taken")
    return tl


def test_timeline_json():
    """format=json's timeline on burn's agent (no browser): CPU and wall
    windows have one, the heap and the thread dump none."""
    base = f"http://127.0.0.1:{burn_port}{PREFIX}"
    r = curl(base + "/profile?seconds=1&hz=200&format=json")
    if ok(r.status == 200, "profile?format=json: 200", r):
        prof = r.json()
        tl = check_timeline_json(prof, "profile", 1)
        if tl:
            ev = tl["events"]
            ok(len(ev) <= prof["totals"][0],
               "profile: one event per record, a record weighing 1 or more",
               (len(ev), prof["totals"][0]))
            eq([e for e in ev if e[1] and
                label_of(prof["samples"][e[2]], "thread_id") != e[1]], [],
               "profile: each event's tid is its sample's thread_id")
            names = {label_of(prof["samples"][e[2]], "thread_name")
                     for e in ev if e[1]}
            ok({"burn-0"} <= names, "profile: the burner is on the timeline",
               names)
            lost = {prof["functions"][prof["locations"][l]["lines"][0]["function"]]["name"]
                    for e in ev if not e[1]
                    for l in prof["samples"][e[2]]["locations"]}
            # Charges that belong to no sampled moment or thread: samples
            # the ring dropped, and the CPU of threads that block the
            # sampling signal (under TSan its own background thread).
            ok(lost <= {"[pullprof: lost samples, the ring was full]",
                        "[pullprof: not sampled, the thread blocks the "
                        "signal]"},
               "profile: the process's events (tid 0) are lost samples or "
               "threads that could not be sampled", lost)
    r = curl(base + "/wall?seconds=1&hz=100&format=json")
    if ok(r.status == 200, "wall?format=json: 200", r):
        prof = r.json()
        tl = check_timeline_json(prof, "wall", 1)
        if tl:
            ev = tl["events"]
            eq(len(ev), prof["totals"][0], "wall: one event per look at a thread")
            ok(all(e[1] and label_of(prof["samples"][e[2]], "thread_name") and
                   label_of(prof["samples"][e[2]], "state") for e in ev),
               "wall: every event is a thread's, with its name and state")
    for kind in ("heap", "goroutine"):
        r = curl(f"{base}/{kind}?format=json")
        if ok(r.status == 200, f"{kind}?format=json: 200", r):
            ok("timeline" not in r.json(), f"{kind}: no timeline in the JSON")


def drag(x0, x1, y, steps=12):
    """A real mouse drag, the left button held, from (x0, y) to (x1, y)."""
    browser.mouse("mouseMoved", x0, y)
    browser.mouse("mousePressed", x0, y, "left", 1)
    for k in range(1, steps + 1):
        browser.send("Input.dispatchMouseEvent", {
            "type": "mouseMoved", "x": x0 + (x1 - x0) * k / steps, "y": y,
            "button": "left", "buttons": 1})
    browser.mouse("mouseReleased", x1, y, "left", 1)


def lane_y(i):
    """The viewport y of timeline lane i, scrolled to; after the scroll's
    events (a scroll hides the tooltip)."""
    y = js(f"pullprofViewer.laneY({i})")
    browser.evaluate("new Promise(r => requestAnimationFrame(() =>"
                     " requestAnimationFrame(() => r(1))))")
    return y


def double_click(x, y):
    browser.mouse("mouseMoved", x, y)
    for clicks in (1, 2):
        browser.mouse("mousePressed", x, y, "left", clicks)
        browser.mouse("mouseReleased", x, y, "left", clicks)


def range_weights(prof, a, b, vi):
    """Each sample's share of value vi in the events timed within [a, b]."""
    w = [0] * len(prof["samples"])
    for t, _, si, count, value in prof["timeline"]["events"]:
        if a <= t <= b:
            w[si] += count if vi == 0 else value
    return w


def sample_names(prof, weights):
    """The frames' names of the samples with a weight, as the viewer names
    them (an unsymbolized location by its address; a state frame)."""
    names = set()
    for s, w in zip(prof["samples"], weights):
        if w <= 0:
            continue
        for li in s["locations"]:
            loc = prof["locations"][li]
            if not loc["lines"]:
                names.add(loc["address"] or "(unknown)")
            for line in loc["lines"]:
                f = prof["functions"][line["function"]]
                names.add(f["name"] or f["system_name"] or "(unnamed)")
        st = label_of(s, "state")
        if st:
            names.add("state: " + st)
    return names


RANGE_NOTE = re.compile(r"^(\d+\.\d\d) s – (\d+\.\d\d) s of (\d+\.\d\d) s, "
                        r"([\d,]+) samples?$")


def threads_cpu(pid, name):
    """CPU seconds the threads named `name` of pid used so far (the main
    thread when name is None)."""
    return pptest.threads_cpu(
        pid, lambda tid, n: tid == pid if name is None else n == name)


def capturework(env, what):
    """capturework (a host for the viewer's scenes) with its agent
    started, checked as `what`: (host, port), the port None when it did
    not start (the host is quit by the caller's finally either way)."""
    w = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0", **env}, exe=CAPTUREWORK)
    try:
        line = w.cmd("start")
    except Exception:
        w.quit()
        raise
    m = re.match(r"ok (\d+)$", line)
    ok(m, what, line)
    return w, int(m.group(1)) if m else None


def test_timeline_cpu():
    """A CPU window's timeline in the page. capturework burns in
    cw_burn_heavy and cw_burn_light on one thread (cw-burn-0) for the first
    1.6 s of a 4 s window, then in cw_churn (malloc and free) on its main
    thread until the window ends. Brushing the first part with the mouse
    leaves only what ran there in the flame graph; the whole window comes
    back with the button, a double-click or Escape."""
    w, port = capturework({}, "capturework starts the agent")
    try:
        if not port:
            return
        base = f"http://127.0.0.1:{port}{PREFIX}"
        viewer(port)
        browser.click("input[name=kind][value=profile]")
        browser.type_into("#seconds", "4")
        browser.type_into("#hz", "200")
        browser.click("#fetch")
        deadline = time.time() + 10
        while time.time() < deadline and \
                curl(base + "/status").json()["cpu"]["windows_open"] < 1:
            time.sleep(0.02)
        opened = time.time()
        eq(w.cmd("burn 1"), "burning 1", "phase 1: one burner thread")
        time.sleep(max(0, 1.6 - (time.time() - opened)))
        eq(w.cmd("calm"), "calm", "phase 1 ends: the burner has stopped")
        churns = 0
        while time.time() - opened < 4.3:
            w.cmd("churn 2000000000", timeout=60)
            churns += 1
        ok(churns > 0, "phase 2: the main thread churned until the window ended",
           churns)
        if not wait_loaded("CPU timeline"):
            shot("timeline-failed")
            return
        ok(js("!document.getElementById('timeline').hidden"),
           "a CPU profile shows its timeline above the flame graph")
        ok(js("document.getElementById('timeline').getBoundingClientRect().bottom"
              " <= document.getElementById('graph').getBoundingClientRect().top"),
           "the timeline is above the flame graph")
        ok(js("document.getElementById('color-by').hidden"),
           "no colour-by-state choice without thread states")
        tl = js("pullprofViewer.timeline")
        hrefs = js("Array.from(document.querySelectorAll('#downloads a'))"
                   ".map(a => a.getAttribute('href'))") or []
        href = next((h for h in hrefs if "format=json" in h), None)
        if not ok(href, "a JSON download link", hrefs):
            return
        prof = curl(f"{base}/ui/{href}").json()
        ptl = check_timeline_json(prof, "the page's CPU profile", 4)
        if not ptl:
            return
        events = ptl["events"]
        eq(tl["events"], len(events), "the page drew every event of the JSON")
        # One lane per thread sampled, named by its last sample's
        # thread_name (the agent reads a new thread's name at its first
        # sample, then once a second at most: the burner's first samples
        # may carry the name of the thread that started it).
        last = {}
        for t, tid, si, _, _ in sorted(events):
            if tid:
                last[tid] = label_of(prof["samples"][si], "thread_name")
        want = sorted(last.items())
        got = sorted((lane["tid"], lane["name"]) for lane in tl["lanes"]
                     if lane["tid"])
        eq(got, want, "one lane per sampled thread, with its name and tid")
        eq(len(tl["lanes"]), len(want) + any(not e[1] for e in events),
           "and a process lane only for lost samples")
        eq(js("document.getElementById('lanes').dataset.lanes"),
           str(len(tl["lanes"])), "the canvas drew every lane")
        lanes = {lane["name"]: lane for lane in tl["lanes"]}
        ok("cw-burn-0" in lanes and "capturework" in lanes,
           "lanes for the burner (cw-burn-0) and the main thread (capturework)",
           list(lanes))
        for lane in tl["lanes"]:
            eq(lane["events"], sum(1 for e in events if e[1] == lane["tid"]),
               f"lane {lane['label']}: its events")
        ok(re.match(r"^Whole window: 4\.\d\d s, [\d,]+ samples on \d+ threads?$",
                    tl["note"]), "the note describes the whole window", tl["note"])
        whole = set(js("pullprofViewer.names()"))
        total = js("pullprofViewer.total")
        eq(total, prof["totals"][1], "the whole window's total is the profile's")
        truth = SANITIZER != "tsan"
        if truth:
            ok({"cw_burn_heavy", "cw_burn_light", "cw_churn"} <= whole,
               "the whole window's flame graph has both phases' functions",
               whole)
        else:
            skip("both phases in the flame graph", NO_CPU_TRUTH_WHY)
        if "cw-burn-0" not in lanes:
            return
        shot("timeline")

        # Hover: the lane's thread and the sample under the pointer (at one
        # of the burner's samples: a busy machine leaves gaps between them).
        span = tl["span"]
        idx = [lane["name"] for lane in tl["lanes"]].index("cw-burn-0")
        tid = lanes["cw-burn-0"]["tid"]
        at = min((e[0] for e in events if e[1] == tid),
                 key=lambda t: abs(t - span * 0.2))
        y = lane_y(idx)
        x = js(f"pullprofViewer.timeX({at})")
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait("!document.getElementById('tl-tip').hidden && "
                           "document.getElementById('tl-tip').innerText", 5) or ""
        ok(tip.startswith(f"cw-burn-0 ({tid})"),
           "hover: the tooltip names the lane's thread", tip)
        if truth:
            ok(re.search(r"cw_burn_(heavy|light)", tip),
               "hover: and the sample's leaf function", tip)

        # Brush the first part (2% to 30% of the window) with the mouse.
        a, b = span * 0.02, span * 0.30
        x0, x1 = js(f"pullprofViewer.timeX({a})"), js(f"pullprofViewer.timeX({b})")
        pixel = span / (js(f"pullprofViewer.timeX({span})") -
                        js("pullprofViewer.timeX(0)"))  # ns per pixel
        drag(x0, x1, y)
        got = browser.wait("pullprofViewer.timeline.range", 5)
        ok(got and abs(got[0] - a) <= 2 * pixel and abs(got[1] - b) <= 2 * pixel,
           "a drag chooses a time range", (got, a, b))
        if not got:
            return
        ra, rb = got
        weights = range_weights(prof, ra, rb, 1)
        in_range = [e for e in events if ra <= e[0] <= rb]
        eq(js("pullprofViewer.total"), sum(weights),
           "the range's total is the sum of its events' CPU time")
        note = js("document.getElementById('range-note').textContent")
        m = RANGE_NOTE.match(note)
        ok(m and (m.group(1), m.group(2), m.group(3)) ==
           (f"{ra / 1e9:.2f}", f"{rb / 1e9:.2f}", f"{span / 1e9:.2f}") and
           int(m.group(4).replace(",", "")) == sum(e[3] for e in in_range),
           "the note says the range and its samples", note)
        ok("samples in the time range" in
           js("document.getElementById('meta').textContent"),
           "the summary counts the range's samples")
        ok(not js("document.getElementById('whole-window').disabled"),
           "Whole window is offered")
        ranged = set(js("pullprofViewer.names()"))
        ok(ranged <= sample_names(prof, weights) | {"all"},
           "the flame graph draws only the functions of the range's samples",
           ranged - sample_names(prof, weights))
        if truth:
            ok("cw_burn_heavy" in ranged and "cw_churn" not in ranged,
               "the first part: the burner's functions, not the main "
               "thread's later churn", ranged)
            rows = js("Array.from(document.querySelectorAll('#top tbody tr'))"
                      ".map(r => r.dataset.name)")
            ok(rows and rows[0] == "cw_burn_heavy" and "cw_churn" not in rows,
               "the table too", rows[:5])
        shot("timeline-range")

        # Whole window: the button.
        browser.click("#whole-window")
        ok(browser.wait("pullprofViewer.timeline.range === null", 5),
           "Whole window clears the range")
        eq(js("pullprofViewer.total"), total, "the whole total is back")
        eq(set(js("pullprofViewer.names()")), whole,
           "the whole flame graph is back")
        ok(js("document.getElementById('whole-window').disabled"),
           "Whole window is disabled without a range")

        # The last part (60% to 95%), dragged on the time axis.
        ax = browser.box("#axis")
        a, b = span * 0.60, span * 0.95
        drag(js(f"pullprofViewer.timeX({a})"), js(f"pullprofViewer.timeX({b})"),
             ax["y"])
        got = browser.wait("pullprofViewer.timeline.range", 5)
        ok(got, "a drag on the time axis chooses a range too", got)
        if got:
            weights = range_weights(prof, got[0], got[1], 1)
            eq(js("pullprofViewer.total"), sum(weights),
               "the last part's total is its events'")
            late = set(js("pullprofViewer.names()"))
            if truth:
                ok("cw_churn" in late and not
                   late & {"cw_burn_heavy", "cw_burn_light"},
                   "the last part: the main thread's churn, not the burner",
                   late)
        shot("timeline-range-late")
        # A double-click on the lanes clears it.
        double_click(js(f"pullprofViewer.timeX({span * 0.5})"),
                     lane_y(idx))
        ok(browser.wait("pullprofViewer.timeline.range === null", 5),
           "a double-click on the timeline clears the range")
        eq(set(js("pullprofViewer.names()")), whole, "the whole flame graph again")
        # Escape on the timeline (focused by the drag) clears it too.
        y = lane_y(idx)
        drag(js(f"pullprofViewer.timeX({span * 0.1})"),
             js(f"pullprofViewer.timeX({span * 0.2})"), y)
        ok(browser.wait("pullprofViewer.timeline.range", 5), "another range")
        browser.key("Escape", "Escape", 27)
        ok(browser.wait("pullprofViewer.timeline.range === null", 5),
           "Escape on the timeline clears the range")
        # A click alone chooses nothing.
        browser.click_at(js(f"pullprofViewer.timeX({span * 0.4})"), y)
        eq(js("pullprofViewer.timeline.range"), None, "a click is not a range")
    finally:
        w.quit()


# The colours of the wall profile's states in the legend, and how many
# pixels of the lanes have each.
STATE_SWATCHES = """(() => {
  const out = {};
  for (const item of document.querySelectorAll('#state-legend [data-state]')) {
    const m = getComputedStyle(item.querySelector('.swatch')).backgroundColor
      .match(/\\d+/g);
    out[item.dataset.state] = m.slice(0, 3).map(Number);
  }
  return out;
})()"""


def state_pixels(colors):
    return js(f"""(() => {{
  const want = {json.dumps(colors)};
  const c = document.getElementById('lanes');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const out = {{}};
  for (const k in want) out[k] = 0;
  for (let i = 0; i < d.length; i += 4)
    for (const k in want) {{
      const w = want[k];
      if (Math.abs(d[i] - w[0]) <= 2 && Math.abs(d[i + 1] - w[1]) <= 2 &&
          Math.abs(d[i + 2] - w[2]) <= 2) out[k]++;
    }}
  return out;
}})()""")


def check_wall_timeline():
    """The wall profile's timeline: coloured by state first, by function on
    the toggle (a real click), and back."""
    tl = js("pullprofViewer.timeline")
    ok(tl and not js("document.getElementById('timeline').hidden"),
       "wall: the timeline is shown")
    if not tl:
        return
    ok(len([lane for lane in tl["lanes"] if lane["tid"]]) >= 2,
       "wall: a lane per thread", tl["lanes"])
    ok(js("!document.getElementById('color-by').hidden"),
       "wall: colour by function or state is offered")
    eq(tl["colorBy"], "state", "wall: coloured by thread state first")
    ok({"running", "sleeping"} <= set(tl["states"]),
       "wall: the states seen", tl["states"])
    colors = js(STATE_SWATCHES)
    eq(sorted(colors), sorted(tl["states"]), "wall: a legend of the states")
    before = state_pixels(colors)
    ok(before.get("running", 0) > 20 and before.get("sleeping", 0) > 20,
       "wall: the lanes are drawn in the states' colours", before)
    shot("wall-timeline-state")
    browser.click("input[name=color-by][value=function]")
    ok(browser.wait("pullprofViewer.timeline.colorBy === 'function'", 5),
       "wall: a click colours by function")
    after = state_pixels(colors)
    eq(after, {k: 0 for k in colors},
       "wall: by function, no lane pixel has a state's colour")
    ok(js("document.getElementById('state-legend').hidden"),
       "wall: no state legend when coloured by function")
    shot("wall-timeline-function")
    browser.click("input[name=color-by][value=state]")
    ok(browser.wait("pullprofViewer.timeline.colorBy === 'state'", 5),
       "wall: and back to the states")
    again = state_pixels(colors)
    ok(again.get("running", 0) > 20 and again.get("sleeping", 0) > 20,
       "wall: the states' colours are back", again)


def large_timeline(path, threads=100, per_thread=1000, seed=11):
    """A CPU profile with a timeline of threads * per_thread events over
    10 s (each thread in one of 40 functions at a time, running or
    sleeping), and 3 events of lost samples on the process's lane."""
    rnd = random.Random(seed)
    nfn = 40
    functions = [{"name": f"work::step_{i}", "system_name": f"s{i}",
                  "file": "/src/work.cc", "start_line": 10 * i}
                 for i in range(nfn)]
    functions.append({"name": "worker_main", "system_name": "worker_main",
                      "file": "/src/work.cc", "start_line": 1})
    functions.append({"name": "[pullprof: lost samples, the ring was full]",
                      "system_name": "", "file": "", "start_line": 0})
    locations = [{"address": hex(0x401000 + 16 * i), "mapping": 0,
                  "lines": [{"function": i, "line": 10 * i + 2}]}
                 for i in range(nfn + 1)]
    locations.append({"address": "", "mapping": -1,
                      "lines": [{"function": nfn + 1, "line": 0}]})
    span = 10 * 10 ** 9
    period = span // per_thread
    samples, index, events = [], {}, []

    def sample_of(key, locs, labels):
        if key not in index:
            index[key] = len(samples)
            samples.append({"locations": locs, "values": [0, 0],
                            "labels": labels})
        return index[key]

    for k in range(threads):
        tid = 1000 + k
        fn = rnd.randrange(nfn)
        for j in range(per_thread):
            if rnd.random() < 0.02:
                fn = rnd.randrange(nfn)
            st = "running" if (j // 50 + k) % 3 else "sleeping"
            si = sample_of((tid, fn, st), [fn, nfn],
                           [{"key": "thread_name", "str": f"worker-{k:02d}"},
                            {"key": "state", "str": st}])
            t = (j + 1) * period - rnd.randrange(period // 2)
            events.append([t, tid, si, 1, period])
    for t in (span // 3, span // 2, span - 1):
        si = sample_of("lost", [nfn + 1], [])
        events.append([t, 0, si, 2, 2 * period])
    rnd.shuffle(events)
    for _, _, si, c, v in events:
        samples[si]["values"][0] += c
        samples[si]["values"][1] += v
    prof = {
        "sample_types": [{"type": "samples", "unit": "count"},
                         {"type": "cpu", "unit": "nanoseconds"}],
        "default_sample_type": 1,
        "period_type": {"type": "cpu", "unit": "nanoseconds"},
        "period": period, "time_nanos": 1763712000000000000,
        "duration_nanos": span, "comments": ["synthetic: test_viewer.py"],
        "functions": functions,
        "mappings": [{"start": "0x400000", "limit": "0x500000",
                      "offset": "0x0", "path": "/usr/bin/work",
                      "build_id": "ab12"}],
        "locations": locations, "samples": samples,
        "totals": [sum(s["values"][0] for s in samples),
                   sum(s["values"][1] for s in samples)],
        "timeline": {"start_ns": 5 * 10 ** 12, "end_ns": 5 * 10 ** 12 + span,
                     "over": 0, "events": events},
    }
    with open(path, "w") as f:
        json.dump(prof, f)
    return prof


def test_timeline_large():
    """A hundred threads and a hundred thousand events, from a file: the
    lanes scroll, a lane far down is reached and hovered, and a range
    brushed on the time axis sums its events. Times are printed, not
    asserted."""
    h = Host()
    port = h.start("127.0.0.1:0")
    try:
        viewer(port)
        with tempfile.TemporaryDirectory() as d:
            # Small ones first: an event naming no sample is left out and
            # said so; a window with no event draws an empty timeline.
            odd = dict(SMALL, timeline={
                "start_ns": 10 ** 9, "end_ns": 6 * 10 ** 9, "over": 4,
                "events": [[10 ** 9, 7, 0, 6, 60000000],
                           [2 * 10 ** 9, 7, 99, 1, 10000000]]})
            path = os.path.join(d, "odd.json")
            with open(path, "w") as f:
                json.dump(odd, f)
            browser.set_files("#file", [path])
            if wait_loaded("a timeline with an event naming no sample"):
                tl = js("pullprofViewer.timeline")
                eq((tl["events"], tl["bad"], [lane["label"] for lane in tl["lanes"]]),
                   (1, 1, ["thread (7)"]),
                   "an event naming no sample is left out")
                ok("1 event naming no sample" in tl["note"] and
                   "4 more samples, past the timeline's bound" in tl["note"],
                   "the note says so, and counts the samples past the bound",
                   tl["note"])
            odd["timeline"]["events"] = []
            path = os.path.join(d, "empty.json")
            with open(path, "w") as f:
                json.dump(odd, f)
            browser.set_files("#file", [path])
            if wait_loaded("a timeline with no events"):
                tl = js("pullprofViewer.timeline")
                ok(tl and tl["events"] == 0 and tl["lanes"] == [] and
                   tl["note"].startswith("Whole window: 5.00 s, 0 samples on 0 threads"),
                   "an empty timeline is drawn, and says so", tl)
            path = os.path.join(d, "timeline.json")
            prof = large_timeline(path)
            size = os.path.getsize(path)
            t0 = time.time()
            browser.set_files("#file", [path])
            loaded = wait_loaded("100k events", timeout=120)
            wall = time.time() - t0
        if not loaded:
            return
        tl = js("pullprofViewer.timeline")
        events = prof["timeline"]["events"]
        eq(tl["events"], len(events), "100k events: all of them kept")
        eq(len(tl["lanes"]), 101, "100 threads' lanes and the process's")
        eq(tl["lanes"][-1]["label"], "process (lost samples)",
           "lost samples on the process's lane, last")
        eq(sorted(lane["name"] for lane in tl["lanes"][:-1]),
           [f"worker-{k:02d}" for k in range(100)], "each thread's name")
        sc = js("(() => { const s = document.getElementById('lanes-scroll');"
                " return {client: s.clientHeight, scroll: s.scrollHeight}; })()")
        ok(sc["client"] < 320 and sc["scroll"] > 4 * sc["client"],
           "the lanes scroll in a box of capped height", sc)
        # The last thread's lane, scrolled to and hovered with the mouse.
        k = len(tl["lanes"]) - 2
        y = lane_y(k)
        x = js(f"pullprofViewer.timeX({tl['span'] * 0.5})")
        ok(js("document.getElementById('lanes-scroll').scrollTop") > 0,
           "a lane far down is scrolled to")
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait("!document.getElementById('tl-tip').hidden && "
                           "document.getElementById('tl-tip').innerText", 5) or ""
        ok(tip.startswith(tl["lanes"][k]["label"]) and "work::step_" in tip,
           "hover far down: that thread's sample", tip)
        draw = sorted(js("(() => { const t = []; for (let i = 0; i < 5; i++)"
                         " t.push(pullprofViewer.drawTimeline()); return t; })()"))
        timings = js("pullprofViewer.timings")
        ax = browser.box("#axis")
        a, b = tl["span"] * 0.1, tl["span"] * 0.2
        t1 = time.time()
        drag(js(f"pullprofViewer.timeX({a})"), js(f"pullprofViewer.timeX({b})"),
             ax["y"])
        got = browser.wait("pullprofViewer.timeline.range", 10)
        brush = time.time() - t1
        ok(got, "100k events: a drag on the axis chooses a range")
        if got:
            inside = [e for e in events if got[0] <= e[0] <= got[1]]
            eq(js("pullprofViewer.timeline.rangeEvents"), len(inside),
               "the range holds the events timed in it")
            eq(js("pullprofViewer.total"), sum(e[4] for e in inside),
               "the flame graph sums their time")
            range_build = js("pullprofViewer.timings.buildMs")
        shot("timeline-large")
        print(f"# timeline: {len(events)} events, 101 lanes, JSON "
              f"{size / 1e6:.1f} MB; file chosen -> drawn {wall * 1000:.0f} ms; "
              f"timeline prepared in {timings['timelineMs']:.1f} ms; lanes "
              f"drawn in {draw[2]:.1f} ms (median of 5, min {draw[0]:.1f}); "
              f"a brush (12 moves, the range's tree and redraw, CDP round "
              f"trips included) {brush * 1000:.0f} ms, of which the tree "
              f"{range_build if got else float('nan'):.1f} ms", flush=True)
    finally:
        h.quit()


# ---- the Recent view (the record) ----------------------------------------------

# Each pixel column between viewport x0 and x1: whether row i of the Recent
# chart (0: all threads) has CPU drawn at its bottom (in the chart's warm
# colours, which neither the row's grey background nor the ranges' blue
# and orange shading make), read from the canvas itself.
ROW_INK = """((i, x0, x1) => {
  const cv = document.getElementById('rec-chart');
  const r = cv.getBoundingClientRect();
  const row = pullprofViewer.recent.rows[i];
  const ctx = cv.getContext('2d');
  const sx = cv.width / r.width;
  const y = Math.round((row.y + row.h - 1.5) * sx);
  const a = Math.round((x0 - r.left) * sx), b = Math.round((x1 - r.left) * sx);
  if (b <= a) return 0;
  const d = ctx.getImageData(a, y, b - a, 1).data;
  const ink = [];
  for (let k = 0; k < d.length; k += 4) ink.push(d[k] - d[k + 2] > 60);
  return ink;
})"""

# The colour at the middle of the widest frame called name in the flame graph.
FRAME_RGB = """((name) => {
  const b = pullprofViewer.frameBox(name);
  if (!b) return null;
  const cv = document.getElementById('graph');
  const r = cv.getBoundingClientRect();
  const sx = cv.width / r.width;
  const d = cv.getContext('2d').getImageData(Math.round((b.x - r.left + 2) * sx),
      Math.round((b.y - r.top + 2) * sx), 1, 1).data;
  return [d[0], d[1], d[2]];
})"""


def cum_per_second(prof, name, seconds, vi=1):
    """A function's cumulative value in a JSON profile, per second."""
    total = 0
    for s in prof["samples"]:
        names = set()
        for li in s["locations"]:
            for line in prof["locations"][li]["lines"]:
                f = prof["functions"][line["function"]]
                names.add(f["name"] or f["system_name"])
        if name in names:
            total += int(s["values"][vi])
    return total / seconds


def wait_recent(what, want="ready", timeout=20):
    got = browser.wait("['ready', 'off', 'error'].includes(document.body.dataset.recent)"
                       " && document.body.dataset.recent", timeout)
    ok(got == want, f"{what}: the Recent view is {want}",
       f"{got!r}: {js('pullprofViewer.recent')!r}")
    return got == want


def requested(part):
    browser.pump()
    return [u for u in browser.requests if part in u]


def test_recent():
    """The Recent view on a host recording at 97 Hz that burns in
    cw_burn_heavy and cw_burn_light on thread cw-burn-0 for 2 s, then in
    cw_churn on its main thread for 2 s: the chart draws each thread's CPU
    where it ran; a range dragged over the first phase is that phase's
    flame graph; a second range over the second phase turns it into their
    difference, churn hotter, the burner cooler; the address keeps all of
    it; then it keeps 41 MB (cw_keep_small, cw_keep_large), which a range
    read as the heap's change shows (the record of 2 minutes snapshots the
    heap every second); a saved recording is a source of its own."""
    w, port = capturework({"PULLPROF_RECORD": "2m",
                           "PULLPROF_RECORD_HZ": "97"},
                          "capturework starts the agent with the record on")
    try:
        if not port:
            return
        base = f"http://127.0.0.1:{port}{PREFIX}"
        time.sleep(0.3)
        p1 = time.time()
        eq(w.cmd("burn 1"), "burning 1", "phase 1: one burner thread")
        time.sleep(2.0)
        # What each thread used in its phase, by the scheduler's count: on
        # a loaded machine 2 s of a burner can be a tenth of a CPU second.
        burner_used = threads_cpu(w.pid, "cw-burn-0")
        main0 = threads_cpu(w.pid, None)
        eq(w.cmd("calm"), "calm", "phase 1 ends")
        p2 = time.time()
        while time.time() - p2 < 2.0:
            w.cmd("churn 300000000", timeout=60)
        p3 = time.time()
        main_used = threads_cpu(w.pid, None) - main0
        keep = w.cmd("keep")
        ok(keep.startswith("truth cw_keep_small"), "the host keeps 41 MB", keep)
        p4 = time.time()
        time.sleep(1.6)  # a heap snapshot after it
        ok(curl(base + "/record").json()["on"], "the agent records")

        browser.requests.clear()
        ok(browser.navigate(f"http://127.0.0.1:{port}{PREFIX}/ui/#view=recent&span=60"),
           "the viewer opens on the Recent view")
        if not wait_recent("live record"):
            shot("recent-failed")
            return
        eq(js("pullprofViewer.view"), "recent", "the view is Recent")
        eq(js("document.querySelector('#views [aria-pressed=true]')"
              ".dataset.view"), "recent", "its button is the pressed one")
        ok(js("document.getElementById('fetch-form').hidden"),
           "the fetch form is hidden in the Recent view")
        rc = js("pullprofViewer.recent")
        urls = requested("/record/timeline?")
        ok(urls and "last=60" in urls[-1], "the page read the last 60 s of the "
           "timeline", urls)
        if not urls:
            return
        truth = curl(urls[-1]).json()
        eq(sorted((t["tid"], t["name"]) for t in rc["threads"]),
           sorted((t["tid"], t["name"]) for t in truth["threads"]),
           "one row per thread of the agent's timeline, named and with its tid")
        eq(rc["rowsDrawn"], len(truth["threads"]) + 1 +
           ("other_threads" in truth), "the canvas drew them under the total")
        names = [t["name"] for t in rc["threads"]]
        if not ok("cw-burn-0" in names and "capturework" in names,
                  "rows for the burner and the main thread", names):
            return
        # From the record's first sample (the burner's: the main thread
        # sleeps before phase 1) to the time the page asked.
        oldest = curl(base + "/record").json()["coverage"]["oldest"]
        ok(abs(rc["start"] - oldest) < 1e-3 and rc["start"] < p2 and
           rc["end"] >= p3, "the chart spans the record, both phases",
           (rc["start"], rc["end"], oldest, p1, p2, p3))
        burner = 1 + names.index("cw-burn-0")
        main_row = 1 + names.index("capturework")
        x = lambda t: js(f"pullprofViewer.recentX({t})")  # noqa: E731
        truth_cpu = SANITIZER != "tsan"
        # The page's steps are the agent's (the last one may have grown).
        page = {t["tid"]: t["cpu"] for t in rc["threads"]}
        for t in truth["threads"]:
            n = min(len(t["cpu"]), len(page[t["tid"]])) - 1
            eq(page[t["tid"]][:n], t["cpu"][:n],
               f"{t['name']}: the page's CPU per step is the agent's")
        # Each row drawn where its thread had CPU, and nowhere else: every
        # pixel column against its step (the columns at a step's edge,
        # drawn in part, left out).
        step, start, end = rc["step"], rc["start"], rc["end"]
        x0, x1 = x(start), x(end)
        for row in (burner, main_row):
            cpu = rc["threads"][row - 1]["cpu"]
            js(f"pullprofViewer.recentY({row})")
            cols = js(f"{ROW_INK}({row}, {x0}, {x1})")
            agree = total = 0
            for k, inked in enumerate(cols):
                pos = (k + 0.5) / (x1 - x0) * (end - start) / step
                if abs(pos - round(pos)) * step / (end - start) * (x1 - x0) < 1.5:
                    continue
                i = int(pos)
                if i >= len(cpu):
                    continue
                total += 1
                agree += inked == (cpu[i] > 0)
            ok(total > 100 and agree / total >= 0.97,
               f"row {rc['rows'][row]['label']}: drawn in the steps with CPU",
               (agree, total))
        if truth_cpu:
            def phase_cpu(cpu, a, b):
                return sum(v for i, v in enumerate(cpu)
                           if a <= start + i * step and
                           start + (i + 1) * step <= b)
            bc, mc = rc["threads"][burner - 1]["cpu"], rc["threads"][main_row - 1]["cpu"]
            b1, b2 = phase_cpu(bc, p1 + 0.2, p2), phase_cpu(bc, p2 + 0.2, p3)
            m1, m2 = phase_cpu(mc, p1 + 0.2, p2), phase_cpu(mc, p2 + 0.2, p3)
            # The steps counted leave out the phase's first 0.2 s and
            # its edges: most of what the thread used, not all.
            ok(b1 > 0.4 * burner_used and b2 == 0,
               "the burner's CPU: in phase 1 only (it used "
               f"{burner_used:.2f} s there)", (b1, b2))
            ok(m2 > 0.4 * main_used and m1 < 0.1 * m2,
               f"the main thread's: in phase 2 (it used {main_used:.2f} s "
               "there)", (m1, m2))
        else:
            skip("each phase's thread has its CPU in its phase",
                 NO_CPU_TRUTH_WHY)
        shot("recent")

        # Hover: the row's thread and its CPU there.
        y = js(f"pullprofViewer.recentY({burner})")
        browser.mouse("mouseMoved", x((p1 + p2) / 2), y)
        tip = browser.wait("!document.getElementById('rec-tip').hidden && "
                           "document.getElementById('rec-tip').innerText", 5) or ""
        ok(tip.startswith("cw-burn-0 (") and "of a CPU" in tip,
           "hover: the thread and its CPU at that time", tip)

        # Range A: phase 1, dragged on the chart.
        # (Inside the chart: it starts at the record's first sample, the
        # burner's, which a slow host takes a while to make.)
        a0, a1 = max(p1 + 0.25, rc["start"] + 0.1), p2 - 0.25
        drag(x(a0), x(a1), y)
        if not ok(browser.wait("pullprofViewer.recent.a", 5),
                  "the drag chose a range", (a0, a1, js("pullprofViewer.recent"))):
            shot("recent-a-failed")
            return
        if not wait_loaded("range A"):
            shot("recent-a-failed")
            return
        rc = js("pullprofViewer.recent")
        pixel = (rc["end"] - rc["start"]) / (x(rc["end"]) - x(rc["start"]))
        ok(rc["a"] and abs(rc["a"][0] - a0) <= 2 * pixel and
           abs(rc["a"][1] - a1) <= 2 * pixel, "a drag sets range A",
           (rc["a"], a0, a1))
        eq(rc["b"], None, "no range B yet")
        eq(rc["brush"], "b", "the next drag sets B")
        urls = requested("/profile?start=")
        ok(urls and "format=json" in urls[-1], "the page asked the record for "
           "range A's profile", urls)
        pa = curl(urls[-1]).json()
        eq(js("pullprofViewer.total"), pa["totals"][1],
           "the flame graph's total is range A's CPU")
        got = set(js("pullprofViewer.names()"))
        if truth_cpu:
            ok("cw_burn_heavy" in got and "cw_churn" not in got,
               "range A's flame graph: the burner, not the later churn", got)
            rows = js("Array.from(document.querySelectorAll('#top tbody tr'))"
                      ".map(r => r.dataset.name)")
            eq(rows[:1], ["cw_burn_heavy"], "the table's top function too")
        else:
            skip("range A's flame graph: the burner's functions",
                 NO_CPU_TRUTH_WHY)
        ok("A " in js("document.getElementById('rec-note').textContent"),
           "the note says range A")
        shot("recent-a")

        # Range B: phase 2. The flame graph becomes B against A.
        b0, b1 = p2 + 0.25, min(p3 - 0.25, rc["end"] - 0.1)
        drag(x(b0), x(b1), y)
        ok(browser.wait("pullprofViewer.diff && document.body.dataset.state"
                        " === 'ready'", 20), "a second range: the difference")
        rc = js("pullprofViewer.recent")
        ok(rc["b"] and abs(rc["b"][0] - b0) <= 2 * pixel, "the drag set B",
           (rc["b"], b0))
        urls = requested("/profile?start=")
        pb = curl(urls[-1]).json()
        diff = {d["name"]: d for d in js("pullprofViewer.diff") or []}
        # Per second of what each answer covers.
        sa, sb = pa["duration_nanos"] / 1e9, pb["duration_nanos"] / 1e9
        ok(abs(sa - (rc["a"][1] - rc["a"][0])) < 0.002 and
           abs(sb - (rc["b"][1] - rc["b"][0])) < 0.002,
           "each answer covers its range", (sa, sb, rc["a"], rc["b"]))
        for fn in ("cw_churn", "cw_burn_heavy"):
            want_a, want_b = cum_per_second(pa, fn, sa), cum_per_second(pb, fn, sb)
            d = diff.get(fn)
            if not d and not want_a and not want_b and not truth_cpu:
                skip(f"{fn} in the difference", NO_CPU_TRUTH_WHY)
                continue
            ok(d and abs(d["a"] - want_a) <= 1e-6 * max(want_a, 1) and
               abs(d["b"] - want_b) <= 1e-6 * max(want_b, 1) and
               d["delta"] == d["b"] - d["a"],
               f"{fn}: per second of A and of B, and B - A, as the two "
               "profiles say", (d, want_a, want_b))
        deltas = [abs(d["delta"]) for d in js("pullprofViewer.diff")]
        ok(deltas and deltas == sorted(deltas, reverse=True),
           "the table: the largest changes first", deltas[:8])
        if truth_cpu:
            ok(diff.get("cw_churn", {}).get("delta", 0) > 0 and
               diff.get("cw_burn_heavy", {}).get("delta", 0) < 0,
               "churn got hotter, the burner cooler",
               {k: diff.get(k) for k in ("cw_churn", "cw_burn_heavy")})
            hot = js(f"{FRAME_RGB}('cw_churn')")
            cool = js(f"{FRAME_RGB}('cw_burn_heavy')")
            ok(hot and hot[0] > hot[2] + 40, "cw_churn is drawn red (hotter)",
               hot)
            ok(cool and cool[2] > cool[0] + 40,
               "cw_burn_heavy is drawn blue (cooler)", cool)
            n = js("pullprofViewer.diffNode('cw_churn')")
            ok(n and n["a"] == 0 and n["b"] > 0, "cw_churn's frame: only in B",
               n)
        else:
            skip("the phases' signs and colours in the difference",
                 NO_CPU_TRUTH_WHY)
        ok(js("document.getElementById('top').hidden") and
           not js("document.getElementById('delta').hidden"),
           "the change table replaces the top functions")
        ok(js("document.getElementById('meta').textContent")
           .startswith("Difference"), "the summary says it is a difference")
        box, (fx, fy) = frame_centre("cw_churn")
        if box:
            browser.mouse("mouseMoved", fx, fy)
            tip = browser.wait("!document.getElementById('tip').hidden && "
                               "document.getElementById('tip').innerText", 5) or ""
            ok(tip.startswith("cw_churn") and "B − A +" in tip,
               "hover: A, B and the change", tip)
        browser.type_into("#search", "cw_")
        ok(browser.wait("document.body.dataset.matched > 0", 5),
           "search matches in the difference")
        shot("recent-diff")

        # The address keeps it: view, source, ranges, search.
        url = js("location.href")
        ok(all(k in url for k in ("view=recent", "a=", "b=", "search=cw_")),
           "the address holds the view, the ranges and the search", url)
        browser.navigate("about:blank")
        ok(browser.navigate(url), "the address opens again")
        if wait_recent("the address opened again"):
            ok(browser.wait("pullprofViewer.diff && document.body.dataset.state"
                            " === 'ready'", 20), "and shows the difference")
            again = js("pullprofViewer.recent")
            eq([round(v, 3) for v in again["a"] + again["b"]],
               [round(v, 3) for v in rc["a"] + rc["b"]], "the same ranges")
            eq(js("document.getElementById('search').value"), "cw_",
               "the same search")
            ok(js("document.body.dataset.matched > 0"), "applied")
            # The same ranges read again from the record: the same answer.
            diff2 = {d["name"]: d["delta"] for d in js("pullprofViewer.diff")}
            eq(diff2, {k: d["delta"] for k, d in diff.items()},
               "the same difference, function by function")

        # A range the record does not hold: the chart still, and the
        # agent's 416 with what it holds.
        browser.navigate("about:blank")
        ok(browser.navigate(url.split("#")[0] + "#view=recent&span=60&a=1000,1001"),
           "an address with a range from 1970")
        if wait_recent("a range the record does not hold"):
            ok(browser.wait("document.body.dataset.state === 'error'", 10),
               "the range: an error")
            err = js("document.getElementById('error').innerText") or ""
            ok("416" in err and "the record holds" in err,
               "the agent's 416 and what the record holds", err)
        browser.navigate("about:blank")
        ok(browser.navigate(url), "the address with A and B again")
        wait_recent("A and B again")
        ok(browser.wait("pullprofViewer.diff && document.body.dataset.state"
                        " === 'ready'", 20), "the difference again")

        # Drop B: range A's flame graph again; Escape clears both.
        browser.click("#rec-clear-b")
        ok(browser.wait("!pullprofViewer.diff && document.body.dataset.state"
                        " === 'ready'", 10), "Drop B: range A alone again")
        ok("b=" not in js("location.hash"), "and the address forgets B")
        js(f"pullprofViewer.recentY({burner})")
        browser.click("#rec-chart")
        browser.key("Escape", "Escape", 27)
        ok(browser.wait("!pullprofViewer.recent.a && document.getElementById('result').hidden", 5),
           "Escape on the chart clears the ranges")

        # Ranges of the heap's change: the kept blocks.
        def choose(sel, value):
            js(f"(() => {{ const s = document.querySelector({json.dumps(sel)});"
               f" s.value = {json.dumps(value)};"
               " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        choose("#rec-kind", "heap")
        ok("kind=heap" in js("location.hash"), "the address names the kind")
        browser.requests.clear()
        y = js(f"pullprofViewer.recentY({main_row})")
        h0, h1 = p3 - 0.1, min(p4 + 1.4, rc["end"] - 0.05)
        drag(x(h0), x(h1), y)
        st = browser.wait("['ready', 'error'].includes(document.body.dataset.state)"
                          " && document.body.dataset.state", 20)
        hurls = requested("/heap?start=")
        ok(hurls and "format=json" in hurls[-1], "the range was asked of /heap",
           browser.requests)
        if sanitized():
            # The record keeps what /heap serves: empty here, or a 404.
            ok(st == "ready" and js("pullprofViewer.total") == 0 or
               st == "error" and "404" in js("pullprofViewer.error"),
               "heap range: an empty graph or the agent's 404 (not recorded)",
               (st, js("pullprofViewer.error")))
            skip("the heap's change over a range", NO_HEAP_WHY)
        elif ok(st == "ready", "the heap's change over a range is drawn",
                js("pullprofViewer.error")):
            eq(js("document.getElementById('value-type').selectedOptions[0]"
                  ".textContent"), "inuse_space (bytes)",
               "the heap in use first")
            ph = curl(hurls[-1]).json()
            vi = [t["type"] for t in ph["sample_types"]].index("inuse_space")
            eq(js("pullprofViewer.total"),
               sum(max(0, int(sm["values"][vi])) for sm in ph["samples"]),
               "the flame graph's total is the range's growth")
            got = set(js("pullprofViewer.names()"))
            ok({"cw_keep_small", "cw_keep_large"} <= got,
               "the range's flame graph names the kept blocks", got)
            ok(js("pullprofViewer.total") > 30e6,
               "about the 41 MB kept", js("pullprofViewer.total"))
            shot("recent-heap")
        choose("#rec-kind", "profile")
        browser.click("#rec-clear")
        ok(browser.wait("!pullprofViewer.recent.a", 5), "ranges cleared")

        # A saved recording: listed, and a source of its own.
        r = curl(base + "/record/save?reason=viewer+test&last=60", "-X", "POST")
        ok(r.status == 200, "POST record/save", r.text)
        rid = str(r.json()["id"]) if r.status == 200 else "?"
        ok(until(lambda: any(str(s["id"]) == rid for s in
                             curl(base + "/record").json()["savings"]["list"]), 5),
           "the agent lists it")
        browser.click("#rec-refresh")
        wait_recent("refreshed")
        sources = js("pullprofViewer.recent.sources")
        ok(any(s["value"] == rid and "viewer test" in s["text"] for s in sources),
           "the source picker lists the saved recording with its reason", sources)
        browser.requests.clear()
        js("(() => { const s = document.getElementById('rec-source');"
           f" s.value = {json.dumps(rid)};"
           " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        time.sleep(0.2)
        if wait_recent("saved recording"):
            ok(requested(f"/record/timeline?recording={rid}"),
               "the chart is the recording's", browser.requests)
            ok(f"recording={rid}" in js("location.hash"),
               "the address names the recording")
            y = js(f"pullprofViewer.recentY({burner})")
            drag(x(a0), x(a1), y)
            if wait_loaded("a range of the saved recording"):
                ok(requested(f"/profile?recording={rid}&start="),
                   "its range is read from the recording", browser.requests)
                if truth_cpu:
                    got = set(js("pullprofViewer.names()"))
                    ok("cw_burn_heavy" in got and "cw_churn" not in got,
                       "the recording's phase 1", got)
        shot("recent-saved")
    finally:
        w.quit()


def test_recent_off():
    """Without PULLPROF_RECORD the Recent view says how to turn it on, and
    fails nowhere; a saved recording's address says so too."""
    base = f"http://127.0.0.1:{burn_port}{PREFIX}"
    eq(curl(base + "/record").json()["on"], False, "burn does not record")
    browser.requests.clear()
    browser.failed_loads.clear()
    ok(browser.navigate(f"{base}/ui/#view=recent"), "Recent, record off")
    if wait_recent("record off", "off"):
        off = js("pullprofViewer.recent.off")
        ok("PULLPROF_RECORD=5m" in off and "off" in off,
           "the view says how to turn the record on", off)
        ok(js("document.getElementById('rec-wrap').hidden"), "no chart")
        eq(js("document.body.dataset.state"), "idle", "no error shown")
        eq(requested("/record/timeline"), [], "no timeline asked for")
        eq(browser.failed_loads, [], "no failed load")
        shot("recent-off")
    # The same with an address naming a saved recording: the agent's 404.
    browser.navigate("about:blank")
    ok(browser.navigate(f"{base}/ui/#view=recent&recording=3"),
       "Recent, record off, a recording named")
    if wait_recent("record off, recording=3", "off"):
        off = js("pullprofViewer.recent.off")
        ok("PULLPROF_RECORD=5m" in off and "The agent said: " in off,
           "the view says how to turn the record on, and the agent's words",
           off)
    browser.failed_loads.clear()


def test_recent_many_threads():
    """32 threads and the others summed: every row drawn, a row at least 12
    pixels high with its thread's name, all in view without scrolling."""
    viewer(burn_port)
    n = 300
    rnd = random.Random(5)
    tl = {"start": 1795780000.0, "end": 1795780000.0 + n * 0.2,
          "step_seconds": 0.2,
          "threads": [{"tid": 1000 + k, "name": f"worker-{k:02d}",
                       "cpu_seconds": 0, "cpu": [round(rnd.random() * 0.2, 6)
                                                 for _ in range(n)]}
                      for k in range(32)],
          "other_threads": [0.5] * n}
    js(f"pullprofViewer.showRecent({json.dumps(tl)})")
    rc = js("pullprofViewer.recent")
    eq(rc["rowsDrawn"], 34, "32 threads, the total and the other threads")
    rows = rc["rows"]
    ok(all(r["h"] >= 12 for r in rows), "every row at least 12 px high",
       [r["h"] for r in rows])
    eq([r["label"] for r in rows[1:33]],
       [f"worker-{k:02d} ({1000 + k})" for k in range(32)],
       "each thread's row named")
    sc = js("(() => { const s = document.getElementById('rec-scroll');"
            " return {client: s.clientHeight, scroll: s.scrollHeight}; })()")
    ok(sc["scroll"] <= sc["client"] + 1, "all of them in view, no scrolling",
       sc)
    ink = js(f"{ROW_INK}(33, pullprofViewer.recentX({tl['start'] + 1}),"
             f" pullprofViewer.recentX({tl['end'] - 1}))") or []
    ok(ink and all(ink), "the other threads' row is drawn", ink.count(False))
    shot("recent-32")


def test_kinds():
    """The kind picker offers every profile the agent serves, and each
    loads (as JSON) into the flame graph; the kind is in the address."""
    base = f"http://127.0.0.1:{burn_port}{PREFIX}"
    viewer(burn_port)
    offered = js("Array.from(document.querySelectorAll('input[name=kind]'))"
                 ".map(i => i.value)")
    want = {"profile", "heap", "allocs", "wall", "fgprof", "goroutine",
            "threadcreate", "mutex", "block"}
    eq(set(offered), want, "every kind the agent serves is offered")
    st = curl(base + "/status").json()
    listed = [p for k in st["kinds"] for p in k["profiles"]]
    eq(sorted(listed), sorted(want), "the status lists each kind's profiles")
    eq(browser.wait("pullprofViewer.kindsFrom === 'status' && "
                    "pullprofViewer.kindsFrom", 10), "status",
       "the picker is built from the agent's status")
    eq(sorted(js("Array.from(document.querySelectorAll('input[name=kind]'))"
                 ".map(i => i.value)")), sorted(listed),
       "the picker offers the kinds the status lists")
    index = curl(base + "/").text
    for k in want:
        ok(f'href="{k}' in index, f"{k}: the agent's index lists it")
    types = {"mutex": ["contentions (count)", "delay (nanoseconds)"],
             "block": ["contentions (count)", "delay (nanoseconds)"],
             "threadcreate": ["threadcreate (count)"],
             "goroutine": ["goroutine (count)"],
             "fgprof": ["samples (count)", "time (nanoseconds)"]}
    for k, t in types.items():
        browser.requests.clear()
        browser.click(f"input[name=kind][value={k}]")
        ok(f"kind={k}" in js("location.hash"), f"{k}: the address names it")
        if k == "fgprof":
            browser.type_into("#seconds", "1")
        browser.click("#fetch")
        if not wait_loaded(k):
            shot(f"kind-{k}-failed")
            continue
        eq(js("Array.from(document.getElementById('value-type').options)"
              ".map(o => o.textContent)"), t, f"{k}: its sample types")
        ok(requested(f"{PREFIX}/{k}?"), f"{k}: asked of /{k}",
           browser.requests)
        if k == "threadcreate":
            ok("burn" in " ".join(js("pullprofViewer.names()")) or
               js("pullprofViewer.total") >= 1,
               "threadcreate: the stacks that made threads",
               js("pullprofViewer.names()"))
    # The address of a fetched profile opens it again, by its id.
    url = js("location.href")
    ok("kind=fgprof" in url and re.search(r"id=\d+", url),
       "the address names the kind and the profile's id", url)
    browser.navigate("about:blank")
    browser.requests.clear()
    ok(browser.navigate(url), "the profile's address opens again")
    if wait_loaded("fgprof by id"):
        ok(js("document.querySelector('input[name=kind]:checked').value")
           == "fgprof", "the kind is chosen again")
        ok(requested("/fgprof?id="), "the same profile, by id",
           browser.requests)
    # An agent whose status cannot be read: the picker keeps its fallback,
    # every kind all the same.
    browser.send("Network.setBlockedURLs", {"urls": [f"*{PREFIX}/status"]})
    try:
        browser.navigate("about:blank")
        browser.requests.clear()
        viewer(burn_port)
        browser.pump(0.5)
        ok(requested(f"{PREFIX}/status"), "the viewer asked for the status",
           browser.requests)
        eq(js("pullprofViewer.kindsFrom"), "fallback",
           "no status: the picker keeps its fallback")
        eq(set(js("Array.from(document.querySelectorAll('input[name=kind]'))"
                  ".map(i => i.value)")), want,
           "no status: every kind is offered all the same")
    finally:
        browser.send("Network.setBlockedURLs", {"urls": []})


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
    tests = [test_routing, test_browser, test_no_favicon_request,
             test_cpu_flame_graph, test_errors_shown,
             test_timeline_json,
             test_heap_flame_graph, test_wall_flame_graph, test_timeline_cpu,
             test_model_from_file, test_large_profile, test_timeline_large,
             test_kinds, test_recent_off, test_recent_many_threads,
             test_recent,
             test_index_live_status,  # stops burn: the last to use it
             test_no_console_errors]
    only = os.environ.get("PP_ONLY")
    if only:  # the browser and the burn host are every test's setup
        names = set(only.split(","))
        tests = [t for t in tests
                 if t is test_browser or t.__name__ in names]
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

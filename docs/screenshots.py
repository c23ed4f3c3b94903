"""Regenerate the README's screenshots (docs/*.png) in headless Chromium
(tests/integration/cdp.py): the CPU flame graph and the index of a running
examples/demo, the heap flame graph of tests/heap/heapwork after its
"accuracy" command (allocations from known functions, part freed).

    PULLPROF_LISTEN=127.0.0.1:6060 ./examples/demo &
    (echo accuracy; sleep 600) | PULLPROF_LISTEN=127.0.0.1:6061 \
        PULLPROF_HEAP_RATE=4096 tests/heap/heapwork &
    python3 docs/screenshots.py 6060 6061

The Recent view's picture (viewer-recent.png) comes from a run of its own,
in the build tree: tests/capture/capturework recording (PULLPROF_RECORD),
one thread burning for 3 s, then the main thread allocating for 3 s, the
first phase as range A and the second as B:

    python3 docs/screenshots.py --recent
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from cdp import Browser, find_chromium  # noqa: E402


def drag(b, x0, x1, y):
    b.mouse("mouseMoved", x0, y)
    b.mouse("mousePressed", x0, y, "left", 1)
    for k in range(1, 11):
        b.send("Input.dispatchMouseEvent", {
            "type": "mouseMoved", "x": x0 + (x1 - x0) * k / 10, "y": y,
            "button": "left", "buttons": 1})
    b.mouse("mouseReleased", x1, y, "left", 1)


def recent():
    exe = os.path.join(HERE, "..", "tests", "capture", "capturework")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULLPROF_")}
    env.update(PULLPROF_LISTEN="127.0.0.1:0", PULLPROF_RECORD="5m",
               PULLPROF_RECORD_HZ="97")
    host = subprocess.Popen([exe], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)

    def cmd(line):
        host.stdin.write(line + "\n")
        return host.stdout.readline().strip()
    b = None
    try:
        host.stdout.readline()  # ready
        port = int(re.match(r"ok (\d+)", cmd("start")).group(1))
        time.sleep(1)
        p1 = time.time()
        cmd("burn 1")
        time.sleep(3)
        cmd("calm")
        p2 = time.time()
        while time.time() - p2 < 3:
            cmd("churn 300000000")
        p3 = time.time()
        time.sleep(1)
        b = Browser(find_chromium(), width=1280, height=900)
        b.navigate(f"http://127.0.0.1:{port}/debug/pprof/ui/#view=recent&span=60")
        if not b.wait("document.body.dataset.recent === 'ready'", 20):
            raise SystemExit("the Recent view did not load")
        y = b.evaluate("pullprofViewer.recentY(1)")
        x = lambda t: b.evaluate(f"pullprofViewer.recentX({t})")  # noqa: E731
        drag(b, x(p1 + 0.3), x(p2 - 0.3), y)
        b.wait("document.body.dataset.state === 'ready'", 20)
        drag(b, x(p2 + 0.3), x(p3 - 0.3), y)
        if not b.wait("pullprofViewer.diff && document.body.dataset.state === 'ready'", 20):
            raise SystemExit("the difference did not load")
        b.evaluate("window.scrollTo(0, 0)")
        b.screenshot(os.path.join(HERE, "viewer-recent.png"))
        if b.errors:
            raise SystemExit("console errors: " + "\n".join(b.errors))
    finally:
        if b:
            b.close()
        host.stdin.close()
        host.wait(10)


def main():
    if sys.argv[1:] == ["--recent"]:
        recent()
        return
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6060
    heap_port = int(sys.argv[2]) if len(sys.argv) > 2 else port
    base = f"http://127.0.0.1:{port}/debug/pprof"
    heap_base = f"http://127.0.0.1:{heap_port}/debug/pprof"
    b = Browser(find_chromium(), width=1280, height=760)
    try:
        b.navigate(base + "/ui/")
        b.click("input[name=kind][value=profile]")
        b.type_into("#seconds", "5")
        b.click("#fetch")
        if b.wait("document.body.dataset.state === 'ready'", 60) is None:
            raise SystemExit("the CPU profile did not load")
        box = b.evaluate("pullprofViewer.frameBox('hash_block') || "
                         "pullprofViewer.frameBox('hash_worker')")
        if box:
            b.mouse("mouseMoved", box["x"] + box["w"] / 3, box["y"] + 8)
        b.screenshot(os.path.join(HERE, "viewer-cpu.png"))
        b.navigate(heap_base + "/ui/")
        b.click("input[name=kind][value=heap]")
        b.click("#fetch")
        if b.wait("document.body.dataset.state === 'ready'", 60) is None:
            raise SystemExit("the heap profile did not load")
        box = b.evaluate("pullprofViewer.frameBox('hw_large_blocks')")
        if box:
            b.mouse("mouseMoved", box["x"] + box["w"] / 2, box["y"] + 8)
        b.screenshot(os.path.join(HERE, "viewer-heap.png"))
        b.navigate(base + "/")
        b.wait("document.body.dataset.live === 'ok'", 10)
        b.screenshot(os.path.join(HERE, "index-live.png"))
        if b.errors:
            raise SystemExit("console errors: " + "\n".join(b.errors))
    finally:
        b.close()


main()

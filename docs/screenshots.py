"""Regenerate the README's screenshots (docs/*.png) in headless Chromium
(tests/integration/cdp.py): the CPU flame graph and the index of a running
examples/demo, the heap flame graph of tests/heap/heapwork after its
"accuracy" command (allocations from known functions, part freed).

    PULLPROF_LISTEN=127.0.0.1:6060 ./examples/demo &
    (echo accuracy; sleep 600) | PULLPROF_LISTEN=127.0.0.1:6061 \
        PULLPROF_HEAP_RATE=4096 tests/heap/heapwork &
    python3 docs/screenshots.py 6060 6061
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from cdp import Browser, find_chromium  # noqa: E402


def main():
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

"""A headless Chromium driven over the Chrome DevTools Protocol, for the
viewer's browser tests: real page loads, real input events
(Input.dispatchMouseEvent / dispatchKeyEvent / insertText), screenshots, and
every console error or uncaught exception the page produces.

The WebSocket comes from python3-websocket (Debian's package, in
scripts/deps.sh --test). When the interpreter running the test lacks it (a
pyenv python on a developer's machine), the test re-runs itself with the
system's /usr/bin/python3, which has it.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import websocket
except ImportError:  # pragma: no cover - depends on the machine
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system) and \
            os.access(system, os.X_OK):
        os.execv(system, [system, *sys.argv])
    websocket = None  # Browser() says so; the test reports it as a failure

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium():
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(Exception):
    pass


class Browser:
    """One headless Chromium with one page, and a CDP session on it."""

    def __init__(self, exe, width=1400, height=1000):
        if websocket is None:
            raise CDPError("python3-websocket is not installed "
                           "(scripts/deps.sh --test installs it)")
        self.tmp = tempfile.mkdtemp(prefix="pp-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-port=0", f"--user-data-dir={self.tmp}",
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--mute-audio",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        port_file = os.path.join(self.tmp, "DevToolsActivePort")
        deadline = time.time() + 30
        port = None
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with open(port_file) as f:
                    first = f.readline().strip()
                if first.isdigit():
                    port = int(first)
                    break
            except OSError:
                pass
            time.sleep(0.05)
        if port is None:
            err = self.proc.stderr.read().decode(errors="replace") \
                if self.proc.poll() is not None else ""
            self.close()
            raise CDPError(f"chromium did not start: {err[-2000:]}")
        self.port = port
        page = None
        deadline = time.time() + 10
        while page is None and time.time() < deadline:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                targets = json.load(r)
            page = next((t for t in targets if t.get("type") == "page"), None)
            if page is None:
                time.sleep(0.1)
        if page is None:
            self.close()
            raise CDPError("chromium shows no page target")
        self.ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []
        self.errors = []  # console errors and exceptions, as text
        self.allowed_errors = []  # substrings of expected errors
        # Every request the page made (URLs), and every failed one the
        # console reported ("Failed to load resource: ... 404"), as
        # (text, url): the errors above leave failed requests out, since
        # many tests provoke them on purpose.
        self.requests = []
        self.failed_loads = []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Log.enable")
        self.send("DOM.enable")
        self.send("Network.enable")
        # The window's size is not the page's in headless mode: fix the
        # viewport, so screenshots and coordinates are the same everywhere.
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1,
            "mobile": False})

    # -- protocol ---------------------------------------------------------

    def _event(self, msg):
        method, params = msg["method"], msg.get("params", {})
        self.events.append(msg)
        text = None
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            text = "exception: " + (d.get("exception", {}).get("description")
                                    or d.get("text", "?"))
        elif method == "Runtime.consoleAPICalled" and \
                params.get("type") in ("error", "assert"):
            text = "console.error: " + " ".join(
                str(a.get("value", a.get("description", "")))
                for a in params.get("args", []))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Log.entryAdded":
            e = params.get("entry", {})
            if e.get("level") == "error" and e.get("source") == "network":
                self.failed_loads.append((e.get("text"), e.get("url", "")))
            # A failed request is expected where a test provokes one (a
            # 4xx, an agent that went away); it is checked by the test.
            if e.get("level") == "error" and e.get("source") != "network":
                text = f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}"
        if text and not any(a in text for a in self.allowed_errors):
            self.errors.append(text)

    def send(self, method, params=None, timeout=60):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method,
                                 "params": params or {}}))
        deadline = time.time() + timeout
        while True:
            self.ws.settimeout(max(0.1, deadline - time.time()))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self._event(msg)
                continue
            if msg.get("id") != mid:
                continue
            if "error" in msg:
                raise CDPError(f"{method}: {msg['error']}")
            return msg.get("result", {})

    def pump(self, seconds=0.05):
        """Read the events that arrived meanwhile."""
        self.evaluate("1", timeout=seconds + 10)

    # -- page -------------------------------------------------------------

    def evaluate(self, expr, timeout=60):
        r = self.send("Runtime.evaluate", {
            "expression": expr, "returnByValue": True, "awaitPromise": True,
            "userGesture": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError(f"evaluate {expr!r}: "
                           f"{r['exceptionDetails'].get('exception', {}).get('description')}")
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=30, interval=0.1):
        """Poll until expr is truthy; returns its value, or None on time-out."""
        deadline = time.time() + timeout
        while True:
            v = self.evaluate(expr)
            if v:
                return v
            if time.time() > deadline:
                return None
            time.sleep(interval)

    def navigate(self, url, timeout=30):
        self.send("Page.navigate", {"url": url})
        return self.wait("document.readyState === 'complete' && "
                         f"location.href === {json.dumps(url)}", timeout)

    def box(self, selector):
        """The centre of the element's box in viewport CSS pixels."""
        return self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")

    def mouse(self, kind, x, y, button="none", clicks=0):
        self.send("Input.dispatchMouseEvent", {
            "type": kind, "x": x, "y": y, "button": button,
            "clickCount": clicks, "buttons": 1 if kind == "mousePressed" else 0})

    def click_at(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, "left", 1)
        self.mouse("mouseReleased", x, y, "left", 1)

    def click(self, selector):
        b = self.box(selector)
        if not b:
            raise CDPError(f"no element {selector}")
        self.click_at(b["x"], b["y"])

    def key(self, key, code=None, keycode=0):
        """Press and release one key (on the focused element)."""
        for kind in ("rawKeyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {
                "type": kind, "key": key, "code": code or key,
                "windowsVirtualKeyCode": keycode})

    def type_into(self, selector, text):
        """Click the field, select what it holds, and type text over it."""
        self.click(selector)
        for kind in ("rawKeyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {
                "type": kind, "key": "a", "code": "KeyA", "modifiers": 2,
                "windowsVirtualKeyCode": 65, "commands": ["selectAll"]})
        if text:
            self.send("Input.insertText", {"text": text})
        else:
            self.key("Delete", "Delete", 46)

    def set_files(self, selector, paths):
        doc = self.send("DOM.getDocument", {"depth": 0})
        node = self.send("DOM.querySelector", {
            "nodeId": doc["root"]["nodeId"], "selector": selector})
        self.send("DOM.setFileInputFiles", {"nodeId": node["nodeId"],
                                            "files": list(paths)})

    def color_scheme(self, scheme):
        self.send("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": scheme}]})

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": False})["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        except Exception:  # noqa: BLE001 - best effort
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

"""<prefix>/metrics in Prometheus's text format, checked the way a monitoring
system reads it: Prometheus's own linter (promtool check metrics, from
Debian's prometheus package: scripts/deps.sh --test puts it in
/opt/pullprof-test) and Prometheus's Python client parser (Debian's
python3-prometheus-client). Then the numbers: request counters move with
known requests, the SIGPROF handler histogram after a real CPU window, heap
gauges against /status and known allocations, process metrics against
/proc/PID; the counters of hostile hosts (issue 27: the signal in use,
threads blocking it, foreign signals, connections waiting and let in on
kept places, descriptors the host closed, files changed under their
mappings, thread stacks not readable) against the same moment's /status.
PULLPROF_METRICS_PATH, the token, bad settings. Real processes
(tests/host, tests/heap/heapwork, tests/hostile/*, tests/symbols/pluginhost,
tests/threads/dropper), real curl."""
import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - depends on the machine
    # Debian's python3-prometheus-client is for the system's python3; a
    # pyenv python on a developer's machine lacks it: run again with that.
    SYSTEM = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM) and \
            os.access(SYSTEM, os.X_OK):
        os.execv(SYSTEM, [SYSTEM, *sys.argv])
    text_string_to_metric_families = None

import pptest  # noqa: E402
from pptest import (BUILD, NO_HEAP_WHY, SRC, Host, Profile,  # noqa: E402
                    Work, curl, eq, ok, preload_env, raw_http, run, sanitized,
                    skip, until, version)

PREFIX = "/debug/pprof"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TOKEN = "metrics-t0ken-for-tests"
PROMTOOL_PLACES = (os.environ.get("PP_PROMTOOL"), "/opt/pullprof-test/promtool",
                   shutil.which("promtool"))

# Every family /metrics serves, with its type. (The heap's peak time is
# there once the heap has peaked, which any host does at start.)
FAMILIES = {
    "pullprof_build_info": "gauge",
    "pullprof_start_time_seconds": "gauge",
    "pullprof_http_requests_total": "counter",
    "pullprof_http_connections_active": "gauge",
    "pullprof_http_connections_total": "counter",
    "pullprof_http_connections_refused_total": "counter",
    "pullprof_http_server_errors_total": "counter",
    "pullprof_http_connections_timed_out_total": "counter",
    "pullprof_http_connections_evicted_total": "counter",
    "pullprof_http_connections_lost_total": "counter",
    "pullprof_record_on": "gauge",
    "pullprof_record_coverage_seconds": "gauge",
    "pullprof_record_bytes": "gauge",
    "pullprof_record_bound_bytes": "gauge",
    "pullprof_record_samples": "gauge",
    "pullprof_record_samples_aged_out_total": "counter",
    "pullprof_record_samples_dropped_total": "counter",
    "pullprof_record_savings": "gauge",
    "pullprof_record_cpu_seconds_total": "counter",
    "pullprof_http_connections_waiting": "gauge",
    "pullprof_http_connections_reserved_total": "counter",
    "pullprof_http_waits_refused_total": "counter",
    "pullprof_http_descriptors_lost_total": "counter",
    "pullprof_http_server_restarts_total": "counter",
    "pullprof_http_answers_bytes": "gauge",
    "pullprof_http_answers_refused_total": "counter",
    "pullprof_cpu_windows_open": "gauge",
    "pullprof_cpu_threads_sampled": "gauge",
    "pullprof_cpu_sampling_frequency_hertz": "gauge",
    "pullprof_cpu_timer_mode": "gauge",
    "pullprof_cpu_timer_signal": "gauge",
    "pullprof_cpu_threads_blocking_signal": "gauge",
    "pullprof_cpu_foreign_signals_total": "counter",
    "pullprof_cpu_samples_total": "counter",
    "pullprof_cpu_sample_periods_total": "counter",
    "pullprof_cpu_samples_dropped_total": "counter",
    "pullprof_cpu_unwind_failures_total": "counter",
    "pullprof_cpu_handler_duration_seconds": "histogram",
    "pullprof_cpu_handler_max_duration_seconds": "gauge",
    "pullprof_cpu_ring_capacity": "gauge",
    "pullprof_cpu_ring_high_water": "gauge",
    "pullprof_cpu_unwind_images": "gauge",
    "pullprof_cpu_unwind_fallbacks_total": "counter",
    "pullprof_cpu_unwind_table_bytes": "gauge",
    "pullprof_cpu_thread_exit_periods_total": "counter",
    "pullprof_heap_sampling_enabled": "gauge",
    "pullprof_heap_interposed": "gauge",
    "pullprof_heap_allocator_info": "gauge",
    "pullprof_heap_pool_sampled_total": "counter",
    "pullprof_heap_pool_gone_total": "counter",
    "pullprof_heap_pool_live_objects": "gauge",
    "pullprof_heap_sampling_interval_bytes": "gauge",
    "pullprof_heap_sampled_allocations_total": "counter",
    "pullprof_heap_sampled_bytes_total": "counter",
    "pullprof_heap_sampled_frees_total": "counter",
    "pullprof_heap_sampled_live_objects": "gauge",
    "pullprof_heap_estimated_allocated_bytes_total": "counter",
    "pullprof_heap_estimated_inuse_bytes": "gauge",
    "pullprof_heap_estimated_peak_bytes": "gauge",
    "pullprof_heap_peak_time_seconds": "gauge",
    "pullprof_heap_samples_dropped_total": "counter",
    "pullprof_heap_unwind_failures_total": "counter",
    "pullprof_heap_unwind_fallbacks_total": "counter",
    "pullprof_heap_unwind_duration_seconds": "summary",
    "pullprof_heap_stacks": "gauge",
    "pullprof_heap_buckets": "gauge",
    "pullprof_heap_table_bytes": "gauge",
    "pullprof_heap_filter_false_hits_total": "counter",
    "pullprof_heap_profiles_pending": "gauge",
    "pullprof_lock_sampling_rate": "gauge",
    "pullprof_lock_events_total": "counter",
    "pullprof_lock_events_dropped_total": "counter",
    "pullprof_lock_waiting_threads": "gauge",
    "pullprof_symbols_mappings": "gauge",
    "pullprof_symbols_cached_addresses": "gauge",
    "pullprof_symbols_lookups_total": "counter",
    "pullprof_symbols_cache_hits_total": "counter",
    "pullprof_symbols_refreshes_total": "counter",
    "pullprof_symbols_files_changed_total": "counter",
    "pullprof_thread_looks_denied_total": "counter",
    "pullprof_lookups_queued": "gauge",
    "pullprof_lookups_running": "gauge",
    "pullprof_lookups_completed_total": "counter",
    "pullprof_lookups_cancelled_total": "counter",
    "pullprof_lookups_refused_total": "counter",
    "pullprof_label_sets": "gauge",
    "pullprof_label_pushes_refused_total": "counter",
    "process_cpu_seconds_total": "counter",
    "process_resident_memory_bytes": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_threads": "gauge",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_start_time_seconds": "gauge",
}


def promtool():
    for p in PROMTOOL_PLACES:
        if p and os.access(p, os.X_OK):
            return p
    return None


def lint(body):
    """promtool check metrics on body: (exit code, what it printed)."""
    if not promtool():
        return None, "promtool is not installed"
    p = subprocess.run([promtool(), "check", "metrics"], input=body,
                       capture_output=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


class Metrics:
    """One scrape, read by Prometheus's Python parser: the families by
    name, and every sample by (name, sorted labels)."""

    def __init__(self, text):
        self.text = text
        self.families = {}
        self.samples = {}
        for fam in text_string_to_metric_families(text):
            self.families[fam.name] = fam
            for s in fam.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def __call__(self, name, **labels):
        return self.samples[(name, tuple(sorted(labels.items())))]

    def get(self, name, default=None, **labels):
        return self.samples.get((name, tuple(sorted(labels.items()))), default)

    def buckets(self, name):
        """[(le, cumulative count)] in the order served."""
        out = []
        for line in self.text.splitlines():
            m = re.match(rf'{name}_bucket{{le="([^"]+)"}} (\S+)$', line)
            if m:
                out.append((float(m.group(1)), float(m.group(2))))
        return out


def scrape(base, *args, path="/metrics"):
    r = curl(base + path, *args)
    if r.status != 200:
        raise AssertionError(f"{path}: {r!r}")
    return Metrics(r.text)


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # [0] is the state


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def cpu_seconds(pid):
    f = proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


h = None
base = None


def setup():
    global h, base
    h = Host()
    port = h.start()
    ok(isinstance(port, int), "host with the agent starts", port)
    base = f"http://127.0.0.1:{port}{PREFIX}"


def test_tools():
    ok(promtool() is not None,
       "promtool is installed (scripts/deps.sh --test puts it in "
       "/opt/pullprof-test)", PROMTOOL_PLACES)
    ok(text_string_to_metric_families is not None,
       "Prometheus's Python client parser is installed "
       "(python3-prometheus-client)")
    # The linter is a real one: it fails what breaks the conventions.
    code, out = lint(b"# HELP foo_ms A time.\n# TYPE foo_ms counter\nfoo_ms 1\n")
    eq(code, 3, "promtool exits 3 on lint problems (the check can fail)")
    ok("_total" in out and "abbreviated units" in out,
       "promtool names the problems", out)
    code, out = lint(b"bad{ 1\n")
    eq(code, 1, "promtool exits 1 on a parse error")


def test_format():
    r = curl(base + "/metrics")
    eq(r.status, 200, "/metrics: 200")
    eq(r.header("content-type"), CONTENT_TYPE, "/metrics: the text format's type")
    eq(r.header("content-encoding"), None, "not compressed unless asked")
    eq(r.header("vary"), "Accept-Encoding", "Vary: Accept-Encoding")
    code, out = lint(r.body)
    eq(code, 0, "promtool check metrics: exit 0")
    eq(out, "", "promtool check metrics: nothing to say")
    m = Metrics(r.text)
    for name, typ in FAMILIES.items():
        # The Python parser names a counter's family without _total.
        fam = m.families.get(re.sub(r"_total$", "", name) if typ == "counter"
                             else name)
        ok(fam is not None and fam.type == typ,
           f"{name}: parsed, a {typ}", fam and (fam.type, fam.samples[:2]))
    served = {re.sub(r"_(bucket|sum|count)$", "", l.split()[2])
              for l in r.text.splitlines() if l.startswith("# TYPE ")}
    eq(sorted(served - set(FAMILIES)), [], "no family the test does not know")
    helps = re.findall(r"^# HELP (\S+) (.+)$", r.text, re.M)
    eq(len(helps), len(served), "every family has HELP text")
    ok(all(len(t) > 10 for _, t in helps), "... that says something")
    eq(m("pullprof_build_info", version=version()), 1.0,
       "pullprof_build_info{version} 1")
    ok(abs(m("pullprof_start_time_seconds") - time.time()) < 120,
       "pullprof_start_time_seconds is the agent's start",
       m("pullprof_start_time_seconds"))

    # What Prometheus asks for: gzip.
    z = curl(base + "/metrics", "-H", "Accept-Encoding: gzip")
    eq(z.header("content-encoding"), "gzip", "Accept-Encoding: gzip is honoured")
    plain = gzip.decompress(z.body)
    ok(len(z.body) * 3 < len(plain), "and it shrinks", (len(z.body), len(plain)))
    code, out = lint(plain)
    ok(code == 0 and out == "", "the gzipped answer lints clean too", out)
    # HEAD over a raw socket: the headers, and not one byte after them.
    port = int(base.split(":")[2].split("/")[0])
    data = raw_http(port, f"HEAD {PREFIX}/metrics HTTP/1.1\r\nHost: "
                    "localhost\r\nConnection: close\r\n\r\n".encode())
    head, _, rest = data.partition(b"\r\n\r\n")
    ok(head.startswith(b"HTTP/1.1 200") and
       f"Content-Type: {CONTENT_TYPE}".encode() in head and rest == b"",
       "HEAD: 200, the type, no body", data[:400])
    bad = curl(base + "/metrics", "-X", "DELETE")
    ok(bad.status == 405 and bad.header("allow") == "GET, HEAD" and
       bad.header("content-type") == "text/plain; charset=utf-8",
       "DELETE: 405 in text, with Allow", bad)


def test_request_counters():
    def req(m, endpoint, code):
        return m("pullprof_http_requests_total", endpoint=endpoint, code=code)

    m0 = scrape(base)
    for _ in range(5):
        eq(curl(base + "/status").status, 200, "a /status request")
    eq(curl(base + "/nope").status, 404, "an unknown endpoint")
    eq(curl(base + "/metrics", "-X", "POST").status, 405, "POST /metrics")
    eq(curl(base + "/healthz").status, 200, "/healthz")
    m1 = scrape(base)
    eq(req(m1, "status", "2xx") - req(m0, "status", "2xx"), 5,
       "5 /status requests: requests_total{endpoint=status,code=2xx} +5")
    eq(req(m1, "other", "4xx") - req(m0, "other", "4xx"), 1,
       "the 404 is counted under endpoint=other, code=4xx")
    eq(req(m1, "metrics", "4xx") - req(m0, "metrics", "4xx"), 1,
       "the 405 under metrics, 4xx")
    eq(req(m1, "healthz", "2xx") - req(m0, "healthz", "2xx"), 1, "healthz 2xx")
    # A scrape is counted once it is answered: the first one shows in the
    # second.
    eq(req(m1, "metrics", "2xx") - req(m0, "metrics", "2xx"), 1,
       "the first scrape is counted by the second")
    eq(req(m1, "status", "5xx"), 0.0, "no 5xx")
    ok(m1("pullprof_http_connections_total") >=
       m0("pullprof_http_connections_total") + 9,
       "connections_total counts every curl's connection")
    ok(m1("pullprof_http_connections_active") >= 1, "the scrape's own connection is open")
    # Every endpoint and status class has its series from the start.
    names = [rt["name"] for rt in pptest.routes()]
    missing = [(n, c) for n in names + ["other"] for c in ("2xx", "3xx", "4xx", "5xx")
               if m1.get("pullprof_http_requests_total", endpoint=n, code=c) is None]
    eq(missing, [], "a series for every endpoint and class")


def test_cpu_window():
    eq(h.cmd("spin 6"), "ok", "a host thread burns CPU")
    m0 = scrape(base)
    eq(m0("pullprof_cpu_windows_open"), 0.0, "no window open at first")
    res = {}

    def fetch():
        res["r"] = curl(base + "/profile?seconds=3&hz=500", timeout=30)
    t = threading.Thread(target=fetch)
    t.start()
    during = None
    deadline = time.time() + 3
    while time.time() < deadline:
        m = scrape(base)
        # The window is counted as soon as it is asked for; the timers
        # are armed a moment later.
        if m("pullprof_cpu_windows_open") == 1 and \
                m("pullprof_cpu_sampling_frequency_hertz") > 0:
            during = m
            break
        time.sleep(0.05)
    ok(during is not None, "while the profile runs: pullprof_cpu_windows_open 1")
    if during:
        eq(during("pullprof_cpu_timer_mode", mode="per-thread"), 1.0,
           "timer_mode{mode=per-thread} 1 during the window")
        eq(during("pullprof_cpu_timer_mode", mode="off"), 0.0, "... and off 0")
        eq(during("pullprof_cpu_sampling_frequency_hertz"), 500.0,
           "sampling frequency 500 Hz")
        ok(during("pullprof_cpu_threads_sampled") >= 2,
           "threads sampled during the window",
           during("pullprof_cpu_threads_sampled"))
    t.join(40)
    eq(res["r"].status, 200, "the profile arrives")
    m1 = scrape(base)
    eq(m1("pullprof_cpu_windows_open"), 0.0, "window closed after")
    eq(m1("pullprof_cpu_timer_mode", mode="off"), 1.0, "timer_mode off after")
    samples = m1("pullprof_cpu_samples_total") - m0("pullprof_cpu_samples_total")
    ok(samples > 0, "pullprof_cpu_samples_total rose", samples)
    # The window was the only one: every sample taken inside its span is
    # in its profile (in timer periods: a sample weighs 1 + its overruns).
    # The timers are disarmed a moment after the span ends: the few samples
    # taken then are counted and belong to no window (measured: 10-13 at
    # 500 Hz on this host's threads).
    periods = (m1("pullprof_cpu_sample_periods_total") -
               m0("pullprof_cpu_sample_periods_total"))
    dropped = (m1("pullprof_cpu_samples_dropped_total", reason="ring_full") -
               m0("pullprof_cpu_samples_dropped_total", reason="ring_full"))
    # Only what the handler recorded: not the frames pullprof makes up for
    # CPU it measured instead (a thread blocking the signal, as TSan's own
    # background thread does).
    prof = Profile(res["r"].body)
    in_profile = sum(smp["value"][0] for smp in prof.samples
                     if not any(ln[0].startswith("[pullprof:")
                                for loc in prof.stack(smp) for ln in loc if ln[0]))
    ok(dropped == 0 and 0 <= periods - in_profile <= max(50, in_profile / 20),
       "pullprof_cpu_sample_periods_total rose by the profile's sample "
       "count, plus the few taken as the window closed (nothing dropped)",
       f"counter +{periods:.0f}, profile {in_profile}, dropped {dropped:.0f}")
    ok(m1("pullprof_cpu_sample_periods_total") >= m1("pullprof_cpu_samples_total"),
       "sample periods >= samples (overruns add)")
    name = "pullprof_cpu_handler_duration_seconds"
    b = m1.buckets(name)
    eq(len(b), 12, "11 bucket bounds and +Inf")
    les = [le for le, _ in b]
    eq(les, sorted(les), "le bounds ascend")
    ok(les[0] == 5e-07 and les[-2] == 0.001 and les[-1] == float("inf"),
       "from 500 ns to 1 ms, then +Inf", les)
    counts = [c for _, c in b]
    ok(all(x <= y for x, y in zip(counts, counts[1:])),
       "buckets are cumulative (non-decreasing)", counts)
    eq(counts[-1], m1(name + "_count"), "+Inf bucket == _count")
    # No window is open: every recorded sample went through the histogram.
    eq(m1(name + "_count"), m1("pullprof_cpu_samples_total"),
       "_count == samples recorded")
    ok(m1(name + "_sum") > 0, "_sum > 0", m1(name + "_sum"))
    mean = m1(name + "_sum") / m1(name + "_count")
    ok(1e-7 < mean < 1e-3, "mean handler time between 0.1 us and 1 ms", mean)
    ok(m1("pullprof_cpu_handler_max_duration_seconds") >= mean,
       "max >= mean")
    d = {k: m1("pullprof_cpu_unwind_failures_total", reason=k)
         for k in ("truncated", "unknown_code", "failed")}
    ok(all(v >= 0 for v in d.values()), "unwind failures by reason", d)
    eq(m1("pullprof_cpu_samples_dropped_total", reason="ring_full"),
       float(curl(base + "/status").json()["cpu"]["dropped"]["ring_full"]),
       "dropped{reason=ring_full} is /status's cpu.dropped.ring_full")
    ok(h.alive(), "the host's own thread kept working")


def test_process():
    pid = h.pid
    t0 = cpu_seconds(pid)
    m = scrape(base)
    t1 = cpu_seconds(pid)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    cpu = m("process_cpu_seconds_total")
    ok(t0 - tick <= cpu <= t1 + tick, "process_cpu_seconds_total agrees with "
       f"/proc/{pid}/stat", (t0, cpu, t1))
    eq(m("process_threads"), float(proc_stat(pid)[17]),
       f"process_threads is /proc/{pid}/stat's num_threads")
    eq(m("process_threads"), float(len(os.listdir(f"/proc/{pid}/task"))),
       f"... and the entries of /proc/{pid}/task")
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    ok(abs(m("process_open_fds") - fds) <= 2,
       f"process_open_fds within 2 of /proc/{pid}/fd", (m("process_open_fds"), fds))
    rss = vm_rss(pid)
    ok(abs(m("process_resident_memory_bytes") - rss) <= 0.2 * rss,
       "process_resident_memory_bytes within 20% of VmRSS",
       (m("process_resident_memory_bytes"), rss))
    vsize = int(proc_stat(pid)[20])
    ok(abs(m("process_virtual_memory_bytes") - vsize) <= 0.2 * vsize,
       "process_virtual_memory_bytes within 20% of /proc's vsize",
       (m("process_virtual_memory_bytes"), vsize))
    with open(f"/proc/{pid}/limits") as f:
        soft = re.search(r"^Max open files\s+(\S+)", f.read(), re.M).group(1)
    if soft == "unlimited":
        ok(m.get("process_max_fds") is None, "no process_max_fds without a limit")
    else:
        eq(m("process_max_fds"), float(soft), "process_max_fds is the soft limit")
    with open("/proc/stat") as f:
        btime = int(re.search(r"^btime (\d+)", f.read(), re.M).group(1))
    start = btime + int(proc_stat(pid)[19]) / os.sysconf("SC_CLK_TCK")
    ok(abs(m("process_start_time_seconds") - start) < 1.5,
       "process_start_time_seconds agrees with /proc (btime + starttime)",
       (m("process_start_time_seconds"), start))
    eq(scrape(base)("process_start_time_seconds"), m("process_start_time_seconds"),
       "process_start_time_seconds does not wobble between scrapes")
    ok(m("process_start_time_seconds") <= m("pullprof_start_time_seconds"),
       "the process started before the agent")


def test_other_families():
    m = scrape(base)
    s = curl(base + "/status").json()
    for metric, value in (
            ("pullprof_lookups_completed_total", s["lookups"]["done"]),
            ("pullprof_lookups_refused_total", s["lookups"]["refused"]),
            ("pullprof_lookups_queued", s["lookups"]["queued"]),
            ("pullprof_label_sets", s["labels"]["sets"]),
            ("pullprof_label_pushes_refused_total", s["labels"]["refused"]),
            ("pullprof_symbols_mappings", s["symbols"]["mappings"]),
            ("pullprof_cpu_ring_capacity", s["cpu"]["ring"]["capacity"])):
        eq(m(metric), float(value), f"{metric} is what /status says")


def test_heap():
    w = Work(env={"PULLPROF_HEAP_RATE": "32768"})
    ok(w.port, "heapwork starts", w.ready)
    wbase = f"http://127.0.0.1:{w.port}{PREFIX}"
    # Idle host: /status and /metrics read the same counters.
    m = scrape(wbase)
    st = curl(wbase + "/status").json()["heap"]
    eq(m("pullprof_heap_sampling_enabled"), float(st["enabled"]),
       "heap sampling enabled as /status says")
    eq(m("pullprof_heap_sampling_interval_bytes"), 32768.0,
       "sampling interval is PULLPROF_HEAP_RATE")
    for metric, key in (("pullprof_heap_sampled_allocations_total", "sampled"),
                        ("pullprof_heap_sampled_frees_total", "sampled_freed"),
                        ("pullprof_heap_sampled_live_objects", "live_sampled"),
                        ("pullprof_heap_estimated_inuse_bytes", "inuse_bytes_estimate"),
                        ("pullprof_heap_estimated_peak_bytes", "peak_bytes_estimate"),
                        ("pullprof_heap_samples_dropped_total", "dropped"),
                        ("pullprof_heap_stacks", "stacks"),
                        ("pullprof_heap_table_bytes", "table_bytes")):
        eq(m(metric), float(st[key]), f"{metric} == /status heap.{key}")
    if st["peak_time"] is None:
        eq(m.get("pullprof_heap_peak_time_seconds"), None,
           "no peak yet: no peak time sample")
    else:
        ok(abs(m("pullprof_heap_peak_time_seconds") - st["peak_time"]) < 1e-3,
           "peak time == /status heap.peak_time")

    if sanitized():
        skip("the heap metrics follow known allocations", NO_HEAP_WHY)
        code, out = lint(curl(wbase + "/metrics").body)
        ok(code == 0 and out == "", "heapwork's /metrics lints clean", out)
        w.quit()
        return
    eq(m("pullprof_heap_sampling_enabled"), 1.0, "heap sampling enabled")
    # 64 MiB in 4 KiB blocks, kept: the estimates move by about that much.
    size = 64 << 20
    eq(w.cmd(f"delta {size}"), "allocated", "the host allocates 64 MiB")
    m1 = scrape(wbase)

    def rise(name):
        return m1(name) - m(name)
    n = rise("pullprof_heap_sampled_allocations_total")
    # P(sampled) for 4096 bytes at 32768: 1 - e^(-1/8) = 11.75%: ~1900.
    ok(1500 < n < 2500, "about 1900 of the 16384 allocations sampled", n)
    per = rise("pullprof_heap_sampled_bytes_total") / n
    ok(4096 <= per < 4200, "sampled bytes are 4 KiB per sampled allocation", per)
    for name in ("pullprof_heap_estimated_allocated_bytes_total",
                 "pullprof_heap_estimated_inuse_bytes"):
        ok(abs(rise(name) - size) < 0.15 * size,
           f"{name} rose by 64 MiB within 15%", rise(name))
    ok(m1("pullprof_heap_estimated_peak_bytes") >=
       m1("pullprof_heap_estimated_inuse_bytes"), "peak >= in use")
    ok(abs(m1("pullprof_heap_peak_time_seconds") - time.time()) < 60,
       "the peak's time is now", m1.get("pullprof_heap_peak_time_seconds"))
    ok(m1("pullprof_heap_sampled_live_objects") >= n,
       "the sampled blocks are live", m1("pullprof_heap_sampled_live_objects"))
    ok(m1("pullprof_heap_unwind_duration_seconds_count") >=
       m("pullprof_heap_unwind_duration_seconds_count"),
       "the unwind summary's count does not go back")
    code, out = lint(curl(wbase + "/metrics").body)
    ok(code == 0 and out == "", "heapwork's /metrics lints clean", out)
    w.quit()

    # Heap sampling off: said so, and the counters stay still.
    w = Work(env={"PULLPROF_HEAP_RATE": "0"})
    wbase = f"http://127.0.0.1:{w.port}{PREFIX}"
    eq(w.cmd("delta 1048576"), "allocated", "allocations with sampling off")
    m = scrape(wbase)
    eq(m("pullprof_heap_sampling_enabled"), 0.0, "PULLPROF_HEAP_RATE=0: enabled 0")
    eq(m("pullprof_heap_sampled_allocations_total"), 0.0, "nothing sampled")
    w.quit()


def test_metrics_path():
    other = Host(env={"PULLPROF_METRICS_PATH": "/metrics"})
    port = other.start()
    ok(isinstance(port, int), "starts with PULLPROF_METRICS_PATH=/metrics", port)
    root = f"http://127.0.0.1:{port}"
    r = curl(root + "/metrics")
    eq(r.status, 200, "/metrics at the root: 200")
    eq(r.header("content-type"), CONTENT_TYPE, "/metrics at the root: the type")
    code, out = lint(r.body)
    ok(code == 0 and out == "", "lints clean", out)
    a = Metrics(r.text)
    p = curl(root + PREFIX + "/metrics")
    eq(p.status, 200, "the prefix's /metrics still answers")
    b = Metrics(p.text)
    eq(sorted(a.families), sorted(b.families), "the same families at both paths")
    # Both are the one endpoint: the root's scrape counted under metrics.
    eq(b("pullprof_http_requests_total", endpoint="metrics", code="2xx") -
       a("pullprof_http_requests_total", endpoint="metrics", code="2xx"), 1,
       "a scrape at the root counts as endpoint=metrics")
    for path in ("/metricsx", "/metrics/", "/Metrics", "/metrics/x"):
        eq(curl(root + path).status, 404, f"{path}: 404 (exact path only)")
    eq(curl(root + "/metrics?x=1").status, 200, "a query string is ignored")
    eq(curl(root + "/metrics", "-I").status, 200, "HEAD /metrics")
    eq(curl(root + "/metrics", "-X", "DELETE").status, 405, "DELETE /metrics: 405")
    eq(curl(root + "/").status, 302, "/ still leads to the index")
    st = curl(root + PREFIX + "/status").json()
    eq(st["config"]["metrics_path"], "/metrics", "status.config.metrics_path")
    other.quit()


def test_bad_metrics_path():
    for value, why in (("metrics", "starting with /"),
                       ("/", "leads to the index"),
                       ("/metrics?x=1", "may not contain a query"),
                       ("/debug/pprof/status", "under the prefix"),
                       ("/a//b", "empty, . or ..")):
        bad = Host(env={"PULLPROF_METRICS_PATH": value})
        line = bad.start()
        ok(isinstance(line, str) and line.startswith("err -22"),
           f"PULLPROF_METRICS_PATH={value}: the start fails (-EINVAL)", line)
        m = bad.wait_line(bad.err_lines, "PULLPROF_METRICS_PATH", timeout=5)
        ok(m is not None and why in m.string,
           f"... with a line naming PULLPROF_METRICS_PATH: {why}",
           bad.stderr_text())
        ok(bad.alive(), "... and the host runs on")
        bad.quit()


def test_token():
    t = Host(env={"PULLPROF_TOKEN": TOKEN, "PULLPROF_METRICS_PATH": "/metrics"})
    port = t.start()
    ok(isinstance(port, int), "starts with a token", port)
    root = f"http://127.0.0.1:{port}"
    for path in (PREFIX + "/metrics", "/metrics"):
        eq(curl(root + path).status, 401, f"{path} without the token: 401")
        # curl keeps only the last header of a name: read them raw.
        raw = subprocess.run(["curl", "-s", "-D", "-", "-o", "/dev/null",
                              root + path], capture_output=True, text=True).stdout
        ok('WWW-Authenticate: Bearer realm="pullprof"' in raw,
           f"{path}: the 401 asks for a Bearer token", raw)
        eq(curl(root + path, "-H", "Authorization: Bearer wrong-token-x").status,
           401, f"{path} with a wrong token: 401")
        r = curl(root + path, "-H", f"Authorization: Bearer {TOKEN}")
        eq(r.status, 200, f"{path} with Authorization: Bearer (as Prometheus "
           "sends it): 200")
        code, out = lint(r.body)
        ok(code == 0 and out == "", f"{path}: lints clean", out)
        eq(curl(root + path, "-u", f"prometheus:{TOKEN}").status, 200,
           f"{path} with the token as the Basic password: 200")
    t.quit()


def test_scrape_load():
    """Scrapes in a tight loop while a CPU window runs: every one answered
    and clean, the host unharmed."""
    eq(h.cmd("spin 4"), "ok", "a host thread burns CPU")
    res = {}

    def fetch():
        res["r"] = curl(base + "/profile?seconds=2&hz=1000", timeout=30)
    t = threading.Thread(target=fetch)
    t.start()
    statuses = set()
    n = 0
    deadline = time.time() + 2
    while time.time() < deadline and n < 400:
        statuses.add(curl(base + "/metrics").status)
        n += 1
    t.join(40)
    eq(statuses, {200}, f"{n} scrapes during a 1000 Hz window: all 200")
    eq(res["r"].status, 200, "the window's profile arrives")
    ok(h.alive(), "host alive")


def same_moment(base, pairs, what, *args):
    """Each (metric, labels, value from /status) of pairs checked against
    the /status read between two scrapes that agree on it (the value did
    not move meanwhile). args go to curl. The last scrape and /status."""
    for _ in range(20):
        m1 = scrape(base, *args)
        st = curl(base + "/status", *args).json()
        m2 = scrape(base, *args)
        got = [(m1.get(n, **labels), m2.get(n, **labels))
               for n, labels, _ in pairs]
        if all(a == b for a, b in got):
            break
    for (n, labels, value), (a, _) in zip(pairs, got):
        sel = ",".join(f'{k}="{v}"' for k, v in labels.items())
        eq(a, float(value(st)), f"{what}: {n}{{{sel}}} is /status's value "
           "at that moment" if sel else
           f"{what}: {n} is /status's value at that moment")
    return m2, st


def signal_pairs(status_of):
    """pullprof_cpu_timer_signal's series against /status's cpu.signal."""
    return [("pullprof_cpu_timer_signal", {"signal": sig},
             lambda st, sig=sig: status_of(st).get("signal") == sig)
            for sig in ("SIGURG", "SIGPROF")]


def test_cpu_signals():
    """cpu.signal, cpu.threads_blocking_signal and cpu.foreign_signals:
    idle, then during a window that a stray kill(SIGURG) reaches."""
    def cpu(st):
        return st["cpu"]
    pairs = signal_pairs(cpu) + [
        ("pullprof_cpu_threads_blocking_signal", {},
         lambda st: st["cpu"]["threads_blocking_signal"]),
        ("pullprof_cpu_foreign_signals_total", {},
         lambda st: st["cpu"]["foreign_signals"])]
    m, st = same_moment(base, pairs, "no window")
    ok(st["cpu"]["signal"] is None and
       m("pullprof_cpu_timer_signal", signal="SIGURG") == 0,
       "no window: no signal, every timer_signal series 0", st["cpu"])
    # No thread of the host's burns CPU: the kill is taken by one that
    # waits in a system call. (TSan runs a handler late, at the thread's
    # next intercepted call, which a spinning thread may not make before
    # the window ends and the handler is gone.)
    def spinners():
        n = 0
        for tid in os.listdir(f"/proc/{h.pid}/task"):
            try:
                with open(f"/proc/{h.pid}/task/{tid}/comm") as f:
                    n += f.read().strip() == "late-spinner"
            except OSError:
                pass
        return n
    # test_cpu_window's spinner burns 6 s of its own CPU: beside busy
    # loops that is minutes of wall time, longer than any wait here. It
    # is told to end (the host's "unspin"), and then it is gone at its
    # next look at the clock, a millisecond of its CPU away.
    eq(h.cmd("unspin"), "ok", "the spinners of earlier tests are told to end")
    ok(until(lambda: spinners() == 0, timeout=30),
       "the spinner of an earlier test has ended")
    res = {}
    t = threading.Thread(target=lambda: res.update(
        r=curl(base + "/profile?seconds=5", timeout=30)))
    t.start()
    ok(until(lambda: curl(base + "/status").json()["cpu"]["signal"] ==
             "SIGURG", timeout=20), "the window samples with SIGURG")
    f0 = curl(base + "/status").json()["cpu"]["foreign_signals"]
    os.kill(h.pid, signal.SIGURG)
    # A host command each time: TSan holds a signal that lands in the
    # main thread's read() until its next intercepted call.
    ok(until(lambda: h.alive() and
             curl(base + "/status").json()["cpu"]["foreign_signals"] > f0,
             timeout=10), "a kill(SIGURG) reaches the handler as a foreign "
       "signal")
    m, st = same_moment(base, pairs, "during a window")
    eq(m("pullprof_cpu_timer_signal", signal="SIGURG"), 1.0,
       "during the window: timer_signal{signal=SIGURG} 1")
    ok(m("pullprof_cpu_foreign_signals_total") > f0,
       "pullprof_cpu_foreign_signals_total counts the kill",
       (f0, m("pullprof_cpu_foreign_signals_total")))
    t.join(40)
    eq(res.get("r") and res["r"].status, 200, "the window's profile arrives")
    ok(h.alive(), "host alive")


def test_sigprof_blocking_host():
    """A host with a SIGURG handler of its own (pullprof samples with
    SIGPROF) whose threads block every signal mid-window
    (tests/hostile/sighost, as test_hostile_signals.py drives it)."""
    from test_hostile_signals import SigHost, in_background
    sh = SigHost()
    ok(sh.port, "sighost serves", sh.stderr_text())
    eq(sh.cmd("burn 2"), "ok", "2 burner threads")
    eq(sh.cmd("urg"), "ok", "the host installs its own SIGURG handler")
    t, res = in_background(f"{sh.base}/profile?seconds=6")
    ok(until(lambda: sh.status().get("samples", 0) > 5, timeout=20),
       "the window samples")
    eq(sh.cmd("blocklater"), "ok", "the burners block every signal now")
    ok(until(lambda: sh.status().get("threads_blocking_signal", 0) >= 2,
             timeout=20), "the collector finds both", sh.status())
    m, _ = same_moment(sh.base, signal_pairs(lambda st: st["cpu"]) + [
        ("pullprof_cpu_threads_blocking_signal", {},
         lambda st: st["cpu"]["threads_blocking_signal"])],
        "sighost during the window")
    ok(m("pullprof_cpu_timer_signal", signal="SIGPROF") == 1 and
       m("pullprof_cpu_timer_signal", signal="SIGURG") == 0,
       "timer_signal{signal=SIGPROF} 1, {signal=SIGURG} 0")
    ok(m("pullprof_cpu_threads_blocking_signal") >= 2,
       "pullprof_cpu_threads_blocking_signal counts the burners")
    t.join(60)
    eq(res.get("r") and res["r"].status, 200, "the window: 200")
    eq(sh.quit(), 0, "sighost exits 0")


def test_connection_metrics():
    """connections.waiting, .reserved and .waits_refused with one client
    at a limit of 1: its window waits, its healthz comes in on a kept
    place, its second window is refused. Read from another address,
    which is at no limit and moves none of them."""
    c = Host(env={"PULLPROF_MAX_CLIENT_CONNECTIONS": "1"})
    port = c.start()
    ok(isinstance(port, int), "host with PULLPROF_MAX_CLIENT_CONNECTIONS=1",
       port)
    cbase = f"http://127.0.0.1:{port}{PREFIX}"
    other = ("--interface", "127.0.0.250")

    def conns(st):
        return st["connections"]
    pairs = [("pullprof_http_connections_waiting", {},
              lambda st: conns(st)["waiting"]),
             ("pullprof_http_connections_reserved_total", {},
              lambda st: conns(st)["reserved"]),
             ("pullprof_http_waits_refused_total", {},
              lambda st: conns(st)["waits_refused"])]
    s = socket.create_connection(("127.0.0.1", port), timeout=30,
                                 source_address=("127.0.0.1", 0))
    s.sendall(f"GET {PREFIX}/profile?seconds=20 HTTP/1.1\r\n"
              "Host: localhost\r\n\r\n".encode())
    ok(until(lambda: conns(curl(cbase + "/status", *other).json())
             ["waiting"] == 1, timeout=30), "the window waits")
    eq(curl(cbase + "/healthz").status, 200,
       "/healthz from the same client: 200 (on a kept place)")
    eq(curl(cbase + "/profile?seconds=1").status, 429,
       "a second window from it: 429")
    m, st = same_moment(cbase, pairs, "one window at the limit", *other)
    ok(m("pullprof_http_connections_waiting") == 1 and
       m("pullprof_http_connections_reserved_total") >= 2 and
       m("pullprof_http_waits_refused_total") >= 1,
       "waiting 1, reserved >= 2, waits_refused >= 1", conns(st))
    s.close()
    ok(until(lambda: conns(curl(cbase + "/status", *other).json())
             ["waiting"] == 0, timeout=30), "the window ends with its client")
    m, _ = same_moment(cbase, pairs, "client gone", *other)
    eq(m("pullprof_http_connections_waiting"), 0.0,
       "pullprof_http_connections_waiting 0 again")
    c.quit()


def test_descriptors_lost():
    """A host that closes every descriptor from 3 on and reuses the
    numbers (tests/hostile/closefrom, as test_hostile_fds.py drives it)."""
    ch = Host(env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"),
              exe=os.path.join(BUILD, "tests", "hostile", "closefrom"))
    mt = ch.wait_line(ch.err_lines, r"serving http://127\.0\.0\.1:(\d+)/",
                      timeout=30)
    ok(mt, "closefrom serves", ch.stderr_text())
    cbase = f"http://127.0.0.1:{mt.group(1) if mt else 0}{PREFIX}"
    pairs = [("pullprof_http_descriptors_lost_total", {},
              lambda st: st["descriptors"]["lost"]),
             ("pullprof_http_server_restarts_total", {},
              lambda st: st["descriptors"]["server_restarts"])]
    m, _ = same_moment(cbase, pairs, "before")
    eq(m("pullprof_http_descriptors_lost_total"), 0.0, "nothing lost at first")
    with tempfile.TemporaryDirectory() as d:
        eq(ch.cmd("close"), "closed", "the host closes every descriptor >= 3")
        ok(ch.cmd(f"reuse {d} 3").startswith("reused "),
           "and opens files and pipes that take the numbers")

        def restarted():
            r = curl(cbase + "/status", timeout=10)
            return r.status == 200 and \
                r.json()["descriptors"]["server_restarts"] >= 1
        ok(until(restarted, timeout=30), "the server is set up again")
        m, _ = same_moment(cbase, pairs, "after closefrom")
        ok(m("pullprof_http_descriptors_lost_total") >= 1 and
           m("pullprof_http_server_restarts_total") >= 1,
           "descriptors lost and server restarts counted")
        code, out = lint(curl(cbase + "/metrics").body)
        ok(code == 0 and out == "", "its /metrics lints clean", out)
        ch.p.stdin.write(b"exit\n")
        ch.p.stdin.flush()
        eq(ch.p.wait(20), 0, "closefrom exits 0")


def test_files_changed():
    """A loaded plugin truncated under its mapping
    (tests/symbols/pluginhost, as test_hostile_images.py drives it)."""
    d = tempfile.mkdtemp(prefix="pp-metrics-")
    path = os.path.join(d, "plugin.so")
    shutil.copyfile(os.path.join(BUILD, "tests", "symbols", "plugin1.so"), path)
    ph = Host(env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"),
              exe=os.path.join(BUILD, "tests", "symbols", "pluginhost"))
    mt = ph.wait_line(ph.err_lines,
                      r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                      timeout=30)
    ok(mt, "pluginhost serves", ph.stderr_text())
    pbase = f"http://127.0.0.1:{mt.group(1) if mt else 0}{PREFIX}"
    pairs = [("pullprof_symbols_files_changed_total", {},
              lambda st: st["symbols"]["files_changed"])]
    try:
        ok(ph.cmd("load " + path).startswith("loaded 1 "), "a plugin loaded")
        m, _ = same_moment(pbase, pairs, "before the change")
        eq(m("pullprof_symbols_files_changed_total"), 0.0, "none changed yet")
        os.truncate(path, 0)

        def seen():
            curl(pbase + "/maps")
            return curl(pbase + "/status").json()["symbols"]["files_changed"] >= 1
        ok(until(seen, timeout=30), "the agent finds the file changed")
        m, _ = same_moment(pbase, pairs, "after the truncation")
        ok(m("pullprof_symbols_files_changed_total") >= 1,
           "pullprof_symbols_files_changed_total counts it")
    finally:
        eq(ph.quit(), 0, "pluginhost exits 0")
        shutil.rmtree(d, ignore_errors=True)


def test_looks_denied():
    """Thread stacks the agent may not read once the host is not
    dumpable (tests/threads/dropper, as test_hostile_privileges.py drives
    it; as root it runs as uid 65534, since root reads root's files)."""
    env = preload_env(PULLPROF_LISTEN="127.0.0.1:0")
    prefix = ()
    if os.geteuid() == 0:
        prefix = ("setpriv", "--reuid=65534", "--regid=65534",
                  "--clear-groups", "env",
                  *(f"{k}={v}" for k, v in env.items()))
        env = {}
    dh = Host(env=env, exe=os.path.join(BUILD, "tests", "threads", "dropper"),
              prefix=prefix)
    mt = dh.wait_line(dh.err_lines,
                      r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                      timeout=30)
    ok(mt, "dropper serves", dh.stderr_text())
    dbase = f"http://127.0.0.1:{mt.group(1) if mt else 0}{PREFIX}"
    pairs = [("pullprof_thread_looks_denied_total", {},
              lambda st: st["threads"]["looks"]["denied"])]
    m, _ = same_moment(dbase, pairs, "dumpable")
    eq(m("pullprof_thread_looks_denied_total"), 0.0, "nothing denied at first")
    ok(re.match(r"dropped \d+ 0$", dh.cmd("nodump")),
       "the host is not dumpable any more")
    eq(curl(dbase + "/goroutine").status, 200, "a thread dump: 200")
    m, _ = same_moment(dbase, pairs, "not dumpable")
    ok(m("pullprof_thread_looks_denied_total") > 0,
       "pullprof_thread_looks_denied_total counts the refused looks")
    eq(dh.quit(), 0, "dropper exits 0")


def test_readme():
    """Every family served is documented in docs/endpoints.md's metrics
    table, and the table names nothing else."""
    with open(os.path.join(SRC, "docs", "endpoints.md")) as f:
        doc = f.read()
    m = re.search(r"^## Prometheus metrics.*?(?=^## |\Z)", doc, re.M | re.S)
    ok(m is not None, "docs/endpoints.md has a Prometheus metrics section")
    section = m.group(0) if m else ""
    rows = dict(re.findall(r"^\| `((?:pullprof|process)_[a-z_]+)`[^|]*\| (\w+) \|",
                           section, re.M))
    eq(rows, FAMILIES, "docs rows: every family with its type, and no other")


def teardown():
    h.quit()


run([test_tools, setup, test_format, test_request_counters, test_cpu_window,
     test_process, test_other_families, test_cpu_signals,
     test_sigprof_blocking_host, test_connection_metrics,
     test_descriptors_lost, test_files_changed, test_looks_denied,
     test_heap, test_metrics_path,
     test_bad_metrics_path, test_token, test_scrape_load, test_readme, teardown])

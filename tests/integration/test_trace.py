#!/usr/bin/env python3
"""/trace and ?format=perfetto: CPU samples on a per-thread timeline as a
Perfetto trace, against a host that burns at known times
(tests/trace/phases), over real HTTP. Every trace is decoded with protoc
against Perfetto's own protos (../shared/perfetto-protos, or
PP_PERFETTO_PROTOS) and checked against the rules Perfetto's trace
processor relies on, and against the pprof of the same window (?id=)."""
import gzip
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptest  # noqa: E402
from pptest import (BUILD, NO_CPU_TRUTH_WHY, SANITIZER, Proc,  # noqa: E402
                    Profile, Work, _parse_text_format, curl, eq, find_protos,
                    ok, run, sanitized, skip)

PHASES = os.path.join(BUILD, "tests", "trace", "phases")


PROTOS = find_protos()
NO_PROTOS = (f"Perfetto's protos are not here ({PROTOS}; set "
             "PP_PERFETTO_PROTOS): the trace is not decoded")
BUILTIN_MONOTONIC = 3
BUILTIN_BOOTTIME = 6


def have_protos():
    return os.path.exists(os.path.join(PROTOS, "protos", "perfetto", "trace",
                                       "trace.proto"))


def decode_trace(data):
    """protoc --decode=perfetto.protos.Trace against Perfetto's protos: the
    packets, as dicts (every field a list)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = subprocess.run(
        ["protoc", f"--proto_path={PROTOS}", "--decode=perfetto.protos.Trace",
         "protos/perfetto/trace/trace.proto"], input=data,
        capture_output=True, timeout=300)
    if p.returncode != 0:
        raise ValueError("protoc could not decode: " + p.stderr.decode())
    return _parse_text_format(p.stdout.decode("utf-8", "replace")).get(
        "packet", [])


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


class Trace:
    """A decoded trace, checked as it is read: interned data resolved per
    sequence, in stream order."""

    def __init__(self, packets):
        self.packets = packets
        self.problems = []
        self.seq_first = {}
        self.tracks = {}
        self.events = []  # (packet index, seq, ts, clock, track_event, ctx)
        self.snapshots = []
        interned = {}
        for i, pk in enumerate(packets):
            seq = one(pk, "trusted_packet_sequence_id", 0)
            if seq not in self.seq_first:
                self.seq_first[seq] = pk
                if not one(pk, "first_packet_on_sequence") or not (
                        one(pk, "sequence_flags", 0) & 1):
                    self.problems.append(
                        f"sequence {seq}: its first packet does not clear "
                        "incremental state")
                interned[seq] = defaultdict(dict)
            elif one(pk, "sequence_flags", 0) & 1:
                interned[seq] = defaultdict(dict)
            it = interned[seq]
            for idata in pk.get("interned_data", []):
                for kind, entries in idata.items():
                    for e in entries:
                        it[kind][one(e, "iid")] = e
            if "clock_snapshot" in pk:
                self.snapshots.append(pk["clock_snapshot"][0])
            for td in pk.get("track_descriptor", []):
                self.tracks[one(td, "uuid")] = td
            for te in pk.get("track_event", []):
                ctx = self.resolve(seq, it, te)
                self.events.append((i, seq, one(pk, "timestamp"),
                                    one(pk, "timestamp_clock_id"), te, ctx))

    def need(self, seq, it, kind, iid, what):
        e = it[kind].get(iid)
        if e is None:
            self.problems.append(
                f"sequence {seq}: {what} uses {kind} {iid}, not defined "
                "before it")
        return e

    def resolve(self, seq, it, te):
        """The event's name and callstack (function names, root first)."""
        ctx = {"name": one(te, "name"), "stack": None, "args": {}}
        if one(te, "name_iid"):
            e = self.need(seq, it, "event_names", one(te, "name_iid"),
                          "an event")
            ctx["name"] = one(e, "name") if e else None
        for d in te.get("debug_annotations", []):
            name = one(d, "name")
            if one(d, "name_iid"):
                e = self.need(seq, it, "debug_annotation_names",
                              one(d, "name_iid"), "an argument")
                name = one(e, "name") if e else None
            value = one(d, "int_value", one(d, "string_value"))
            if one(d, "string_value_iid"):
                e = self.need(seq, it, "debug_annotation_string_values",
                              one(d, "string_value_iid"), "an argument")
                value = one(e, "str") if e else None
            ctx["args"][name] = value
        cs = one(te, "callstack_iid")
        if not cs:
            return ctx
        c = self.need(seq, it, "callstacks", cs, "an event")
        if not c:
            return ctx
        names = []
        for fid in c.get("frame_ids", []):
            f = self.need(seq, it, "frames", fid, f"callstack {cs}")
            if not f:
                continue
            fn = one(f, "function_name_id")
            name = None
            if fn:
                s = self.need(seq, it, "function_names", fn, f"frame {fid}")
                name = one(s, "str") if s else None
            for k, kind in (("mapping_id", "mappings"),
                            ("source_path_iid", "source_paths")):
                if one(f, k):
                    self.need(seq, it, kind, one(f, k), f"frame {fid}")
            if one(f, "mapping_id"):
                m = it["mappings"].get(one(f, "mapping_id"))
                for pid in (m or {}).get("path_string_ids", []):
                    self.need(seq, it, "mapping_paths", pid, "a mapping")
                if m and one(m, "build_id"):
                    self.need(seq, it, "build_ids", one(m, "build_id"),
                              "a mapping")
            names.append(name)
        ctx["stack"] = names
        return ctx

    def thread_of(self, uuid):
        td = self.tracks.get(uuid)
        return one(td, "thread") if td else None

    def cpu_events(self):
        return [e for e in self.events if e[5]["name"] == "cpu"]


def window_bounds(tr, what="CPU window"):
    begin = end = None
    for i, seq, ts, clock, te, ctx in tr.events:
        if ctx["name"] == what and one(te, "type") == "TYPE_SLICE_BEGIN":
            begin = ts
            track = one(te, "track_uuid")
        elif (begin is not None and end is None and
              one(te, "type") == "TYPE_SLICE_END" and
              one(te, "track_uuid") == track):
            end = ts
    return begin, end


def start_phases():
    p = Proc([PHASES], env={"PULLPROF_LISTEN": "127.0.0.1:0"},
             stdout_lines=True)
    port = int(p.wait_line(p.out_lines, r"^port (\d+)", timeout=30).group(1))
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    return p, port


def url(port, path):
    return f"http://127.0.0.1:{port}/debug/pprof/{path}"


def status(port):
    return curl(url(port, "status")).json()


def wait_window(port):
    deadline = time.time() + 60
    while status(port)["cpu"]["windows_open"] < 1:
        if time.time() > deadline:
            raise TimeoutError("no CPU window opened")
        time.sleep(0.02)


def send(p, line):
    p.p.stdin.write((line + "\n").encode())
    p.p.stdin.flush()


def in_background(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()
    return t, box


def trace_leaf(e):
    """A CPU event's leaf function as pprof names it: "?" for a frame no
    symbol covers (the trace has a frame without a name there, and its
    debug.function says "[unknown]")."""
    stack = e[5]["stack"] or []
    return (stack[-1] if stack else None) or "?"


def trace_function_arg(e):
    f = e[5]["args"].get("function")
    return "?" if f == "[unknown]" else f


def leaf_counts_pprof(prof):
    c = Counter()
    for s in prof.samples:
        st = prof.stack(s)
        leaf = st[0][0][0] if st and st[0] else "?"
        c[leaf] += int(s["value"][0])
    return c


def check_phases(tr, cpu, seen, misplaced):
    ok(seen["phase_a_work"] >= 10 and seen["phase_b_work"] >= 10,
       "trace: both phases sampled (0.8 s of burning each at 250 Hz; "
       "a busy machine gives them less CPU)", seen)
    eq(misplaced[:5], [], "trace: phase_a_work's samples all fall in "
       "phase-a's burn and phase_b_work's in phase-b's, on their threads")
    roots = Counter((e[5]["stack"] or ["?"])[0] for e in cpu
                    if (e[5]["stack"] or [None])[-1] == "phase_a_work")
    ok(roots and set(roots) <= {"__clone3", "clone", "start_thread"},
       "trace: callstacks run root first (thread start ... leaf)", roots)


def test_trace_of_known_phases():
    p, port = start_phases()
    try:
        t, box = in_background(lambda: curl(
            url(port, "trace?seconds=4&hz=250"), timeout=120))
        wait_window(port)
        send(p, "go 800")
        m = p.wait_line(p.out_lines, r"^phases (\d+) (\d+) (\d+) (\d+)",
                        timeout=60)
        a0, a1, b0, b1 = (int(x) for x in m.groups())
        t.join()
        r = box["r"]
        eq(r.status, 200, "trace: 200")
        eq(r.headers.get("content-type"), "application/octet-stream",
           "trace: application/octet-stream")
        eq(r.headers.get("content-disposition"),
           'attachment; filename="trace.pftrace"',
           "trace: a file to save, trace.pftrace")
        tid_text = r.headers.get("x-pullprof-profile-id", "")
        ok(tid_text.isdigit(), "trace: kept under an id (?id=)", tid_text)
        ok(r.body[:2] != b"\x1f\x8b", "trace: not gzipped for a client "
           "that did not ask")
        if not have_protos():
            skip("trace: decoded with Perfetto's protos", NO_PROTOS)
            return
        tr = Trace(decode_trace(r.body))
        eq(tr.problems, [], "trace: every sequence starts cleared, every "
           "interned id is defined before its use in the same sequence")

        # Clocks: a snapshot relating MONOTONIC to BOOTTIME; every
        # timestamp says it is MONOTONIC.
        clocks = {one(c, "clock_id") for s in tr.snapshots
                  for c in s.get("clocks", [])}
        ok({BUILTIN_MONOTONIC, BUILTIN_BOOTTIME} <= clocks,
           "trace: the clock domain is declared (a snapshot with "
           "MONOTONIC and BOOTTIME)", clocks)
        bad_clock = [e[0] for e in tr.events if e[2] is not None and
                     e[3] != BUILTIN_MONOTONIC]
        eq(bad_clock, [], "trace: every timestamp is on CLOCK_MONOTONIC")

        begin, end = window_bounds(tr)
        ok(begin and end and 3.9e9 <= end - begin <= 4.1e9,
           "trace: the window's bounds, 4 s apart", (begin, end))
        cpu = tr.cpu_events()
        outside = [e[2] for e in cpu if not begin <= e[2] <= end]
        eq(outside, [], "trace: every CPU sample lies within the window")
        last = {}
        unordered = 0
        for e in cpu:
            u = one(e[4], "track_uuid")
            if e[2] < last.get(u, 0):
                unordered += 1
            last[u] = e[2]
        eq(unordered, 0, "trace: timestamps ordered per thread")

        # Each sample on its thread's track, named as /threads names it.
        threads = {t["tid"]: t["name"] for t in
                   curl(url(port, "threads")).json()["threads"]}
        wrong = []
        for e in cpu:
            th = tr.thread_of(one(e[4], "track_uuid"))
            if not th or one(th, "tid") not in threads or \
                    one(th, "thread_name") != threads[one(th, "tid")] or \
                    one(th, "pid") != p.pid:
                wrong.append(th)
        eq(wrong[:3], [], "trace: every sample on a thread track whose "
           "pid, tid and name match /threads")

        # When: phase_a_work only while phase-a burnt, on phase-a;
        # phase_b_work likewise. One period of slack either side (a sample
        # is stamped when the timer fires, up to a period after).
        slack = 2 * 1000000000 // 250
        seen = Counter()
        misplaced = []
        for e in cpu:
            stack = e[5]["stack"] or []
            leaf = stack[-1] if stack else None
            th = tr.thread_of(one(e[4], "track_uuid"))
            name = one(th, "thread_name") if th else None
            for fn, lo, hi, tname in (("phase_a_work", a0, a1, "phase-a"),
                                      ("phase_b_work", b0, b1, "phase-b")):
                if leaf == fn:
                    seen[fn] += 1
                    if not (lo - slack <= e[2] <= hi + slack) or \
                            name != tname:
                        misplaced.append((fn, name, (e[2] - lo) / 1e6))
        if SANITIZER == "tsan":
            skip("trace: samples at the phases' times and places",
                 NO_CPU_TRUTH_WHY)
        else:
            check_phases(tr, cpu, seen, misplaced)

        # The same facts as the pprof of the same window.
        r2 = curl(url(port, f"profile?id={tid_text}"))
        eq(r2.status, 200, "the trace's window as pprof: /profile?id=")
        prof = Profile(r2.body)
        total = sum(int(s["value"][0]) for s in prof.samples)
        total_ns = sum(int(s["value"][1]) for s in prof.samples)
        counts = [e[5]["args"].get("samples", 1) for e in cpu]
        lost = sum(e[5]["args"].get("lost_samples", 0) for e in tr.events)
        eq([(e[5]["args"].get("function"), e[5]["args"].get("cpu_ns"))
            for e in cpu if trace_function_arg(e) != trace_leaf(e) or
            e[5]["args"].get("cpu_ns") !=
            one(e[4], "callstack_weight")][:3], [],
           "trace: each sample's arguments for SQL (debug.function, "
           "debug.cpu_ns) match its leaf and weight")
        period = prof.raw.get("period", [0])[0]
        eq(sum(counts) + lost, total,
           "trace: sample counts (with overruns and lost ones) add up to "
           "the pprof's")
        weight = sum(one(e[4], "callstack_weight", 0) for e in cpu)
        eq(int(weight) + lost * period, total_ns,
           "trace: total weight equals the pprof's CPU nanoseconds")
        per_fn = Counter()
        for e, c in zip(cpu, counts):
            per_fn[trace_leaf(e)] += c
        # The samples on no thread's timeline (a full ring, threads that
        # block the signal): one event each on the process's track,
        # named after the pprof's frame.
        for e in tr.events:
            m = re.match(r"(\d+) CPU samples not on the timeline: (.*)",
                         e[5]["name"] or "")
            if m:
                eq(int(m.group(1)), e[5]["args"].get("lost_samples"),
                   f"trace: {m.group(2)}: its count in lost_samples")
                per_fn[m.group(2)] += int(m.group(1))
        want = leaf_counts_pprof(prof)
        eq(dict(per_fn), dict(want), "trace: per-function sample counts "
           "rebuilt from the trace equal the pprof's")

        # The kept window again, as a trace: the same samples.
        r3 = curl(url(port, f"profile?id={tid_text}&format=perfetto"))
        eq(r3.status, 200, "/profile?id=N&format=perfetto: 200")
        eq(r3.headers.get("content-disposition"),
           'attachment; filename="profile.pftrace"',
           "/profile?id=N&format=perfetto: a file to save")
        tr3 = Trace(decode_trace(r3.body))
        eq(tr3.problems, [], "?id=N&format=perfetto: a valid trace")
        eq([(e[2], e[5]["stack"]) for e in tr3.cpu_events()],
           [(e[2], e[5]["stack"]) for e in cpu],
           "?id=N&format=perfetto: the same samples at the same times")
    finally:
        p.stop()


def test_blocked_threads():
    """Threads that block the sampling signals (a host reading its signals
    with signalfd): their CPU, which pprof charges to a frame of its own,
    is on the trace's process track under that frame's name, with the
    same count."""
    frame = "[pullprof: not sampled, the thread blocks the signal]"

    sighost = os.path.join(BUILD, "tests", "hostile", "sighost")
    p = Proc([sighost], env=pptest.preload_env(PULLPROF_LISTEN="127.0.0.1:0"))
    try:
        m = p.wait_line(p.err_lines,
                        r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                        timeout=60)
        port = int(m.group(1))
        eq(p.ask("blockall signalfd", 60), "ok", "blocked: every signal "
           "blocked, read with signalfd")
        eq(p.ask("burn 2", 60), "ok", "blocked: two burners")
        r = curl(url(port, "trace?seconds=2"), timeout=120)
        eq(r.status, 200, "blocked: trace 200")
        if r.status != 200:
            return
        if not have_protos():
            skip("blocked: decoded with Perfetto's protos", NO_PROTOS)
            return
        tid = r.headers.get("x-pullprof-profile-id", "")
        prof = Profile(curl(url(port, f"profile?id={tid}")).body)
        want = leaf_counts_pprof(prof).get(frame, 0)
        ok(want > 0, "blocked: the pprof charges their CPU to the frame",
           leaf_counts_pprof(prof))
        tr = Trace(decode_trace(r.body))
        got = [(e[5]["name"], e[5]["args"].get("lost_samples"))
               for e in tr.events
               if (e[5]["name"] or "").endswith(": " + frame)]
        eq(got, [(f"{want} CPU samples not on the timeline: {frame}", want)],
           "blocked: one instant on the process's track names the frame, "
           "with the pprof's count")
        eq(p.ask("read", 60), "read 0 0 0", "blocked: the host read none of "
           "pullprof's signals")
    finally:
        try:
            send(p, "quit")
            p.p.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            p.p.kill()


def test_formats_and_gzip():
    p, port = start_phases()
    try:
        # A /profile window rendered straight as a trace.
        t, box = in_background(lambda: curl(
            url(port, "profile?seconds=1&hz=200&format=perfetto"),
            timeout=60))
        wait_window(port)
        send(p, "go 300")
        p.wait_line(p.out_lines, r"^phases", timeout=60)
        t.join()
        eq(box["r"].status, 200, "/profile?format=perfetto: 200")
        eq(box["r"].headers.get("content-disposition"),
           'attachment; filename="profile.pftrace"',
           "/profile?format=perfetto: profile.pftrace")
        # gzip in transit when the client takes it.
        r = curl(url(port, "trace?seconds=1"), "-H",
                 "Accept-Encoding: gzip", timeout=60)
        eq(r.status, 200, "trace, gzip accepted: 200")
        eq(r.headers.get("content-encoding"), "gzip",
           "trace, gzip accepted: Content-Encoding gzip")
        ok(r.body[:2] == b"\x1f\x8b", "trace, gzip accepted: the body is "
           "gzip")
        ok("accept-encoding" in r.headers.get("vary", "").lower(),
           "trace: Vary: Accept-Encoding")
        if have_protos():
            tr = Trace(decode_trace(gzip.decompress(r.body)))
            eq(tr.problems, [], "trace, gzipped: a valid trace inside")
            b, e = window_bounds(tr)
            ok(b and e and 0.9e9 <= e - b <= 1.1e9,
               "trace: seconds defaults to what was asked (1 s)", (b, e))
        else:
            skip("trace, gzipped: decoded", NO_PROTOS)
    finally:
        p.stop()


def test_bad_input():
    p, port = start_phases()
    try:
        for q, want in (
                ("trace?seconds=0", "seconds"),
                ("trace?seconds=99999", "seconds"),
                ("trace?hz=0", "hz"),
                ("trace?hz=5000", "hz"),
                ("trace?format=pprof", "format"),
                ("trace?debug=1", "debug"),
                ("trace?top=5", "top"),
                ("trace?id=999999", None),
                ("trace?id=1&seconds=2", "seconds"),
                ("trace?wall=2", "wall"),
                ("trace?heap=yes", "heap"),
                ("trace?id=1&wall=1", "wall"),
                ("heap?format=perfetto", "perfetto"),
                ("goroutine?format=perfetto", "perfetto"),
                ("mutex?format=perfetto", "perfetto"),
        ):
            r = curl(url(port, q))
            code = 404 if want is None else 400
            eq(r.status, code, f"{q}: {code}")
            if want:
                ok(want in r.body.decode("utf-8", "replace"),
                   f"{q}: the answer names {want}", r.body[:200])
        ok(status(port)["cpu"]["windows_open"] == 0,
           "bad requests opened no window")
        # Heap profiling off: heap=1 says so, and opens nothing.
        q = Proc([PHASES], env={"PULLPROF_LISTEN": "127.0.0.1:0",
                                "PULLPROF_HEAP_RATE": "0"},
                 stdout_lines=True)
        qport = int(q.wait_line(q.out_lines, r"^port (\d+)",
                                timeout=30).group(1))
        r = curl(url(qport, "trace?seconds=1&heap=1"))
        eq(r.status, 404, "trace?heap=1 with heap profiling off: 404")
        ok(b"PULLPROF_HEAP_RATE" in r.body, "... naming PULLPROF_HEAP_RATE",
           r.body[:200])
        eq(status(qport)["cpu"]["windows_open"], 0, "... and no window "
           "stays open")
        q.stop()
        eq(curl(url(port, "healthz")).status, 200, "the agent still answers")
    finally:
        p.stop()


def test_wall_beside():
    p, port = start_phases()
    try:
        t, box = in_background(lambda: curl(
            url(port, "trace?seconds=3&hz=100&wall=1"), timeout=120))
        wait_window(port)
        send(p, "go 600")
        m = p.wait_line(p.out_lines, r"^phases (\d+) (\d+) (\d+) (\d+)",
                        timeout=60)
        a0, a1 = int(m.group(1)), int(m.group(2))
        t.join()
        r = box["r"]
        eq(r.status, 200, "trace?wall=1: 200")
        if not have_protos():
            skip("trace?wall=1: decoded", NO_PROTOS)
            return
        tr = Trace(decode_trace(r.body))
        eq(tr.problems, [], "trace?wall=1: sequence and interning rules "
           "hold on every sequence")
        begin, end = window_bounds(tr, "wall-clock window")
        ok(begin and end, "trace?wall=1: the wall window's bounds",
           (begin, end))
        # Wall slices: on a child track of each thread's track, named by
        # the state, over the time each look stands for.
        slices = defaultdict(list)  # thread name -> [(ts, state, stack)]
        open_ = {}
        wrong_parent = []
        for i, seq, ts, clock, te, ctx in tr.events:
            u = one(te, "track_uuid")
            td = tr.tracks.get(u)
            if not td or one(td, "name") != "wall-clock state":
                continue
            parent = tr.thread_of(one(td, "parent_uuid"))
            if not parent:
                wrong_parent.append(u)
                continue
            name = one(parent, "thread_name")
            if one(te, "type") == "TYPE_SLICE_BEGIN":
                open_[u] = (ts, ctx["name"], ctx["stack"] or [])
            elif one(te, "type") == "TYPE_SLICE_END" and u in open_:
                b, state, stack = open_.pop(u)
                slices[name].append((b, ts, state, stack))
        eq(wrong_parent, [], "trace?wall=1: every wall track is a child of "
           "a thread's track")
        idle = slices.get("idle", [])
        ok(idle and all(st == "sleeping" and "idle_wait" in stack
                        for _, _, st, stack in idle),
           "trace?wall=1: the idle thread is sleeping in idle_wait at "
           "every look", idle[:3])
        covered = sum(e - b for b, e, _, _ in idle)
        ok(begin and end and abs(covered - (end - begin)) <= 0.15 * (
            end - begin), "trace?wall=1: the idle thread's slices cover "
           "the window's wall time (within 15%)",
           (covered / 1e9, (end - begin) / 1e9 if begin else None))
        # A slice ends at its look.
        burning = [(e, st) for b, e, st, stack in slices.get("phase-a", [])
                   if "phase_a_work" in stack]
        ok(len(burning) >= 5 and all(st == "running" for _, st in burning),
           "trace?wall=1: phase-a looked at while it burnt: running, in "
           "phase_a_work", burning[:5])
        # A look is stamped when its tick starts; a running thread's
        # stack is taken by perf_event up to 20 ms later (more if the
        # sampler is preempted on a busy machine).
        slack = 100 * 1000000
        eq([e for e, _ in burning if not a0 - slack <= e <= a1 + slack], [],
           "trace?wall=1: ... and only while it burnt")
        cpu = tr.cpu_events()
        if SANITIZER != "tsan":
            ok(any((e[5]["stack"] or [None])[-1] == "phase_a_work"
                   for e in cpu), "trace?wall=1: the CPU samples are there "
               "too")
        # A /wall window alone, as a trace: wall slices, no CPU samples.
        r = curl(url(port, "wall?seconds=1&hz=50&format=perfetto"),
                 timeout=60)
        eq(r.status, 200, "/wall?format=perfetto: 200")
        tw = Trace(decode_trace(r.body))
        eq(tw.problems, [], "/wall?format=perfetto: a valid trace")
        states = Counter(e[5]["name"] for e in tw.events
                         if one(e[4], "type") == "TYPE_SLICE_BEGIN" and
                         e[5]["stack"])
        ok(states.get("sleeping", 0) > 0 and not tw.cpu_events(),
           "/wall?format=perfetto: the looks as state slices with stacks, "
           "no CPU samples", states)
    finally:
        p.stop()


def heap_dumps(packets):
    """The ProfilePackets' dumps, checked: every id a packet uses is defined
    in it. [(problems, [(leaf function, sample dict)])]"""
    out = []
    for pk in packets:
        for pp in pk.get("profile_packet", []):
            problems = []
            strings = {one(x, "iid"): one(x, "str") for x in
                       pp.get("strings", [])}
            maps = {one(x, "iid"): x for x in pp.get("mappings", [])}
            frames = {one(x, "iid"): x for x in pp.get("frames", [])}
            stacks = {one(x, "iid"): x for x in pp.get("callstacks", [])}
            for f in frames.values():
                if one(f, "function_name_id") not in strings:
                    problems.append(f"frame {one(f, 'iid')}: no name")
                if one(f, "mapping_id") and one(f, "mapping_id") not in maps:
                    problems.append(f"frame {one(f, 'iid')}: no mapping")
            for m in maps.values():
                for sid in m.get("path_string_ids", []) + m.get("build_id",
                                                                []):
                    if sid not in strings:
                        problems.append(f"mapping {one(m, 'iid')}: {sid}")
            rows = []
            for d in pp.get("process_dumps", []):
                for smp in d.get("samples", []):
                    cs = stacks.get(one(smp, "callstack_id"))
                    if not cs:
                        problems.append("a sample without its callstack")
                        continue
                    fids = cs.get("frame_ids", [])
                    if any(f not in frames for f in fids):
                        problems.append("a callstack without its frames")
                        continue
                    leaf = strings.get(one(frames[fids[-1]],
                                           "function_name_id"))
                    rows.append((leaf, smp, d))
            out.append((problems, rows))
    return out


def test_heap_beside():
    if sanitized():
        skip("trace?heap=1", "the sanitizer's allocator replaces the "
             "agent's malloc interposition")
        return
    w = Work({"PULLPROF_HEAP_RATE": "4096"})
    try:
        MiB = 1 << 20
        eq(w.cmd(f"peak {64 * MiB}", timeout=120), "peaked",
           "heapwork: 64 MiB allocated, then freed")
        eq(w.cmd(f"delta {16 * MiB}", timeout=120), "allocated",
           "heapwork: 16 MiB kept")
        r = w.get("trace?seconds=1&heap=1")
        eq(r.status, 200, "trace?heap=1: 200")
        if not have_protos():
            skip("trace?heap=1: decoded", NO_PROTOS)
            return
        packets = decode_trace(r.body)
        tr = Trace(packets)
        eq(tr.problems, [], "trace?heap=1: sequence rules hold")
        dumps = heap_dumps(packets)
        eq(len(dumps), 1, "trace?heap=1: one heap dump (a ProfilePacket)")
        if len(dumps) != 1:
            return
        problems, rows = dumps[0]
        eq(problems, [], "trace?heap=1: every string, mapping, frame and "
           "callstack the dump uses is in its packet")
        d = rows[0][2] if rows else {}
        eq(one(d, "pid"), w.pid, "trace?heap=1: the dump names the process")
        eq(one(d, "sampling_interval_bytes"), 4096,
           "trace?heap=1: the sampling interval")
        by = defaultdict(lambda: Counter())
        for leaf, smp, _ in rows:
            for k in ("self_allocated", "self_freed", "self_max"):
                by[leaf][k] += one(smp, k, 0)
        # The leaf of a heap stack is the allocating function.
        peak = by.get("hw_peak_builder")
        ok(peak is not None and abs(peak["self_max"] - 64 * MiB) <= 0.1 *
           64 * MiB and abs(peak["self_allocated"] - peak["self_freed"]) <=
           MiB, "trace?heap=1: hw_peak_builder: 64 MiB at the peak "
           "(self_max), all of it freed now", dict(peak or {}))
        prof = Profile(w.get("heap").body)
        want = 0
        for smp in prof.samples:
            st = prof.stack(smp)
            if any(f[0] == "hw_delta_work" for fs in st for f in fs):
                want += int(smp["value"][3])
        got = sum(v["self_allocated"] - v["self_freed"]
                  for k, v in by.items() if k == "hw_delta_work")
        ok(want > 0 and abs(got - want) <= 0.01 * want,
           "trace?heap=1: hw_delta_work's bytes in use (allocated - freed) "
           "equal /heap's inuse_space", (got, want))
    finally:
        w.quit()


if __name__ == "__main__":
    run([test_trace_of_known_phases, test_blocked_threads,
         test_formats_and_gzip, test_wall_beside, test_heap_beside,
         test_bad_input])

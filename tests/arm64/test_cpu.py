#!/usr/bin/env python3
"""CPU profiles of arm64 programs, in the emulated arm64 Debian (HACKING.md,
"arm64: the emulated Debian"): one boot of scripts/arm64-run.sh runs
tests/arm64/cpuhost (cross-built here, -O2, its deep stacks once per
variant: pointer authentication on and off, frame pointers kept and
omitted) with the cross-built libpullprof.so preloaded. The checks talk to
the agent inside from this side through the forwarded port (curl, protoc,
go tool pprof) and drive the host over a second one:

* two busy threads split 3:1 between burn_heavy and burn_light: the
  profile's CPU within 10% of the CPU the threads used by their own clocks,
  the split within 5 points;
* 30 frames deep, exact frame for frame (dwarf mode), with PAC on and off
  and with frame pointers;
* a leaf (its return address in x30 all along) and a function interrupted
  in its prologue (x30 signed and not yet stored, sp moved or not) under
  their callers;
* C++ with inlined member functions, named demangled, innermost first;
* short-lived threads' CPU accounted.

TAP on stdout (tests/integration/pptest.py); "1..0 # SKIP why" where
tests/arm64/run.sh skips (no qemu-system-aarch64, no cross compiler, no
arm64 package lists)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import pptest  # noqa: E402
import guestcheck  # noqa: E402  (tests/arm64: can the guest run here)
from pptest import (Profile, Proc, curl, eq, free_port, go_pprof, ok,  # noqa: E402
                    run, source_line)

T0 = time.time()
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
# 100 Hz, as go tool pprof asks: the guest's kernel ticks at 250 Hz and a
# vCPU the busy machine descheduled comes back with several periods gone
# (one signal, weighted by its overruns), so a higher rate adds weight, not
# independent draws.
HZ = 100


guestcheck.require(("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++"))

# The variants of tests/arm64/cpu_deep.c: name -> flags.
VARIANTS = {
    "pac": ["-mbranch-protection=standard", "-fomit-frame-pointer"],
    "nopac": ["-mbranch-protection=none", "-fomit-frame-pointer"],
    "fp": ["-mbranch-protection=standard", "-fno-omit-frame-pointer"],
}
CFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"]
CXX_SRC = os.path.join(HERE, "cpu_cxx.cc")

tmp = tempfile.mkdtemp(prefix="pp-arm64cpu-")
BIN = os.path.join(tmp, "bin")  # all of it goes into the guest
OBJ = os.path.join(tmp, "obj")
os.makedirs(BIN)
os.makedirs(OBJ)
HOST = os.path.join(BIN, "cpuhost")

state = {}


def cross_build():
    cc, cxx = "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++"
    steps = [[cc, *CFLAGS, "-mbranch-protection=standard",
              "-fomit-frame-pointer", "-c", os.path.join(HERE, "cpuhost.c"),
              "-o", os.path.join(OBJ, "cpuhost.o")],
             [cxx, *CFLAGS, "-mbranch-protection=standard", "-c", CXX_SRC,
              "-o", os.path.join(OBJ, "cxx.o")]]
    for v, flags in VARIANTS.items():
        steps.append([cc, *CFLAGS, f"-DVARIANT={v}", *flags, "-c",
                      os.path.join(HERE, "cpu_deep.c"),
                      "-o", os.path.join(OBJ, f"deep_{v}.o")])
    for argv in steps:
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode:
            return f"{' '.join(argv)}\n{p.stderr}"
    objs = sorted(os.path.join(OBJ, f) for f in os.listdir(OBJ))
    p = subprocess.run([cxx, "-pthread", "-o", HOST, *objs],
                       capture_output=True, text=True)
    return p.stderr if p.returncode else None


def disassembly(fn):
    """fn's instructions in the cross-built host, as objdump prints them."""
    if "objdump" not in state:
        state["objdump"] = subprocess.run(
            ["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", HOST],
            capture_output=True, text=True).stdout
    m = re.search(rf"^[0-9a-f]+ <{fn}>:\n(.*?)\n\n", state["objdump"],
                  re.S | re.M)
    return m.group(1) if m else ""


class Guest:
    """The VM running cpuhost with the agent preloaded, and the
    connection that drives the host."""

    def __init__(self):
        self.agent, self.ctl = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.agent}/debug/pprof"
        self.t0 = time.time()
        self.p = Proc([os.path.join(TOP, "scripts", "arm64-run.sh"),
                       "--preload", "--port", f"{self.agent}:6060",
                       "--port", f"{self.ctl}:7070", "--", HOST, "7070"],
                      env={"PULLPROF_LISTEN": "0.0.0.0:6060",
                           "PULLPROF_INSECURE": "1",
                           "PP_ARM64_TIMES": "1",
                           "PP_ARM64_TIMEOUT": "900"},
                      stdin=False)
        self.sock = None
        # The first run builds the guest and the library (minutes).
        self.listening = self.p.wait_line(self.p.out_lines,
                                          r"^cpuhost: listening", 600)
        self.boot_s = time.time() - self.t0
        if self.listening:
            self.sock = self._connect()

    def _connect(self, timeout=60):
        # The forwarded port accepts, then resets, until the guest
        # listens: ask until an answer comes.
        deadline = time.time() + timeout
        while time.time() < deadline and self.p.p.poll() is None:
            s = socket.create_connection(("127.0.0.1", self.ctl), timeout=10)
            try:
                s.settimeout(30)
                s.sendall(b"pac\n")
                f = s.makefile("rb")
                line = f.readline().decode().strip()
                if line.startswith("pac "):
                    self.f, self.pac = f, line
                    s.settimeout(None)
                    return s
            except OSError:
                pass
            s.close()
            time.sleep(0.3)
        return None

    def cmd(self, line, timeout=300):
        self.sock.settimeout(timeout)
        self.sock.sendall((line + "\n").encode())
        return self.f.readline().decode().strip()

    def status(self):
        return curl(f"{self.base}/status", timeout=30).json()

    def wait_agent(self, timeout=60):
        return pptest.until(lambda: curl(f"{self.base}/status",
                                         timeout=10).status == 200, timeout)

    def window_open(self, n=1, timeout=60):
        """Until /status counts n CPU windows open."""
        return pptest.until(
            lambda: self.status()["cpu"]["windows_open"] >= n, timeout)

    def profile_in_background(self, seconds, hz=HZ):
        res = {}
        t = threading.Thread(target=lambda: res.setdefault("r", curl(
            f"{self.base}/profile?seconds={seconds}&hz={hz}",
            timeout=seconds + 120)))
        t.start()
        return t, res

    def finish(self):
        code = None
        if self.sock:
            try:
                self.sock.sendall(b"quit\n")
            except OSError:
                pass
        try:
            code = self.p.p.wait(120)
        except subprocess.TimeoutExpired:
            self.p.stop()
        self.p.drain()
        return code


def thread_samples(prof, name):
    """The thread's samples, one entry a signal (a row of the profile
    holds every signal of one stack: its first value)."""
    return [s for s in prof.samples
            if prof.labels(s).get("thread_name") == name
            for _ in range(int(s["value"][0]))]


def names_of(prof, s):
    """The sample's function names, leaf first, inlined ones included."""
    return [f[0] for fs in prof.stack(s) for f in fs]


def weight(s):
    return int(s["value"][1])


def test_build():
    err = cross_build()
    ok(err is None, "the arm64 hosts cross-build (-O2; PAC on and off, frame "
       "pointers kept and omitted; C++)", err)
    if err:
        return
    pac = disassembly("deep_even_pac")
    nopac = disassembly("deep_even_nopac")
    ok("paciasp" in pac and "autiasp" in pac and "paciasp" not in nopac,
       "the pac variant signs its return addresses (paciasp), the nopac one "
       "does not", pac[:300] + "\n" + nopac[:300])
    ok("mov\tx29, sp" in disassembly("bottom_fp") and
       "x29" not in disassembly("bottom_nopac"),
       "the fp variant keeps frame records, the others do not in frames "
       "without arrays", disassembly("bottom_nopac"))
    leaf = disassembly("leaf_spin")
    ok(leaf and not re.search(r"\b(x30|sp|bl|x29)\b", leaf),
       "leaf_spin is a leaf that never stores x30 nor moves sp", leaf)


def test_boot():
    if not os.path.exists(HOST):
        ok(False, "no host to run")
        return
    g = state["g"] = Guest()
    ok(g.listening and g.sock,
       f"the VM booted and cpuhost answers through --port ({g.boot_s:.1f} s)",
       g.p.stderr_text()[-3000:])
    if not g.sock:
        return
    ok(g.wait_agent(), "the preloaded agent answers /status through --port")
    m = re.match(r"pac (on|off) (signed|unsigned)", g.pac)
    ok(m and m.groups() == ("on", "signed"),
       "pointer authentication is on in the guest (HWCAP_PACA, and pacia "
       "changes an address)", g.pac)
    st = g.status()
    eq(st["config"]["unwind"], "dwarf", "the unwinder is dwarf (the default)")


def guest():
    g = state.get("g")
    if not g or not g.sock:
        raise RuntimeError("no guest")
    return g


def burn_window(g, ms, seconds):
    """A window of `seconds` in which the burners use `ms` each; returns
    the response, the host's answer and whether the burn ended inside."""
    t, res = g.profile_in_background(seconds)
    if not g.window_open():
        t.join()
        return res.get("r"), None, False, 1.0
    before = g.status()["cpu"]
    answer = g.cmd(f"burn {ms}")
    inside = g.status()["cpu"]["windows_open"] >= 1
    t.join()
    after = g.status()["cpu"]
    per = pptest.periods_per_signal(
        (before["samples"], before["samples_weighted"]),
        (after["samples"], after["samples_weighted"]))
    return res["r"], answer, inside, per


def test_accuracy():
    g = guest()
    # How fast the guest burns here: a short burn without a window (the
    # busy host may give the two vCPUs far less than two cores).
    t = time.time()
    g.cmd("burn 200")
    rate = (time.time() - t) / 0.2  # wall seconds per CPU second a thread
    # 3.5 s of each thread at 100 Hz: 700 draws, so that 5 points are
    # three standard deviations of the share (sqrt(3/16 / 700) = 1.6).
    ms = 3500
    seconds = min(120, int(4 + 2 * rate * ms / 1e3))
    for attempt in (1, 2):
        r, answer, inside, per = burn_window(g, ms, seconds)
        if inside:
            break
        seconds = min(240, seconds * 2)
    ok(inside, f"the burn ended inside the {seconds} s window "
       f"(calibrated: {rate:.1f} s a CPU second)")
    if not eq(r and r.status, 200, "burn: the profile 200"):
        return
    real = int(answer.split()[1]) / 1e9
    prof = Profile(r.body)
    cpu = heavy = light = 0
    per_thread = Counter()
    for s in prof.samples:
        if not prof.labels(s).get("thread_name", "").startswith("burn-"):
            continue
        cpu += weight(s)
        per_thread[prof.labels(s)["thread_name"]] += weight(s) / 1e9
        leaf = names_of(prof, s)[0]
        if leaf == "burn_heavy":
            heavy += weight(s)
        elif leaf == "burn_light":
            light += weight(s)
    cpu /= 1e9
    ok(heavy + light >= 0.9 * cpu * 1e9,
       f"the burners' CPU is in burn_heavy and burn_light "
       f"({(heavy + light) / 1e9:.2f} of {cpu:.2f} s)")
    # What the guest kernel's own 100 Hz timers on the same clocks
    # delivered (expirations, overruns included): when the profile is
    # short of the CPU, it tells whether the kernel was too.
    kernel = int(answer.split()[3]) / 100
    ok(abs(cpu - real) <= 0.10 * real,
       f"two threads: profile total {cpu:.2f} s within 10% of the {real:.2f} "
       "s CPU they used by their own clocks (the kernel's own timers: "
       f"{kernel:.2f} s)", (cpu, real, kernel, dict(per_thread),
                             g.status()["cpu"]))
    ok(abs(cpu - kernel) <= 0.10 * kernel,
       f"two threads: profile total {cpu:.2f} s within 10% of the "
       f"{kernel:.2f} s the guest kernel's own CPU timers counted",
       (cpu, kernel))
    share = heavy / (heavy + light) if heavy + light else 0
    n = (heavy + light) / (1e9 / HZ) / per
    ok(abs(share - 0.75) <= 0.05,
       f"burn_heavy:burn_light is 3:1 within 5 points ({share:.3f} of "
       f"{n:.0f} signals, {per:.2f} periods each)", share)


def expected_deep(v, depth=30):
    names, f = [], "deep_even"
    for _ in range(depth):
        names.append(f"{f}_{v}")
        f = "deep_odd" if f == "deep_even" else "deep_even"
    return [f"deep_leaf_{v}", f"bottom_{v}"] + names[::-1] + \
        [f"deep_descend_{v}"]


def test_spinners():
    g = guest()
    ready = g.cmd("spin 30")
    m = re.match(r"ready prologue=0x([0-9a-f]+)", ready)
    if not ok(m, "the spinning threads are in place", ready):
        return
    prologue = int(m.group(1), 16)
    seconds = 6
    t, res = g.profile_in_background(seconds)
    t.join()
    # Then go tool pprof's own window, through the port.
    rc, top, err = go_pprof("-top", "-nodecount=40",
                            f"{g.base}/profile?seconds=2")
    st = g.status()["cpu"]
    eq(g.cmd("unspin"), "ok", "the spinning threads stop")
    ok(rc == 0, "go tool pprof -top fetches a profile through the port",
       err[-300:])
    for fn in ("deep_leaf_pac", "leaf_spin", "prologue_spin",
               "cxxwork::churn"):
        ok(fn in top, f"go tool pprof -top names {fn}", top)
    r = res["r"]
    if not eq(r.status, 200, "spinners: the profile 200"):
        return
    prof = Profile(r.body)
    state["spin"] = prof
    outer = Counter()
    libc_tail = Counter()

    for v in VARIANTS:
        want = expected_deep(v)
        samples = thread_samples(prof, f"deep-{v}")
        exact = [s for s in samples
                 if names_of(prof, s)[:len(want)] == want]
        for s in {id(s): s for s in samples}.values():
            locs = [prof.loc_by_id[i] for i in s["location_id"]]
            names = [prof.frames(l)[0][0] if prof.frames(l) else None
                     for l in locs]
            k = names.index(f"deep_descend_{v}") \
                if f"deep_descend_{v}" in names else len(names)
            maps = {prof.s(prof.field(prof.map_by_id[prof.field(
                l, "mapping_id")], "filename")).split("/")[-1]
                for l in locs[k + 1:]}
            outer[(len(locs) - k - 1, tuple(sorted(maps)))] += 1
            libc_tail[tuple(prof.field(l, "address")
                            for l in locs[k + 1:])] += 1
        what = {"pac": "PAC on, no frame pointers",
                "nopac": "PAC off, no frame pointers",
                "fp": "PAC on, frame pointers"}[v]
        ok(len(samples) >= 20, f"deep-{v}: sampled ({len(samples)})")
        ok(samples and len(exact) == len(samples),
           f"depth 30, {what}: every sample has all {len(want)} frames, "
           f"exact and in order ({len(exact)} of {len(samples)})",
           Counter(tuple(names_of(prof, s)) for s in samples
                   if names_of(prof, s)[:len(want)] != want).most_common(3))
    # Past the start routine: glibc's start_thread and thread_start
    # (libc.so.6 has no symbol table here), the same frames every time.
    ok(len(libc_tail) == 1 and len(outer) == 1 and
       next(iter(outer))[0] >= 2 and
       next(iter(outer))[1] == ("libc.so.6",),
       "every deep stack goes on past its start routine into libc.so.6 to "
       f"the same outermost frame ({dict(outer)})", libc_tail.most_common(3))
    u = st["unwind"]
    ok(u["compact"] > 0, f"walked by the compact tables ({u['compact']} "
       f"captures; {u['fallbacks']} fallbacks, {u['unknown_code']} stopped "
       "at code without tables: the vDSO thread's)", u)
    eq(u["failed"] + u["truncated"], 0, "no capture failed or was cut")

    # The leaf: its return address never left x30.
    samples = thread_samples(prof, "leaf")
    in_leaf = [s for s in samples if names_of(prof, s)[0] == "leaf_spin"]
    right = [s for s in in_leaf
             if names_of(prof, s)[1:3] == ["leaf_caller", "leaf_thread"]]
    ok(len(in_leaf) >= 20 and len(in_leaf) >= 0.8 * len(samples),
       f"leaf: its samples are in leaf_spin ({len(in_leaf)} of "
       f"{len(samples)})")
    ok(in_leaf and len(right) == len(in_leaf),
       "a leaf (return address in x30) is under its caller, leaf_caller, "
       f"then leaf_thread ({len(right)} of {len(in_leaf)})",
       Counter(tuple(names_of(prof, s)[:4]) for s in in_leaf).most_common(3))

    # The prologue: x30 signed and not stored yet, sp moved or not.
    samples = thread_samples(prof, "prologue")
    phases = Counter()
    wrong = Counter()
    for s in samples:
        names = names_of(prof, s)
        if names[0] != "prologue_spin":
            continue
        addr = prof.field(prof.loc_by_id[s["location_id"][0]], "address")
        off = addr - prologue
        phase = 1 if 8 <= off < 16 else 2 if 24 <= off < 32 else 0
        phases[phase] += 1
        if names[1:3] != ["prologue_caller", "prologue_thread"]:
            wrong[(phase, tuple(names[:4]))] += 1
    n = sum(phases.values())
    ok(phases[1] >= 10 and phases[2] >= 10,
       "prologue: samples before sp moves and after it did, both before "
       f"x30 is stored ({phases[1]} and {phases[2]} of {n})", phases)
    ok(n and not wrong,
       "a function interrupted in its prologue (x30 signed, not stored) is "
       f"under its caller, prologue_caller ({n - sum(wrong.values())} of "
       f"{n})", wrong.most_common(3))

    # C++: the inlined member functions named, innermost first.
    samples = thread_samples(prof, "cxx")
    inl = Counter()
    under = 0
    run_line = source_line(CXX_SRC, "MARK:cxx_run")
    run_lines = set()
    for s in samples:
        st_ = prof.stack(s)
        leaf = [f[0] for f in st_[0]]
        if leaf[-1] == "cxxwork::churn(cxxwork::Mixer<unsigned long>&, "\
                "unsigned long)" and [f[0] for f in st_[1]] == \
                ["cpu_cxx_thread"]:
            under += 1
        inl[tuple(leaf)] += 1
        for f in st_[0]:
            if "::run(" in f[0]:
                run_lines.add((f[2].split("/")[-1], f[3]))
    want = ("cxxwork::Mixer<unsigned long>::run(unsigned long, int)",
            "cxxwork::churn(cxxwork::Mixer<unsigned long>&, unsigned long)")
    ok(len(samples) >= 20 and under == len(samples),
       f"C++: every sample's leaf location ends in cxxwork::churn, under "
       f"cpu_cxx_thread ({under} of {len(samples)})", inl.most_common(4))
    ok(inl[want] >= 0.5 * len(samples), "C++: Mixer<unsigned long>::run "
       "inlined into churn, both named demangled, innermost first "
       f"({inl[want]} of {len(samples)} samples)", inl.most_common(4))
    ok(("cpu_cxx.cc", run_line) in run_lines,
       f"C++: the inlined run with its own file and line "
       f"(cpu_cxx.cc:{run_line})", run_lines)

    # The vDSO: Debian 12's arm64 vDSO has no CFI at all; its frameless
    # functions get a leaf rule (pp_arch_bare_rule): a sample in
    # __kernel_clock_gettime (the CPU clocks' system call) is walked on.
    samples = thread_samples(prof, "vdso")
    in_vdso = [s for s in samples
               if names_of(prof, s)[:1] == ["__kernel_clock_gettime"]]
    walked = [s for s in in_vdso if "vdso_caller" in names_of(prof, s)]
    ok(in_vdso and len(walked) == len(in_vdso),
       "a sample in the vDSO's __kernel_clock_gettime is walked on to its "
       f"caller ({len(walked)} of {len(in_vdso)})")


def test_short_lived():
    g = guest()
    seconds = 20
    t, res = g.profile_in_background(seconds)
    g.window_open()
    t0 = time.time()
    answer = g.cmd("short 5000 2 3000 200")
    took = time.time() - t0
    inside = g.status()["cpu"]["windows_open"] >= 1
    t.join()
    m = re.match(r"cpu_ns (\d+) threads (\d+)", answer)
    ok(m and inside, f"short-lived threads ran inside the window ({took:.1f} "
       "s)", answer)
    if not m or not eq(res["r"].status, 200, "short-lived: the profile 200"):
        return
    real = int(m.group(1)) / 1e9
    prof = Profile(res["r"].body)
    under = tail = 0
    exit_frame = "[pullprof: CPU after the thread's last tick]"
    for s in prof.samples:
        names = set(names_of(prof, s))
        if "short_thread" in names or exit_frame in names:
            under += weight(s)
        if exit_frame in names:
            tail += weight(s)
    under /= 1e9
    ok(int(m.group(2)) >= 200, f"{m.group(2)} threads came and went")
    ok(abs(under - real) <= 0.10 * real,
       f"short-lived threads: the profile accounts {under:.2f} s of the "
       f"{real:.2f} s CPU they used (within 10%)", (under, real, tail))


def test_exit():
    g = state.get("g")
    if not g:
        return
    code = g.finish()
    eq(code, 0, "cpuhost quits and the runner exits with its status (0)")
    out = [l for l in g.p.err_lines if "qemu ran" in l]
    print(f"# {' '.join(out)}", flush=True)


def main():
    try:
        run([test_build, test_boot, test_accuracy, test_spinners,
             test_short_lived, test_exit])
    finally:
        print(f"# tests/arm64/test_cpu.py took {time.time() - T0:.0f} s",
              flush=True)
        g = state.get("g")
        if g and g.p.p.poll() is None:
            g.p.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

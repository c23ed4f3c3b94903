"""/symbol: pprof's remote symbolization protocol, over real HTTP, against a
real host; the symbol cache follows dlopen and dlclose."""
import os
import re
import socket
import subprocess
import time

from pptest import BUILD, HOST, Host, curl, eq, ok, run

DLLIB = os.path.join(BUILD, "tests", "profile", ".libs", "libsymtest_dl.so")
h = Host()
port = h.start()
URL = f"http://127.0.0.1:{port}/debug/pprof/symbol"


def runtime_addr(path, symbol):
    """Where `symbol` of the ELF file `path` sits in the host's memory:
    the file's load base (its offset-0 mapping) plus the symbol's value."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True,
                         text=True).stdout
    value = int(re.search(rf"^([0-9a-f]+) [Tt] {re.escape(symbol)}$", out,
                          re.M).group(1), 16)
    real = os.path.realpath(path)
    with open(f"/proc/{h.pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16) + value
    raise ValueError(f"{real} not mapped")


def write_tmp(text):
    import tempfile
    fd, path = tempfile.mkstemp()
    os.write(fd, text.encode())
    os.close(fd)
    return path


def post(body, *args):
    return curl(URL, "-X", "POST", "--data-binary", body, *args)


def test_get_count():
    r = curl(URL)
    eq(r.status, 200, "GET /symbol: 200")
    eq(r.body, b"num_symbols: 1\n", "GET /symbol says symbols are available")
    eq(r.header("content-type"), "text/plain; charset=utf-8", "text/plain")


def test_post_addresses():
    main = runtime_addr(HOST, "main")
    r = post(f"{main:#x}")
    eq(r.status, 200, "POST one address: 200")
    eq(r.text, f"num_symbols: 1\n{main:#x} main\n", "the host's main is named")
    inside = main + 5  # not the first byte of the function
    r = post(f"{inside:#x}+0x1+{main:#x}")
    eq(r.text, f"num_symbols: 1\n{inside:#x} main\n{main:#x} main\n",
       "several addresses, in order; unknown ones (0x1) left out")
    r = curl(URL + f"?{main:#x}+{inside:#x}")
    eq(r.text, f"num_symbols: 1\n{main:#x} main\n{inside:#x} main\n",
       "the same as a GET query")
    r = post(f"{main}")
    eq(r.text, f"num_symbols: 1\n{main:#x} main\n", "decimal addresses too")


def test_dlopen_invalidation():
    # Fill the cache first, then change the mappings.
    post(f"{runtime_addr(HOST, 'main'):#x}")
    line = h.cmd(f"dlopen {DLLIB} symtest_dl_function")
    ok(line.startswith("addr "), "host dlopens a library", line)
    addr = int(line.split()[1], 16)
    eq(addr, runtime_addr(DLLIB, "symtest_dl_function"), "address agrees with nm")
    r = post(f"{addr:#x}")
    eq(r.text, f"num_symbols: 1\n{addr:#x} symtest_dl_function\n",
       "a library loaded after the first lookup is symbolized")
    s = curl(f"http://127.0.0.1:{port}/debug/pprof/status").json()
    ok(s["symbols"]["refreshes"] >= 2, "the mappings change was seen",
       s.get("symbols"))
    eq(h.cmd("dlclose"), "ok", "host dlcloses it")
    r = post(f"{addr:#x}")
    eq(r.text, "num_symbols: 1\n",
       "after dlclose its old address is not named from a stale cache")


def test_bad_input():
    for body in ("hello", "0x12+zz", "0xfffffffffffffffffff", "0x"):
        r = post(body)
        eq(r.status, 400, f"POST {body!r}: 400")
        ok(r.header("x-go-pprof") == "1" and "not an address" in r.text,
           f"POST {body!r}: the reason, for pprof to show", r.text)
    r = curl(URL, "-X", "POST", "-H", "Content-Length: 5000000", "--data-binary",
             "0x1")
    ok(r.status == 413 or r.exit_code != 0,
       "a declared 5 MB body is refused (413)", r)
    big = write_tmp("+".join(["0x1234"] * 800000))  # 5.6 MB, sent chunked
    r = curl(URL, "-X", "POST", "-H", "Transfer-Encoding: chunked",
             "--data-binary", "@" + big)
    eq(r.status, 413, "a chunked body over the limit gets 413 at its end")
    huge = write_tmp("+".join(["0x1234"] * 12000000))  # 84 MB
    r = curl(URL, "-X", "POST", "-H", "Transfer-Encoding: chunked",
             "--data-binary", "@" + huge)
    ok(r.status != 200, "a chunked body past 16x the limit is cut off", r.status)
    os.unlink(huge)
    eq(curl(URL).status, 200, "the agent answers after oversized bodies")
    ok(h.alive(), "the host is alive")
    # Just under the limit: accepted and answered.
    addrs = write_tmp("+".join(["0x1"] * 250000))
    r = post("@" + addrs)
    eq(r.status, 200, "a 1 MB list is answered")


def test_methods():
    eq(curl(URL, "-X", "PUT").status, 405, "PUT /symbol: 405")
    eq(curl(URL, "-X", "PUT").header("allow"), "GET, HEAD, POST", "Allow header")


run([test_get_count, test_post_addresses, test_dlopen_invalidation,
     test_bad_input, test_methods, lambda: eq(h.quit(), 0, "host exits cleanly")])

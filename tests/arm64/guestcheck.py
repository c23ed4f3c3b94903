"""What the arm64 tests (tests/arm64/test_*.py) share: whether this machine
can boot the emulated arm64 Debian, said the way TAP skips a whole file."""
import os
import shutil
import subprocess
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def cache_dir():
    """Where scripts/arm64-run.sh keeps the guest and the cross build."""
    return os.environ.get("PP_ARM64_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.environ.get("HOME") or "/tmp", ".cache"), "pullprof-arm64")


def skip_all(why):
    print(f"1..0 # SKIP {why}", flush=True)
    sys.exit(0)


def require(compilers=("aarch64-linux-gnu-gcc",)):
    """Skip the whole file (and exit) when the guest cannot run here."""
    if not shutil.which("qemu-system-aarch64"):
        skip_all("no qemu-system-aarch64 (Debian: apt-get install "
                 "qemu-system-arm)")
    for cc in compilers:
        if not shutil.which(cc):
            pkg = cc.replace("aarch64-linux-gnu-", "") + "-aarch64-linux-gnu"
            skip_all(f"no {cc} (Debian: apt-get install {pkg})")
    if not os.path.isfile(os.path.join(cache_dir(), "base", "recipe")) and \
            subprocess.run(["apt-cache", "show",
                            "linux-image-cloud-arm64:arm64"],
                           capture_output=True).returncode != 0:
        skip_all("apt knows no arm64 packages to build the guest from "
                 "(dpkg --add-architecture arm64; apt-get update)")
    if not os.path.exists(os.path.join(SRC, "src", "arch", "aarch64.c")):
        skip_all("no src/arch/aarch64.c: the library has no arm64 port")

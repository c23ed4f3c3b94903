#!/bin/bash
# Run an arm64 program in an emulated arm64 Debian (HACKING.md, "arm64: the
# emulated Debian"):
#
#   scripts/arm64-run.sh [--port HOSTPORT:GUESTPORT]... [--env NAME=VALUE]...
#                        [--preload] [--no-build] -- PROGRAM [ARGS...]
#
# PROGRAM is an arm64 executable named by its path on this (x86_64) side.
# Its directory is copied into the guest at the same absolute path and the
# program runs there, in that directory, with the caller's PULLPROF_*
# variables (and --env's). --preload starts it with the cross-built
# libpullprof.so preloaded; the cross build's libraries are in the guest's
# /opt/pullprof/lib (on LD_LIBRARY_PATH) either way; --no-build leaves the
# library out (no cross build at all). --port forwards
# 127.0.0.1:HOSTPORT here to GUESTPORT in the guest (a server there listens
# on 0.0.0.0 or 10.0.2.15, not on 127.0.0.1). PROGRAM's stdout and stderr
# come out on this script's; the script exits with PROGRAM's status (128+N
# for a signal, as a shell says) and the VM powers off. 125 means the runner
# itself failed (its own messages start with "arm64-run:").
#
# Everything downloaded and built is kept under $PP_ARM64_CACHE (default
# ~/.cache/pullprof-arm64): a second run boots in a few seconds.
# PP_ARM64_TIMEOUT (seconds, default 900) bounds a run; PP_ARM64_CONSOLE=1
# shows the guest's console (kernel messages) on stderr; PP_ARM64_TIMES=1
# says how long qemu ran and when PROGRAM started.
set -euo pipefail

self=$(basename "$0")
die() {
	echo "arm64-run: $*" >&2
	exit 125
}
say() { echo "arm64-run: $*" >&2; }

ports=()
envs=()
preload=0
build=1
while [ $# -gt 0 ]; do
	case $1 in
	--port)
		[ $# -ge 2 ] || die "--port needs HOSTPORT:GUESTPORT"
		[[ $2 =~ ^[0-9]+:[0-9]+$ ]] || die "--port $2: not HOSTPORT:GUESTPORT"
		ports+=("$2")
		shift 2
		;;
	--port=*)
		[[ ${1#*=} =~ ^[0-9]+:[0-9]+$ ]] || die "$1: not HOSTPORT:GUESTPORT"
		ports+=("${1#*=}")
		shift
		;;
	--env)
		[ $# -ge 2 ] && [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env needs NAME=VALUE"
		envs+=("$2")
		shift 2
		;;
	--preload)
		preload=1
		shift
		;;
	--no-build)
		build=0
		shift
		;;
	--)
		shift
		break
		;;
	*) die "usage: $self [--port HOSTPORT:GUESTPORT]... [--env NAME=VALUE]... [--preload] [--no-build] -- PROGRAM [ARGS...]" ;;
	esac
done
[ $# -ge 1 ] || die "no PROGRAM (usage: $self [options] -- PROGRAM [ARGS...])"
[ -f "$1" ] && [ -x "$1" ] || die "$1: not an executable file"
[ "$preload" = 0 ] || [ "$build" = 1 ] || die "--preload needs the cross build (no --no-build)"
prog=$(realpath "$1")
shift
progdir=$(dirname "$prog")
case $progdir in
/ | /usr | /usr/* | /bin | /lib | /lib/* | /opt | /opt/pullprof* | /etc | /proc | /sys | /dev | /tmp)
	die "$prog: put PROGRAM in a directory of its own (the whole of $progdir is copied into the guest)"
	;;
esac
# The directory goes into the guest's memory: refuse what cannot fit.
kib=$(du -sk "$progdir" | cut -f1)
[ "$kib" -le 262144 ] || die "$progdir holds $((kib / 1024)) MiB: PROGRAM's directory goes into the guest's RAM (256 MiB at most)"
command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 is missing (Debian: apt-get install qemu-system-arm)"

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${PP_ARM64_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/pullprof-arm64}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# --- The guest: Debian's arm64 cloud kernel and a root of Debian's arm64
# packages, one uncompressed initramfs (cache/base/). The list below is the
# recipe: change it and the root is built again.
packages="libc6 libgcc-s1 libstdc++6 libmicrohttpd12 libjson-c5 libunwind8 libdw1 libelf1 zlib1g busybox-static"
# The virtio drivers, loaded in this order (the cloud kernel has them as
# modules): the network card, then the serial ports PROGRAM's output takes.
modules="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net virtio_console"
recipe="v3 $packages / $modules"

# newc cpio writer (the kernel's initramfs format) so that cpio(1) is not
# needed: cpio.py OUT ROOT [PREFIX] archives ROOT's contents as PREFIX/...,
# owned by root. Several archives one after the other make one initramfs.
cpio_py='
import os, stat, sys
out, root = sys.argv[1], sys.argv[2]
prefix = sys.argv[3].strip("/") if len(sys.argv) > 3 else ""
ino = [700000]
def entry(f, name, st, data):
    ino[0] += 1
    name = name.encode() + b"\0"
    hdr = "070701" + "".join("%08X" % v for v in (
        ino[0], st.st_mode, 0, 0, 1, int(st.st_mtime), len(data), 0, 0, 0, 0,
        len(name), 0))
    f.write(hdr.encode() + name)
    f.write(b"\0" * ((4 - (110 + len(name)) % 4) % 4))
    f.write(data)
    f.write(b"\0" * ((4 - len(data) % 4) % 4))
with open(out, "wb") as f:
    # The directories above PREFIX, so that it can be made.
    parts = prefix.split("/") if prefix else []
    for i in range(len(parts)):
        entry(f, "/".join(parts[: i + 1]), os.stat("/"), b"")
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(dirs) + sorted(files):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            name = prefix + "/" + rel if prefix else rel
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(p).encode()
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as g:
                    data = g.read()
            elif stat.S_ISDIR(st.st_mode):
                data = b""
            else:
                continue
            entry(f, name, st, data)
    f.write(b"070701" + b"0" * 8 * 11 + b"%08X" % 11 + b"0" * 8 + b"TRAILER!!!\0")
    f.write(b"\0" * ((4 - (110 + 11) % 4) % 4))
'

# The mirror of the checkout the cross build reads: mirror.py TOP DST, the
# files git tracks on stdin (NUL-separated). A file is copied when its
# content differs (and then has a new time, so make rebuilds what uses it),
# never otherwise: a fresh clone or a branch switched back rebuilds nothing
# that did not change. Files git no longer tracks go, autotools' outputs
# stay.
mirror_py='
import filecmp, os, re, shutil, sys
top, dst = sys.argv[1], sys.argv[2]
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
for n in names:
    s, d = os.path.join(top, n), os.path.join(dst, n)
    if os.path.islink(s):
        if not os.path.islink(d) or os.readlink(d) != os.readlink(s):
            if os.path.lexists(d):
                os.unlink(d)
            os.makedirs(os.path.dirname(d), exist_ok=True)
            os.symlink(os.readlink(s), d)
        continue
    if not os.path.isfile(s):
        continue  # deleted in the working tree, not yet in git
    if (os.path.isfile(d) and not os.path.islink(d)
            and os.path.getsize(s) == os.path.getsize(d)
            and filecmp.cmp(s, d, shallow=False)):
        if os.stat(s).st_mode != os.stat(d).st_mode:
            shutil.copymode(s, d)
        continue
    os.makedirs(os.path.dirname(d), exist_ok=True)
    shutil.copyfile(s, d + ".pp-new")
    shutil.copymode(s, d + ".pp-new")
    os.replace(d + ".pp-new", d)
keep = set(names)
made = re.compile(r"(configure~?|aclocal\.m4|pp-autoconf\.h\.in~?|(.*/)?Makefile\.in)$")
for dirpath, dirs, files in os.walk(dst):
    rel = os.path.relpath(dirpath, dst)
    if rel in ("autom4te.cache", "build-aux", "m4"):
        dirs[:] = []
        continue
    for f in files:
        r = os.path.normpath(os.path.join(rel, f))
        if r not in keep and not made.match(r):
            os.unlink(os.path.join(dirpath, f))
'

build_base() { # the kernel, the modules and the root's archive, in $cache/base
	local b=$cache/base.new deb kver
	rm -rf "$b"
	mkdir -p "$b/debs" "$b/root" "$b/kernel"
	say "building the guest in $cache/base (Debian arm64 packages: $packages)"
	# The kernel: the package the cloud meta-package depends on today.
	kver=$(apt-cache depends linux-image-cloud-arm64:arm64 2>/dev/null |
		sed -n 's/.*Depends: \(linux-image-[^:]*\).*/\1/p' | head -1)
	[ -n "$kver" ] || die "apt-cache knows no linux-image-cloud-arm64:arm64 (dpkg --add-architecture arm64; apt-get update)"
	local pkgs
	# The libraries' dependencies, all the way down (none is virtual).
	# shellcheck disable=SC2046 # one word a package
	pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances \
		$(printf '%s:arm64 ' $packages) | grep -v '^ ' | sort -u)
	# Old package lists name versions the mirror no longer has: once more
	# after apt-get update (root only).
	(cd "$b/debs" && apt-get download -q "$kver:arm64" $pkgs >../download.log 2>&1) ||
		{ [ "$(id -u)" = 0 ] && apt-get update -qq >>"$b/download.log" 2>&1 &&
			(cd "$b/debs" && apt-get download -q "$kver:arm64" $pkgs >>../download.log 2>&1); } ||
		die "apt-get download failed: $(tail -3 "$b/download.log")"
	dpkg-deb -x "$b"/debs/linux-image-*.deb "$b/kernel/x"
	cp "$b"/kernel/x/boot/vmlinuz-* "$b/kernel/vmlinuz"
	for deb in "$b"/debs/*.deb; do
		case $deb in */linux-image-*) continue ;; esac
		dpkg-deb -x "$deb" "$b/root"
	done
	# What a program never reads here: documentation, locales, man pages,
	# iconv's modules, the packages' tools.
	rm -rf "$b"/root/usr/share "$b"/root/usr/lib/aarch64-linux-gnu/gconv \
		"$b"/root/usr/bin "$b"/root/usr/sbin "$b"/root/sbin "$b"/root/etc/*
	mkdir -p "$b/root/lib/modules"
	local m f
	for m in $modules; do
		f=$(find "$b/kernel/x/lib/modules" -name "$m.ko" | head -1)
		[ -n "$f" ] || die "the kernel package has no $m.ko"
		cp "$f" "$b/root/lib/modules/"
	done
	rm -rf "$b/kernel/x"
	mkdir -p "$b"/root/{bin,sbin,proc,sys,dev,tmp,run,mnt,etc,root,opt/pullprof/lib}
	[ -x "$b/root/bin/busybox" ] || die "busybox-static has no /bin/busybox"
	# busybox's applets as links, made here: the guest spends no time on it.
	local a
	for a in sh ash cat echo mount umount mkdir ln ls insmod ip sleep poweroff \
		sync cp rm env id ps kill grep sed head tail wc date uname dmesg \
		cut tr true false test [ printf stat find chmod readlink timeout hostname; do
		[ -e "$b/root/bin/$a" ] || ln -s busybox "$b/root/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$b/root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$b/root/etc/group"
	printf '127.0.0.1 localhost\n::1 localhost\n10.0.2.15 arm64\n' >"$b/root/etc/hosts"
	printf 'passwd: files\ngroup: files\nhosts: files\n' >"$b/root/etc/nsswitch.conf"
	echo arm64 >"$b/root/etc/hostname"
	cat >"$b/root/init" <<'EOF'
#!/bin/sh
# The guest's first process (scripts/arm64-run.sh): mount, bring the virtio
# devices up, run /run/pp/run.sh (the run's own archive put it there), print
# its status on the console, power off.
export PATH=/bin:/sbin
mount -t proc proc /proc
echo "pp-init: start $(cat /proc/uptime)"
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
# /tmp stays in the root (no tmpfs over it): PROGRAM's directory may be
# under it.
chmod 1777 /tmp
for m in $(cat /lib/modules/order); do
	insmod /lib/modules/$m.ko || echo "pp-init: insmod $m failed"
done
echo "pp-init: modules $(cat /proc/uptime)"
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up &&
	ip route add default via 10.0.2.2
hostname arm64 2>/dev/null
# The output ports, by the names the runner gave them.
out= err=
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
	for p in /sys/class/virtio-ports/*; do
		[ -f "$p/name" ] || continue
		case $(cat "$p/name") in
		pp.stdout) out=/dev/${p##*/} ;;
		pp.stderr) err=/dev/${p##*/} ;;
		esac
	done
	[ -n "$out" ] && [ -n "$err" ] && [ -c "$out" ] && [ -c "$err" ] && break
	sleep 0.05
done
[ -n "$out" ] || out=/dev/console
[ -n "$err" ] || err=/dev/console
echo "pp-init: ready $(cat /proc/uptime)"
sh /run/pp/run.sh </dev/null >"$out" 2>"$err"
status=$?
echo "pp-exit: $status"
sync
poweroff -f
EOF
	chmod +x "$b/root/init"
	echo "$modules" | tr ' ' '\n' >"$b/root/lib/modules/order"
	python3 -c "$cpio_py" "$b/root.cpio" "$b/root" || die "writing the initramfs failed"
	echo "$recipe" >"$b/recipe"
	echo "$kver" >"$b/kernel/version"
	rm -rf "$cache/base"
	mv "$b" "$cache/base"
	say "guest ready: $kver, root $(du -m "$cache/base/root.cpio" | cut -f1) MiB"
}

# --- The cross build of the library, in a build directory of its own per
# checkout. configure --host wants a source tree that is not configured in
# place (the x86_64 build is, by scripts/build.sh), so the files git tracks
# (as they are in the working tree: edits included, new files once added)
# are mirrored into cache/lib/KEY/src (mirror_py) and built out of tree in
# cache/lib/KEY/build. A tree configured nowhere (a tarball) is built from
# where it is.
cross_build() { # sets $libdir, or leaves it empty saying why
	libdir=
	command -v aarch64-linux-gnu-gcc >/dev/null || {
		say "no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu): no libpullprof in the guest"
		return 1
	}
	local key src bld log
	key=$(printf %s "$top" | cksum | cut -d' ' -f1)
	bld=$cache/lib/$key/build
	log=$cache/lib/$key/build.log
	mkdir -p "$bld"
	if [ ! -f "$top/config.status" ] && [ -x "$top/configure" ]; then
		src=$top
	elif git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		src=$cache/lib/$key/src
		mkdir -p "$src"
		(cd "$top" && git ls-files -z) | python3 -c "$mirror_py" "$top" "$src" ||
			{
				say "mirroring $top into $src failed"
				return 1
			}
		mkdir -p "$src/m4"
		if [ ! -x "$src/configure" ] || [ "$src/configure.ac" -nt "$src/configure" ] ||
			[ "$src/Makefile.am" -nt "$src/Makefile.in" ]; then
			say "autoreconf in $src"
			(cd "$src" && autoreconf -fi) >"$log" 2>&1 || {
				say "autoreconf failed (log: $log)"
				return 1
			}
		fi
	else
		say "$top is configured in place and is not a git checkout: no cross build"
		return 1
	fi
	if [ ! -f "$bld/config.status" ] || [ "$src/configure" -nt "$bld/config.status" ]; then
		say "configuring the arm64 build in $bld"
		# No aarch64-linux-gnu-pkg-config here: pkg-config reads the arm64
		# multiarch .pc files.
		(cd "$bld" && PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
			"$src/configure" --quiet --host=aarch64-linux-gnu) >"$log" 2>&1 || {
			say "configure --host=aarch64-linux-gnu failed (log: $log)"
			rm -f "$bld/config.status"
			return 1
		}
	fi
	make -C "$bld" -j2 libpullprof.la libpullprof-agent.la >"$log" 2>&1 || {
		say "the arm64 cross build of libpullprof failed (log: $log; $(grep -m1 'error:' "$log" || tail -1 "$log"))"
		return 1
	}
	libdir=$bld/.libs
}

# --- Prepare (one at a time: runs in parallel share the cache).
exec 9>"$cache/lock"
flock 9
if [ ! -f "$cache/base/recipe" ] || [ "$(cat "$cache/base/recipe")" != "$recipe" ]; then
	build_base
fi
libdir=
if [ "$build" = 1 ]; then
	if ! cross_build; then
		[ "$preload" = 0 ] || die "--preload: no cross-built libpullprof.so"
		say "running PROGRAM without libpullprof in the guest"
	fi
fi
flock -u 9

# --- The run's own archive: PROGRAM's directory at its path, the library,
# and run.sh (the environment and the command line).
run=$(mktemp -d "$cache/run.XXXXXX")
pids=() # what runs beside this script: ended with it
cleanup() {
	local p
	for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

q() { # a word the guest's shell reads back as it is
	printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"
}
mkdir -p "$run/pp/run/pp" "$run/lib"
{
	echo "# written by scripts/arm64-run.sh"
	echo "export PATH=/bin:/sbin HOME=/root"
	[ -z "$libdir" ] || echo "export LD_LIBRARY_PATH=/opt/pullprof/lib"
	while IFS= read -r name; do
		echo "export $name=$(q "${!name}")"
	done < <(compgen -e | grep '^PULLPROF_' || true)
	for e in "${envs[@]+"${envs[@]}"}"; do
		echo "export ${e%%=*}=$(q "${e#*=}")"
	done
	[ "$preload" = 0 ] || echo "export LD_PRELOAD=/opt/pullprof/lib/libpullprof.so"
	echo "cd $(q "$progdir") || exit 125"
	printf 'exec'
	for a in "$prog" "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$run/pp/run/pp/run.sh"
python3 -c "$cpio_py" "$run/pp.cpio" "$run/pp" || die "writing the run's archive failed"
python3 -c "$cpio_py" "$run/dir.cpio" "$progdir" "$progdir" || die "archiving $progdir failed"
if [ -n "$libdir" ]; then
	cp -P "$libdir"/*.so* "$run/lib/"
	python3 -c "$cpio_py" "$run/lib.cpio" "$run/lib" /opt/pullprof/lib
	# The build's own path too, as a link: the cross build's programs
	# (-no-install) name it in their run path.
	mkdir -p "$run/link$(dirname "$libdir")"
	ln -s /opt/pullprof/lib "$run/link$libdir"
	python3 -c "$cpio_py" "$run/link.cpio" "$run/link"
fi
cat "$cache/base/root.cpio" "$run"/*.cpio >"$run/initrd"

# --- Boot. The console (kernel messages, the init's lines) goes to a file;
# PROGRAM's stdout and stderr have a virtio serial port each, read here
# through FIFOs so that any kind of stdout (pipe, file, terminal) works.
mkfifo "$run/out" "$run/err"
cat "$run/out" &
pids+=($!)
cat "$run/err" >&2 &
pids+=($!)
net="user,id=n0,ipv6=off"
for p in "${ports[@]+"${ports[@]}"}"; do
	net="$net,hostfwd=tcp:127.0.0.1:${p%%:*}-:${p#*:}"
done
console=$run/console.log
: >"$console"
t0=$(date +%s.%N)
# Bounded (timeout): a program that never ends must not hold CI forever.
timeout "${PP_ARM64_TIMEOUT:-900}" qemu-system-aarch64 \
	-machine virt -cpu max,pauth-impdef=on -smp 2 -m 1024 \
	-nographic -monitor none -serial "file:$console" -no-reboot \
	-kernel "$cache/base/kernel/vmlinuz" -initrd "$run/initrd" \
	-append "console=ttyAMA0 quiet loglevel=3 rdinit=/init panic=-1" \
	-netdev "$net" -device virtio-net-pci,netdev=n0,romfile= \
	-device virtio-serial-pci \
	-chardev "file,id=out,path=$run/out" -device virtserialport,chardev=out,name=pp.stdout \
	-chardev "file,id=err,path=$run/err" -device virtserialport,chardev=err,name=pp.stderr \
	</dev/null >"$run/qemu.log" 2>&1 &
qemu=$!
pids+=("$qemu")
[ "${PP_ARM64_CONSOLE:-0}" != 1 ] || tail -n +1 -f --pid="$qemu" "$console" >&2 &
rc=0
wait "$qemu" || rc=$?
# The readers end as soon as they have what qemu wrote before it closed
# the FIFOs; a qemu that never opened them leaves them waiting: not for long.
for _ in $(seq 50); do
	kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null || break
	sleep 0.1
done
t1=$(date +%s.%N)
status=$(sed -n 's/^pp-exit: \([0-9]*\).*/\1/p' "$console" | tr -d '\r' | tail -1)
if [ -n "${PP_ARM64_TIMES:-}" ]; then
	ready=$(sed -n 's/^pp-init: ready \([0-9.]*\).*/\1/p' "$console" | tail -1)
	say "$(awk -v a="$t0" -v b="$t1" -v r="$ready" 'BEGIN { printf "qemu ran %.2f s; PROGRAM started %s s after the kernel did", b - a, r }')"
fi
if [ -z "$status" ]; then
	say "the guest ended without PROGRAM's status (qemu status $rc); its console:"
	tail -n 40 "$console" >&2
	tail -n 5 "$run/qemu.log" >&2
	[ "$rc" != 124 ] || say "stopped after PP_ARM64_TIMEOUT=${PP_ARM64_TIMEOUT:-900} s"
	exit 125
fi
exit "$status"

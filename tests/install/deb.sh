#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 20: the Debian packages. Builds lupine-server and lupine-client
# with dpkg-buildpackage from a copy of the sources, runs lintian, checks
# that meson install (tests/install/layout.sh) and the packages hold what
# docs/install-layout.txt says, installs both with apt-get, runs the
# installed lupined on the simulator as user lupine (directly: CI has no
# systemd as PID 1) and the example client through the installed shim,
# stops it, purges both, and compares the file system with what it was
# before. Needs root (apt-get); without it, says so and does nothing.
set -eu
cd "$(dirname "$0")/../.."
src=$PWD
if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: tests/install/deb.sh installs packages with apt-get: run it as root"
        exit 0
fi
export DEBIAN_FRONTEND=noninteractive
scripts/install-deps.sh --deb | grep -v '^CUDA headers' || true
inc=$(cat .deps/cuda-include-dir)
tmp=$(mktemp -d)
sock=""
pid=""
installed=0
cleanup() {
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill -KILL "$pid" 2>/dev/null || true
        fi
        if [ "$installed" = 1 ]; then
                apt-get purge -y -qq lupine-server lupine-client >/dev/null 2>&1 || true
        fi
        rm -rf "$tmp"
        [ -z "$sock" ] || rm -rf "$sock"
}
trap cleanup EXIT
fail() {
        echo "FAIL: $*"
        exit 1
}
step() { echo "--- $*"; }

# Paths find must skip: what apt and dpkg keep for themselves, caches
# that other programs fill, and this checkout.
snapshot() {
        find /etc /usr /var /opt /srv /run -xdev \
                \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache/apt -o -path /var/log \
                -o -path /var/cache/debconf -o -path /var/cache/ldconfig -o -path /var/cache/man \
                -o -path /var/tmp -o -path /run/user -o -name __pycache__ -o -path "$src" \) -prune \
                -o -printf '%y %p\n' 2>/dev/null | sort
}
if dpkg -s lupine-server >/dev/null 2>&1 || dpkg -s lupine-client >/dev/null 2>&1; then
        echo "purging lupine packages left by an earlier run"
        apt-get purge -y -qq lupine-server lupine-client >/dev/null
fi

step "dpkg-buildpackage -b -us -uc"
mkdir -p "$tmp/src/lupine"
# the sources as committed or about to be (a tarball without .git: all but builds)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -co --exclude-standard | tar -cf - -T -
else
        tar --exclude=./.git --exclude=./build --exclude='./build-*' --exclude=./.deps --exclude=./obj-\* -cf - .
fi | tar -xf - -C "$tmp/src/lupine"
t0=$(date +%s)
(cd "$tmp/src/lupine" &&
        CUDA_INCLUDE=$inc DEB_BUILD_OPTIONS="parallel=$(nproc) noautodbgsym" \
                dpkg-buildpackage -b -us -uc >"$tmp/build.log" 2>&1) ||
        { tail -n 40 "$tmp/build.log"; fail "dpkg-buildpackage"; }
echo "built in $(($(date +%s) - t0)) s: $(cd "$tmp/src" && echo ./*.deb)"
server=$(echo "$tmp"/src/lupine-server_*.deb)
client=$(echo "$tmp"/src/lupine-client_*.deb)
[ -f "$server" ] && [ -f "$client" ] || fail "no lupine-server and lupine-client .deb"

step "lintian"
lintian --pedantic -I --fail-on error,warning,info,pedantic "$server" "$client" ||
        fail "lintian reports tags without an override (debian/*.lintian-overrides)"
echo "lintian: clean"

step "the install layout"
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$arch
pkglib=$libdir/lupine
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
tests/install/layout.sh "$tmp/src/lupine/obj-$arch"
for p in lupine-server lupine-client; do
        dpkg-deb --fsys-tarfile "$(echo "$tmp"/src/${p}_*.deb)" | tar -t | grep -v '/$' | sed 's|^\.||' | sort >"$tmp/$p.got"
        python3 tests/install/layout.py "$libdir" "$unitdir" package "$p" >"$tmp/$p.want"
        diff -u "$tmp/$p.want" "$tmp/$p.got" ||
                fail "$p differs from docs/install-layout.txt (- promised, + in the package)"
        echo "ok: $p holds the $(wc -l <"$tmp/$p.got") files docs/install-layout.txt gives it"
done

step "apt-get install"
snapshot >"$tmp/before"
installed=1
(cd "$tmp/src" && apt-get install -y -qq "./$(basename "$server")" "./$(basename "$client")" >"$tmp/apt.log" 2>&1) ||
        { cat "$tmp/apt.log"; fail "apt-get install"; }
# sysusers: a system user whose home is its state directory, no login
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd lupine) || fail "no lupine user after install"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/lupine ] && [ "$shell" = /usr/sbin/nologin ] ||
        fail "lupine user: uid $uid home $home shell $shell"
# tmpfiles: the directories, owned and private
for d in /var/lib/lupine /var/lib/lupine/checkpoints; do
        [ "$(stat -c '%U:%G %a' "$d")" = "lupine:lupine 700" ] || fail "$d: $(stat -c '%U:%G %a' "$d" 2>&1)"
done
[ "$(stat -c '%U:%G %a' /run/lupine)" = "root:lupine 755" ] || fail "/run/lupine: $(stat -c '%U:%G %a' /run/lupine 2>&1)"
# units enabled (the symlinks of their [Install] sections), not started
for l in multi-user.target.wants/lupined.service sockets.target.wants/lupined.socket \
        sockets.target.wants/lupined-local.socket; do
        [ "$(readlink "/etc/systemd/system/$l")" = "$unitdir/${l#*/}" ] || fail "not enabled: /etc/systemd/system/$l"
done
# (by its binary: on a shared machine other lupined processes may run)
for p in $(pgrep -x lupined || true); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" != /usr/sbin/lupined ] || fail "installing started lupined (pid $p)"
done
# the shims do not shadow a driver: nothing finds them unless asked
! ldconfig -p | grep -q "$pkglib" || fail "ldconfig knows $pkglib"
echo "ok: user lupine, its directories, units enabled and not started, the shims private"

step "lupined on the simulator, the example through the installed shim"
sock=$(mktemp -d /tmp/lupine-deb.XXXXXX)
chmod 755 "$sock"
chown lupine:lupine "$sock"
setpriv --reuid=lupine --regid=lupine --init-groups -- /usr/sbin/lupined --backend sim --listen "unix:$sock/lupined.sock" \
        --checkpoint-dir /var/lib/lupine/checkpoints >"$tmp/lupined.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
        [ -S "$sock/lupined.sock" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/lupined.log"; fail "lupined exited"; }
        sleep 0.1
done
[ -S "$sock/lupined.sock" ] || { cat "$tmp/lupined.log"; fail "lupined made no socket in 10 s"; }
runuser -u lupine -- lupinectl --socket "$sock/lupined.sock" status >"$tmp/status" ||
        { cat "$tmp/status" "$tmp/lupined.log"; fail "lupinectl status as user lupine"; }
cat "$tmp/status"
grep -q "^backend sim," "$tmp/status" || { cat "$tmp/status"; fail "lupinectl status names no simulated backend"; }
# A program built against the installed shim's directory, as a user would.
cc -O2 -o "$tmp/roundtrip" examples/roundtrip.c -I"$inc" -L"$pkglib" -lcuda
ldd "$tmp/roundtrip" | grep -q 'libcuda.so.1 => not found' ||
        { ldd "$tmp/roundtrip"; fail "libcuda.so.1 resolves without LD_LIBRARY_PATH"; }
LD_LIBRARY_PATH=$pkglib ldd "$tmp/roundtrip" | grep -q "libcuda.so.1 => $pkglib/libcuda.so.1" ||
        fail "LD_LIBRARY_PATH=$pkglib does not find the installed shim"
LD_LIBRARY_PATH=$pkglib LUPINE_SERVER=unix:$sock/lupined.sock "$tmp/roundtrip" >"$tmp/roundtrip.out" 2>&1 ||
        { cat "$tmp/roundtrip.out" "$tmp/lupined.log"; fail "the example client"; }
cat "$tmp/roundtrip.out"
grep -q '(sim)' "$tmp/roundtrip.out" && grep -qx 'roundtrip: OK' "$tmp/roundtrip.out" ||
        fail "the example did not see the simulated GPU or did not end OK"
# its worker found the installed simulator (daemon/backend.c's search)
grep -q "backend: SIMULATED GPU driver /usr/sbin/../lib/$arch/lupine/libcuda-sim.so" "$tmp/lupined.log" ||
        { cat "$tmp/lupined.log"; fail "lupined's workers did not load the installed simulator"; }
# the installed cutrace logs the calls the example makes
LD_AUDIT=$pkglib/liblupine-cutrace.so CUTRACE_FILE=$tmp/cutrace LD_LIBRARY_PATH=$pkglib \
        LUPINE_SERVER=unix:$sock/lupined.sock "$tmp/roundtrip" >/dev/null 2>&1 || fail "the example under cutrace"
grep -q '> cuInit(' "$tmp/cutrace" && grep -q '< cuMemcpyHtoD_v2 = 0' "$tmp/cutrace" ||
        { head -n 20 "$tmp/cutrace"; fail "cutrace logged no cuInit and cuMemcpyHtoD_v2"; }
echo "ok: cutrace logged $(wc -l <"$tmp/cutrace") lines"
# and the installed NVML shim, through pynvml where it is installed
if python3 -c 'import pynvml' 2>/dev/null; then
        LD_LIBRARY_PATH=$pkglib LUPINE_SERVER=unix:$sock/lupined.sock python3 -c '
import pynvml as N
N.nvmlInit()
print("nvml:", N.nvmlDeviceGetCount(), N.nvmlDeviceGetName(N.nvmlDeviceGetHandleByIndex(0)))' >"$tmp/nvml.out" 2>&1 ||
                { cat "$tmp/nvml.out"; fail "pynvml through the installed libnvidia-ml.so.1"; }
        cat "$tmp/nvml.out"
        grep -q '(sim)' "$tmp/nvml.out" || fail "pynvml did not see the simulated GPU"
else
        echo "pynvml not installed: the NVML shim is not run here"
fi
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || { cat "$tmp/lupined.log"; fail "lupined exited $rc on SIGTERM"; }
echo "ok: lupined stopped cleanly"

step "apt-get purge"
apt-get purge -y -qq lupine-server lupine-client >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "apt-get purge"; }
installed=0
rm -rf "$sock"
sock=""
snapshot >"$tmp/after"
# What policy lets stay: the lupine user and group (and systemd-sysusers'
# backups of the files it edited), which files on other disks may still
# belong to. Anything else the packages added or removed is a fault.
getent passwd lupine >/dev/null && echo "the lupine user stays, as Debian policy allows (files elsewhere may be its)"
diff "$tmp/before" "$tmp/after" | grep '^[<>]' |
        grep -vE '^> f /etc/(passwd|group|shadow|gshadow)-$' >"$tmp/left" || true
if [ -s "$tmp/left" ]; then
        echo "FAIL: purge left the file system changed (< gone, > left behind):"
        cat "$tmp/left"
        exit 1
fi
echo "ok: after purge the file system is as before, but for the lupine user"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 20: the paths docs/running.md and docs/operations.md promise are
# the ones `meson install` uses. Installs BUILDDIR (configured with
# --prefix=/usr; tests/install/deb.sh passes the Debian build's) into a
# scratch --destdir and compares every file and link there with
# docs/install-layout.txt. Without BUILDDIR it configures and builds one
# (tests disabled) with the CUDA headers scripts/install-deps.sh chose.
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build=${1:-}
if [ -z "$build" ]; then
        build=$tmp/build
        inc=$(cat .deps/cuda-include-dir 2>/dev/null || echo "${CUDA_INCLUDE:-/usr/local/cuda/include}")
        meson setup "$build" --prefix=/usr -Dtests=disabled -Dtoolkit_include="$inc" >"$tmp/setup.log" 2>&1 ||
                { cat "$tmp/setup.log"; exit 1; }
        ninja -C "$build" >"$tmp/ninja.log" 2>&1 || { tail -n 30 "$tmp/ninja.log"; exit 1; }
fi
opts=$(meson introspect --buildoptions "$build")
opt() { python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]][0])' "$1" <<<"$opts"; }
prefix=$(opt prefix)
[ "$prefix" = /usr ] || { echo "FAIL: $build has prefix $prefix; docs/install-layout.txt is for /usr"; exit 1; }
libdir=$prefix/$(opt libdir)
# as systemd/meson.build chooses it for prefix /usr
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /usr/lib/systemd/system)
meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log"; exit 1; }
(cd "$tmp/root" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort) >"$tmp/got"
python3 tests/install/layout.py "$libdir" "$unitdir" meson >"$tmp/want"
if ! diff -u "$tmp/want" "$tmp/got" >"$tmp/diff"; then
        echo "FAIL: meson install differs from docs/install-layout.txt (- promised, + installed):"
        cat "$tmp/diff"
        exit 1
fi
# Where lupined looks for the simulator (daemon/backend.c): compiled in.
grep -q "$libdir/lupine" "$tmp/root/usr/sbin/lupined" ||
        { echo "FAIL: lupined does not name $libdir/lupine"; exit 1; }
# the units run the installed daemon
grep -q "^ExecStart=/usr/sbin/lupined " "$tmp/root$unitdir/lupined.service" ||
        { echo "FAIL: lupined.service does not start /usr/sbin/lupined"; exit 1; }
# the ld.so.conf.d example names the directory the shims are in
grep -qx "$libdir/lupine" "$tmp/root/usr/share/doc/lupine/examples/ld.so.conf.d-lupine.conf" ||
        { echo "FAIL: the ld.so.conf.d example does not name $libdir/lupine"; exit 1; }
echo "ok: meson install puts the $(wc -l <"$tmp/got") files of docs/install-layout.txt where it says"

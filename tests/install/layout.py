#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The file lists of docs/install-layout.txt, one path a line, sorted.

layout.py LIBDIR UNITDIR meson           what `meson install` must give
layout.py LIBDIR UNITDIR package NAME    what package NAME must hold
"""
import os
import platform
import sys

LAYOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'install-layout.txt')


def rows():
    for n, line in enumerate(open(LAYOUT), 1):
        f = line.split()
        if not f or f[0].startswith('#'):
            continue
        if f[-1] == 'x86_64':
            if platform.machine() != 'x86_64':
                continue
            f = f[:-1]
        if len(f) not in (2, 3) or (f[0] == '-' and len(f) != 3):
            sys.exit('%s:%d: want "PATH PACKAGE [PACKAGE-PATH]", got %r' % (LAYOUT, n, line.strip()))
        yield f[0], f[1], f[2] if len(f) == 3 and f[2] != '=' else f[0]


def main():
    if len(sys.argv) < 4 or sys.argv[3] not in ('meson', 'package') or (sys.argv[3] == 'package') != (len(sys.argv) == 5):
        sys.exit(__doc__)
    libdir, unitdir = sys.argv[1].rstrip('/'), sys.argv[2].rstrip('/')

    def subst(p):
        return p.replace('LIBDIR', libdir, 1) if p.startswith('LIBDIR') else p.replace('UNITDIR', unitdir, 1)
    if sys.argv[3] == 'meson':
        out = [subst(m) for m, _, _ in rows() if m != '-']
    else:
        out = [subst(d) for _, pkg, d in rows() if pkg == sys.argv[4]]
        if not out:
            sys.exit('%s names no file of package %s' % (LAYOUT, sys.argv[4]))
    print('\n'.join(sorted(out)))


main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""File-level call graph of one source folder, from the built objects.

    scripts/callgraph.py [-C build] [--edges] [--target DIR.p] FOLDER...

For each C file of FOLDER (e.g. daemon/supervisor) it finds the object the
build made from it (build/compile_commands.json says which), and asks nm
which global symbols that object defines and which it references. File A
has an edge to file B when A references a symbol B defines: A calls (or
reads) something of B's. Only edges inside the folder count; calls into
common/ or libc are the layer below and cannot close a cycle here.

It prints the strongly connected components with more than one file (each
is a cycle: every file in it reaches every other), and for each the edges
inside it with the symbols that make them, so one can see which call to
move or invert. --edges prints the whole graph too.

Exit status: 0 when the folder has no cycle, 1 when it has one, 2 when the
build is missing. A source compiled into several targets (sd_fds.c is in a
test too) is read from the target holding most of the folder's files,
unless --target names one (the directory name ending in .p).
"""
import argparse
import collections
import json
import os
import subprocess
import sys


def objects_for(build, folder, target):
    """{source path relative to the source root: object path}."""
    try:
        with open(os.path.join(build, "compile_commands.json")) as f:
            cmds = json.load(f)
    except OSError:
        return {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = os.path.normpath(folder)
    by_target = collections.defaultdict(dict)
    for c in cmds:
        src = os.path.normpath(os.path.join(c["directory"], c["file"]))
        rel = os.path.relpath(src, root)
        if os.path.dirname(rel) != folder or not rel.endswith(".c"):
            continue
        obj = os.path.join(c["directory"], c["output"])
        if not os.path.exists(obj):
            continue
        by_target[os.path.dirname(c["output"])][rel] = obj
    if not by_target:
        return {}
    if target:
        for t, objs in by_target.items():
            if os.path.basename(t) == target:
                return objs
        return {}
    return max(by_target.values(), key=len)


def nm_symbols(obj):
    """(defined globals, referenced undefined symbols) of one object."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRGSCV" or kind == "W":
            defined.add(name)
    return defined, undefined


def graph(objs):
    definer = {}
    refs = {}
    for src, obj in objs.items():
        d, u = nm_symbols(obj)
        for sym in d:
            definer[sym] = src
        refs[src] = u
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for src, u in refs.items():
        for sym in sorted(u):
            dst = definer.get(sym)
            if dst and dst != src:
                edges[src][dst].append(sym)
    return edges


def sccs(nodes, edges):
    """Tarjan's algorithm, iterative; components in reverse topological order."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(root):
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return out


def short(path, folder):
    return os.path.relpath(path, folder)


def report(build, folder, target, show_edges):
    objs = objects_for(build, folder, target)
    if not objs:
        print(f"{folder}: no objects in {build} (build first, or check --target)", file=sys.stderr)
        return 2
    edges = graph(objs)
    comps = sccs(objs.keys(), edges)
    cyclic = [c for c in comps if len(c) > 1]
    print(f"== {folder}: {len(objs)} files, "
              f"{sum(len(d) for d in edges.values())} file-to-file edges, {len(cyclic)} cycle(s)")
    if show_edges:
        for src in sorted(edges):
            for dst in sorted(edges[src]):
                syms = edges[src][dst]
                print(f"  {short(src, folder)} -> {short(dst, folder)}: {', '.join(syms)}")
    for c in cyclic:
        print(f"  SCC of {len(c)}: {' '.join(short(f, folder) for f in c)}")
        members = set(c)
        for src in c:
            for dst in sorted(edges.get(src, {})):
                if dst in members:
                    syms = edges[src][dst]
                    print(f"    {short(src, folder)} -> {short(dst, folder)}: {', '.join(syms)}")
    # The order files can be read in, lowest first (each SCC one step).
    print("  layers, lowest first: " +
              " | ".join(" ".join(short(f, folder) for f in c) for c in comps))
    return 1 if cyclic else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-C", dest="build", default="build", help="the meson build directory (default: build)")
    ap.add_argument("--target", help="read objects from this target directory (e.g. lupined.p)")
    ap.add_argument("--edges", action="store_true", help="print every edge, not only those in cycles")
    ap.add_argument("folders", nargs="+", help="source folders, relative to the source root")
    a = ap.parse_args()
    rc = 0
    for folder in a.folders:
        rc = max(rc, report(a.build, folder, a.target, a.edges))
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Production C files over 800 lines and functions over 120 lines.

    scripts/check-size.py [--max-file N] [--max-function N] [DIR...]

STYLE.md, habit 8: a file near 1,000 lines is two files. This lists every
.c and .h file under the production folders (daemon/, shim/, common/,
checkpoint/, cli/, sim/, tools/ unless DIRs are given) longer than
--max-file lines, and every function longer than --max-function lines
(from the line that names it to its closing brace). Exit status 1 when
anything is listed, 0 otherwise.

Functions are found by matching braces after comments, strings and
character literals are blanked out: a '{' at file level that follows a
parameter list ')' opens a function body. Preprocessor lines are skipped,
so a function whose braces are split across #if branches may be misread;
none is today.
"""
import argparse
import os
import re
import sys

DEFAULT_DIRS = ["daemon", "shim", "common", "checkpoint", "cli", "sim", "tools"]


def blank(text):
    """text with comments, string and char literals and preprocessor lines
    replaced by spaces (newlines kept, so line numbers still hold)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # a directive, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            # the quotes stay, what is between them goes
            out.append(c + " " * (j - i - 1))
            if j < n and text[j] == c:
                out.append(c)
                j += 1
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """[(name, first line, last line)] of the function definitions in text."""
    code = blank(text)
    found = []
    depth = 0
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "{":
            if depth == 0:
                head = code[:i].rstrip()
                if head.endswith(")"):
                    # the parameter list's '(' and the name before it
                    k, d = len(head) - 1, 0
                    while k >= 0:
                        if head[k] == ")":
                            d += 1
                        elif head[k] == "(":
                            d -= 1
                            if d == 0:
                                break
                        k -= 1
                    m = re.search(r"([A-Za-z_]\w*)\s*$", head[:k])
                    if m:
                        start_line = code.count("\n", 0, m.start(1)) + 1
                        end = match_brace(code, i)
                        found.append((m.group(1), start_line, code.count("\n", 0, end) + 1))
                        i = end + 1
                        continue
            depth += 1
        elif c == "}":
            depth = max(depth - 1, 0)
        i += 1
    return found


def match_brace(code, i):
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def sources(dirs):
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-file", type=int, default=800)
    ap.add_argument("--max-function", type=int, default=120)
    ap.add_argument("dirs", nargs="*", default=DEFAULT_DIRS)
    a = ap.parse_args()
    big_files, big_funcs = [], []
    for path in sources(a.dirs):
        with open(path, errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > a.max_file:
            big_files.append((path, lines))
        for name, first, last in functions(text):
            if last - first + 1 > a.max_function:
                big_funcs.append((path, first, name, last - first + 1))
    for path, lines in big_files:
        print(f"{path}: {lines} lines (limit {a.max_file})")
    for path, first, name, lines in big_funcs:
        print(f"{path}:{first}: {name}() is {lines} lines (limit {a.max_function})")
    if not big_files and not big_funcs:
        print(f"no file over {a.max_file} lines, no function over {a.max_function} lines")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The house rules that a compiler cannot check, checked on every CI run.

1. No import cycle among the top-level modules of any crate (`crate::a` in `b.rs` or
   `b/...` is an edge b -> a; test modules are ignored). Each crate must be a DAG of modules.
2. Only `crates/os` touches the kernel's files and scheduling calls: outside it, no string
   naming `/proc/` or `/sys/`, and no call of sched_setaffinity, setns, sched_setattr,
   setpriority, nice or unshare (comments are ignored). Tests included: they use `os` too.
3. The binary is thin: every `crates/triage/src/cmd/*.rs` file holds arguments and glue only,
   so none may be longer than CMD_MAX_LINES lines.

Prints each violation and exits 1 if there is any. `--verbose` also prints each crate's
module order (leaves first).
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CRATES = os.path.join(ROOT, "crates")
CMD_MAX_LINES = 300

KERNEL_PATTERNS = [
    (re.compile(r'"/proc(/|")'), "names /proc"),
    (re.compile(r'"/sys/'), "names /sys"),
    (re.compile(r"\bsched_setaffinity\b"), "calls sched_setaffinity"),
    (re.compile(r"\bsched_getaffinity\b"), "calls sched_getaffinity"),
    (re.compile(r"\bsetns\b\s*\("), "calls setns"),
    (re.compile(r"\bunshare\b\s*\("), "calls unshare"),
    (re.compile(r"\bsched_setattr\b"), "calls sched_setattr"),
    (re.compile(r"\bsetpriority\b"), "calls setpriority"),
    (re.compile(r"\blibc::nice\b"), "calls nice"),
    (re.compile(r"\bSYS_openat2\b"), "calls openat2"),
    (re.compile(r"\blibc::statx\b"), "calls statx"),
]


def strip_comments(text):
    """Remove // comments (line and doc) and /* */ blocks, keeping string literals intact
    well enough for a grep: a `//` inside a string literal ends the scan of that line only
    when it is preceded by an even number of quotes."""
    out = []
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for line in text.splitlines():
        quotes = 0
        cut = len(line)
        i = 0
        while i < len(line) - 1:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quotes += 1
            elif c == "/" and line[i + 1] == "/" and quotes % 2 == 0:
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def without_tests(text):
    """The part of a file before its first `#[cfg(test)]` (unit-test modules sit at the end)."""
    return text.split("#[cfg(test)]")[0]


def rust_files(d):
    for root, _, files in os.walk(d):
        for f in files:
            if f.endswith(".rs"):
                yield os.path.join(root, f)


def module_edges(src):
    """Top-level module of each file under src, and the crate-local modules each one uses."""
    mods, edges = set(), {}
    for path in rust_files(src):
        rel = os.path.relpath(path, src)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top in ("lib", "main"):
            continue
        mods.add(top)
        text = strip_comments(without_tests(open(path, errors="replace").read()))
        used = set(re.findall(r"\bcrate::(\w+)", text))
        # `use crate::{a, b::c}` groups.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text, flags=re.S):
            used.update(re.findall(r"(?:^|,)\s*(\w+)", group))
        edges.setdefault(top, set()).update(m for m in used if m != top)
    return mods, {m: {w for w in e if w in mods} for m, e in edges.items()}


def cycles(mods, edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for m in sorted(mods):
        if m not in index:
            visit(m)
    return out


def leaves_first(mods, edges):
    order, done = [], set()
    while len(done) < len(mods):
        ready = sorted(m for m in mods - done if edges.get(m, set()) <= done)
        if not ready:
            break
        order.extend(ready)
        done.update(ready)
    return order


def main():
    verbose = "--verbose" in sys.argv
    problems = []
    for crate in sorted(os.listdir(CRATES)):
        src = os.path.join(CRATES, crate, "src")
        if not os.path.isdir(src):
            continue
        mods, edges = module_edges(src)
        for comp in cycles(mods, edges):
            problems.append(f"crates/{crate}: import cycle among modules {' '.join(comp)}")
        if verbose:
            print(f"{crate}: {' '.join(leaves_first(mods, edges))}")

    for path in rust_files(CRATES):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("crates", "os") + os.sep) or "/target/" in rel:
            continue
        text = strip_comments(open(path, errors="replace").read())
        for lineno, line in enumerate(text.splitlines(), 1):
            for pat, what in KERNEL_PATTERNS:
                if pat.search(line):
                    problems.append(f"{rel}:{lineno}: {what} outside crates/os: {line.strip()}")

    cmd = os.path.join(CRATES, "triage", "src", "cmd")
    if os.path.isdir(cmd):
        for f in sorted(os.listdir(cmd)):
            path = os.path.join(cmd, f)
            n = sum(1 for _ in open(path))
            if n > CMD_MAX_LINES:
                problems.append(
                    f"crates/triage/src/cmd/{f}: {n} lines; a subcommand file holds arguments "
                    f"and glue only (at most {CMD_MAX_LINES}): move the work into a library crate"
                )

    for p in problems:
        print(p)
    if problems:
        print(f"check_layout: {len(problems)} problem(s)")
        return 1
    print("check_layout: ok (no module cycles, kernel files only in crates/os, thin cmd files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

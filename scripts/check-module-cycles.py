#!/usr/bin/env python3
"""No import cycle between the top-level modules of any crate.

A module is a crate's top-level file or folder under src/ (`corpus.rs` with `corpus/`); it
imports another when its code (comments aside) names `crate::other`. Prints each crate's
module count and the cycles found (strongly connected groups); exits 1 when there is one.
"""

import os
import re
import sys


def graph(src):
    files = {}
    for folder, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(folder, name)
                top = os.path.relpath(path, src).split(os.sep)[0].removesuffix(".rs")
                files.setdefault(top, []).append(path)
    edges = {}
    for top, paths in files.items():
        deps = set()
        for path in paths:
            with open(path, encoding="utf-8") as f:
                code = "\n".join(
                    line for line in f.read().splitlines() if not line.strip().startswith("//")
                )
            for other in re.findall(r"crate::([a-z_0-9]+)", code):
                if other != top and other in files and top not in ("lib", "main"):
                    deps.add(other)
        edges[top] = deps
    return edges


def cycles(edges):
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")
    bad = False
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not os.path.isdir(src):
            continue
        edges = graph(src)
        found = cycles(edges)
        print(f"  {crate}: {len(edges)} modules, {len(found)} import cycles {found or ''}")
        bad = bad or bool(found)
    if bad:
        print("import cycle between modules of a crate (see above)", file=sys.stderr)
        return 1
    print("module imports ok: no cycle inside any crate")
    return 0


if __name__ == "__main__":
    sys.exit(main())

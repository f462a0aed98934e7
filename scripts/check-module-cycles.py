#!/usr/bin/env python3
"""No import cycle between sibling modules anywhere in a crate.

Every folder of a crate's src/ is a level: its modules are its files and sub-folders
(`grid.rs` with `grid/` is one module `grid`). A module imports a sibling when its code
(comments aside) names a path that lands in it: `crate::grid::report::…`, `super::report`,
`super::super::x`, `self::x`, or a group `super::{placebo, report}`. Each path is resolved
against the file's own module, and an edge is drawn between the two children of the deepest
module both paths share, so `crate::` circles between top-level modules and `super::` circles
between the files of one folder are caught alike. Prints each crate's module and cycle
counts and the cycles found (strongly connected groups, each named by its folder); exits 1
when there is one.

    check-module-cycles.py [CRATES_DIR]     (default: the repository's crates/)
"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::(?:super|[A-Za-z_][A-Za-z_0-9]*))*)(?:::\{([^{}]*)\})?")


def module_path(src, path):
    """The module path of a source file: lib.rs/main.rs → [], a/b.rs → [a, b], a/mod.rs → [a]."""
    parts = os.path.relpath(path, src).removesuffix(".rs").split(os.sep)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return parts


def modules(src):
    """Every module path of the crate (as tuples), from its files and folders."""
    found = {()}
    for folder, dirs, names in os.walk(src):
        rel = os.path.relpath(folder, src)
        base = [] if rel == "." else rel.split(os.sep)
        for d in dirs:
            found.add(tuple(base + [d]))
        for name in names:
            if name.endswith(".rs"):
                found.add(tuple(module_path(src, os.path.join(folder, name))))
    return found


def references(own, code):
    """The absolute paths a file of module `own` names (each item of a group separately)."""
    for m in PATH.finditer(code):
        head, rest, group = m.group(1), m.group(2), m.group(3)
        segments = [s for s in rest.split("::") if s]
        if head == "crate":
            base = []
        elif head == "self":
            base = list(own)
        else:  # super
            base = list(own[:-1])
        while segments and segments[0] == "super":
            base = base[:-1]
            segments.pop(0)
        if group is None:
            yield base + segments
        else:
            for item in group.split(","):
                name = item.strip().split("::")[0].split(" ")[0]
                if name and name not in ("self", "*"):
                    yield base + segments + [name]
                elif name == "self":
                    yield base + segments


def graph(src):
    """Edges between sibling modules: {folder path: {child: {sibling, …}}}."""
    known = modules(src)
    levels = {}
    for folder, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            own = module_path(src, path)
            with open(path, encoding="utf-8") as f:
                code = "\n".join(
                    line for line in f.read().splitlines() if not line.strip().startswith("//")
                )
            # Every module is a node of its parent's level, imports or not.
            for depth in range(len(own)):
                levels.setdefault(tuple(own[:depth]), {}).setdefault(own[depth], set())
            for target in references(own, code):
                shared = 0
                while shared < min(len(own), len(target)) and own[shared] == target[shared]:
                    shared += 1
                if shared >= len(own) or shared >= len(target):
                    continue  # a module naming its own items, its parent's or its children's
                parent = tuple(own[:shared])
                a, b = own[shared], target[shared]
                if parent + (b,) in known:
                    levels.setdefault(parent, {}).setdefault(a, set()).add(b)
    return levels


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


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "crates")
    bad = False
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not os.path.isdir(src):
            continue
        levels = graph(src)
        found = []
        for folder, edges in sorted(levels.items()):
            where = "::".join(folder) or "crate"
            found += [f"{where}: {' ↔ '.join(group)}" for group in cycles(edges)]
        count = sum(len(edges) for edges in levels.values())
        print(f"  {crate}: {count} modules, {len(found)} import cycles {found or ''}")
        bad = bad or bool(found)
    if bad:
        print("import cycle between modules of a crate (see above)", file=sys.stderr)
        return 1
    print("module imports ok: no cycle inside any crate, at any level")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

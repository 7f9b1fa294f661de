#!/usr/bin/env python3
"""Fails when the top-level modules of a Rust crate import each other in a circle.

Usage: scripts/check-module-cycles.py CRATE_SRC_DIR...

ARCHITECTURE.md promises that the ranker's modules form layers (the
vocabulary at the bottom, the scoring core importing only `config`); this
keeps the promise checked. A module `a` depends on `b` when code in `a.rs`
(or under `a/`), outside comments and `#[cfg(test)]` modules, names
`crate::b`, or names a type `lib.rs` re-exports from `b`
(`pub use b::{Type, ...}`). rustc accepts circles between modules of one
crate, so nothing else would catch one.
"""
import os
import re
import sys


def code_of(path):
    """The file's code without its test module and comment lines."""
    text = open(path, encoding="utf-8").read()
    # A crate's test module comes last in its file, by this workspace's convention.
    tests = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+", text, re.M)
    if tests:
        text = text[: tests.start()]
    return "\n".join(line for line in text.split("\n") if not line.strip().startswith("//"))


def module_sources(src):
    """Each top-level module's code, its submodules' included."""
    modules = {}
    for entry in sorted(os.listdir(src)):
        name, ext = os.path.splitext(entry)
        if ext != ".rs" or name in ("lib", "main"):
            continue
        code = code_of(os.path.join(src, entry))
        folder = os.path.join(src, name)
        if os.path.isdir(folder):
            for root, _, files in os.walk(folder):
                code += "".join(code_of(os.path.join(root, f)) for f in sorted(files) if f.endswith(".rs"))
        modules[name] = code
    return modules


def reexports(src):
    """Type name -> the module `lib.rs` re-exports it from."""
    lib = code_of(os.path.join(src, "lib.rs"))
    owner = {}
    for module, items in re.findall(r"pub use (\w+)::\{?([^;]+?)\}?;", lib, re.S):
        for item in re.split(r"[,\s]+", items):
            if item:
                owner[item] = module
    return owner


def dependencies(src):
    modules = module_sources(src)
    owner = reexports(src)
    graph = {}
    for name, code in modules.items():
        deps = {m for m in re.findall(r"crate::(\w+)", code) if m in modules}
        named = re.findall(r"crate::([A-Z]\w*)", code)
        for group in re.findall(r"use crate::\{([^}]*)\}", code):
            # `crate::{lease::X, Type}`: a path's first segment names its module.
            named += [item.split("::")[0] for item in re.split(r"[,\s]+", group) if item]
        deps |= {owner.get(item, item) for item in named if item in owner or item in modules}
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycle(graph):
    """One circle as a list of modules, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    status = 0
    for src in sys.argv[1:]:
        cycle = find_cycle(dependencies(src))
        if cycle:
            print(f"{src}: modules import each other in a circle: {' -> '.join(cycle)}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

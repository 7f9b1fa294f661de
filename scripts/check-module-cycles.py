#!/usr/bin/env python3
"""Fails when the modules of a Rust crate import each other in a circle.

Usage: scripts/check-module-cycles.py CRATE_SRC_DIR...

ARCHITECTURE.md promises that each crate's modules form layers; rustc accepts
circles between the modules of one crate, so this keeps the promise checked.

Every file is a module (`src/a.rs` and `src/a/mod.rs` are `crate::a`,
`src/a/b.rs` is `crate::a::b`), at any depth. Module `m` depends on module
`n` when code in `m`'s file, outside comments and its `#[cfg(test)]` module,
names an item of `n` by a path: `crate::...`, `super::...`, `self::...`, or
the name of one of `m`'s own child modules; `use` groups (`use super::{a::X,
b}`) count path by path. A path leads to the deepest module it names, and on
through `pub use` re-exports (`crate::store::WalkPage` is `store::walk` when
`store` re-exports `walk::WalkPage`). A child's use of the modules that
enclose it is no dependency (it sees their items as Rust's privacy does), and
what a parent declares (`mod child;`) or re-exports (`pub use child::X;`) is
its facade, not a dependency: a circle is between modules neither of which
encloses the other, siblings or cousins at any depth.
"""
import os
import pathlib
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def code_of(path):
    """The file's code without its test module, comment lines and strings."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    # A module's tests come last in its file, by this workspace's convention.
    tests = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*(pub(\(\w+\))? )?mod \w+", text, re.M)
    if tests:
        text = text[: tests.start()]
    text = "\n".join(line for line in text.split("\n") if not line.strip().startswith("//"))
    # Paths inside literals (log lines, filters) are not code: raw strings,
    # strings (escapes and line continuations included) and the characters
    # `'"'` and `'\\''`, which would otherwise open a string.
    text = re.sub(r'r(#*)"[\s\S]*?"\1', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])'", "' '", text)
    return re.sub(r'"(?:\\[\s\S]|[^"\\])*"', '""', text)


def module_files(src):
    """Module path (a tuple of names; () for the crate root) -> its file."""
    files = {}
    for root, folders, names in os.walk(src):
        # Binaries under src/bin are crates of their own.
        if root == src:
            folders[:] = [folder for folder in folders if folder != "bin"]
        relative = os.path.relpath(root, src)
        parents = () if relative == "." else tuple(relative.split(os.sep))
        for name in sorted(names):
            stem, ext = os.path.splitext(name)
            if ext != ".rs":
                continue
            if stem in ("lib", "main") and not parents:
                module = ()
            elif stem == "mod":
                module = parents
            else:
                module = parents + (stem,)
            files[module] = os.path.join(root, name)
    # A binary's root (main.rs beside lib.rs) is its own crate; the library's
    # root stands for both, since main.rs names the library by its crate name.
    if os.path.exists(os.path.join(src, "lib.rs")):
        files[()] = os.path.join(src, "lib.rs")
    return files


def expand_use(tree):
    """`a::{b::C, d}` -> ["a::b::C", "a::d"], through nested groups."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree] if tree else []
    prefix, body = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for index, char in enumerate(body):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index])
            start = index + 1
    parts.append(body[start:])
    return [path for part in parts if part for path in expand_use(prefix + part)]


def facade(code, children):
    """`code` less the lines by which a module declares its children or re-exports their items."""
    code = re.sub(rf"^\s*(pub(\([^)]*\))? )?mod {IDENT};", "", code, flags=re.M)
    pattern = rf"^\s*pub(\([^)]*\))? use ((self::)?(?:{'|'.join(children) or '$^'})\b[^;]*);"
    return re.sub(pattern, "", code, flags=re.M | re.S)


def reexports(code, module, modules):
    """Name -> the module it comes from, for each `pub use` of `module`."""
    owners = {}
    for tree in re.findall(r"pub(?:\([^)]*\))? use ([^;]+);", code, re.S):
        for path in expand_use(tree):
            segments = path.split("::")
            target = resolve(segments[:-1], module, modules, {})
            if target is not None:
                owners[segments[-1]] = target
    return owners


def resolve(segments, module, modules, exports):
    """The deepest module `segments` (a path read in `module`) names, or None."""
    if not segments:
        return None
    head, rest = segments[0], segments[1:]
    if head == "crate":
        base = ()
    elif head == "self":
        base = module
    elif head == "super":
        base = module[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif module + (head,) in modules:
        base, rest = module + (head,), rest
    else:
        return None
    for name in rest:
        if base + (name,) in modules:
            base = base + (name,)
        elif name in exports.get(base, {}):
            base = exports[base][name]
        else:
            break
    return base


def dependencies(src):
    files = module_files(src)
    modules = set(files)
    codes = {module: code_of(path) for module, path in files.items()}
    exports = {module: reexports(code, module, modules) for module, code in codes.items()}
    graph = {}
    for module, code in codes.items():
        children = [m[-1] for m in modules if m[:-1] == module and len(m) == len(module) + 1]
        code = facade(code, children)
        paths = [path for tree in re.findall(r"\buse ([^;]+);", code, re.S) for path in expand_use(tree)]
        code = re.sub(r"\buse [^;]+;", "", code, flags=re.S)
        heads = ["crate", "super", "self"] + children
        # Not inside another path (`common::store::x` names no child `store`).
        paths += re.findall(rf"(?<!::)\b(?:{'|'.join(heads)})(?:::{IDENT})+", code)
        deps = set()
        for path in paths:
            target = resolve(path.split("::"), module, modules, exports)
            # A module sees the items of the modules that enclose it, as Rust's
            # privacy lets it (a child adds methods to its parent's types); the
            # circles that break layers are between modules neither of which
            # encloses the other.
            if target is not None and module[: len(target)] != target:
                deps.add(target)
        graph[module] = deps
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
                return stack[stack.index(dep) :] + [dep]
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


def name(module):
    return "::".join(("crate",) + module)


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    status = 0
    for src in sys.argv[1:]:
        cycle = find_cycle(dependencies(src))
        if cycle:
            print(f"{src}: modules import each other in a circle: {' -> '.join(map(name, cycle))}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

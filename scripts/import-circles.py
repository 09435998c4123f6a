#!/usr/bin/env python3
"""Lists the import circles between the modules of each crate, and exits 1 if any.

Usage: scripts/import-circles.py [CRATE_SRC_DIR ...]   (default: every crate's src/)

A module's imports are the crate-local paths its file names: `crate::a::b`, `super::x`
(resolved against the module's parent) and `self::x`, in `use` lines and in code alike
(comments, doc links among them, are not imports); tests modules (`#[cfg(test)]` to the end of the file) are left out. A circle is a set of
modules (a strongly connected component of that graph, Tarjan's algorithm) where each
reaches every other. A module reaching its own submodules is not a circle; a submodule
reaching back into its parent is an import like any other.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)+)")


def module_of(src, file):
    """`a::b` for src/a/b.rs or src/a/b/mod.rs; `` for lib.rs or main.rs."""
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def imports(src, modules, module, text):
    text = text.split("#[cfg(test)]")[0]
    # Comments (doc links among them) name modules without importing them.
    text = "\n".join(line.split("//")[0] for line in text.splitlines())
    found = set()
    for root, rest in PATH.findall(text):
        names = rest.strip(":").split("::")
        if root == "crate":
            base = []
        elif root == "self":
            base = module.split("::") if module else []
        else:  # super: the parent module, and for a submodule file its own parent
            base = module.split("::")[:-1] if module else []
        path = base + names
        # The longest prefix that is a module of this crate.
        while path and "::".join(path) not in modules:
            path = path[:-1]
        target = "::".join(path)
        own = target == module or (module and target.startswith(module + "::"))
        if path and not own:
            found.add(target)
    return found


def circles(src):
    files = [f for f in src.rglob("*.rs")]
    modules = {module_of(src, f): f for f in files}
    graph = {m: imports(src, modules, m, f.read_text()) for m, f in modules.items()}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    dirs = [pathlib.Path(d) for d in sys.argv[1:]] or sorted(
        [p / "src" for p in (ROOT / "crates").iterdir() if (p / "src").is_dir()] + [ROOT / "kernels/src", ROOT / "src"]
    )
    found = 0
    for src in dirs:
        for comp in circles(src.resolve()):
            found += 1
            print(f"{src.relative_to(ROOT) if src.is_relative_to(ROOT) else src}: {' ↔ '.join(comp)}")
    print(f"import-circles: {found} circle(s)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()

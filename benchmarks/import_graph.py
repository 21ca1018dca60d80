"""The import graph of ``specdec_core`` read from the source with ``ast`` (nothing is
imported or run): its folders, the edges between folders and any import cycle between
modules. ``tests/test_layout.py`` checks the house rules on the same graph.

    python benchmarks/import_graph.py            # folders, folder edges, cycles
    python benchmarks/import_graph.py --json     # the same as JSON

A module is ``specdec_core.x.y`` (a package is its ``__init__``); its folder is the package
path below ``specdec_core`` (``engine/chain``; the two top-level modules are ``.``). An edge
``a → b`` is an absolute import of ``b`` (``import b``, ``from b import name``, or ``from
a.pkg import b`` when ``b`` is a module) anywhere in ``a``: module level or inside a
function. Imports under ``if TYPE_CHECKING:`` are kept apart (``typing`` edges): they
never run, so they are left out of the cycle search but counted where a rule is about who
may know whom (chain and tree). A relative import is resolved and listed as such.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "specdec_core"


@dataclass
class Graph:
    """Modules (dotted name → file), runtime and typing-only edges (``a → {b}``), the
    third-party top-level names each module imports, and relative imports found."""

    files: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    typing_edges: dict[str, set[str]] = field(default_factory=dict)
    external: dict[str, set[str]] = field(default_factory=dict)
    relative: list[tuple[str, int]] = field(default_factory=list)

    def all_edges(self, module: str) -> set[str]:
        return self.edges[module] | self.typing_edges[module]


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def folder(module: str) -> str:
    """``specdec_core.engine.chain.session`` → ``engine/chain``; a top-level module → ``.``;
    a package's ``__init__`` belongs to its own folder."""
    parts = module.split(".")[1:]
    path = REPO.joinpath(*module.split("."))
    if not path.is_dir():  # a module: its folder is its package
        parts = parts[:-1]
    return "/".join(parts) or "."


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers of the statements inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    for inner in ast.walk(stmt):
                        if hasattr(inner, "lineno"):
                            lines.add(inner.lineno)
    return lines


def build(root: Path = REPO, package: str = PACKAGE) -> Graph:
    """Read every ``.py`` under ``root/package`` (``__pycache__`` skipped)."""
    graph = Graph()
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" not in path.parts:
            graph.files[module_name(path, root)] = path
    modules = set(graph.files)
    for name, path in graph.files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        typing_only = _type_checking_lines(tree)
        runtime, typing, external = set(), set(), set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    graph.relative.append((name, node.lineno))
                    anchor = name.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            else:
                continue
            for target in targets:
                top = target.split(".")[0]
                if top != package:
                    external.add(top)
                    continue
                while target not in modules and "." in target:  # `import a.b.c` of a name
                    target = target.rsplit(".", 1)[0]
                if target == name:
                    continue
                (typing if node.lineno in typing_only else runtime).add(target)
        graph.edges[name] = runtime
        graph.typing_edges[name] = typing - runtime
        graph.external[name] = external
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, …, a]``) for each strongly connected component of more than one
    module (Tarjan's algorithm, iterative), shortest found by a breadth-first search."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return [_shortest_cycle(edges, set(c)) for c in components]


def _shortest_cycle(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    best: list[str] | None = None
    for start in sorted(component):
        parents = {start: None}
        queue = [start]
        found = None
        while queue and found is None:
            nxt = []
            for node in queue:
                for child in sorted(edges[node] & component):
                    if child == start:
                        found = node
                        break
                    if child not in parents:
                        parents[child] = node
                        nxt.append(child)
                if found:
                    break
            queue = nxt
        path = [start]
        node = found
        while node is not None and node != start:
            path.append(node)
            node = parents[node]
        path = [start] + path[1:][::-1] + [start]
        if best is None or len(path) < len(best):
            best = path
    assert best is not None
    return best


def folder_edges(graph: Graph) -> Counter:
    """(folder a, folder b) → number of runtime module edges from a to b (a ≠ b)."""
    count: Counter = Counter()
    for a, targets in graph.edges.items():
        for b in targets:
            if folder(a) != folder(b):
                count[(folder(a), folder(b))] += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    graph = build()
    folders = Counter(folder(m) for m in graph.files)
    lines = Counter({f: 0 for f in folders})
    for m, path in graph.files.items():
        lines[folder(m)] += len(path.read_text(encoding="utf-8").splitlines())
    edges = folder_edges(graph)
    found = cycles(graph.edges)
    folder_cycles = cycles(_folder_graph(edges, folders))
    if args.json:
        out = {
            "folders": {f: {"modules": folders[f], "lines": lines[f]} for f in sorted(folders)},
            "folder_edges": [[a, b, n] for (a, b), n in sorted(edges.items())],
            "module_cycles": found,
            "folder_cycles": folder_cycles,
            "relative_imports": [f"{m}:{line}" for m, line in graph.relative],
        }
        print(json.dumps(out, indent=1))
        return 0
    print(f"{PACKAGE}/: {len(graph.files)} modules in {len(folders)} folders")
    for f in sorted(folders):
        print(f"  {f:<16} {folders[f]:3d} modules {lines[f]:6d} lines")
    print(f"\nedges between folders (module imports, at run time): {len(edges)}")
    for a in sorted(folders):
        outs = sorted((b, n) for (x, b), n in edges.items() if x == a)
        if outs:
            print(f"  {a:<16} → " + ", ".join(f"{b} ({n})" for b, n in outs))
    print(f"\nmodule cycles: {len(found)}")
    for c in found:
        print("  " + " → ".join(c))
    print(f"folder cycles: {len(folder_cycles)}")
    for c in folder_cycles:
        print("  " + " → ".join(c))
    if graph.relative:
        print("relative imports: " + ", ".join(f"{m}:{line}" for m, line in graph.relative))
    return 0


def _folder_graph(edges: Counter, folders: Counter) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {f: set() for f in folders}
    for a, b in edges:
        graph[a].add(b)
    return graph


if __name__ == "__main__":
    sys.exit(main())

"""The import graph of Tidepool's own code, read from the source (every import statement, those
inside functions included; `if TYPE_CHECKING:` blocks are left out because they never run)."""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "console", "scheduler", "tidepool_ckpt", "tidepool_cli")

# The components whose dependencies DESIGN §5 rules: a module belongs to the first prefix it
# starts with; a top-level module of `scheduler` is a component of its own.
COMPONENTS = (
    "scheduler.engine",
    "scheduler.node.runtime",
    "scheduler.node",
    "scheduler.loop",
    "scheduler.executors",
    "scheduler.services",
    "scheduler.selectors",
    "scheduler.api",
    "scheduler.simulator",
    "scheduler.management",
    "scheduler.migrations",
    "console",
    "config",
    "tidepool_ckpt",
    "tidepool_cli",
    "scheduler.metrics",
)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for package in PACKAGES for p in (root / package).rglob("*.py") if "migrations" not in p.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """(imported name, line) for every import that can run; names may be modules or module.attr."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            found.extend((f"{target}.{alias.name}", node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def module_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module → {imported module of ours: first line}."""
    files = source_files(root)
    names = {module_name(p, root): p for p in files}
    graph: dict[str, dict[str, int]] = {}
    for name, path in names.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, line in _imports(tree, name, path.name == "__init__.py"):
            if target in names and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def component(module: str) -> str:
    for prefix in COMPONENTS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return module


def component_graph(graph: dict[str, dict[str, int]]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            a, b = component(source), component(target)
            if a != b:
                edges[a].add(b)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, …, a], or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def imports_of_prefix(graph: dict[str, dict[str, int]], source: str, target: str) -> list[str]:
    """'module:line → imported' for every import from `source`'s modules into `target`'s."""
    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    return [
        f"{mod}:{line} → {imp}"
        for mod, imports in sorted(graph.items()) if under(mod, source)
        for imp, line in sorted(imports.items()) if under(imp, target)
    ]


def package(module: str) -> str:
    """The top-level unit a module belongs to: `scheduler.<name>` for anything inside scheduler/
    (a subpackage such as scheduler.node, runtime/ included, or a top-level module such as
    scheduler.states), else its top-level package (console, config, …)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "scheduler" and len(parts) > 1 else parts[0]


def package_edges(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, list[str]]]:
    """package → {imported package: ['module:line → imported', …]}."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for source, targets in sorted(graph.items()):
        for target, line in sorted(targets.items()):
            a, b = package(source), package(target)
            if a != b:
                edges[a].setdefault(b, []).append(f"{source}:{line} → {target}")
    return edges


def package_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every group of packages that import each other in a circle (the strongly connected parts of
    the package graph with more than one package), each as one cycle through it [a, b, …, a]
    followed by the imports that make each step, sorted."""
    edges = package_edges(graph)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    found = []
    for group in groups:
        inside = {a: {b for b in edges.get(a, {}) if b in group} for a in group}
        cycle = find_cycle(inside) or []
        steps = [f"  {a} → {b}: {edges[a][b][0]}" for a, b in pairwise(cycle)]
        others = sorted(group - set(cycle))
        also = f" (with {', '.join(others)} in the same circle)" if others else ""
        found.append([" → ".join(cycle) + also, *steps])
    return sorted(found)

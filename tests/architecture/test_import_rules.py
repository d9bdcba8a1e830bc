"""DESIGN §5's import rules, checked on the import graph read from the source (function-level
imports included): the engine and the pod runtime stay pure Python, the node worker never reaches
into the scheduler loop or the console, the domain never imports the console, and no two
components import each other in a circle."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.architecture.import_graph import (
    ROOT,
    component_graph,
    find_cycle,
    imports_of_prefix,
    module_graph,
    package_cycles,
)


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return module_graph()


def _third_party(prefix: str, package: str) -> list[str]:
    """Imports of `package` (e.g. django) anywhere under `prefix`, as 'file:line'."""
    import ast

    hits = []
    base = ROOT / prefix.replace(".", "/")
    files = [base.with_suffix(".py")] if base.with_suffix(".py").exists() else sorted(base.rglob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name.split(".")[0] == package for name in names):
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return hits


@pytest.mark.parametrize("pure", ["scheduler.engine", "scheduler.node.runtime", "scheduler.node.remote", "tidepool_ckpt",
                                  "tidepool_cli"])
def test_pure_python_parts_import_no_django(graph, pure):
    assert _third_party(pure, "django") == []
    # Nor through a module of ours: everything they import must be pure as well.
    def inside(mod: str) -> bool:
        return mod == pure or mod.startswith(pure + ".")

    reached = {imp for mod, imports in graph.items() if inside(mod) for imp in imports}
    impure = sorted(mod for mod in reached if not inside(mod) and _third_party(mod, "django"))
    assert impure == [], f"{pure} imports modules that use Django: {impure}"


def test_importing_the_runtime_and_engine_loads_no_django():
    modules = [path for path in (ROOT / "scheduler" / "node" / "runtime").glob("*.py")]
    modules += [path for path in (ROOT / "scheduler" / "engine").glob("*.py")]
    names = ", ".join(
        ".".join(path.relative_to(ROOT).with_suffix("").parts) for path in modules if path.stem != "__init__"
    )
    code = f"import sys, {names}\nprint('django' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("source", "forbidden"),
    [
        ("scheduler.node", "scheduler.loop"),
        ("scheduler.node", "console"),
        ("scheduler", "console"),
        ("scheduler", "config"),  # the Celery app is Celery's current app, never imported
        ("scheduler.executors", "scheduler.node.agent"),  # the port names adapters by path only
        ("scheduler.services", "scheduler.loop"),
        ("scheduler.engine", "scheduler.simulator"),
    ],
)
def test_forbidden_direction(graph, source, forbidden):
    assert imports_of_prefix(graph, source, forbidden) == []


def test_no_import_cycle_between_components(graph):
    assert find_cycle(component_graph(graph)) is None


# Circles between packages that are allowed, each with its reason: none today.
ALLOWED_PACKAGE_CYCLES: dict[str, str] = {}


def test_no_import_cycle_between_packages(graph):
    """No two top-level parts of scheduler/ (engine, loop, node — runtime/ included —, executors,
    services, selectors, models, api, simulator, states, …) nor console, config, … import each
    other in a circle, module-level and function-level imports alike. Each circle is listed with
    the import that makes each step."""
    cycles = [cycle for cycle in package_cycles(graph) if cycle[0] not in ALLOWED_PACKAGE_CYCLES]
    assert cycles == [], "\n" + "\n".join(line for cycle in cycles for line in cycle)


def test_no_import_cycle_between_modules(graph):
    assert find_cycle({module: set(imports) for module, imports in graph.items()}) is None


def test_the_checks_catch_a_cycle_and_a_wrong_way_import(tmp_path):
    """The rules above could fail: a tree with a function-level cycle and a node → loop import."""
    for name, text in {
        "scheduler/__init__.py": "",
        "scheduler/services/__init__.py": "",
        "scheduler/services/lifecycle.py": "def f():\n    from scheduler.executors import get\n",
        "scheduler/executors/__init__.py": "from scheduler.node import agent\n",
        "scheduler/node/__init__.py": "",
        "scheduler/node/agent.py": "from ..services import lifecycle\nfrom scheduler.loop.cycle import x\n",
        "scheduler/loop/__init__.py": "",
        "scheduler/loop/cycle.py": "x = 1\n",
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    graph = module_graph(tmp_path)
    assert find_cycle(component_graph(graph)) == [
        "scheduler.executors", "scheduler.node", "scheduler.services", "scheduler.executors"
    ]
    assert imports_of_prefix(graph, "scheduler.node", "scheduler.loop") == [
        "scheduler.node.agent:2 → scheduler.loop.cycle"
    ]


def test_the_package_check_sees_through_subpackages(tmp_path):
    """executors → node.runtime and node → executors is a circle between the packages even though
    no component-level cycle shows it (node.runtime is a component of its own); a function-level
    import counts."""
    for name, text in {
        "scheduler/__init__.py": "",
        "scheduler/executors/__init__.py": "",
        "scheduler/executors/logs.py": "def read():\n    from scheduler.node.runtime.logs import chunk\n",
        "scheduler/node/__init__.py": "",
        "scheduler/node/worker.py": "from scheduler.executors import logs\n",
        "scheduler/node/runtime/__init__.py": "",
        "scheduler/node/runtime/logs.py": "chunk = 1\n",
        "scheduler/states.py": "",
        "scheduler/engine/__init__.py": "from scheduler import states\n",
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = module_graph(tmp_path)
    assert find_cycle(component_graph(graph)) is None
    assert package_cycles(graph) == [[
        "scheduler.executors → scheduler.node → scheduler.executors",
        "  scheduler.executors → scheduler.node: scheduler.executors.logs:2 → scheduler.node.runtime.logs",
        "  scheduler.node → scheduler.executors: scheduler.node.worker:1 → scheduler.executors",
    ]]

"""scheduler/engine stays pure Python: the simulator and the scenario files run it without Django; so do
the tools around it (scheduler/engine_tools: scenario files, the benchmark's snapshots)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "scheduler" / "engine"
TOOLS = ENGINE.parent / "engine_tools"


def _django_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}" for alias in node.names if alias.name.split(".")[0] == "django"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "django":
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_engine_module_imports_django():
    files = sorted(ENGINE.rglob("*.py")) + sorted(TOOLS.rglob("*.py"))
    assert len(files) >= 8, f"engine modules not found under {ENGINE}"
    offenders = [hit for path in files for hit in _django_imports(path)]
    assert offenders == [], f"Django imported in the engine: {offenders}"


def test_the_scan_would_catch_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom django.db import models\nimport django.conf as c\n")
    assert _django_imports(bad) == ["bad.py:2", "bad.py:3"]


def _modules(package: Path) -> list[str]:
    """Every module of the package, subpackages included, as dotted names."""
    names = [".".join(p.relative_to(package).with_suffix("").parts) for p in sorted(package.rglob("*.py"))]
    return [f"scheduler.{package.name}.{name.removesuffix('.__init__')}" for name in names if name != "__init__"]


def test_importing_the_engine_and_its_tools_loads_no_django():
    modules = ", ".join(_modules(ENGINE) + _modules(TOOLS))
    assert "scheduler.engine.victims.index" in modules and "scheduler.engine_tools.scenario" in modules
    code = f"import sys, {modules}\nprint('django' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ENGINE.parents[1], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"

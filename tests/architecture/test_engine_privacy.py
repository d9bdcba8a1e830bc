"""Each engine rule module uses the others only through their public names (DESIGN §5: one explicit
cycle state passed to rule modules, no mixins sharing private attributes). A `_name` is private to its
module: no engine module imports another's, and none reads `obj._attr` of anything but itself
(`self`, `cls`)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.import_graph import ROOT

CHECKED = (ROOT / "scheduler" / "engine", ROOT / "scheduler" / "engine_tools")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path, root: Path = ROOT) -> list[str]:
    """'file:line what' for every private name imported from another module and every `x._attr` where x
    is not `self` or `cls`."""
    where = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [f"{where}:{node.lineno} imports {alias.name}" for alias in node.names if _private(alias.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{where}:{node.lineno} reads {ast.unparse(node)}")
    return found


def test_no_engine_module_uses_another_modules_private_names():
    files = [path for base in CHECKED for path in sorted(base.rglob("*.py"))]
    assert len(files) > 20, "engine modules not found"
    assert [hit for path in files for hit in private_uses(path)] == []


def test_the_check_sees_a_private_import_and_a_private_attribute(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from .cycle import _Cycle, run_cycle\n"
        "from . import memo\n"
        "def f(cycle, self):\n"
        "    cycle._refusal(1)\n"
        "    memo._Memo()\n"
        "    self._ok = cycle.__class__\n"
    )
    assert private_uses(bad, tmp_path) == [
        "bad.py:1 imports _Cycle", "bad.py:4 reads cycle._refusal", "bad.py:5 reads memo._Memo"]

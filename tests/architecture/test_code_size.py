"""Readable pieces: no module over 500 lines (tests and migrations aside), and no function over
80 lines unless its docstring says why it is long ("Long because …")."""

from __future__ import annotations

import ast

from tests.architecture.import_graph import ROOT, source_files

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _long_functions(path, root=ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            doc = ast.get_docstring(node) or ""
            if length > MAX_FUNCTION_LINES and "long because" not in doc.lower():
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_module_over_500_lines():
    too_long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in source_files() if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert too_long == []


def test_no_function_over_80_lines_without_a_reason():
    assert [hit for path in source_files() for hit in _long_functions(path)] == []


def test_the_size_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\ndef ok():\n    '''Long because: a table.'''\n{body}\n")
    assert _long_functions(tmp_path / "m.py", tmp_path) == ["m.py:1 long (86 lines)"]

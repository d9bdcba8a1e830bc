"""Decisions reach the services as typed values, and text is made from them in one place: the engine's
`reasons` module renders a reason (or a preemption) for a member or for staff. Code that applies
decisions (scheduler/services/, scheduler/loop/) never reads meaning back out of a reason's text: no
`startswith`/`in`/regular expression over something called a reason, and no `str()` of an engine reason
value (text only through `reasons.render` / `reasons.preemption_text`; meaning through `.code`,
`.kind` and the parts)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.import_graph import ROOT

CHECKED = (ROOT / "scheduler" / "services", ROOT / "scheduler" / "loop")
# str methods that look into a text (slicing to a column's length, or comparing for a change, is fine)
INSPECTING = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "split", "rsplit",
              "partition", "rpartition", "splitlines", "casefold", "lower", "upper"}
REASONISH = ("reason", "why", "preemption")
REGEX_METHODS = {"match", "fullmatch", "search", "sub", "subn", "findall", "finditer"}


def _about_a_reason(node: ast.AST) -> bool:
    """The expression names a reason: a variable or attribute called *reason*, *why* or *preemption*."""
    for part in ast.walk(node):
        name = part.id if isinstance(part, ast.Name) else part.attr if isinstance(part, ast.Attribute) else ""
        if any(word in name.lower() for word in REASONISH):
            return True
    return False


def reason_readings(path: Path, root: Path = ROOT) -> list[str]:
    """'file:line code' for every place the module reads meaning out of a reason's text."""
    where = path.relative_to(root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # Functions about reasons (by name): any regular expression in them reads a reason's text.
    in_reason_function = {id(inner) for func in ast.walk(tree)
                          if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef) and _about_a_reason(
                              ast.Name(func.name)) for inner in ast.walk(func)}
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr in INSPECTING and _about_a_reason(func.value):
                hit = True  # reason.startswith(...), reason.split(...)
            elif func.attr in REGEX_METHODS and (any(map(_about_a_reason, node.args)) or id(node) in in_reason_function):
                hit = True  # re.match(..., reason), or PATTERN.match(text) inside reason_texts()
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
            hit = any(map(_about_a_reason, node.args))  # str(why): text not made by reasons.render
        elif isinstance(node, ast.Compare):
            hit = any(isinstance(op, ast.In | ast.NotIn) and _about_a_reason(right)
                      for op, right in zip(node.ops, node.comparators, strict=True))  # "priority" in reason
        if hit:
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_services_and_the_loop_never_read_meaning_out_of_reason_text():
    files = [path for base in CHECKED for path in sorted(base.rglob("*.py"))]
    assert len(files) > 10, "services and loop modules not found"
    assert [hit for path in files for hit in reason_readings(path)] == []


def test_the_check_sees_each_way_of_parsing_a_reason(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import re\n"
        "def f(preemption, why, job):\n"
        "    if preemption.reason.startswith('reclaimed by quota'):\n"
        "        pass\n"
        "    kind = 'priority' in preemption.reason\n"
        "    count = re.match(r'waiting for (\\d+)', str(why))\n"
        "    job.waiting_reason = job.waiting_reason[:500]\n"
        "    changed = job.waiting_reason != 'x'\n"
        "def reason_texts(text):\n"
        "    return WAITING.match(text)\n"
    )
    assert sorted(reason_readings(bad, tmp_path)) == [
        "bad.py:10 WAITING.match(text)",
        "bad.py:3 preemption.reason.startswith('reclaimed by quota')",
        "bad.py:5 'priority' in preemption.reason",
        "bad.py:6 re.match('waiting for (\\\\d+)', str(why))",
        "bad.py:6 str(why)",
    ]

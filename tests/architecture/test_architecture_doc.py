"""docs/architecture.md stays true: every module of the processes' packages is named there, and every
file it names exists."""

from __future__ import annotations

import re

from tests.architecture.import_graph import ROOT

DOC = ROOT / "docs" / "architecture.md"
# Packages whose modules the document lists one by one (the engine and simulator have docs of their own).
LISTED = ("scheduler", "scheduler/models", "scheduler/loop", "scheduler/node", "scheduler/node/runtime", "scheduler/executors",
          "scheduler/services", "scheduler/selectors", "scheduler/api", "scheduler/api/v1", "scheduler/metrics")


def test_every_module_is_named():
    text = DOC.read_text(encoding="utf-8")
    missing = [
        f"{package}/{path.name}"
        for package in LISTED
        for path in sorted((ROOT / package).glob("*.py"))
        if path.name != "__init__.py" and not re.search(rf"(?<![\w/]){re.escape(path.name)}\b", text)
    ]
    assert missing == [], f"docs/architecture.md does not name: {missing}"


def test_every_named_package_exists():
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:scheduler|console|config|tidepool_\w+)/[\w/]*)`", text))
    assert named, "no package named in docs/architecture.md"
    assert sorted(p for p in named if not (ROOT / p.rstrip("/")).exists()) == []

"""Templates name states through scheduler/states.py, never by spelling a status (issue 9)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.templatetags.console_tags import is_job_status, is_pod_status

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
SPELLED = re.compile(r"status\s*==\s*['\"]")


def test_the_filters_compare_with_the_states_module():
    assert is_job_status("Preempted", "PREEMPTED,FAILED") and is_job_status("Failed", "PREEMPTED, FAILED")
    assert not is_job_status("Running", "PREEMPTED,FAILED")
    assert is_pod_status("Running", "RUNNING") and not is_pod_status("Pending", "RUNNING")
    with pytest.raises(KeyError):
        is_job_status("Preempted", "PREMPTED")  # a typo fails loudly instead of never matching


def test_no_template_spells_a_status():
    hits = [f"{path.relative_to(TEMPLATES)}:{n}" for path in sorted(TEMPLATES.rglob("*.html"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if SPELLED.search(line)]
    assert hits == []

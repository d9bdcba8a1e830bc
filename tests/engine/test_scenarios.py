"""The scenario files (DESIGN §4): every rule file matches its expect:, broken files are refused
with the file, the place in it and the reason, and a wrong expectation prints a diff."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from scheduler.engine.types import IDLE_OFF, PENDING, RUNNING
from scheduler.engine_tools.scenario import ScenarioError, load, main, parse

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
VALID = sorted(SCENARIOS.glob("*.yaml"))
INVALID = sorted((SCENARIOS / "invalid").glob("*.yaml"))
WRONG = SCENARIOS / "wrong_expectation" / "expects_wrong_victim.yaml"


def _run(*paths) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(p) for p in paths], out, err)
    return code, out.getvalue(), err.getvalue()


def test_one_file_per_rule():
    assert len(VALID) >= 45 and len(INVALID) >= 20
    for path in VALID:
        text = path.read_text()
        assert text.startswith("# Rule"), f"{path.name}: start with a '# Rule...' comment saying what it shows"
        assert "expect" in yaml.safe_load(text), f"{path.name}: no expect: block"


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_scenario_matches_its_expectations(path):
    code, out, err = _run(path)
    assert code == 0, out + err
    decisions = json.loads(out)
    assert set(decisions) == {"admitted", "preempted", "nominated", "promoted", "demoted", "pending", "grown", "shrunk",
                              "reasons", "estimated_start"}


def test_a_wrong_expectation_fails_with_a_readable_diff():
    code, out, err = _run(WRONG)
    assert code == 1 and err == ""
    assert f"{WRONG}: decisions differ from expect:" in out
    assert "admitted: a1 expected, but it was not admitted" in out
    assert 'preempted: expected ["v-old"], got ["v-new"] (missing v-old; unexpected v-new)' in out
    assert 'nominated: expected [], got ["a1"] (unexpected a1)' in out


def _expected_error(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# error: "):
            return line.removeprefix("# error: ")
    raise AssertionError(f"{path.name}: no '# error: ...' comment")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_malformed_file_is_refused_naming_file_place_and_reason(path):
    code, out, err = _run(path)
    assert code == 2 and out == ""
    assert err.startswith(f"{path}: "), err
    assert _expected_error(path) in err


def test_every_file_runs_and_the_worst_result_is_the_exit_code():
    code, out, err = _run(VALID[0], WRONG, INVALID[0])
    assert code == 2
    assert f"== {VALID[0]} ==" in out and f"== {WRONG} ==" in out
    assert str(INVALID[0]) in err
    assert _run(VALID[0], WRONG)[0] == 1
    assert _run()[0] == 2


def test_missing_file(tmp_path):
    code, _, err = _run(tmp_path / "nope.yaml")
    assert code == 2 and "nope.yaml: cannot read" in err


def test_json_files_work_too(tmp_path):
    data = yaml.safe_load((SCENARIOS / "reclaim_basic.yaml").read_text())
    path = tmp_path / "reclaim_basic.json"
    path.write_text(json.dumps(data))
    assert _run(path)[0] == 0


def test_units_and_defaults():
    scenario = parse({
        "nodes": [{"name": "n1", "gpu_type": "A100", "gpus": 8, "cpu": 96, "memory_gib": 768}],
        "quotas": [{"name": "root"}, {"name": "q", "parent": "root", "min": {"gpus": {"A100": 8}, "cpu": 1.5}}],
        "jobs": [
            {"name": "a", "quota": "q", "idle": False, "pods": [{"count": 2, "gpus": 1, "cpu": 0.5, "memory_gib": 2}]},
            {"name": "b", "quota": "q", "state": "running", "nodes": ["n1"], "pods": [{"gpus": 1}]},
        ],
    })
    node = scenario.snapshot.nodes[0]
    assert (node.cpu_m, node.memory_mib, node.pool, node.schedulable) == (96000, 786432, "general", True)
    assert scenario.snapshot.quotas[0].min == {} and scenario.snapshot.quotas[1].min == {"gpu:A100": 8, "cpu": 1500}
    a, b = scenario.snapshot.jobs
    assert (a.priority, a.idle, a.submitted_at, a.phase) == (1, IDLE_OFF, 0, PENDING)
    assert len(a.pods) == 2 and a.pods[0].role == "worker" and (a.pods[0].cpu_m, a.pods[0].memory_mib) == (500, 2048)
    assert (b.phase, b.in_quota, b.started_at, b.submitted_at) == (RUNNING, True, 1, 1)
    assert scenario.expect is None


def test_error_names_file_path_and_reason():
    with pytest.raises(ScenarioError) as caught:
        parse({"jobs": [{"name": "a", "quota": "q"}]}, source="s.yaml")
    assert (caught.value.file, caught.value.path) == ("s.yaml", "jobs[0].quota")
    assert str(caught.value) == "s.yaml: jobs[0].quota: unknown quota 'q'"


def test_load_reports_line_of_a_yaml_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("nodes: [\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load(path)


def test_django_command(capsys):
    from django.core.management import call_command

    out = io.StringIO()
    call_command("scenario", str(VALID[0]), stdout=out)
    assert json.loads(out.getvalue())
    with pytest.raises(SystemExit) as exited:
        call_command("scenario", str(WRONG), stdout=io.StringIO())
    assert exited.value.code == 1
    with pytest.raises(SystemExit) as exited:
        call_command("scenario", str(INVALID[0]), stdout=io.StringIO(), stderr=io.StringIO())
    assert exited.value.code == 2

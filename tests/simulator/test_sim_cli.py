"""`manage.py simulate` and `python -m scheduler.simulator` on a user's own cluster files."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.simulator.cli import main

JOBS_CSV = """name,quota,submit_s,duration_s,gpus
a1,team-a,0,3600,8
a2,team-a,0,3600,8
b1,team-b,1000,1000,8
"""

CLUSTER_YAML = """
nodes:
  - {name: n, gpu_type: A100, gpus: 8, count: 2}
quotas:
  - {name: root, min: {gpus: {A100: 16}}}
  - {name: team-a, parent: root, min: {gpus: {A100: 8}}}
  - {name: team-b, parent: root, min: {gpus: {A100: 8}}}
"""


# Free saves and restarts, first checkpoint one interval in: test_sim_replay's hand-worked model.
FREE_CHECKPOINTS = ("--checkpoint-cost-seconds", "0", "--restart-seconds", "0", "--fixed-checkpoint-phase")


@pytest.fixture
def user_files(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_CSV)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER_YAML)
    return jobs, cluster, tmp_path / "out" / "report.html"


def test_command_prints_figures_then_one_json_line_and_writes_a_self_contained_report(user_files):
    jobs, cluster, report = user_files
    out, err = StringIO(), StringIO()
    call_command(
        "simulate", "--trace", str(jobs), "--cluster", str(cluster), "--report", str(report),
        *FREE_CHECKPOINTS, stdout=out, stderr=err,
    )
    lines = out.getvalue().strip().splitlines()
    closing = json.loads(lines[-1])
    assert closing["jobs"] == 3 and closing["gpus"] == 16
    assert list(closing["policies"]) == ["fifo", "strict", "idle", "pool"]
    # The same trace as test_sim_replay's two-team example: the figures worked out there.
    assert closing["policies"]["idle"]["preemptions"] == 1
    assert closing["policies"]["strict"]["allocation_rate"] == 0.5
    assert closing["policies"]["idle"]["reclaim_latency_s"]["max"] == 30.0
    assert any(line.startswith("allocation: useful (held)") for line in lines)
    assert "100.0% of arrivals" in err.getvalue()  # progress goes to stderr
    page = report.read_text()
    assert "plotly" in page.lower() and "<script src=" not in page  # Plotly embedded: works offline
    assert "GPUs doing useful work over time" in page and "Time queued" in page and "Mean slowdown per quota" in page


def test_command_refuses_a_jobs_csv_without_a_cluster(user_files):
    jobs, _, report = user_files
    with pytest.raises(CommandError, match="needs --cluster"):
        call_command("simulate", "--trace", str(jobs), "--report", str(report), stdout=StringIO())


def test_module_entry_point_runs_one_policy_without_django(user_files, capsys):
    jobs, cluster, report = user_files
    code = main(
        ["--trace", str(jobs), "--cluster", str(cluster), "--policy", "pool", "--cycle-seconds", "0",
         "--report", str(report), "--quiet"]
    )
    assert code == 0
    captured = capsys.readouterr()
    closing = json.loads(captured.out.strip().splitlines()[-1])
    assert list(closing["policies"]) == ["pool"]
    assert closing["policies"]["pool"]["cycle_s"] == 0.0
    assert captured.err == ""
    assert main(["--trace", str(jobs), "--cluster", str(cluster), "--policy", "lifo", "--quiet"]) == 2

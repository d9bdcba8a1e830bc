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


def test_sweep_replays_every_policy_at_every_scale_into_one_report(user_files, capsys):
    jobs, cluster, report = user_files
    code = main(
        ["--trace", str(jobs), "--cluster", str(cluster), "--policy", "fifo,idle", "--sweep",
         "--sweep-scales", "1,0.5", "--report", str(report), "--quiet", *FREE_CHECKPOINTS]
    )
    assert code == 0
    out = capsys.readouterr().out
    closing = json.loads(out.strip().splitlines()[-1])
    # Scale 1: two 8-GPU nodes; 0.5: one node (ceil(2 x 0.5)), team quotas 4 GPUs each.
    assert [(s["scale"], s["gpus"], list(s["policies"])) for s in closing["sweep"]] == [
        (1.0, 16, ["fifo", "idle"]), (0.5, 8, ["fifo", "idle"]),
    ]
    # At 0.5 no 8-GPU job fits a 4-GPU guarantee: fifo starts none, idle runs all three on idle capacity.
    half = closing["sweep"][1]["policies"]
    assert half["fifo"]["never_started"] == 3 and half["idle"]["never_started"] == 0
    assert "cluster.yaml: 1 nodes, 8 GPUs (scale 0.5 of 2 nodes)" in out
    page = report.read_text()
    assert page.count("<script") >= 3 and "<script src=" not in page  # inline Plotly, works offline
    assert "Across scales" in page and "Scale 0.5" in page and "By job size" in page and "By quota" in page


def test_window_replays_only_the_jobs_submitted_inside_it(user_files, capsys):
    jobs, cluster, report = user_files
    args = ["--trace", str(jobs), "--cluster", str(cluster), "--policy", "strict", "--report", str(report), "--quiet"]
    assert main([*args, "--window", "500", "1h"]) == 0
    closing = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert closing["jobs"] == 1 and closing["window"] == ["500", "1h"]  # b1, submitted at 1000
    assert main([*args, "--window", "2000", "3000"]) == 2
    assert "no jobs in that window" in capsys.readouterr().err
    assert main([*args, "--window", "soon", "later"]) == 2

"""The openb pod trace (Alibaba cluster-trace-gpu-v2023): its loader, its QoS-class quotas and `--trace openb`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from scheduler.engine.types import CPU, MEMORY, gpu_key
from scheduler.simulator import cli
from scheduler.simulator.clusters import (
    demand_shared_quotas,
    demand_weights,
    largest_remainder,
    load_openb_nodes,
    openb_pods_cluster,
)
from scheduler.simulator.traces import OPENB_PODS, TraceError, TraceJob, load_openb_pods, read_openb_pods

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
G2, T4 = gpu_key("G2"), gpu_key("T4")


def pod(name: str, *, gpus: int = 1, milli: int = 1000, qos: str = "LS", phase: str = "Running", created: int = 0,
        scheduled: int | None = 0, deleted: int = 100, cpu: int = 4000, memory: int = 8192, spec: str = "") -> str:
    """One row of an openb pod list; `scheduled=None` is a pod that was never scheduled (empty cell)."""
    return (f"{name},{cpu},{memory},{gpus},{milli},{spec},{qos},{phase},{created},{deleted},"
            f"{'' if scheduled is None else scheduled}")


def pod_list(tmp_path: Path, rows: Sequence[str], name: str = "pods.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_pods_become_jobs_and_what_is_left_out_or_changed_is_counted(tmp_path):
    path = pod_list(tmp_path, [
        pod("p0", created=100, scheduled=100, deleted=400),                            # plain: runs 300 s
        pod("p1", milli=460, qos="BE", created=150, scheduled=160, deleted=260),      # shares a GPU: 1 whole GPU
        pod("p2", gpus=0, milli=0, created=170, scheduled=170, deleted=900),          # CPU only: left out
        pod("p3", phase="Pending", created=180, scheduled=None, deleted=300),         # never ran: left out
        pod("p4", gpus=8, qos="Burstable", phase="Failed", created=200, scheduled=230, deleted=240,
            cpu=88000, memory=327680),                                                # failed: held 10 s, replayed
        pod("p5", spec="V100M16|V100M32", created=200, scheduled=200, deleted=300),   # a choice of models: any
        pod("p6", spec="T4", created=250, scheduled=260, deleted=270),                # one model: that one
    ])
    pods = read_openb_pods(path)
    assert [(j.name, j.quota, j.submit_s, j.duration_s, j.gpus, j.gpu_type, j.cpu_m, j.memory_mib) for j in pods.jobs] == [
        ("p0", "LS", 0.0, 300.0, 1, None, 4000, 8192),
        ("p1", "BE", 50.0, 100.0, 1, None, 4000, 8192),
        ("p4", "Burstable", 100.0, 10.0, 8, None, 88000, 327680),
        ("p5", "LS", 100.0, 100.0, 1, None, 4000, 8192),  # same creation time as p4: file order
        ("p6", "LS", 150.0, 10.0, 1, "T4", 4000, 8192),
    ]
    assert (pods.rows, pods.never_ran, pods.cpu_only, pods.fractional, pods.failed) == (7, 1, 1, 1, 1)
    assert pods.by_class == {"BE": 1, "Burstable": 1, "LS": 3}
    assert pods.note() == (
        "openb: 5 of 7 pods replayed (BE 1, Burstable 1, LS 3); left out: 1 never scheduled, 1 without GPUs; "
        "1 asking part of a GPU rounded up to 1 GPU; 1 Failed replayed for the time they held"
    )
    # A window counts from the first kept pod (p0, created at 100) and restarts the clock; limit after it.
    assert [(j.name, j.submit_s) for j in load_openb_pods(path, window=(50, 150))] == [("p1", 0.0), ("p4", 50.0),
                                                                                       ("p5", 50.0)]
    assert [j.name for j in load_openb_pods(path, limit=2)] == ["p0", "p1"]


@pytest.mark.parametrize("row, message", [
    (pod("bad", created=0, scheduled=50, deleted=50), "deletion after scheduling"),
    (pod("bad", gpus=-1), "GPUs >= 0"),
    (pod("bad", qos=""), "empty qos"),
    ("bad,4000,8192,one,1000,,LS,Running,0,100,0", "invalid literal"),
])
def test_a_bad_pod_row_names_the_file_and_line(tmp_path, row, message):
    path = pod_list(tmp_path, [pod("ok"), row])
    with pytest.raises(TraceError, match=rf"pods.csv:3: .*{message}"):
        read_openb_pods(path)


def test_a_pod_list_without_a_column_is_refused(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(HEADER.replace(",qos", "") + "\n")
    with pytest.raises(TraceError, match="missing column.*qos"):
        read_openb_pods(path)


def job(name: str, quota: str, gpus: int, duration: float, cpu: int = 0, memory: int = 0) -> TraceJob:
    return TraceJob(name=name, quota=quota, submit_s=0.0, duration_s=duration, gpus=gpus, cpu_m=cpu, memory_mib=memory)


def test_each_class_gets_its_share_of_each_resource_by_its_own_demand(tmp_path):
    nodes = load_openb_nodes(_nodes(tmp_path))
    jobs = [
        job("a", "LS", 1, 300, cpu=1000, memory=100),    # LS: 300 GPU-s, 300,000 m-s, 30,000 MiB-s
        job("b", "BE", 2, 50, cpu=12000, memory=600),   # BE: 100 GPU-s, 600,000 m-s, 30,000 MiB-s
    ]
    assert demand_weights(jobs) == {"BE": {"gpus": 100.0, CPU: 600000.0, MEMORY: 30000.0},
                                    "LS": {"gpus": 300.0, CPU: 300000.0, MEMORY: 30000.0}}
    quotas = {q.name: dict(q.min) for q in demand_shared_quotas(nodes, jobs)}
    # GPUs 1:3 on every model (G2 8 -> 2 / 6; T4 2 -> 0.5 / 1.5, the tie at .5 to the first, BE); CPU 2:1 of
    # 96 + 2 x 16 = 128 cores; memory 1:1 of 786,432 + 2 x 65,536 MiB.
    assert quotas == {
        "openb": {G2: 8, T4: 2, CPU: 128000, MEMORY: 917504},
        "BE": {G2: 2, T4: 1, CPU: 85333, MEMORY: 458752},
        "LS": {G2: 6, T4: 1, CPU: 42667, MEMORY: 458752},
    }
    # Every resource adds up to the root, exactly.
    for key, amount in quotas["openb"].items():
        assert quotas["BE"].get(key, 0) + quotas["LS"].get(key, 0) == amount


def _nodes(tmp_path: Path) -> Path:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                    "g0,96000,786432,8,G2\nt0,16000,65536,1,T4\nt1,16000,65536,1,T4\n")
    return path


def test_largest_remainder_adds_up_and_gives_nothing_without_demand():
    assert largest_remainder(7, {"x": 1, "y": 1, "z": 1}) == {"x": 3, "y": 2, "z": 2}
    assert largest_remainder(5, {"x": 0.0, "y": 0.0}) == {"x": 0, "y": 0}


def test_scaled_classes_keep_at_least_their_share_and_nodes_are_added_when_they_do_not_fit(tmp_path):
    nodes = load_openb_nodes(_nodes(tmp_path))
    jobs = [job("a", "LS", 1, 300, cpu=1000, memory=100), job("b", "BE", 2, 50, cpu=12000, memory=600)]
    # At 0.5: one G2 node and ceil(2 x 0.5) = 1 T4 node; the classes' T4 shares (1 and 1) round up to 1
    # each, 2 T4 against the one kept, so a copy of t0 is added.
    cluster = openb_pods_cluster(nodes, jobs, 0.5)
    assert [n.name for n in cluster.nodes] == ["g0", "t0", "t0+1"]
    quotas = {q.name: {k: v for k, v in q.min.items() if k.startswith("gpu:")} for q in cluster.quotas}
    assert quotas == {"openb": {G2: 8, T4: 2}, "BE": {G2: 1, T4: 1}, "LS": {G2: 3, T4: 1}}
    assert cluster.description == (
        "openb: 3 nodes, 10 GPUs shared by 2 QoS classes (scale 0.5 of 3 nodes; 1 node(s) added so that the "
        "guarantees fit)"
    )


def test_the_committed_pod_list_loads_to_the_counts_the_docs_give():
    pods = read_openb_pods(OPENB_PODS)
    assert (pods.rows, len(pods.jobs), pods.never_ran, pods.cpu_only, pods.fractional, pods.failed) == (
        8152, 6203, 897, 1052, 2573, 1869)
    assert pods.by_class == {"BE": 2510, "Burstable": 97, "Guaranteed": 6, "LS": 3590}
    assert all(j.gpu_type is None and j.duration_s > 0 for j in pods.jobs)


def test_command_replays_the_openb_trace_with_one_quota_per_class(tmp_path, monkeypatch, capsys):
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "openb_gpu_node.csv").write_text(_nodes(tmp_path).read_text())
    pods = pod_list(tmp_path, [
        pod("p0", created=0, scheduled=0, deleted=3600),
        pod("p1", qos="BE", milli=500, created=10, scheduled=10, deleted=610),
        pod("p2", gpus=8, qos="BE", created=20, scheduled=20, deleted=1220, cpu=88000, memory=327680),
        pod("p3", phase="Pending", created=30, scheduled=None, deleted=40),
    ])
    monkeypatch.setattr(cli, "OPENB_PODS", pods)
    code = cli.main(["--trace", "openb", "--traces-dir", str(traces), "--policy", "strict,idle", "--quiet",
                     "--report", str(tmp_path / "report.html")])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("openb: 3 of 4 pods replayed (BE 2, LS 1); left out: 1 never scheduled")
    assert lines[1].startswith("openb: 3 nodes, 10 GPUs shared by 2 QoS classes: 3 jobs")
    closing = json.loads(lines[-1])
    assert closing["trace"] == "openb" and closing["inventory"] == "openb" and closing["jobs"] == 3
    idle = closing["policies"]["idle"]
    assert idle["never_started"] == 0 and idle["by_quota"].keys() == {"BE", "LS"}

"""Loaders of the simulator: Philly, openb, the user's jobs CSV and cluster YAML, and scaling."""

from __future__ import annotations

from datetime import datetime

import pytest

from scheduler.engine.types import CPU, MEMORY, Node, gpu_key
from scheduler.simulator.clusters import (
    load_cluster_yaml,
    load_openb_nodes,
    load_philly_vcs,
    openb_cluster,
    philly_cluster,
    scale_cluster,
    scale_nodes,
    scaled_count,
    shared_quotas,
)
from scheduler.simulator.traces import (
    TraceError,
    cut_window,
    load_jobs_csv,
    load_philly_jobs,
    pod_resources,
    pod_sizes,
)

P100 = gpu_key("P100")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_jobs_sorted_by_submission_relative_to_the_first(tmp_path):
    path = write(
        tmp_path,
        "philly.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:01:00,66.0,1,66.0,11cb48\n"
        "2017-10-01 00:00:00,100.0,16,1600.0,6214e9\n"
        "2017-10-01 00:01:00,5.0,2,10.0,zz\n",  # same second as the first row: file order breaks the tie
    )
    jobs = load_philly_jobs(path)
    assert [(j.name, j.quota, j.submit_s, j.duration_s, j.gpus) for j in jobs] == [
        ("p00000", "6214e9", 0.0, 100.0, 16),
        ("p00001", "11cb48", 60.0, 66.0, 1),
        ("p00002", "zz", 60.0, 5.0, 2),
    ]
    assert [j.name for j in load_philly_jobs(path, limit=2)] == ["p00000", "p00001"]


def test_philly_bad_row_names_the_line(tmp_path):
    path = write(tmp_path, "bad.csv", "timestamp,duration,num_gpus,gpu_time,cluster\nnot a date,1,1,1,a\n")
    with pytest.raises(TraceError, match="bad.csv:2"):
        load_philly_jobs(path)


def test_philly_cluster_is_the_sum_of_the_vcs_rounded_up_when_scaled(tmp_path):
    vcs = load_philly_vcs(write(tmp_path, "vc.csv", "vc,node num\na,64\nb,3\nc,1\n"))
    assert vcs == {"a": 64, "b": 3, "c": 1}
    full = philly_cluster(vcs)
    assert full.total_gpus == (64 + 3 + 1) * 8
    assert {q.name: dict(q.min) for q in full.quotas} == {
        "philly": {P100: 544}, "a": {P100: 512}, "b": {P100: 24}, "c": {P100: 8},
    }
    # 0.5: a 32 nodes, b ceil(1.5) = 2, c ceil(0.5) = 1 -> 35 nodes.
    half = philly_cluster(vcs, scale=0.5)
    assert len(half.nodes) == 35 and half.total_gpus == 280
    assert {q.name: q.min[P100] for q in half.quotas} == {"philly": 280, "a": 256, "b": 16, "c": 8}
    assert all(n.gpus == 8 and n.gpu_type == "P100" for n in half.nodes)


def test_scaled_count_rounds_up_without_float_noise():
    assert scaled_count(64, 0.5) == 32
    assert scaled_count(64, 0.25) == 16
    assert scaled_count(3, 0.1) == 1
    assert scaled_count(10, 0.3) == 3  # 10 * 0.3 = 3.0000000000000004 in floating point
    with pytest.raises(ValueError):
        scaled_count(1, 0)


def test_pod_sizes_split_jobs_larger_than_a_node():
    assert pod_sizes(1, 8) == (1,)
    assert pod_sizes(8, 8) == (8,)
    assert pod_sizes(12, 8) == (8, 4)
    assert pod_sizes(128, 8) == (8,) * 16
    assert pod_sizes(3, 2) == (2, 1)


def test_openb_nodes_scale_kind_by_kind_and_share_every_model(tmp_path):
    path = write(
        tmp_path,
        "openb.csv",
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,64000,262144,2,P100\nn1,64000,262144,2,P100\nn2,64000,262144,2,P100\n"
        "n3,96000,786432,8,G2\n",
    )
    nodes = load_openb_nodes(path)
    assert nodes[3] == Node(name="n3", gpu_type="G2", gpus=8, cpu_m=96000, memory_mib=786432)
    # 0.5: ceil(3 * 0.5) = 2 of the P100 kind (the first two), ceil(0.5) = 1 of the G2 kind.
    assert [n.name for n in scale_nodes(nodes, 0.5)] == ["n0", "n1", "n3"]
    cluster = openb_cluster(nodes, {"a": 3, "b": 1})
    quotas = {q.name: dict(q.min) for q in cluster.quotas}
    # P100: 6 GPUs split 3:1 -> 4.5 / 1.5 -> floors 4 / 1, the one left goes to the larger remainder
    # (a tie at .5: file order, so a). G2: 8 -> 6 / 2 exactly.
    assert quotas == {
        "philly": {P100: 6, gpu_key("G2"): 8},
        "a": {P100: 5, gpu_key("G2"): 6},
        "b": {P100: 1, gpu_key("G2"): 2},
    }


def test_shared_quotas_children_add_up_to_the_root():
    nodes = [Node(name=f"n{i}", gpu_type="T4", gpus=1, cpu_m=0, memory_mib=0) for i in range(7)]
    quotas = shared_quotas(nodes, {"x": 1, "y": 1, "z": 1}, "root")
    assert sum(q.min.get(gpu_key("T4"), 0) for q in quotas if q.parent) == 7
    assert [q.min[gpu_key("T4")] for q in quotas if q.parent] == [3, 2, 2]


def test_jobs_csv_defaults_optional_columns_and_sorts(tmp_path):
    path = write(
        tmp_path,
        "jobs.csv",
        "name,quota,submit_s,duration_s,gpus,gpu_type,priority,idle\n"
        "late,team-a,100,60,2,A100,3,only\n"
        "early,team-b,40,30.5,1,,,\n",
    )
    jobs = load_jobs_csv(path)
    assert [(j.name, j.submit_s, j.duration_s, j.gpus, j.gpu_type, j.priority, j.idle) for j in jobs] == [
        ("early", 0.0, 30.5, 1, None, 1, None),
        ("late", 60.0, 60.0, 2, "A100", 3, "only"),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,t,0,10,1,,,sometimes", "idle must be one of"),
        ("a,t,0,0,1,,,", "duration_s must be positive"),
        ("a,t,0,10,1,,12,", "priority must be 1..9"),
        (",t,0,10,1,,,", "must not be empty"),
        ("a,t,zero,10,1,,,", "jobs.csv:2"),
    ],
)
def test_jobs_csv_errors_name_the_row(tmp_path, row, message):
    path = write(tmp_path, "jobs.csv", "name,quota,submit_s,duration_s,gpus,gpu_type,priority,idle\n" + row + "\n")
    with pytest.raises(TraceError, match=message):
        load_jobs_csv(path)


def test_jobs_csv_rejects_duplicate_names_and_missing_columns(tmp_path):
    dup = write(tmp_path, "dup.csv", "name,quota,submit_s,duration_s,gpus\na,t,0,1,1\na,t,1,1,1\n")
    with pytest.raises(TraceError, match="used twice"):
        load_jobs_csv(dup)
    short = write(tmp_path, "short.csv", "name,quota,submit_s\na,t,0\n")
    with pytest.raises(TraceError, match="missing column"):
        load_jobs_csv(short)


CLUSTER_YAML = """
nodes:
  - {name: big, gpu_type: A100, gpus: 8, cpu: 96, memory_gib: 768, count: 3}
  - {name: small, gpu_type: T4, gpus: 2}
quotas:
  - {name: root, min: {gpus: {A100: 24, T4: 2}, cpu: 288, memory_gib: 2304}}
  - {name: team-a, parent: root, min: {gpus: {A100: 16}}, max: {gpus: {A100: 20}}}
  - {name: team-b, parent: root, min: {gpus: {A100: 8, T4: 2}}}
"""


def test_cluster_yaml_expands_counts_and_converts_units(tmp_path):
    cluster = load_cluster_yaml(write(tmp_path, "cluster.yaml", CLUSTER_YAML))
    assert [n.name for n in cluster.nodes] == ["big-0", "big-1", "big-2", "small"]
    assert cluster.nodes[0] == Node(name="big-0", gpu_type="A100", gpus=8, cpu_m=96000, memory_mib=786432)
    quotas = {q.name: q for q in cluster.quotas}
    assert quotas["root"].min == {gpu_key("A100"): 24, gpu_key("T4"): 2, CPU: 288000, MEMORY: 2304 * 1024}
    assert quotas["team-a"].max == {gpu_key("A100"): 20}
    assert quotas["team-b"].max is None
    assert cluster.capacity()[gpu_key("A100")] == 24


def test_cluster_yaml_unknown_parent_is_an_error(tmp_path):
    # The scenario reader's checks apply, with the place in the file.
    path = write(tmp_path, "c.yaml", "nodes: []\nquotas:\n  - {name: a, parent: nowhere}\n")
    with pytest.raises(TraceError, match=r"quotas\[0\].parent: unknown quota 'nowhere'"):
        load_cluster_yaml(path)
    path = write(tmp_path, "n.yaml", "nodes:\n  - {name: n, gpu_type: A100, gpus: 8, count: 0}\nquotas: []\n")
    with pytest.raises(TraceError, match=r"nodes\[0\].count"):
        load_cluster_yaml(path)


def test_scale_cluster_keeps_every_guarantee_at_least_its_share(tmp_path):
    cluster = load_cluster_yaml(write(tmp_path, "cluster.yaml", CLUSTER_YAML))
    half = scale_cluster(cluster, 0.5)
    # Nodes: ceil(3 * 0.5) = 2 A100 nodes, ceil(0.5) = 1 T4 node.
    assert [n.name for n in half.nodes] == ["big-0", "big-1", "small"]
    assert half.description == "cluster.yaml: 3 nodes, 18 GPUs (scale 0.5 of 4 nodes)"
    quotas = {q.name: q for q in half.quotas}
    # The root is the scaled capacity: 16 A100, 2 T4, 2 x 96 cores, 2 x 768 GiB.
    assert quotas["root"].min == {gpu_key("A100"): 16, gpu_key("T4"): 2, CPU: 192000, MEMORY: 1536 * 1024}
    # Children: each amount times 0.5, rounded up to a whole GPU: 16 -> 8; 8 -> 4, 2 T4 -> 1.
    assert quotas["team-a"].min == {gpu_key("A100"): 8}
    assert quotas["team-b"].min == {gpu_key("A100"): 4, gpu_key("T4"): 1}
    assert quotas["team-a"].max == {gpu_key("A100"): 10}
    # At 0.1: one A100 node (8); team-a ceil(1.6) = 2, team-b ceil(0.8) = 1 and ceil(0.2) = 1 T4:
    # every guarantee at least its share (the old whole-node rounding gave team-b 0).
    tenth = {q.name: q for q in scale_cluster(cluster, 0.1).quotas}
    assert tenth["root"].min[gpu_key("A100")] == 8
    assert tenth["team-a"].min[gpu_key("A100")] == 2
    assert tenth["team-b"].min == {gpu_key("A100"): 1, gpu_key("T4"): 1}


def test_scale_cluster_raises_parents_and_adds_nodes_when_rounded_shares_do_not_fit(tmp_path):
    # Ten teams of one 8-GPU G2 node each (the openb case: many quotas sharing a model), and a
    # nested pair under `mid`.
    teams = "".join(f"  - {{name: t{i}, parent: root, min: {{gpus: {{G2: 8}}}}}}\n" for i in range(9))
    text = (
        "nodes:\n  - {name: g, gpu_type: G2, gpus: 8, count: 10}\n"
        "quotas:\n  - {name: root, min: {gpus: {G2: 80}}}\n" + teams
        + "  - {name: mid, parent: root, min: {gpus: {G2: 8}}}\n"
        "  - {name: c1, parent: mid, min: {gpus: {G2: 4}}}\n"
        "  - {name: c2, parent: mid, min: {gpus: {G2: 4}}}\n"
    )
    cluster = load_cluster_yaml(write(tmp_path, "many.yaml", text))
    scaled = scale_cluster(cluster, 0.3)
    quotas = {q.name: q.min.get(gpu_key("G2"), 0) for q in scaled.quotas}
    # t0..t8: ceil(8 x 0.3) = ceil(2.4) = 3 each. c1, c2: ceil(1.2) = 2 each, so mid (ceil(2.4) = 3)
    # is raised to 4. The root's children ask 9 x 3 + 4 = 31 GPUs; ceil(10 x 0.3) = 3 nodes hold
    # 24, so one copy of g-0 is added: 4 nodes, 32 GPUs.
    assert [quotas[f"t{i}"] for i in range(9)] == [3] * 9
    assert (quotas["c1"], quotas["c2"], quotas["mid"]) == (2, 2, 4)
    assert [n.name for n in scaled.nodes] == ["g-0", "g-1", "g-2", "g-0+1"]
    assert quotas["root"] == 32
    assert scaled.description == (
        "many.yaml: 4 nodes, 32 GPUs (scale 0.3 of 10 nodes; 1 node(s) added so that the guarantees fit)"
    )


def test_jobs_csv_cpu_and_memory_columns_split_over_pods_like_gpus(tmp_path):
    path = write(
        tmp_path,
        "jobs.csv",
        "name,quota,submit_s,duration_s,gpus,gpu_type,priority,idle,cpu,memory_gib\n"
        "big,t,0,10,12,,,,30,1.5\n"
        "old,t,1,10,1,,,,,\n",
    )
    big, old = load_jobs_csv(path)
    assert (big.cpu_m, big.memory_mib) == (30000, 1536)
    assert (old.cpu_m, old.memory_mib) == (0, 0)  # empty cells: no CPU or memory asked, as before
    # 12 GPUs = 8 + 4 on 8-GPU nodes; 30 cores and 1536 MiB split 2 : 1.
    assert pod_resources(12, 30000, 1536, 8) == ((8, 20000, 1024), (4, 10000, 512))
    # Floors first, the units left over go to the first pods: 10 millicores over 3 x 1 GPU.
    assert pod_resources(3, 10, 0, 1) == ((1, 4, 0), (1, 3, 0), (1, 3, 0))
    assert pod_resources(0, 500, 64, 8) == ((0, 500, 64),)
    bad = write(tmp_path, "bad.csv", "name,quota,submit_s,duration_s,gpus,cpu\na,t,0,1,1,-2\n")
    with pytest.raises(TraceError, match="bad.csv:2: cpu and memory_gib"):
        load_jobs_csv(bad)


def test_a_window_keeps_jobs_submitted_inside_it_and_restarts_the_clock(tmp_path):
    path = write(
        tmp_path, "jobs.csv",
        "name,quota,submit_s,duration_s,gpus\na,t,1000,5,1\nb,t,1100,5,1\nc,t,1500,5,1\nd,t,2000,5,1\n",
    )
    # Seconds from the file's first submission (1000): [100, 1000) keeps b (100) and c (500).
    jobs = load_jobs_csv(path, window=(100, 1000))
    assert [(j.name, j.submit_s) for j in jobs] == [("b", 0.0), ("c", 400.0)]
    assert [j.name for j in load_jobs_csv(path, window=(100, None), limit=1)] == ["b"]
    assert cut_window(load_jobs_csv(path), None, 500) == load_jobs_csv(path, limit=2)
    with pytest.raises(TraceError, match="a window by date needs"):
        load_jobs_csv(path, window=(datetime(2017, 10, 1), None))


def test_a_philly_window_by_date_keeps_names_of_the_whole_file(tmp_path):
    path = write(
        tmp_path,
        "philly.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-09-30 23:00:00,10.0,1,10.0,a\n"
        "2017-10-01 00:30:00,20.0,2,40.0,b\n"
        "2017-10-02 00:00:00,30.0,4,120.0,a\n",
    )
    jobs = load_philly_jobs(path, window=(datetime(2017, 10, 1), datetime(2017, 10, 2)))
    assert [(j.name, j.submit_s, j.gpus) for j in jobs] == [("p00001", 0.0, 2)]
    # The same in seconds from the first submission: 3600 (one hour later) to 90000.
    assert load_philly_jobs(path, window=(3600, 90000)) == jobs


def test_openb_scaled_keeps_every_vc_at_least_its_share_of_every_model(tmp_path):
    path = write(
        tmp_path,
        "openb.csv",
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,64000,262144,2,P100\nn1,64000,262144,2,P100\nn2,64000,262144,2,P100\n"
        "n3,96000,786432,8,G2\n",
    )
    nodes = load_openb_nodes(path)
    # Whole inventory (as in the test above): a P100 5, G2 6; b P100 1, G2 2. At 0.25: one P100 node
    # (ceil(0.75)) and the G2 node; a ceil(1.25) = 2 P100 and ceil(1.5) = 2 G2, b 1 and 1. The VCs
    # ask 3 P100 of 2, so a copy of n0 is added.
    cluster = openb_cluster(nodes, {"a": 3, "b": 1}, 0.25)
    quotas = {q.name: {k: v for k, v in q.min.items() if k.startswith("gpu:")} for q in cluster.quotas}
    assert quotas == {
        "philly": {P100: 4, gpu_key("G2"): 8},
        "a": {P100: 2, gpu_key("G2"): 2},
        "b": {P100: 1, gpu_key("G2"): 1},
    }
    assert [n.name for n in cluster.nodes] == ["n0", "n3", "n0+1"]
    assert cluster.description == (
        "openb: 3 nodes, 12 GPUs shared by 2 VCs (scale 0.25 of 4 nodes; 1 node(s) added so that the guarantees fit)"
    )

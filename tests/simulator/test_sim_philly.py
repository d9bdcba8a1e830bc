"""The real traces in ../shared/traces: counts, and short replays that must conserve GPU-time."""

from __future__ import annotations

import pytest

from scheduler.simulator.clusters import load_openb_nodes, load_philly_vcs, openb_cluster, philly_cluster
from scheduler.simulator.metrics import figures, held_gpu_seconds
from scheduler.simulator.replay import ReplayConfig, ReplayResult, replay
from scheduler.simulator.traces import OPENB_NODES, PHILLY_JOBS, PHILLY_VCS, SHARED_TRACES, load_philly_jobs

pytestmark = pytest.mark.skipif(
    not (SHARED_TRACES / PHILLY_JOBS).exists(),
    reason=f"the public traces are not at {SHARED_TRACES} (see ../shared/traces/README.md)",
)


def test_the_published_files_load_with_their_documented_counts():
    jobs = load_philly_jobs(SHARED_TRACES / PHILLY_JOBS)
    assert len(jobs) == 82_247
    assert len({job.quota for job in jobs}) == 15
    assert jobs[0].submit_s == 0 and all(a.submit_s <= b.submit_s for a, b in zip(jobs, jobs[1:], strict=False))
    vcs = load_philly_vcs(SHARED_TRACES / PHILLY_VCS)
    assert len(vcs) == 11
    assert philly_cluster(vcs).total_gpus == 2_816
    # Scale 0.25: every VC's nodes rounded up (64 -> 16, 8 -> 2, ...): 88 nodes.
    assert philly_cluster(vcs, 0.25).total_gpus == 88 * 8
    nodes = load_openb_nodes(SHARED_TRACES / OPENB_NODES)
    assert len(nodes) == 1_213 and sum(n.gpus for n in nodes) == 6_212
    # The README says 12 models; the file has 7 models in 12 (model, GPUs per node) kinds.
    assert {n.gpu_type for n in nodes} == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
    assert len({(n.gpu_type, n.gpus) for n in nodes}) == 12


def assert_conserves_gpu_time(result: ReplayResult) -> None:
    """Every GPU-second held is useful work, redone work or an overhead; capacity is never exceeded."""
    assert all(0 <= held <= result.total_gpus for _, held in result.allocation)
    finished = [j for j in result.jobs if j.end_s is not None]
    assert len(finished) == sum(1 for j in result.jobs if j.first_start_s is not None)
    work = sum(j.gpus * j.duration_s for j in finished)
    assert sum(j.useful_gpu_s for j in result.jobs) == pytest.approx(work, rel=1e-9)
    held = sum(j.held_gpu_s for j in result.jobs)
    assert held_gpu_seconds(result.allocation, 0, result.end_s) == pytest.approx(held, rel=1e-9)
    for j in finished:
        assert j.end_s >= j.first_start_s + j.duration_s >= j.submit_s + j.duration_s


def test_a_philly_slice_replays_under_every_policy_on_a_small_cluster():
    # The first 1,900 jobs include the first two of a VC missing from philly_vc.csv (23dbec).
    jobs = load_philly_jobs(SHARED_TRACES / PHILLY_JOBS, limit=1900)
    cluster = philly_cluster(load_philly_vcs(SHARED_TRACES / PHILLY_VCS), 0.25)
    by_policy = {}
    for policy in ("strict", "idle", "pool"):
        result = replay(jobs, cluster, ReplayConfig(policy=policy))
        assert_conserves_gpu_time(result)
        by_policy[policy] = figures(result)
    # Jobs of VCs missing from philly_vc.csv never start under strict, always under idle and pool.
    assert by_policy["strict"]["never_started"] > 0
    assert by_policy["idle"]["never_started"] == by_policy["pool"]["never_started"] == 0
    assert by_policy["idle"]["allocation_rate"] >= by_policy["strict"]["allocation_rate"]


def test_a_philly_slice_replays_on_the_heterogeneous_openb_inventory():
    jobs = load_philly_jobs(SHARED_TRACES / PHILLY_JOBS, limit=800)
    cluster = openb_cluster(
        load_openb_nodes(SHARED_TRACES / OPENB_NODES), load_philly_vcs(SHARED_TRACES / PHILLY_VCS), 0.1
    )
    result = replay(jobs, cluster, ReplayConfig(policy="idle"))
    assert_conserves_gpu_time(result)
    assert figures(result)["never_started"] == 0

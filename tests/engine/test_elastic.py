"""Elastic jobs (DESIGN §2c) beyond the scenario files: what the live loop reads from a shrink and a
growth, a job shrunk then taken whole in one cycle, and that elastic jobs change nothing for plain ones."""

from __future__ import annotations

from scheduler.engine.cycle import run_cycle
from scheduler.engine_tools.scenario import parse

NODES = [{"name": "n1", "gpu_type": "A100", "gpus": 8}]
QUOTAS = [{"name": "root"}, {"name": "team-a", "parent": "root", "min": {"gpus": {"A100": 8}}},
          {"name": "team-b", "parent": "root", "min": {"gpus": {"A100": 0}}}]
ELASTIC = {"name": "e1", "quota": "team-b", "idle": "only", "state": "running", "started_at": 10,
           "nodes": ["n1"] * 4, "pods": [{"count": 4, "min_count": 2, "gpus": 2, "gpu_type": "A100"}]}


def _decide(jobs: list[dict], **top):
    return run_cycle(parse({"now": 1000, "nodes": NODES, "quotas": QUOTAS, "jobs": jobs, **top}).snapshot)


def test_a_shrink_names_the_job_and_quota_it_was_for():
    decided = _decide([ELASTIC, {"name": "a1", "quota": "team-a", "pods": [{"gpus": 4, "gpu_type": "A100"}]}])
    shrink = decided.shrunk["e1"]
    assert sorted(shrink.indexes) == [2, 3] and (shrink.for_job, shrink.by_quota) == ("a1", "team-a")
    assert "e1" not in decided.preempted and decided.nominated["a1"] == ("n1",)


def test_a_job_shrunk_then_taken_whole_in_one_cycle_is_preempted_only():
    decided = _decide([
        ELASTIC,
        {"name": "a1", "quota": "team-a", "submitted_at": 1, "pods": [{"gpus": 2, "gpu_type": "A100"}]},
        {"name": "a2", "quota": "team-a", "submitted_at": 2, "pods": [{"gpus": 6, "gpu_type": "A100"}]},
    ])
    assert decided.as_contract()["shrunk"] == {}
    assert set(decided.preempted) == {"e1"} and set(decided.nominated) == {"a1", "a2"}


def test_growth_gives_the_indexes_and_nodes_of_the_new_pods():
    job = dict(ELASTIC, nodes=["n1", "n1"])
    decided = _decide([job])
    assert decided.grown["e1"].indexes == (2, 3) and decided.grown["e1"].nodes == ("n1", "n1")
    assert _decide([job], policy={"grow_interval_s": 991}).grown == {}  # started 990 s ago


def test_an_elastic_job_at_its_minimum_reclaimed_whole_like_a_plain_one():
    plain = dict(ELASTIC, nodes=["n1", "n1"], pods=[{"count": 2, "gpus": 2, "gpu_type": "A100"}])
    at_min = dict(ELASTIC, nodes=["n1", "n1"])
    owner = {"name": "a1", "quota": "team-a", "pods": [{"gpus": 8, "gpu_type": "A100"}]}
    got = [_decide([job, owner], policy={"grow_interval_s": 5000}).as_contract() for job in (plain, at_min)]
    assert got[0] == got[1] and got[0]["preempted"] == ["e1"]

"""The fifo baseline: head-of-line blocking per quota, as the Helios simulator runs each VC."""

from __future__ import annotations

import pytest

from scheduler.engine.types import Node, Pod, Quota, gpu_key
from scheduler.simulator.fifo import enforce, head_of_line
from scheduler.simulator.ledger import JobClass
from scheduler.simulator.metrics import figures
from scheduler.simulator.model import ReplayConfig
from scheduler.simulator.replay import replay
from scheduler.simulator.traces import Cluster, TraceJob

A100 = gpu_key("A100")
TWO_TEAMS = Cluster(
    nodes=tuple(Node(name=f"n{i}", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0) for i in range(2)),
    quotas=(Quota(name="root", parent=None, min={A100: 16}),
            Quota(name="a", parent="root", min={A100: 8}), Quota(name="b", parent="root", min={A100: 8})),
)
FREE = {"checkpoint_cost_s": 0.0, "restart_s": 0.0, "checkpoint_seed": None}


def job(name, team, submit, duration, gpus):
    return TraceJob(name=name, quota=team, submit_s=submit, duration_s=duration, gpus=gpus)


# Team a (8 GPUs guaranteed): a1 holds 4 from 0; a4 (16 GPUs) can never fit a's guarantee; a2 (8)
# cannot start while a1 runs; a3 (2) would fit beside a1. Team b's b1 arrives at 300.
JOBS = [
    job("a1", "a", 0, 1000, 4), job("a4", "a", 50, 100, 16), job("a2", "a", 100, 500, 8),
    job("a3", "a", 200, 300, 2), job("b1", "b", 300, 100, 8),
]


def starts(policy, **config):
    result = replay(JOBS, TWO_TEAMS, ReplayConfig(policy=policy, **(FREE | config)))
    return result, {j.name: j for j in result.jobs}


def test_strict_backfills_past_a_head_that_does_not_fit():
    _, jobs = starts("strict")
    # a3 fits a's guarantee beside a1 at 200 and runs to 500; a2 starts when a1 ends at 1000.
    assert {n: (j.first_start_s, j.end_s) for n, j in jobs.items()} == {
        "a1": (0, 1000), "a4": (None, None), "a2": (1000, 1500), "a3": (200, 500), "b1": (300, 400),
    }


@pytest.mark.parametrize("exact", [False, True])
def test_fifo_blocks_a_quota_behind_its_head_but_not_other_quotas(exact):
    result, jobs = starts("fifo", prune=not exact, skip_unchanged=not exact)
    # a2 heads a's queue from 100 (a4 never fits a's guarantee, so it is skipped, not a blocker):
    # a3 waits behind it although it would fit. b1 is not held back. a2 starts at 1000, a3 when a2
    # leaves room, at 1500, and ends at 1800.
    assert {n: (j.first_start_s, j.end_s) for n, j in jobs.items()} == {
        "a1": (0, 1000), "a4": (None, None), "a2": (1000, 1500), "a3": (1500, 1800), "b1": (300, 400),
    }
    f = figures(result)
    # Waits: a1 0, a2 900, a3 1300, b1 0, and a4 censored: from 50 to the replay's end at 1800.
    assert jobs["a4"].censored and jobs["a4"].queued_s == 1750
    assert f["wait_s"]["all"]["max"] == 1750 and f["never_started"] == 1
    assert [jobs[n].queued_s for n in ("a1", "a2", "a3", "b1")] == [0, 900, 1300, 0]


def test_enforce_cuts_after_the_first_job_left_pending_when_a_later_one_was_admitted():
    selected = {"a": [1, 2, 3, 4], "b": [5, 6]}
    admitted = {1, 3, 5}.__contains__
    # a: 2 pending, 3 admitted behind it -> cut after 2. b: 5 admitted, 6 pending: a prefix, kept.
    assert enforce(selected, admitted) == {"a": [1, 2], "b": [5, 6]}
    assert enforce({"a": [1, 2], "b": [5, 6]}, admitted) is None


def test_head_of_line_merges_classes_in_engine_order_and_stops_at_a_spent_bound():
    def cls(gpus, priority, queue, fits=True):
        c = JobClass("a", (Pod(role="w", gpus=gpus),), ("root", "a"), (("general", "A100"),), "off", priority, fits)
        c.queue = queue
        return c

    ones = cls(1, 1, [(0.0, "x", 0), (30.0, "z", 2)])
    eights = cls(8, 1, [(10.0, "y", 1), (40.0, "w", 3)])
    urgent = cls(2, 5, [(50.0, "u", 4)])
    never = cls(16, 9, [(0.0, "big", 5)], fits=False)
    # Engine order: priority first (u), then queue time: x, y, z, w. The never-fitting job is left out.
    assert head_of_line([ones, eights, urgent, never], None) == {"a": [4, 0, 1, 2, 3]}
    # With bounds, the list stops at the first job beyond its class's bound: y (8 GPUs, bound 0).
    bounds = {id(ones): 5, id(eights): 0, id(urgent): 1}
    assert head_of_line([ones, eights, urgent, never], lambda c: bounds[id(c)]) == {"a": [4, 0]}

"""The indexed victim search chooses exactly what the old one did (`reference_reclaim.py`, a frozen copy).

Random reclaim-prone clusters — nodes full of borrowers of mixed sizes (some spanning nodes), CPU or
memory sometimes the binding resource, cordoned nodes, exiting jobs, and a queue of In Quota gangs of
every kind — go through a whole cycle twice: once asking both searches at every reclaim (the victims
must be the same, in the same order), once with the old search alone (the decisions must be equal).
"""

from __future__ import annotations

import random

import pytest
from engine_checks import check_decisions, check_snapshot
from reference_reclaim import reference_select_victims

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import (
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    RUNNING,
    TERMINATING,
    Job,
    Node,
    Pod,
    Quota,
    Snapshot,
    gpu_key,
)
from scheduler.engine.victims import selection
from scheduler.engine_tools.bench import build_mixed_storm_snapshot, build_reclaim_heavy_snapshot

MODELS = ("A100", "H100")


def _random_snapshot(seed: int) -> Snapshot:
    """Nodes of two models, sometimes in two pools (then every pool has its own quota tree)."""
    rng = random.Random(seed)
    pools = ("general", "lingjun") if rng.random() < 0.3 else ("general",)
    nodes = [
        Node(f"n{i:02d}", rng.choice(MODELS), rng.choice((4, 8, 8)), rng.choice((16000, 32000, 96000)),
             rng.choice((65536, 262144)), pool=rng.choice(pools), schedulable=rng.random() > 0.1)
        for i in range(rng.randint(3, 14))
    ]
    teams = rng.randint(1, 3)
    quotas: list[Quota] = []
    for pool in pools:
        capacity: dict[str, int] = {}
        for node in nodes:
            if node.pool == pool:
                capacity[gpu_key(node.gpu_type)] = capacity.get(gpu_key(node.gpu_type), 0) + node.gpus
        quotas += [Quota(f"root-{pool}", None, pool=pool), Quota(f"borrowers-{pool}", f"root-{pool}", pool=pool)]
        for t in range(teams):
            minimum = {k: v // teams for k, v in capacity.items()} | {"cpu": 10**7, "memory": 10**9}
            quotas.append(Quota(f"team{t}-{pool}", f"root-{pool}", minimum, pool=pool))
    free = {n.name: [n.gpus, n.cpu_m, n.memory_mib] for n in nodes}

    def put(pods: tuple[Pod, ...], model: str, pool: str, spread: bool) -> tuple[str, ...] | None:
        order = [n for n in nodes if n.gpu_type == model and n.pool == pool]
        rng.shuffle(order)
        left = {name: list(amounts) for name, amounts in free.items()}
        chosen = []
        for pod in pods:
            for node in order:
                have = left[node.name]
                if have[0] >= pod.gpus and have[1] >= pod.cpu_m and have[2] >= pod.memory_mib:
                    have[0] -= pod.gpus
                    have[1] -= pod.cpu_m
                    have[2] -= pod.memory_mib
                    chosen.append(node.name)
                    if spread:
                        order.append(order.pop(order.index(node)))  # next pod elsewhere if it can
                    break
            else:
                return None
        free.update(left)
        return tuple(chosen)

    jobs: list[Job] = []
    for i in range(rng.randint(5, 40)):  # borrowers, and a few exiting jobs
        model = rng.choice(MODELS)
        gpus = rng.choice((1, 1, 2, 4, 8))
        pod = Pod("w", gpus, model if rng.random() < 0.7 else None, rng.choice((1000, 4000, 12000)) * gpus,
                  rng.choice((4096, 16384, 65536)) * gpus)
        pods = (pod,) * rng.choice((1, 1, 1, 2, 3))
        pool = rng.choice(pools)
        # Now and then a borrower runs in another pool than its quota's (a quota moved under it): such a
        # job is a candidate of its quota's pool only, and its pods there count for nothing.
        runs_in = rng.choice(pools) if rng.random() < 0.15 else pool
        placed = put(pods, model, runs_in, spread=rng.random() < 0.5)
        if placed is None:
            continue
        phase = TERMINATING if rng.random() < 0.1 else RUNNING
        jobs.append(Job(f"b{i:02d}", f"borrowers-{pool}", pods, priority=rng.choice((1, 2, 3)),
                        idle=rng.choice((IDLE_ONLY, IDLE_ACCEPTABLE)), phase=phase, in_quota=False,
                        started_at=float(rng.randint(0, 30)), nodes=placed))
    for i in range(rng.randint(3, 25)):  # the queue
        model = rng.choice((*MODELS, None))
        kind = rng.random()
        gpus = rng.choice((1, 2, 4, 8))
        cpu, mem = rng.choice((1000, 6000, 20000)) * gpus, rng.choice((4096, 32768)) * gpus
        if kind < 0.55:
            pods = (Pod("w", gpus, model, cpu, mem),)
        elif kind < 0.8:
            pods = (Pod("w", gpus, model, cpu, mem),) * rng.randint(2, 4)
        elif kind < 0.92:
            pods = (Pod("m", rng.choice((1, 2)), model, 2000, 4096), Pod("w", gpus, model, cpu, mem))
        else:
            pods = (Pod("c", 0, model, cpu, mem),) * rng.randint(1, 2)
        jobs.append(Job(f"q{i:02d}", f"team{rng.randrange(teams)}-{rng.choice(pools)}", pods, priority=rng.choice((1, 2, 5)),
                        idle=rng.choice((IDLE_OFF, IDLE_OFF, IDLE_ACCEPTABLE)), submitted_at=float(i)))
    return Snapshot(tuple(nodes), tuple(quotas), tuple(jobs))


def _snapshots():
    for seed in range(300):
        yield f"random-{seed}", _random_snapshot(seed)
    for seed in range(3):
        yield f"uniform-{seed}", build_reclaim_heavy_snapshot(nodes=30, pending=300, seed=seed)
        yield f"storm-{seed}", build_mixed_storm_snapshot(nodes=30, pending=300, seed=seed)


def _is_taken(state):
    """The frozen reference asks, per candidate, whether it is taken: not among the untaken ones."""
    untaken = {id(v) for v in state.victims.untaken()}
    return lambda victim: id(victim) not in untaken


def _reference(state, demand, model):
    return reference_select_victims(state.capacity.nodes.values(), state.victims.ordered, _is_taken(state),
                                    demand, model)


def _names(victims):
    return None if victims is None else [v.job.name for v in victims]


def test_indexed_victim_search_matches_the_old_one(monkeypatch):
    indexed = selection.search
    asked = {"calls": 0, "chosen": 0, "none": 0}

    def both(state, demand, model):
        expected = _names(_reference(state, demand, model))
        got = indexed(state, demand, model)
        assert _names(got) == expected, (demand.job.name, model)
        asked["calls"] += 1
        asked["chosen"] += bool(expected)
        asked["none"] += expected is None
        return got

    for label, snapshot in _snapshots():
        monkeypatch.setattr(selection, "search", both)
        new = run_cycle(snapshot)
        monkeypatch.setattr(selection, "search", _reference)
        old = run_cycle(snapshot)
        assert new == old, label
    # The comparison means something only if searches of every outcome happened.
    assert asked["calls"] > 1500 and asked["chosen"] > 500 and asked["none"] > 100, asked


@pytest.mark.parametrize("seed", range(3))
def test_reclaim_storms_keep_every_invariant(seed):
    """The benchmark's storms are consistent inputs, and their decisions keep every rule."""
    for snapshot in (build_mixed_storm_snapshot(nodes=20, pending=200, seed=seed),
                     build_reclaim_heavy_snapshot(nodes=20, pending=200, seed=seed)):
        check_snapshot(snapshot)
        decisions = run_cycle(snapshot)
        assert decisions.preempted and decisions.nominated
        check_decisions(snapshot, decisions)

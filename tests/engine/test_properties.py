"""Properties of the cycle over random small clusters (hypothesis).

Clusters: a few nodes of two models, one of them sometimes cordoned; a root with 2-3 teams, one
of which may have sub-teams and a max; running, terminating and pending jobs of every idle mode,
built to be consistent (pods fit their nodes, In Quota use fits every min, use fits every max).
"""

from __future__ import annotations

import random
from dataclasses import replace

from engine_checks import apply, check_decisions, check_snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import (
    CPU,
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    MEMORY,
    PENDING,
    RUNNING,
    TERMINATING,
    Job,
    Node,
    Pod,
    Quota,
    Snapshot,
    gpu_key,
)

MODELS = ("A100", "H100")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _shares(draw, total: dict[str, int], parts: int) -> list[dict[str, int]]:
    """Split every resource of `total` among `parts` in one set of proportions (some may get 0),
    so a team guaranteed GPUs is also guaranteed the CPU and memory to use them."""
    weights = draw(st.lists(st.integers(0, 4), min_size=parts, max_size=parts))
    weight_sum = sum(weights) or 1
    return [{key: amount * w // weight_sum for key, amount in total.items()} for w in weights]


@st.composite
def snapshots(draw) -> Snapshot:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        nodes.append(Node(
            name=f"n{i}",
            gpu_type=draw(st.sampled_from(MODELS)),
            gpus=draw(st.sampled_from((2, 4, 8))),
            cpu_m=draw(st.sampled_from((8000, 16000, 32000))),
            memory_mib=draw(st.sampled_from((32768, 65536))),
            schedulable=draw(st.sampled_from((True, True, True, False))),
        ))
    capacity: dict[str, int] = {}
    for node in nodes:
        for key, amount in ((gpu_key(node.gpu_type), node.gpus), (CPU, node.cpu_m), (MEMORY, node.memory_mib)):
            capacity[key] = capacity.get(key, 0) + amount

    # root -> team0..teamK; team0 may have two sub-teams. mins split what the parent has.
    teams = draw(st.integers(2, 3))
    quotas = [Quota(name="root", parent=None)]
    for t, minimum in enumerate(_shares(draw, capacity, teams)):
        maximum = None
        if draw(st.booleans()):
            maximum = {key: amount + draw(st.integers(0, 8)) for key, amount in minimum.items() if key.startswith("gpu:")}
        quotas.append(Quota(name=f"team{t}", parent="root", min=minimum, max=maximum))
    if draw(st.booleans()):
        for s, minimum in enumerate(_shares(draw, dict(quotas[1].min), 2)):
            quotas.append(Quota(name=f"team0-{s}", parent="team0", min=minimum))
    models = sorted({n.gpu_type for n in nodes})

    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    jobs: list[Job] = []
    free = {n.name: [n.gpus, n.cpu_m, n.memory_mib] for n in nodes}
    for i in range(draw(st.integers(4, 14))):
        pods = tuple(
            Pod(role="worker", gpus=rng.choice((0, 1, 2, 2, 4)),
                gpu_type=rng.choice((None, *models)),
                cpu_m=rng.choice((0, 1000, 4000)), memory_mib=rng.choice((0, 4096, 16384)))
            for _ in range(rng.choice((1, 1, 1, 2, 3)))
        )
        named = {p.gpu_type for p in pods if p.gpu_type}
        if len(named) > 1:  # one model per job
            pods = tuple(replace(p, gpu_type=None) for p in pods)
        # Half the jobs start out running, many of them on idle resources (the ones reclaim can take).
        wanted = rng.choice((PENDING, PENDING, PENDING, RUNNING, RUNNING, RUNNING, RUNNING, TERMINATING))
        idle = rng.choice((IDLE_OFF, IDLE_ACCEPTABLE, IDLE_ONLY, IDLE_ONLY) if wanted == RUNNING else
                          (IDLE_OFF, IDLE_OFF, IDLE_ACCEPTABLE, IDLE_ONLY))
        job = Job(name=f"j{i}", quota=rng.choice([q.name for q in quotas[1:]]), pods=pods,
                  priority=rng.choice((1, 2, 3)), idle=idle, submitted_at=float(rng.randint(0, 5)))
        if wanted != PENDING:
            job = _place_consistently(job, wanted, nodes, free, quotas, jobs, rng)
        jobs.append(job)
    snapshot = Snapshot(nodes=tuple(nodes), quotas=tuple(quotas), jobs=tuple(jobs))
    check_snapshot(snapshot)
    return snapshot


def _place_consistently(job, wanted, nodes, free, quotas, jobs, rng) -> Job:
    """Put the job on nodes with room (one model, first fit in random order) if quotas allow it as
    `wanted`; otherwise leave it pending."""
    order = list(nodes)
    rng.shuffle(order)
    model_of_pods = next((p.gpu_type for p in job.pods if p.gpu_type), None)
    model = model_of_pods or rng.choice(sorted({n.gpu_type for n in nodes}))
    # the engine's rule: a job with GPUs or a named model keeps all its pods on one model
    any_node = not model_of_pods and not any(p.gpus for p in job.pods)
    left = {n: list(amounts) for n, amounts in free.items()}
    placed = []
    for pod in job.pods:
        for node in order:
            amounts = left[node.name]
            fits = amounts[0] >= pod.gpus and amounts[1] >= pod.cpu_m and amounts[2] >= pod.memory_mib
            if fits and (any_node or node.gpu_type == model):
                amounts[0] -= pod.gpus
                amounts[1] -= pod.cpu_m
                amounts[2] -= pod.memory_mib
                placed.append(node.name)
                break
        else:
            return job
    # In Quota if the quota allows it, else on idle resources if the idle mode allows that.
    tries = {IDLE_OFF: (True,), IDLE_ONLY: (False,), IDLE_ACCEPTABLE: (True, False)}[job.idle]
    if job.idle == IDLE_ACCEPTABLE and rng.random() < 0.5:
        tries = (False,)  # borrowing although its quota has room: a candidate for promotion
    for in_quota in tries:
        candidate = replace(job, phase=wanted, nodes=tuple(placed), started_at=float(rng.randint(0, 50)),
                            in_quota=in_quota)
        if wanted != RUNNING:
            break
        try:
            check_snapshot(Snapshot(nodes=tuple(nodes), quotas=tuple(quotas), jobs=(*jobs, candidate)))
            break
        except AssertionError:
            continue  # breaks a min (try idle) or a max
    else:
        return job  # keep it pending
    free.update(left)
    return candidate


@SETTINGS
@given(snapshots())
def test_decisions_keep_every_invariant(snapshot):
    """No node over capacity, In Quota use within every min, use within every max, no In Quota
    victim, admissions on schedulable nodes of the pool and of one model, pending in queue order."""
    check_decisions(snapshot, run_cycle(snapshot))


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_same_snapshot_same_decisions(snapshot, rnd):
    decisions = run_cycle(snapshot)
    assert run_cycle(snapshot) == decisions
    shuffled = [list(snapshot.nodes), list(snapshot.quotas), list(snapshot.jobs)]
    for part in shuffled:
        rnd.shuffle(part)
    assert run_cycle(Snapshot(*map(tuple, shuffled))) == decisions


@SETTINGS
@given(snapshots())
def test_nominated_jobs_are_admitted_once_victims_exit(snapshot):
    """Cycle 1 nominates; in cycle 2 the victims are still exiting (nominations hold); in cycle 3
    they are gone and every job nominated in cycle 2 is admitted In Quota on its reserved nodes."""
    first = run_cycle(snapshot)
    exiting = apply(snapshot, first, exited=False)
    second = run_cycle(exiting)
    check_decisions(exiting, second)
    for name, nodes in first.nominated.items():
        held = second.nominated.get(name) or second.admitted[name].nodes
        assert held == nodes, f"{name} lost its reservation while its victims were exiting"
    gone = apply(exiting, second, exited=True)
    third = run_cycle(gone)
    check_decisions(gone, third)
    for name, nodes in second.nominated.items():
        assert name in third.admitted, f"{name} was not admitted after its victims exited: {third.reasons.get(name)}"
        assert third.admitted[name].in_quota and third.admitted[name].nodes == nodes


@SETTINGS
@given(snapshots())
def test_cycles_in_a_row_keep_every_invariant(snapshot):
    """Four cycles, exiting pods gone after every second one: the invariants hold at each step,
    with nominated and terminating jobs from earlier cycles in the input."""
    for step in range(4):
        decisions = run_cycle(snapshot)
        check_decisions(snapshot, decisions)
        snapshot = apply(snapshot, decisions, exited=step % 2 == 1)

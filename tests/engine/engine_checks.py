"""Shared by the engine tests: apply a cycle's decisions to a snapshot, and check what must always hold."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from scheduler.engine.quota import effective_min, own_min
from scheduler.engine.resources import add_into, vector
from scheduler.engine.types import (
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    NOMINATED,
    PENDING,
    RUNNING,
    TERMINATING,
    Decisions,
    Job,
    Snapshot,
)


def apply(snapshot: Snapshot, decisions: Decisions, *, exited: bool, now: float = 1e6) -> Snapshot:
    """The next cycle's snapshot, as the loop would write it. `exited`: every exiting pod (this
    cycle's victims and earlier terminating jobs) is gone; otherwise victims are terminating."""
    jobs: list[Job] = []
    for job in snapshot.jobs:
        name = job.name
        if name in decisions.preempted:
            if not exited:
                jobs.append(replace(job, phase=TERMINATING))
        elif job.phase == TERMINATING:
            if not exited:
                jobs.append(job)
        elif name in decisions.admitted:
            admission = decisions.admitted[name]
            jobs.append(replace(job, phase=RUNNING, in_quota=admission.in_quota, nodes=admission.nodes, started_at=now))
        elif name in decisions.nominated:
            jobs.append(replace(job, phase=NOMINATED, nodes=decisions.nominated[name]))
        elif name in decisions.promoted:
            jobs.append(replace(job, in_quota=True))
        elif job.phase == NOMINATED:  # withdrawn and still pending
            jobs.append(replace(job, phase=PENDING, nodes=()))
        else:
            jobs.append(job)
    return replace(snapshot, jobs=tuple(jobs))


def job_model(snapshot: Snapshot, job: Job) -> str | None:
    nodes = {n.name: n for n in snapshot.nodes}
    for pod, node in zip(job.pods, job.nodes, strict=True):
        if pod.gpus:
            return nodes[node].gpu_type
    named = [p.gpu_type for p in job.pods if p.gpu_type]
    return named[0] if named else None


def request_of(snapshot: Snapshot, job: Job) -> dict[str, int]:
    return vector(sum(p.gpus for p in job.pods), job_model(snapshot, job), sum(p.cpu_m for p in job.pods),
                  sum(p.memory_mib for p in job.pods))


def subtree_totals(snapshot: Snapshot, jobs: list[Job]) -> dict[str, dict[str, int]]:
    """Per quota, the sum of `jobs`' requests over its subtree."""
    parent = {q.name: q.parent for q in snapshot.quotas}
    totals: dict[str, dict[str, int]] = defaultdict(dict)
    for job in jobs:
        quota = job.quota
        request = request_of(snapshot, job)
        while quota is not None:
            add_into(totals[quota], request)
            quota = parent.get(quota)
    return totals


def snapshot_quota_max(snapshot: Snapshot, name: str) -> dict[str, int] | None:
    for q in snapshot.quotas:
        if q.name == name:
            return dict(q.max) if q.max is not None else None
    return None


def check_snapshot(snapshot: Snapshot) -> None:
    """What a consistent snapshot satisfies (inputs of the property tests, and every later state)."""
    nodes = {n.name: n for n in snapshot.nodes}
    # per node: (GPUs, CPU, memory) of running pods, exiting pods, and nominated jobs' reservations
    use: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for job in snapshot.jobs:
        if job.phase == PENDING:
            continue
        assert len(job.nodes) == len(job.pods), job
        for pod, name in zip(job.pods, job.nodes, strict=True):
            if pod.gpu_type:
                assert nodes[name].gpu_type == pod.gpu_type, (job.name, name)
            amounts = use[name][job.phase]
            amounts[0] += pod.gpus
            amounts[1] += pod.cpu_m
            amounts[2] += pod.memory_mib
    for name, phases in use.items():
        node = nodes[name]
        capacity = (node.gpus, node.cpu_m, node.memory_mib)
        for i in range(3):
            running = phases[RUNNING][i]
            # pods on the node (running or exiting) fit it, and so do running pods plus reservations
            # (a reservation is made of exiting or free capacity, never of running pods)
            assert running + phases[TERMINATING][i] <= capacity[i], f"node {name} over capacity"
            assert running + phases[NOMINATED][i] <= capacity[i], f"reservations over free capacity on {name}"
    quotas = {q.name: q for q in snapshot.quotas}
    in_quota = [j for j in snapshot.jobs if (j.phase == RUNNING and j.in_quota) or j.phase == NOMINATED]
    for name, total in subtree_totals(snapshot, in_quota).items():
        minimum = effective_min(quotas[name], snapshot.nodes)
        for key, amount in total.items():
            assert amount <= minimum.get(key, 0), f"In Quota use of {name} over its min: {key} {amount}"
    children: dict[str, list[str]] = defaultdict(list)
    for q in snapshot.quotas:
        if q.parent in quotas:
            children[q.parent].append(q.name)
    for name, kids in children.items():  # a child's guarantee is the child's: a parent's own jobs keep to ownmin
        kept = own_min(effective_min(quotas[name], snapshot.nodes), (quotas[k].min for k in kids))
        own = subtree_totals(snapshot, [j for j in in_quota if j.quota == name]).get(name, {})
        for key, amount in own.items():
            assert amount <= kept.get(key, 0), f"In Quota use of {name}'s own jobs over its ownmin: {key} {amount}"
    using = [j for j in snapshot.jobs if j.phase in (RUNNING, NOMINATED)]
    for name, total in subtree_totals(snapshot, using).items():
        maximum = quotas[name].max
        for key, amount in total.items():
            if maximum is not None and key in maximum:
                assert amount <= maximum[key], f"use of {name} over its max: {key} {amount}"
    for job in snapshot.jobs:
        if job.phase == RUNNING and job.idle == IDLE_ONLY:
            assert not job.in_quota, job.name
        if job.phase == RUNNING and job.idle == IDLE_OFF:
            assert job.in_quota, job.name


def check_decisions(snapshot: Snapshot, decisions: Decisions) -> None:
    """Rules each decision obeys on its own, then the snapshot it leads to (victims still exiting,
    and once they are gone)."""
    jobs = {j.name: j for j in snapshot.jobs}
    nodes = {n.name: n for n in snapshot.nodes}
    pools = {q.name: q.pool for q in snapshot.quotas}
    for victim in decisions.preempted:
        job = jobs[victim]
        assert job.phase == RUNNING and not job.in_quota, f"{victim} preempted but it ran In Quota"
        assert pools[job.quota] == pools[jobs[decisions.preempted[victim].for_job].quota]
    waiting = [j for j in snapshot.jobs if j.phase in (PENDING, NOMINATED)]
    for name, admission in decisions.admitted.items():
        job = jobs[name]
        assert job.phase in (PENDING, NOMINATED)
        assert not (job.idle == IDLE_ONLY and admission.in_quota), name
        assert not (job.idle == IDLE_OFF and not admission.in_quota), name
        placed = [nodes[n] for n in admission.nodes]
        assert len(placed) == len(job.pods)
        assert all(n.schedulable for n in placed), name
        assert all(n.pool == pools[job.quota] for n in placed)
        assert len({n.gpu_type for n, p in zip(placed, job.pods, strict=True) if p.gpus}) <= 1, name
    for name in decisions.nominated:
        assert jobs[name].idle != IDLE_ONLY
        assert name in decisions.reasons
    for name in decisions.promoted:
        job = jobs[name]
        assert job.phase == RUNNING and not job.in_quota and job.idle == IDLE_ACCEPTABLE
    # Victims and max: a Not in Quota victim still counts towards max in its cycle (its pods still run),
    # so what runs (less In Quota victims) plus what this cycle admits or nominates stays within max.
    counted = [j for j in snapshot.jobs if j.phase in (RUNNING, NOMINATED)
               and not (j.name in decisions.preempted and j.in_quota)]
    counted += [replace(jobs[n], nodes=tuple(a.nodes)) for n, a in decisions.admitted.items() if jobs[n].phase == PENDING]
    counted += [replace(jobs[n], nodes=tuple(nodes)) for n, nodes in decisions.nominated.items()
                if jobs[n].phase == PENDING]
    for name, total in subtree_totals(snapshot, counted).items():
        maximum = snapshot_quota_max(snapshot, name)
        for key, amount in total.items():
            if maximum is not None and key in maximum:
                assert amount <= maximum[key], f"{name} over its max this cycle, its victims counted: {key} {amount}"
    decided = set(decisions.admitted) | set(decisions.nominated)
    assert sorted(decisions.pending) == sorted(j.name for j in waiting if j.name not in decided)
    order = [(-jobs[n].priority, jobs[n].submitted_at, n) for n in decisions.pending]
    assert order == sorted(order), "pending is not in queue order"
    assert all(decisions.reasons.get(n) for n in decisions.pending), "a pending job has no reason"
    check_snapshot(apply(snapshot, decisions, exited=False))
    check_snapshot(apply(snapshot, decisions, exited=True))

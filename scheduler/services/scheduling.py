"""Applying one scheduling cycle's decisions to the database (the loop calls this in its transaction).

Victims are preempted through the lifecycle service; admitted jobs get their pods, nodes and GPU
indices (batched: a cycle may admit thousands); nominations, promotions, queue positions and
waiting reasons are written; after commit the executor starts the new pods and the console is
told which jobs changed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from scheduler.engine.reasons import MEMBER, Audience, preemption_text, render, staff
from scheduler.engine.types import ESTIMATE_ROUGH, PREEMPT_RECLAIM, PREEMPT_WITHIN, Decisions
from scheduler.engine_rows import SnapshotIndex
from scheduler.executors import get_executor
from scheduler.models import AllocationSample, Job, JobEvent, JobPreemption, Node, Pod
from scheduler.publish import publish_cluster_change_on_commit, publish_jobs_changed_on_commit
from scheduler.selectors import allocation_by_quota
from scheduler.services.bulk import in_ids, insert_rows, insert_values, set_column
from scheduler.services.elastic import apply_resizes
from scheduler.services.events import job_event
from scheduler.services.lifecycle import job_preempt
from scheduler.states import LIVE_POD_STATUSES, EventKind, JobStatus, check_job_transition


def _free_gpu_indices(node_ids: set[int]) -> dict[int, list[int]]:
    used: dict[int, set[int]] = defaultdict(set)
    for node_id, indices in Pod.objects.filter(
        node_id__in=in_ids(node_ids), status__in=LIVE_POD_STATUSES
    ).values_list("node_id", "gpu_indices"):
        used[node_id].update(indices or [])
    counts = dict(Node.objects.filter(pk__in=in_ids(node_ids)).values_list("pk", "gpu_count"))
    return {node_id: [i for i in range(counts[node_id]) if i not in used[node_id]] for node_id in node_ids}


def _display(index: SnapshotIndex, key: str) -> str:
    job = index.jobs.get(key)
    return job.name if job else key.split("#")[0]


def _staff(index: SnapshotIndex) -> Audience:
    """Staff read job names, never the engine's internal `name#id` keys."""
    return staff(lambda key: _display(index, key))


def _texts(member: str, staff_text: str) -> tuple[str, str]:
    """(member text, staff text): the staff text is stored only where it says more."""
    return member[:500], (staff_text if staff_text != member else "")[:500]


def _reasons(decisions: Decisions, index: SnapshotIndex, key: str, default: str = "") -> tuple[str, str, str]:
    """A pending or nominated job's reason as (member text, staff text, code), rendered by the engine's
    reasons module: members never read another job's name; the code keeps the reason's kind."""
    why = decisions.reasons.get(key)
    if why is None:
        return default[:500], "", ""
    return (*_texts(render(why, MEMBER), render(why, _staff(index))), why.code)


def cycle_apply(*, decisions: Decisions, index: SnapshotIndex, now: datetime) -> list[tuple[Job, list[Pod]]]:
    """Write one cycle's decisions inside the caller's transaction; after commit, start the new pods.

    Returns the admitted jobs with their new pods.
    """
    changed: list[Job] = []
    _apply_preemptions(decisions, index)
    launches = _apply_admissions(decisions, index, now, changed)
    _apply_nominations(decisions, index, changed)
    _apply_promotions(decisions, index, changed)
    _apply_demotions(decisions, index, changed)
    launches += apply_resizes(decisions, index, now, changed)  # §2c: shrinks and growths
    _apply_pending(decisions, index, changed)
    if launches:
        transaction.on_commit(lambda: get_executor().launch(launches))
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id) for job in changed])
    if (decisions.admitted or decisions.preempted or decisions.promoted or decisions.demoted or decisions.shrunk
            or decisions.grown):
        publish_cluster_change_on_commit()
    return launches


# The engine's kind of preemption -> the kind a JobPreemption row records.
PREEMPTION_KINDS = {PREEMPT_RECLAIM: JobPreemption.Kind.RECLAIM, PREEMPT_WITHIN: JobPreemption.Kind.PRIORITY}


def _apply_preemptions(decisions: Decisions, index: SnapshotIndex) -> None:
    audience = _staff(index)
    for key, preemption in decisions.preempted.items():
        member, staff_text = _texts(preemption_text(preemption, MEMBER), preemption_text(preemption, audience))
        job_preempt(job=index.jobs[key], reason=member, staff_reason=staff_text,
                    kind=PREEMPTION_KINDS[preemption.kind], code=preemption.code)


def _admitted_fields(now: datetime) -> dict:
    """What admission sets on a job besides in_quota, gpu_type and attempt (the same for every job)."""
    return dict(status=JobStatus.ENV_PREPARING, started_at=now, nominated_nodes=None, demoted=False, waiting_reason="",
                waiting_reason_staff="", waiting_reason_code="", queue_position=None, stop_outcome="")


def _place_pods(job: Job, key: str, nodes: tuple[str, ...], index: SnapshotIndex,
                free_indices: dict[int, list[int]]) -> list[Pod]:
    """The pods of one admitted job, each on its node with the lowest free GPU indices there."""
    pods: list[Pod] = []
    role_counter: dict[str, int] = defaultdict(int)
    slots = index.slots.get(key)  # §2c: an elastic job's base, with each pod's rank and index in its role
    specs = index.pods_of[key] if slots is None else [index.pods_of[key][rank] for rank, _, _ in slots]
    for position, (spec, node_name) in enumerate(zip(specs, nodes, strict=True)):
        node = index.nodes[node_name]
        take = free_indices[node.pk][: spec.gpus]
        del free_indices[node.pk][: spec.gpus]
        rank, role_index = (position, role_counter[spec.role]) if slots is None else (slots[position][0],
                                                                                      slots[position][2])
        pods.append(Pod(job=job, role=spec.role, index=role_index, rank=rank, attempt=job.attempt,
                        node=node, gpu_indices=take))
        role_counter[spec.role] += 1
    return pods


def _apply_admissions(decisions: Decisions, index: SnapshotIndex, now: datetime,
                      changed: list[Job]) -> list[tuple[Job, list[Pod]]]:
    node_ids = {index.nodes[name].pk for a in decisions.admitted.values() for name in a.nodes}
    free_indices = _free_gpu_indices(node_ids) if node_ids else {}
    fields = _admitted_fields(now)
    launches: list[tuple[Job, list[Pod]]] = []
    events: list[tuple[int, datetime, str, str]] = []  # (job, time, kind, reason): rows, not instances
    stamp = timezone.now()  # events are stamped when written (after housekeeping's), like auto_now_add
    for key, admission in decisions.admitted.items():
        job = index.jobs[key]
        check_job_transition(job.status, fields["status"])  # Queuing, or Preempted and requeued
        for name, value in fields.items():
            setattr(job, name, value)
        job.in_quota = admission.in_quota
        job.gpu_type = admission.gpu_type or ""
        job.attempt += 1
        pods = _place_pods(job, key, admission.nodes, index, free_indices)
        where = ", ".join(sorted(set(admission.nodes)))
        how = "In Quota" if admission.in_quota else "Not in Quota (idle resources)"
        events.append((job.pk, stamp, EventKind.ADMITTED, f"admitted {how} on {where}"))
        launches.append((job, pods))
    if launches:
        # Batched: rows differ only in in_quota, gpu_type and attempt.
        groups: dict[tuple[bool, str], list[int]] = defaultdict(list)
        for job, _pods in launches:
            groups[(job.in_quota, job.gpu_type)].append(job.pk)
        for (in_quota, gpu_type), ids in groups.items():
            Job.objects.filter(pk__in=in_ids(ids)).update(
                in_quota=in_quota, gpu_type=gpu_type, attempt=F("attempt") + 1, updated_at=now, **fields
            )
        insert_rows(Pod, [pod for _job, pods in launches for pod in pods], returning=True)
        insert_values(JobEvent, ("job_id", "time", "kind", "reason"), events)
        changed.extend(job for job, _pods in launches)
    return launches


def _apply_nominations(decisions: Decisions, index: SnapshotIndex, changed: list[Job]) -> None:
    for key, nodes in decisions.nominated.items():
        job = index.jobs[key]
        reason, staff, code = _reasons(decisions, index, key, "waiting for preempted jobs to exit")
        if job.nominated_nodes != list(nodes):
            job_event(job, EventKind.NOMINATED, reason, staff_reason=staff, code=code)
        if (job.nominated_nodes != list(nodes) or job.waiting_reason != reason or job.waiting_reason_staff != staff
                or job.waiting_reason_code != code or job.queue_position is not None):
            job.nominated_nodes = list(nodes)
            job.waiting_reason = reason
            job.waiting_reason_staff = staff
            job.waiting_reason_code = code
            job.queue_position = None
            job.save(update_fields=["nominated_nodes", "waiting_reason", "waiting_reason_staff", "waiting_reason_code",
                                    "queue_position", "updated_at"])
            changed.append(job)


def _apply_promotions(decisions: Decisions, index: SnapshotIndex, changed: list[Job]) -> None:
    for key in decisions.promoted:
        job = index.jobs[key]
        job.in_quota = True
        job.demoted = False
        job.save(update_fields=["in_quota", "demoted", "updated_at"])
        job_event(job, EventKind.PROMOTED, f"promoted to In Quota: quota {job.quota.name} has room now")
        changed.append(job)


DEMOTED_REASON = "moved to idle resources by a higher-priority job of the same quota"


def _apply_demotions(decisions: Decisions, index: SnapshotIndex, changed: list[Job]) -> None:
    """DESIGN §2b preempt_within: the job keeps running, Not in Quota, until it is promoted back."""
    for key in decisions.demoted:
        job = index.jobs[key]
        job.in_quota = False
        job.demoted = True
        job.save(update_fields=["in_quota", "demoted", "updated_at"])
        job_event(job, EventKind.DEMOTED, DEMOTED_REASON)
        changed.append(job)


def _apply_pending(decisions: Decisions, index: SnapshotIndex, changed: list[Job]) -> None:
    """Queue positions shift whenever a job ahead leaves the queue, so they are written in one pass;
    reasons are shared by many jobs, so one UPDATE per distinct reason."""
    positions: list[tuple[int, int]] = []
    by_reason: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    renominated: list[int] = []
    texts: dict[object, tuple[str, str, str]] = {}  # reason value -> (member text, staff text, code)
    for position, key in enumerate(decisions.pending, start=1):
        job = index.jobs[key]
        why = decisions.reasons.get(key)
        pair = texts.get(why)
        if pair is None:  # equal reason values (many jobs share one) are rendered once
            pair = texts[why] = _reasons(decisions, index, key)
        reason, staff, code = pair
        touched = False
        if job.queue_position != position:
            positions.append((job.pk, position))
            touched = True
        if job.waiting_reason != reason or job.waiting_reason_staff != staff or job.waiting_reason_code != code:
            by_reason[(reason, staff, code)].append(job.pk)
            touched = True
        if job.nominated_nodes:  # a withdrawn nomination
            renominated.append(job.pk)
            touched = True
        if touched:
            changed.append(job)
    set_column(Job, "queue_position", positions)
    for (reason, staff, code), ids in by_reason.items():
        Job.objects.filter(pk__in=in_ids(ids)).update(waiting_reason=reason, waiting_reason_staff=staff,
                                                      waiting_reason_code=code)
    if renominated:
        Job.objects.filter(pk__in=in_ids(renominated)).update(nominated_nodes=None)
    _store_estimates(decisions, index, changed)


ROUGH_STORE_S = 300  # a rough estimate is stored to 5 min


def _store_estimates(decisions: Decisions, index: SnapshotIndex, changed: list[Job]) -> None:
    """DESIGN §2d: each pending job's start estimate (to the second) or why it has none, written only when
    it changed: one UPDATE per distinct value. A rough estimate (a job past the exact ones of its pool,
    engine/plan_rough.py) is stored to ROUGH_STORE_S with "rough" as its kind, so that the many jobs far
    back share a few values and a small move of theirs writes nothing."""
    by_value: dict[tuple[datetime | None, str], list[int]] = defaultdict(list)
    told = {job.pk for job in changed}  # the live list hears of each changed job once
    for key in decisions.pending:
        job = index.jobs[key]
        estimate = decisions.estimates.get(key)
        if estimate is None:  # no plan this cycle (no time): nothing to say
            value: tuple[datetime | None, str] = (None, "")
        elif estimate.start is None:
            value = (None, estimate.unknown or "")
        elif estimate.rough:
            start = round(estimate.start / ROUGH_STORE_S) * ROUGH_STORE_S
            value = (datetime.fromtimestamp(start, tz=UTC), ESTIMATE_ROUGH)
        else:
            value = (datetime.fromtimestamp(round(estimate.start), tz=UTC), "")
        if (job.estimated_start_at, job.estimate_unknown) != value:
            by_value[value].append(job.pk)
            job.estimated_start_at, job.estimate_unknown = value
            if job.pk not in told:
                told.add(job.pk)
                changed.append(job)
    for (start, unknown), ids in by_value.items():
        Job.objects.filter(pk__in=in_ids(ids)).update(estimated_start_at=start, estimate_unknown=unknown)


ALLOCATION_SAMPLE_EVERY = timedelta(seconds=60)
# A change is stored at the next cycle after it (a few seconds apart at most), so the charts step
# where the allocation changed, not up to a minute later at the next periodic sample.
ALLOCATION_CHANGE_EVERY = timedelta(seconds=2)


def allocation_record(*, now: datetime) -> None:
    """Store GPU allocation per quota and per pool for the charts: once a minute, and as soon as it
    changed (at most every ALLOCATION_CHANGE_EVERY)."""
    last = AllocationSample.objects.order_by("-time").values_list("time", flat=True).first()
    if last is not None and now - last < ALLOCATION_CHANGE_EVERY:
        return
    rows = allocation_by_quota()
    if last is not None and now - last < ALLOCATION_SAMPLE_EVERY:
        stored = set(
            AllocationSample.objects.filter(time=last).values_list(
                "resource_type", "quota_id", "in_quota_gpus", "not_in_quota_gpus", "total_gpus"
            )
        )
        current = {(r.resource_type, r.quota_id, r.in_quota_gpus, r.not_in_quota_gpus, r.total_gpus) for r in rows}
        if current == stored:
            return
    AllocationSample.objects.bulk_create(
        [
            AllocationSample(time=now, resource_type=row.resource_type, quota=row.quota,
                             in_quota_gpus=row.in_quota_gpus, not_in_quota_gpus=row.not_in_quota_gpus,
                             total_gpus=row.total_gpus)
            for row in rows
        ]
    )

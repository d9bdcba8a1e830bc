"""The scheduler stays correct under concurrent load (PostgreSQL: real row locks, real concurrency).

A cluster of 6 nodes × 8 A100 and three team quotas under one root. At the same time:
- submitter threads submit 150 jobs of mixed shapes, idle modes, priorities and fault tolerance;
- a stopper thread stops some of them (queued or running);
- two node threads play the nodes: they report launched pods running, exit pods they were asked
  to terminate, and let running pods succeed or fail at random;
- a scheduler thread runs schedule_once() in a loop;
- a checker thread reads consistent snapshots (REPEATABLE READ) and checks capacity, GPU indices
  and In Quota usage while all of this happens.
Then the load stops and the system settles twice: once with pods left running (capacity
invariants with real occupancy), once with every pod allowed to finish (everything left is
finished or queued with a reason). All invariants are checked from the database.
"""

from __future__ import annotations

import random
import re
import threading
import time
import traceback
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.backends.signals import connection_created
from psycopg.errors import DeadlockDetected

from scheduler.loop.cycle import schedule_once
from scheduler.models import IdleMode, Job, JobEvent, JobRole, Node, Pod, ResourceQuota, Workspace
from scheduler.services.jobs import job_stop, job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodOutcome, PodStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.timeout(120)]

NODES, GPUS, CPU, MEMORY = 6, 8, 64, 512
QUOTAS = {  # name: (min GPUs, max GPUs or None)
    "team-a": (24, None),
    "team-b": (16, None),
    "team-c": (8, 16),
}
SUBMITTERS, JOBS_PER_SUBMITTER = 3, 50
LIVE = (PodStatus.PENDING, PodStatus.RUNNING)
FINAL = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
RECLAIM = re.compile(r"^reclaimed by quota (?P<quota>\S+) for job (?P<job>\S+)$")
# The services and the loop all lock a job before its pods (see test_lock_order.py), so under this
# load PostgreSQL must never abort a call as a deadlock: one is counted and fails the test.


class Load:
    """Shared state of the threads: errors, the ids submitted, and phase switches."""

    def __init__(self, executor) -> None:
        self.executor = executor
        self.errors: list[str] = []
        self.submitted: list[int] = []
        self.stopped = 0
        self.refused = 0  # idle off and larger than the quota: refused at submission
        self.deadlocks: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.submitting_done = threading.Event()
        self.random_exits = threading.Event()  # set: running pods end at random
        self.random_exits.set()
        self.finish_all = threading.Event()  # set: every running pod ends soon
        self.halt = threading.Event()
        self.threads: list[threading.Thread] = []

    def spawn(self, name: str, target, *args) -> None:
        def run() -> None:
            try:
                target(*args)
            except Exception:
                self.record(f"{name}: {traceback.format_exc()}")
            finally:
                connection.close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def record(self, error: str) -> None:
        with self.lock:
            self.errors.append(error)

    def call(self, service, **kwargs):
        """Call a service, counting a deadlock (PostgreSQL aborted the whole transaction) before re-raising."""
        try:
            return service(**kwargs)
        except OperationalError as error:
            if isinstance(error.__cause__, DeadlockDetected):
                with self.lock:
                    self.deadlocks[service.__name__] += 1
            raise


def roles_for(rng: random.Random) -> list[dict]:
    worker = {"name": "worker", "pod_count": rng.choice([1, 1, 1, 2, 3]), "gpus": rng.choice([1, 2, 4, 4, 8]),
              "cpu": rng.choice([2, 4, 8, 16]), "memory_gib": rng.choice([8, 32, 64, 128])}
    if rng.random() < 0.2:  # a CPU-only launcher in front of the workers
        return [{"name": "master", "pod_count": 1, "cpu_only": True, "cpu": 2, "memory_gib": 8}, worker]
    return [worker]


def submitter(load: Load, index: int, user, space, quotas) -> None:
    rng = random.Random(1000 + index)
    for i in range(JOBS_PER_SUBMITTER):
        idle_mode = rng.choice([IdleMode.OFF, IdleMode.ACCEPTABLE, IdleMode.ACCEPTABLE, IdleMode.ONLY])
        try:
            job = job_submit(
                user=user, workspace=space, quota=rng.choice(quotas), name=f"j{index}-{i:03d}", command="train",
                roles=roles_for(rng), priority=rng.randint(1, 9), idle_mode=idle_mode,
                fault_tolerance=rng.random() < 0.6, max_restarts=rng.randint(0, 2),
            )
        except ValidationError as error:  # it could never run: over a max (any idle mode), or idle off over the min
            assert set(error.message_dict) == {"quota"}, error.message_dict
            assert idle_mode == IdleMode.OFF or "max" in error.message_dict["quota"][0], error.message_dict
            with load.lock:
                load.refused += 1
            continue
        with load.lock:
            load.submitted.append(job.pk)
        time.sleep(rng.uniform(0, 0.05))


def stopper(load: Load) -> None:
    rng = random.Random(7)
    while not load.submitting_done.is_set():
        time.sleep(rng.uniform(0.02, 0.15))
        with load.lock:
            candidates = list(load.submitted)
        if not candidates:
            continue
        job = Job.objects.get(pk=rng.choice(candidates))
        try:
            load.call(job_stop, job=job, user=None, reason="stopped by the load test")
            load.stopped += 1
        except ValidationError:
            pass  # already finished or stopping: refused, as it should be


def node(load: Load, parity: int) -> None:
    """One 'node agent' for the pods with id % 2 == parity, fed by the recording executor."""
    rng = random.Random(100 + parity)
    launched_seen = terminated_seen = 0
    running: dict[tuple[int, int], float] = {}  # (pod, attempt) -> when it ends on its own
    while not load.halt.is_set():
        launched = load.executor.launched[launched_seen:]
        launched_seen += len(launched)
        for pod_id, attempt in launched:
            if pod_id % 2 == parity and load.call(pod_running, pod_id=pod_id, attempt=attempt):
                running[(pod_id, attempt)] = time.monotonic() + rng.uniform(0.1, 1.5)
        terminated = load.executor.terminated[terminated_seen:]
        terminated_seen += len(terminated)
        for pod_id, attempt, outcome, _grace in terminated:
            if pod_id % 2 == parity:
                running.pop((pod_id, attempt), None)
                load.call(pod_exited, pod_id=pod_id, attempt=attempt, exit_code=rng.choice([0, -15]),
                          outcome=outcome)
        if load.random_exits.is_set() or load.finish_all.is_set():
            now = time.monotonic()
            for key, ends in list(running.items()):
                if ends <= now or load.finish_all.is_set():
                    del running[key]
                    failed = rng.random() < 0.25
                    load.call(pod_exited, pod_id=key[0], attempt=key[1], exit_code=1 if failed else 0,
                              outcome="failed" if failed else "succeeded")
        time.sleep(0.01)


def scheduler(load: Load) -> None:
    while not load.halt.is_set():
        load.call(schedule_once)
        time.sleep(0.01)


def role_map() -> dict[tuple[int, str], JobRole]:
    return {(role.job_id, role.name): role for role in JobRole.objects.all()}


def capacity_violations() -> list[str]:
    """Nodes never overcommitted; live pods' GPU indices disjoint, in range, as asked; In Quota ≤ min."""
    problems = []
    roles = role_map()
    nodes = {node.pk: node for node in Node.objects.all()}
    used: dict[int, list] = defaultdict(lambda: [0, Decimal(0), Decimal(0), []])
    for pod in Pod.objects.filter(status__in=LIVE):
        role = roles[(pod.job_id, pod.role)]
        usage = used[pod.node_id]
        usage[0] += role.gpus
        usage[1] += role.cpu
        usage[2] += role.memory_gib
        usage[3].extend(pod.gpu_indices)
        if len(pod.gpu_indices) != role.gpus:
            problems.append(f"pod {pod.pk} holds GPUs {pod.gpu_indices} but asked for {role.gpus}")
    for node_id, (gpus, cpu, memory, indices) in used.items():
        node = nodes[node_id]
        if gpus > node.gpu_count or cpu > node.cpu or memory > node.memory_gib:
            problems.append(f"{node.name} overcommitted: {gpus} GPUs, {cpu} CPU, {memory} GiB")
        if len(indices) != len(set(indices)) or not set(indices) <= set(range(node.gpu_count)):
            problems.append(f"{node.name}: GPU indices overlap or out of range: {sorted(indices)}")

    # In Quota usage: what the live pods of running In Quota jobs hold (a pod that has ended
    # already gave its share back), in the job's quota and every ancestor.
    quotas = {quota.pk: quota for quota in ResourceQuota.objects.all()}
    admitted = {job.pk: job for job in Job.objects.filter(
        status__in=[JobStatus.ENV_PREPARING, JobStatus.RUNNING], in_quota=True)}
    in_quota: dict[int, list] = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    live_count: Counter[int] = Counter()
    for pod in Pod.objects.filter(status__in=LIVE, job_id__in=admitted):
        role = roles[(pod.job_id, pod.role)]
        live_count[pod.job_id] += 1
        quota_id = admitted[pod.job_id].quota_id
        while quota_id is not None:
            usage = in_quota[quota_id]
            usage[0] += role.gpus
            usage[1] += role.cpu
            usage[2] += role.memory_gib
            quota_id = quotas[quota_id].parent_id
    for quota_id, (gpus, cpu, memory) in in_quota.items():
        quota = quotas[quota_id]
        if gpus > quota.min_gpus.get("A100", 0) or cpu > quota.min_cpu or memory > quota.min_memory_gib:
            members = [f"{job.name}[{job.status}{'/' + job.stop_outcome if job.stop_outcome else ''}, "
                       f"attempt {job.attempt}, {live_count[job.pk]} live pods]"
                       for job in admitted.values() if job.quota_id == quota_id]
            problems.append(f"In Quota usage of {quota.name} above its min: {gpus} GPUs, {cpu} CPU, "
                            f"{memory} GiB; its In Quota jobs: {', '.join(members) or '(in children)'}")
    return problems


def checker(load: Load) -> None:
    """Capacity invariants on consistent snapshots while everything runs."""
    while not load.halt.is_set():
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            problems = capacity_violations()
        if problems:
            load.record("during the load: " + "; ".join(problems))
        time.sleep(0.25)


def fingerprint() -> tuple:
    jobs = tuple(Job.objects.order_by("pk").values_list(
        "pk", "status", "queue_position", "in_quota", "attempt", "nominated_nodes", "waiting_reason"))
    pods = tuple(Pod.objects.order_by("pk").values_list("pk", "status"))
    return jobs, pods, JobEvent.objects.count()


def settled() -> bool:
    """Nothing in flight: no pod starting or exiting, no job between states."""
    in_between = Job.objects.filter(
        status__in=[JobStatus.ENV_PREPARING, JobStatus.STOPPING, JobStatus.RESTARTING])
    exiting = Pod.objects.filter(status__in=LIVE).exclude(job__status=JobStatus.RUNNING)
    return (not in_between.exists() and not exiting.exists()
            and not Pod.objects.filter(status=PodStatus.PENDING).exists()
            and not Job.objects.filter(status=JobStatus.PREEMPTED, stop_outcome=PodOutcome.PREEMPTED).exists())


def wait_until_quiet(load: Load, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    previous, stable = None, 0
    while time.monotonic() < deadline:
        assert not load.errors, "\n".join(load.errors)
        current = fingerprint()
        stable = stable + 1 if current == previous and settled() else 0
        if stable >= 5:
            return
        previous = current
        time.sleep(0.2)
    states = Counter(Job.objects.values_list("status", flat=True))
    raise AssertionError(f"the cluster did not settle ({what}) within {timeout:.0f} s: {dict(states)}")


def never_runnable(job: Job, roles: dict[tuple[int, str], JobRole]) -> bool:
    """Above its quota's max, or (idle mode off) above its quota's min: no empty cluster runs it."""
    demand = [0, Decimal(0), Decimal(0)]
    for (job_id, _), role in roles.items():
        if job_id == job.pk:
            demand[0] += role.gpus * role.pod_count
            demand[1] += role.cpu * role.pod_count
            demand[2] += role.memory_gib * role.pod_count
    quota = job.quota
    above_max = quota.max_gpus is not None and demand[0] > quota.max_gpus.get("A100", 0)
    above_min = demand[0] > quota.min_gpus.get("A100", 0) or demand[1] > quota.min_cpu or (
        demand[2] > quota.min_memory_gib)
    return above_max or (job.idle_mode == IdleMode.OFF and above_min)


def assert_invariants(submitted: list[int], *, pods_may_run: bool, refused: int) -> None:
    problems = capacity_violations()
    assert not problems, "\n".join(problems)

    jobs = {job.pk: job for job in Job.objects.all()}
    assert sorted(jobs) == sorted(submitted), "a submitted job is missing (or an unknown one appeared)"
    assert len(submitted) + refused == SUBMITTERS * JOBS_PER_SUBMITTER and refused < 10
    roles = role_map()
    live = defaultdict(list)
    for pod in Pod.objects.filter(status__in=LIVE):
        live[pod.job_id].append(pod)
    for job in jobs.values():
        label = f"{job.name} ({job.status}, {job.waiting_reason!r})"
        pods = live.get(job.pk, [])
        if job.status == JobStatus.RUNNING:
            assert pods_may_run, label
            expected = sum(role.pod_count for (job_id, _), role in roles.items() if job_id == job.pk)
            attempt = list(Pod.objects.filter(job=job, attempt=job.attempt))
            assert len(attempt) == expected, f"{label}: {len(attempt)} pods for {expected} instances"
            assert pods, label
            assert all(p.attempt == job.attempt and p.status == PodStatus.RUNNING for p in pods), label
            # The rest of the gang ended well: one failed pod would have ended the attempt.
            assert {p.status for p in attempt if p not in pods} <= {PodStatus.SUCCEEDED}, label
            assert not job.stop_outcome and job.in_quota is not None, label
        elif job.status == JobStatus.QUEUING or job.resumes_automatically:  # waiting (DESIGN §3: a
            # preempted job queued again shows Preempted until it runs)
            assert not pods, label
            assert job.waiting_reason, f"queued without a reason: {label}"
            assert job.queue_position, f"queued without a position: {label}"
            assert not job.nominated_nodes, f"still nominated after the victims left: {label}"
        elif job.status == JobStatus.PREEMPTED:  # fault tolerance off: stays Preempted
            assert not pods and job.finished_at, label
        else:
            assert job.status in FINAL and not pods and job.finished_at, label
        if job.is_waiting and not pods_may_run:
            # The cluster is empty now: only a job its quota can never admit may still wait.
            assert never_runnable(job, roles), f"runnable but left waiting on an empty cluster: {label}"
    positions = sorted(job.queue_position for job in jobs.values() if job.is_waiting)
    assert positions == list(range(1, len(positions) + 1)), positions

    names = {job.name for job in jobs.values()}
    quota_names = set(ResourceQuota.objects.values_list("name", flat=True))
    preemptions = JobEvent.objects.filter(kind="preempted")
    for event in preemptions:
        match = RECLAIM.match(event.staff_reason)  # staff's text names the job; members' never does
        assert match, f"a Preempted event names no quota and job: {event.staff_reason!r}"
        assert match["quota"] in quota_names and match["job"] in names, event.staff_reason
        assert event.reason == f"reclaimed for a queued job of quota {match['quota']}", event.reason


@pytest.fixture
def quick_deadlock_detection():
    """PostgreSQL looks for deadlocks after deadlock_timeout (1 s by default) of waiting on a lock:
    shorter, a deadlock costs this test less time. Superuser-only; without it the default stays."""

    def configure(connection, **kwargs) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET deadlock_timeout = '100ms'")
        except DatabaseError:
            pass

    connection_created.connect(configure)
    yield
    connection_created.disconnect(configure)


def test_concurrent_submissions_reports_and_cycles_keep_invariants(
    postgres_db, recording_executor, settings, quick_deadlock_detection
):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 0.05
    settings.TIDEPOOL_RESTART_BACKOFF_CAP = 0.2
    started = time.monotonic()
    for i in range(1, NODES + 1):
        node_register(name=f"gpu-{i:02d}", gpu_type="A100", gpu_count=GPUS, cpu=CPU, memory_gib=MEMORY)
    user = get_user_model().objects.create_user("loader")
    space = Workspace.objects.create(name="load")
    space.members.add(user)
    root = quota_create(name="root", min_gpus={"A100": NODES * GPUS}, min_cpu=NODES * CPU,
                        min_memory_gib=NODES * MEMORY)
    quotas = []
    for name, (gpus, cap) in QUOTAS.items():
        share = Decimal(gpus) / (NODES * GPUS)
        quotas.append(quota_create(
            name=name, parent=root, workspaces=[space], min_gpus={"A100": gpus},
            min_cpu=int(NODES * CPU * share), min_memory_gib=int(NODES * MEMORY * share),
            max_gpus={"A100": cap} if cap else None,
        ))

    load = Load(recording_executor)
    try:
        load.spawn("scheduler", scheduler, load)
        for parity in (0, 1):
            load.spawn(f"node-{parity}", node, load, parity)
        load.spawn("checker", checker, load)
        load.spawn("stopper", stopper, load)
        submitters = []
        for index in range(SUBMITTERS):
            load.spawn(f"submitter-{index}", submitter, load, index, user, space, quotas)
            submitters.append(load.threads[-1])
        for thread in submitters:
            thread.join(60)
            assert not thread.is_alive(), "submissions took too long"
        load.submitting_done.set()
        phases = {"submitted": time.monotonic() - started}
        time.sleep(1.0)  # the cluster keeps churning for a moment with every job in

        # Settle with pods left running: capacity invariants with real occupancy.
        load.random_exits.clear()
        wait_until_quiet(load, 30, "pods left running")
        phases["settled, pods running"] = time.monotonic() - started
        assert not load.errors, "\n".join(load.errors)
        assert Job.objects.filter(status=JobStatus.RUNNING).exists()
        assert_invariants(load.submitted, pods_may_run=True, refused=load.refused)

        # Settle again with every pod finishing: what is left is finished, or queued with a reason.
        load.finish_all.set()
        wait_until_quiet(load, 40, "every pod finishing")
        phases["settled, pods finished"] = time.monotonic() - started
    finally:
        load.halt.set()
        for thread in load.threads:
            thread.join(30)
    assert not [t.name for t in load.threads if t.is_alive()], "a thread did not stop"
    assert not load.errors, "\n".join(load.errors)
    assert not load.deadlocks, dict(load.deadlocks)

    # No change left to make: two more cycles decide nothing.
    before = fingerprint()
    for _ in range(2):
        result = schedule_once()
        assert (result.admitted, result.preempted, result.nominated, result.promoted) == (0, 0, 0, 0)
    assert fingerprint() == before
    assert_invariants(load.submitted, pods_may_run=False, refused=load.refused)

    # The load really exercised the scheduler.
    statuses = Counter(Job.objects.values_list("status", flat=True))
    print(f"load: {dict(statuses)}; {load.stopped} stops; deadlocks retried: {dict(load.deadlocks)}; "
          f"{JobEvent.objects.filter(kind='preempted').count()} preemptions; "
          + ", ".join(f"{name} after {seconds:.1f} s" for name, seconds in phases.items()))
    assert statuses[JobStatus.SUCCEEDED] >= 30 and statuses[JobStatus.FAILED] >= 5, statuses
    assert statuses[JobStatus.STOPPED] == load.stopped >= 5, (statuses, load.stopped)  # every accepted stop
    assert JobEvent.objects.filter(kind="preempted").exists(), "no reclaim happened under load"
    assert JobEvent.objects.filter(kind="restarting").exists()
    borrowed = JobEvent.objects.filter(kind="admitted", reason__contains="Not in Quota")
    assert borrowed.exists(), "no job ran on idle resources"
    assert time.monotonic() - started < 90

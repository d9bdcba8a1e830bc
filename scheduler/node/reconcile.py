"""Level-triggered pods: the database is the truth, the node converges on it.

`reconcile(agent, nodes)` compares the live pods the database assigns to `nodes` with what the
agent's supervisor runs, and acts:

| database | here | action |
|---|---|---|
| Pending, its job runs this attempt | not running, never ran | start it |
| Pending | running | report it Running (the first report was lost) |
| live, terminate requested / job moved on | running, not terminating | SIGTERM, grace, SIGKILL |
| live, terminate requested / job moved on | not running | report it gone (fenced: a late start is refused) |
| live | exited (in this process, or an exit file) | report the exit (the first report was lost) |
| Running | no process, no exit anywhere | Failed: gone without an exit status |
| not live (or not on these nodes) | running | stop it at once (the database ended it) |

A node worker reconciles every TIDEPOOL_RECONCILE_SECONDS and whenever a start task or a
terminate command arrives (those are hints: a lost one only delays); the embedded executor does
the same for its nodes. Every action is idempotent: starts are fenced by attempt in the
supervisor, reports by attempt and state in the services.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from django.db import close_old_connections

from scheduler.models import Pod
from scheduler.node.agent import PodAgent
from scheduler.node.db import replace_connection, retrying_once
from scheduler.node.orphans import exit_from_file
from scheduler.node.specs import master_address
from scheduler.services.lifecycle import grace_seconds, pod_exited, pod_running
from scheduler.states import LIVE_POD_STATUSES, STARTED_JOB_STATUSES, PodOutcome, PodStatus

log = logging.getLogger("tidepool.reconcile")


def _wanted(pod: Pod) -> bool:
    job = pod.job
    return job.attempt == pod.attempt and job.status in STARTED_JOB_STATUSES and not pod.terminate_requested


def reconcile(agent: PodAgent, node_names: list[str]) -> dict[str, int]:
    """One pass over the live pods of `node_names`. Returns counts per action.

    Long because it is the table above, one branch per row, kept in one place to read.
    """
    close_old_connections()
    query = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__name__in=node_names).select_related(
        "job", "job__workspace", "node")
    pods = list(query)
    running = {(r.pod_id, r.attempt): r for r in agent.supervisor.running()}  # read after the database
    counts: dict[str, int] = defaultdict(int)
    by_attempt: dict[tuple[int, int], list[Pod]] = defaultdict(list)
    for pod in pods:
        by_attempt[(pod.job_id, pod.attempt)].append(pod)
    for pod in pods:
        key = (pod.pk, pod.attempt)
        job = pod.job
        here = running.get(key)
        if here is not None:
            if not _wanted(pod) and here.terminating is None:
                agent.terminate(pod.pk, pod.attempt, grace_s=grace_seconds(job),
                                outcome=pod.terminate_requested or PodOutcome.STOPPED)
                counts["terminated"] += 1
            elif pod.status == PodStatus.PENDING and pod_running(pod_id=pod.pk, attempt=pod.attempt, pid=here.pid):
                counts["reported_running"] += 1
            continue
        if _report_known_exit(agent, pod):
            counts["reported_exit"] += 1
        elif not _wanted(pod):
            agent.terminate(pod.pk, pod.attempt, grace_s=grace_seconds(job),
                            outcome=pod.terminate_requested or PodOutcome.STOPPED)
            counts["fenced"] += 1
        elif pod.status == PodStatus.PENDING:
            siblings = by_attempt[(pod.job_id, pod.attempt)]
            everyone = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=pod.attempt))
            agent.start(job, pod, world_size=len(everyone) or len(siblings), master_addr=master_address(everyone))
            counts["started"] += 1
        elif agent.supervisor.wait(pod.pk, pod.attempt, 0) is None and key not in {
            (r.pod_id, r.attempt) for r in agent.supervisor.running()
        }:
            pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=None, outcome=PodOutcome.FAILED,
                       reason="the pod's process is gone without an exit status")
            counts["gone"] += 1
    _stop_unwanted(agent, running, {(pod.pk, pod.attempt) for pod in pods})
    close_old_connections()
    return dict(counts)


def _report_known_exit(agent: PodAgent, pod: Pod) -> bool:
    """An exit this process saw (its report may have failed) or the pod's exit file recorded."""
    seen = agent.supervisor.wait(pod.pk, pod.attempt, 0)
    if seen is not None:
        reason = f"killed by signal {-seen.exit_code}" if seen.exit_code < 0 else f"exit code {seen.exit_code}"
        agent.report_exit(pod.pk, pod.attempt, seen.exit_code, seen.outcome, reason)
        return True
    from_file = exit_from_file(pod)
    if from_file is None:
        return False
    if agent.supervisor.wait(pod.pk, pod.attempt, 0) is None and any(
        (r.pod_id, r.attempt) == (pod.pk, pod.attempt) for r in agent.supervisor.running()
    ):
        return False  # it is exiting here right now: the supervisor reports it
    code, outcome = from_file
    agent.report_exit(pod.pk, pod.attempt, code, outcome, f"exit code {code} (read back from its exit file)")
    return True


def _stop_unwanted(agent: PodAgent, running: dict, live_keys: set[tuple[int, int]]) -> None:
    """Pods running here that the database no longer calls live: stop them (after re-checking,
    since a start may have raced with the read above)."""
    candidates = [key for key, r in running.items() if key not in live_keys and r.terminating is None]
    if not candidates:
        return
    still_live = set(
        Pod.objects.filter(pk__in=[pod_id for pod_id, _ in candidates], status__in=LIVE_POD_STATUSES)
        .values_list("pk", "attempt")
    )
    for pod_id, attempt in candidates:
        if (pod_id, attempt) not in still_live:
            log.warning("pod %s attempt %s runs here but the database ended it: stopping it", pod_id, attempt)
            agent.terminate(pod_id, attempt, grace_s=0, outcome=PodOutcome.STOPPED)


class ReconcileLoop:
    """Runs `reconcile` every `period_s` and whenever `wake()` is called, on a daemon thread."""

    def __init__(self, agent: PodAgent, node_names: Callable[[], list[str]], period_s: float) -> None:
        self.agent, self._node_names, self.period_s = agent, node_names, period_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidepool-reconcile", daemon=True)

    def start(self) -> ReconcileLoop:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.period_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:  # a connection the database closed is replaced, not reused (db.py)
                counts = retrying_once("reconcile", lambda: reconcile(self.agent, self._node_names()))
                if counts:
                    log.info("reconciled: %s", counts)
            except Exception:
                log.exception("reconcile failed; next try in %.0f s", self.period_s)
                replace_connection()

"""The node side shared by both executors: runs pods through a PodSupervisor and reports to the services.

The local executor owns one agent for all demo nodes; a Celery node worker owns one for its node.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict

from django.db import close_old_connections

from scheduler.models import Job, Pod
from scheduler.node.exit_hints import WorkPlace, exit_hint, read_log_tail, reason_with_hint
from scheduler.node.image_waits import image_retry_delay, pod_image_here, pod_waits_for_image
from scheduler.node.runtime.process import TerminateResult
from scheduler.node.runtime.progress import read_progress
from scheduler.node.runtime.pulls import ImageUnavailable
from scheduler.node.runtimes import image_puller, pod_supervisor
from scheduler.node.specs import master_address, pod_progress_path, pod_spec
from scheduler.node.workplace import prepare_workplace
from scheduler.services.lifecycle import job_progress, pod_exited, pod_never_started, pod_running
from scheduler.states import PodOutcome

log = logging.getLogger("tidepool.agent")

PROGRESS_POLL_S = 2.0


class PodAgent:
    def __init__(self, progress_poll_s: float = PROGRESS_POLL_S) -> None:
        self.supervisor = pod_supervisor(on_exit=self._exited)  # TIDEPOOL_POD_RUNTIME
        self.images = image_puller()  # None for host pods
        # (pod, attempt) -> (consecutive failures, the last cause, monotonic time of the next try)
        self._image_waits: dict[tuple[int, int], tuple[int, str, float]] = {}
        self._progress: dict[tuple[int, int], tuple[int, str]] = {}  # (pod, attempt) -> (job id, file)
        self._lock = threading.Lock()
        self._unreported: set[tuple[int, int]] = set()  # started here, exit not yet written
        self._places: dict[tuple[int, int], tuple[str, WorkPlace]] = {}  # (pod, attempt) -> (log, where it ran)
        self._all_reported = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._poll_s = progress_poll_s
        self._watcher = threading.Thread(target=self._watch_progress, name="tidepool-progress", daemon=True)
        self._watcher.start()

    def start(self, job: Job, pod: Pod, *, world_size: int, master_addr: str) -> None:
        """Launch one pod and report it Running (or Failed if it cannot start)."""
        key = (pod.pk, pod.attempt)
        with self._lock:
            waiting = self._image_waits.get(key)
        if waiting is not None and time.monotonic() < waiting[2]:
            return  # its image could not be had: the next try is not due yet
        try:
            spec = pod_spec(pod, job, world_size=world_size, master_addr=master_addr)
            if self.images is not None:
                spec = self.images.prepare(spec)  # the image here (pulled if it may be), by the name it has here
            place = prepare_workplace(job, pod, spec)
            with self._lock:  # before the start: a command that fails at once is reported with its hint
                self._places.setdefault(key, (spec.log_path, place))
            started = self.supervisor.start(spec)
        except RuntimeError:  # shut down: the pod stays Pending for whoever runs the node next
            self._forget_place(key)
            return
        except ImageUnavailable as error:  # stays Pending with the reason, tried again later: not a failure
            self._forget_place(key)
            self._image_unavailable(pod, str(error), waiting)
            return
        except OSError as error:  # never started: the job is requeued, no restart used
            self._forget_place(key)
            log.warning("pod %s attempt %s could not start: %s", pod.pk, pod.attempt, error)
            pod_never_started(pod_id=pod.pk, attempt=pod.attempt, reason=f"could not start: {error}")
            return
        if waiting is not None or self.images is not None:
            with self._lock:
                self._image_waits.pop(key, None)
            pod_image_here(pod_id=pod.pk, attempt=pod.attempt, image=spec.image)
        if not started:
            self._forget_place(key)
            return
        with self._lock:
            self._unreported.add(key)
            if pod.rank == 0:
                self._progress[key] = (job.pk, str(pod_progress_path(pod)))
        pid = next((r.pid for r in self.supervisor.running() if (r.pod_id, r.attempt) == (pod.pk, pod.attempt)), None)
        pod_running(pod_id=pod.pk, attempt=pod.attempt, pid=pid)

    def adopt(self, job: Job, pod: Pod, *, world_size: int, master_addr: str) -> bool:
        """Take over this pod where a previous agent of the node left it running (runtime/adoption.py):
        its exit and progress are reported from here on. False: no such pod runs here."""
        try:
            adopted = self.supervisor.adopt(pod_spec(pod, job, world_size=world_size, master_addr=master_addr))
        except (OSError, RuntimeError) as error:
            log.warning("pod %s attempt %s could not be adopted: %s", pod.pk, pod.attempt, error)
            return False
        if adopted:
            with self._lock:
                self._unreported.add((pod.pk, pod.attempt))
                if pod.rank == 0:
                    self._progress[(pod.pk, pod.attempt)] = (job.pk, str(pod_progress_path(pod)))
        return adopted

    def detach(self) -> None:
        """Stop reporting and starting pods but leave them running, for the next agent of the node
        to adopt (an agent restart or upgrade: docs/operations.md)."""
        self._stop.set()
        self.supervisor.detach()

    def _image_unavailable(self, pod: Pod, cause: str, waiting: tuple[int, str, float] | None) -> None:
        failures = (waiting[0] if waiting else 0) + 1
        delay = image_retry_delay(failures)
        with self._lock:
            self._image_waits[(pod.pk, pod.attempt)] = (failures, cause, time.monotonic() + delay)
        log.warning("pod %s attempt %s waits for its image (try %s, next in %.0f s): %s",
                    pod.pk, pod.attempt, failures, delay, cause)
        if not pod_waits_for_image(pod_id=pod.pk, attempt=pod.attempt, cause=cause, retry_in_s=delay,
                                   new_cause=waiting is None or waiting[1] != cause):
            with self._lock:  # the pod moved on (stopped, superseded): nothing to retry
                self._image_waits.pop((pod.pk, pod.attempt), None)

    def _forget_place(self, key: tuple[int, int]) -> None:
        """Not started by this call; a start of the same attempt that did run keeps its place."""
        with self._lock:
            if key not in self._unreported:
                self._places.pop(key, None)

    def start_job_pods(self, job: Job, pods: list[Pod]) -> None:
        master = master_address(pods)
        for pod in pods:
            self.start(job, pod, world_size=len(pods), master_addr=master)

    def terminate(self, pod_id: int, attempt: int, *, grace_s: float, outcome: str) -> None:
        with self._lock:
            self._image_waits.pop((pod_id, attempt), None)
        result = self.supervisor.terminate(pod_id, attempt, grace_s, outcome)
        if result == TerminateResult.NOT_STARTED:
            # Never started here (its start is still queued, or went to a dead worker): it is
            # fenced now, so report it gone ourselves.
            pod_exited(pod_id=pod_id, attempt=attempt, exit_code=None, outcome=outcome,
                       reason=f"{outcome} before it started")

    def report_exit(self, pod_id: int, attempt: int, exit_code: int | None, outcome: str, reason: str) -> bool:
        """Write an exit the supervisor did not report (a predecessor's pod, a lost report)."""
        return pod_exited(pod_id=pod_id, attempt=attempt, exit_code=exit_code, outcome=outcome, reason=reason)

    def _exited(self, pod_id: int, attempt: int, exit_code: int, outcome: str) -> None:
        with self._lock:
            tracked = self._progress.pop((pod_id, attempt), None)
            placed = self._places.pop((pod_id, attempt), None)
        try:
            close_old_connections()
            if tracked:  # the last report, e.g. the checkpoint saved on SIGTERM
                self._relay_progress(tracked[0], attempt, tracked[1])
            reason = f"killed by signal {-exit_code}" if exit_code < 0 else f"exit code {exit_code}"
            seen = self.supervisor.wait(pod_id, attempt, 0)
            if seen is not None and seen.reason:  # the runtime knows better: "out of memory (limit 4 GiB)"
                reason = seen.reason
            elif outcome == PodOutcome.FAILED and placed is not None:  # "can't open file": where it ran, what to do
                reason = reason_with_hint(reason, exit_hint(exit_code, read_log_tail(placed[0]), placed[1]))
            pod_exited(pod_id=pod_id, attempt=attempt, exit_code=exit_code, outcome=outcome, reason=reason)
        except Exception:
            log.exception("could not record the exit of pod %s attempt %s", pod_id, attempt)
        finally:
            close_old_connections()
            with self._lock:
                self._unreported.discard((pod_id, attempt))
                self._all_reported.notify_all()

    @staticmethod
    def _relay_progress(job_id: int, attempt: int, path: str) -> None:
        progress = read_progress(path)
        if progress:
            job_progress(job_id=job_id, attempt=attempt, progress=asdict(progress))

    def _watch_progress(self) -> None:
        while not self._stop.wait(self._poll_s):
            with self._lock:
                tracked = list(self._progress.items())
            for (_pod_id, attempt), (job_id, path) in tracked:
                try:
                    self._relay_progress(job_id, attempt, path)
                except Exception:
                    log.exception("progress report of job %s failed", job_id)
            close_old_connections()

    def shutdown(self, grace_s: float, outcome: str = PodOutcome.PREEMPTED, report_timeout_s: float = 15.0) -> None:
        """Terminate every pod, wait for them to exit, then for their exits to be written."""
        self._stop.set()
        self.supervisor.shutdown(grace_s, outcome)
        with self._lock:
            self._all_reported.wait_for(lambda: not self._unreported, timeout=report_timeout_s)

"""Every state a job or pod can be in, the groups of states, event kinds and pod outcomes: one home.

Pure Python (no Django), so the pod runtime and the simulator use the same words as the models,
services, selectors, console and API. The values are what the database stores and the API serves;
`choices()` gives a model field its choices.

- `JobStatus`: PAI's job states (DESIGN §3).
- `PodStatus`: a pod's state.
- `PodOutcome`: how a pod process ended, as the runtime reports it and as `Pod.terminate_requested`
  records why it was asked to stop.
- `EventKind`: the kind of a job event (one per transition).
- The status groups below name every set of states that the code filters on.
- `JOB_TRANSITIONS` / `POD_TRANSITIONS`: every status change the services make (DESIGN §3);
  `check_job_transition` / `check_pod_transition` refuse any other (`Job.move_to`, `Pod.move_to`).
- `PreemptedPhase` and the predicates below it: one function per question the code asks of a job's
  state (waiting, resumes automatically, stays Preempted, holds its GPUs, may be stopped or
  restarted); models, selectors, the loop and the simulator call them instead of their own copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class JobStatus(StrEnum):
    CREATING = "Creating"
    QUEUING = "Queuing"
    ENV_PREPARING = "EnvPreparing"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    PREEMPTED = "Preempted"
    RESTARTING = "Restarting"

    @property
    def label(self) -> str:
        return _JOB_LABELS.get(self, self.value)


_JOB_LABELS = {JobStatus.ENV_PREPARING: "Env Preparing"}


class PodStatus(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    PREEMPTED = "Preempted"
    STOPPED = "Stopped"

    @property
    def label(self) -> str:
        return self.value


class PodOutcome(StrEnum):
    """How a pod ended (runtime → services), and why one was asked to stop (`terminate_requested`)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"  # its capacity was taken back (reclaim, drain, shutdown): not a failure
    STOPPED = "stopped"  # a person stopped it, or its maximum running time passed
    NOT_STARTED = "not-started"  # a pod of the attempt never started: the job is requeued (Job.stop_outcome)
    SHRUNK = "shrunk"  # §2c: an extra pod of an elastic job reclaimed; the job keeps running (not a failure)


POD_STATUS_OF_OUTCOME = {
    PodOutcome.SUCCEEDED: PodStatus.SUCCEEDED,
    PodOutcome.FAILED: PodStatus.FAILED,
    PodOutcome.PREEMPTED: PodStatus.PREEMPTED,
    PodOutcome.STOPPED: PodStatus.STOPPED,
    PodOutcome.SHRUNK: PodStatus.PREEMPTED,
}


class EventKind(StrEnum):
    SUBMITTED = "submitted"
    QUEUED = "queued"
    NOMINATED = "nominated"
    ADMITTED = "admitted"
    RUNNING = "running"
    RESUMED = "resumed"  # progress reported a resume from a checkpoint
    PROMOTED = "promoted"
    DEMOTED = "demoted"  # preempt_within: moved to idle resources by a higher-priority job of its quota
    PREEMPTED = "preempted"
    STOPPING = "stopping"
    STOPPED = "stopped"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    POD_FAILED = "pod-failed"
    ATTEMPT_FAILED = "attempt-failed"  # a pod failed, a node was lost or the job hung
    RESTARTING = "restarting"  # automatic restart after a backoff
    NOT_RESTARTED = "not-restarted"  # stays Preempted: fault tolerance off or no restarts left
    NODE_LOST = "node-lost"  # its node stopped heartbeating: its pods there failed (or never started)
    SHRUNK = "shrunk"  # §2c: extra pods reclaimed; the job keeps running (neither a preemption nor a failure)
    GREW = "grew"  # §2c: extra pods placed on idle resources
    IMAGE_WAIT = "image-wait"  # a pod waits for its image (unknown, pull refused): Pending, retried; not a failure


JOB_STATUS_VALUES = frozenset(status.value for status in JobStatus)

# Job status groups.
ACTIVE_JOB_STATUSES = (
    JobStatus.CREATING,
    JobStatus.QUEUING,
    JobStatus.ENV_PREPARING,
    JobStatus.RUNNING,
    JobStatus.STOPPING,
    JobStatus.PREEMPTED,
    JobStatus.RESTARTING,
)
FINAL_JOB_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
PENDING_JOB_STATUSES = (JobStatus.CREATING, JobStatus.QUEUING, JobStatus.RESTARTING)
STARTED_JOB_STATUSES = (JobStatus.ENV_PREPARING, JobStatus.RUNNING)  # admitted, pods placed
# What one scheduling cycle looks at: queued jobs and every job that may still hold pods.
SCHEDULABLE_JOB_STATUSES = (
    JobStatus.QUEUING,
    JobStatus.ENV_PREPARING,
    JobStatus.RUNNING,
    JobStatus.PREEMPTED,
    JobStatus.STOPPING,
    JobStatus.RESTARTING,
)

# Pod status groups.
LIVE_POD_STATUSES = (PodStatus.PENDING, PodStatus.RUNNING)


# -- Transitions (DESIGN §3): every status change the services make, and no other. A new job is
# written Queuing (`job_submit`); a pod is written Pending. Creation is no transition.
_STOPPABLE = (JobStatus.STOPPING, JobStatus.STOPPED)  # a person's stop, or the maximum running time
JOB_TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = {
    JobStatus.CREATING: frozenset({JobStatus.QUEUING, *_STOPPABLE}),
    # Admitted; or stopped while waiting.
    JobStatus.QUEUING: frozenset({JobStatus.ENV_PREPARING, *_STOPPABLE}),
    # All pods running; preempted; stopped; pods ended (settled); a pod never started (requeued).
    JobStatus.ENV_PREPARING: frozenset({
        JobStatus.RUNNING, JobStatus.PREEMPTED, *_STOPPABLE, JobStatus.SUCCEEDED, JobStatus.FAILED,
        JobStatus.RESTARTING, JobStatus.QUEUING,
    }),
    JobStatus.RUNNING: frozenset({
        JobStatus.PREEMPTED, *_STOPPABLE, JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.RESTARTING,
        JobStatus.QUEUING,
    }),
    JobStatus.STOPPING: frozenset({JobStatus.STOPPED}),
    # Requeued and admitted again (it shows Preempted until then); stopped; a held one restarted.
    # Its phases (exiting → requeued or held) change no status.
    JobStatus.PREEMPTED: frozenset({JobStatus.ENV_PREPARING, *_STOPPABLE, JobStatus.QUEUING}),
    # The backoff passed; or stopped during it.
    JobStatus.RESTARTING: frozenset({JobStatus.QUEUING, *_STOPPABLE}),
    # A person restarts a finished job.
    JobStatus.SUCCEEDED: frozenset({JobStatus.QUEUING}),
    JobStatus.FAILED: frozenset({JobStatus.QUEUING}),
    JobStatus.STOPPED: frozenset({JobStatus.QUEUING}),
}
_POD_ENDS = frozenset(POD_STATUS_OF_OUTCOME.values())
POD_TRANSITIONS: Mapping[PodStatus, frozenset[PodStatus]] = {
    # Its process started; or it ended before (exited, its node was lost, it never started: Stopped).
    PodStatus.PENDING: frozenset({PodStatus.RUNNING, *_POD_ENDS}),
    PodStatus.RUNNING: _POD_ENDS,
    **{end: frozenset() for end in _POD_ENDS},
}


class IllegalTransition(ValueError):
    """A status change that DESIGN §3 does not have: a bug in the caller, never a user's error."""


def _check(table: Mapping, kind: str, enum: type[StrEnum], old: str, new: str) -> None:
    try:
        old_state, new_state = enum(old), enum(new)
    except ValueError as error:
        raise IllegalTransition(f"{kind} status {error}; the statuses are {', '.join(enum)}") from error
    allowed = table[old_state]
    if new_state not in allowed:
        onward = ", ".join(sorted(allowed)) if allowed else "nothing (it is final)"
        raise IllegalTransition(
            f"a {kind} cannot go from {old_state} to {new_state}: from {old_state} it goes only to {onward} "
            f"(scheduler/states.py, DESIGN §3)"
        )


def check_job_transition(old: str, new: str) -> None:
    """Raise IllegalTransition unless a job may go from status `old` to `new`."""
    _check(JOB_TRANSITIONS, "job", JobStatus, old, new)


def check_pod_transition(old: str, new: str) -> None:
    """Raise IllegalTransition unless a pod may go from status `old` to `new`."""
    _check(POD_TRANSITIONS, "pod", PodStatus, old, new)


# -- Questions asked of a job's state. Preempted covers three moments (DESIGN §3), told apart by
# the job's `stop_outcome` and whether `finished_at` is set: its pods still exiting; queued again
# to resume (fault tolerance on); held until a person restarts it (off).


class PreemptedPhase(StrEnum):
    EXITING = "exiting"  # stop_outcome "preempted": its pods have SIGTERM and the grace period
    REQUEUED = "requeued"  # stop_outcome "", not finished: waits like a pending job, shows Preempted
    HELD = "held"  # stop_outcome "", finished: over until a person restarts it


# The Job fields of a requeued Preempted job, for a query (models.core.RESUMES_AUTOMATICALLY).
REQUEUED_FIELDS = {"status": JobStatus.PREEMPTED, "stop_outcome": "", "finished": False}

RESUMES_AUTOMATICALLY = "resumes automatically"  # what members read next to a requeued Preempted job


def preempted_phase(status: str, stop_outcome: str, *, finished: bool) -> PreemptedPhase | None:
    """Which Preempted moment the job is in; None when it is not Preempted."""
    if status != JobStatus.PREEMPTED:
        return None
    if stop_outcome == PodOutcome.PREEMPTED:
        return PreemptedPhase.EXITING
    if stop_outcome:
        return None  # no service writes another outcome on a Preempted job
    return PreemptedPhase.HELD if finished else PreemptedPhase.REQUEUED


def phase_after_preemption(*, fault_tolerance: bool) -> PreemptedPhase:
    """Once a preempted job's pods have exited: queued again at once, keeping its first queue time,
    no backoff and no restart used (fault tolerance on); else held."""
    return PreemptedPhase.REQUEUED if fault_tolerance else PreemptedPhase.HELD


def is_active(status: str) -> bool:
    """Not finished: the job list's "active" group."""
    return status in ACTIVE_JOB_STATUSES


def is_started(status: str) -> bool:
    """Admitted and its pods placed: EnvPreparing or Running (the attempt runs or is starting)."""
    return status in STARTED_JOB_STATUSES


def is_final(status: str) -> bool:
    """Succeeded, Failed or Stopped (a held Preempted job is over too, but not final: see `can_restart`)."""
    return status in FINAL_JOB_STATUSES


def resumes_automatically(status: str, stop_outcome: str, *, finished: bool) -> bool:
    """Preempted and queued again: the scheduler treats it as pending; it shows Preempted until it runs."""
    return preempted_phase(status, stop_outcome, finished=finished) is PreemptedPhase.REQUEUED


def stays_preempted(status: str, stop_outcome: str, *, finished: bool) -> bool:
    """Preempted with fault tolerance off: nothing happens until a person restarts it."""
    return preempted_phase(status, stop_outcome, finished=finished) is PreemptedPhase.HELD


def preempted_exiting(status: str, stop_outcome: str) -> bool:
    """Preempted, its pods still exiting: they hold their GPUs until they have."""
    return status == JobStatus.PREEMPTED and stop_outcome == PodOutcome.PREEMPTED


def is_waiting(status: str, stop_outcome: str, *, finished: bool) -> bool:
    """In the queue: pending, or Preempted and queued again to resume."""
    return status in PENDING_JOB_STATUSES or resumes_automatically(status, stop_outcome, finished=finished)


def holds_capacity(status: str, stop_outcome: str) -> bool:
    """The current attempt holds (or is releasing) GPUs: its pods were placed and it settles once they
    have all exited (Succeeded, Stopped, Restarting, Failed or Preempted's next phase)."""
    return status in (*STARTED_JOB_STATUSES, JobStatus.STOPPING) or preempted_exiting(status, stop_outcome)


def can_stop(status: str, stop_outcome: str, *, finished: bool) -> bool:
    """A person may stop a job that has not finished and is not stopping already. A held Preempted
    job is over until restarted: it offers Restart, not Stop."""
    return (status not in (*FINAL_JOB_STATUSES, JobStatus.STOPPING)
            and not stays_preempted(status, stop_outcome, finished=finished))


def can_restart(status: str, stop_outcome: str, *, finished: bool) -> bool:
    """A finished job, or a held Preempted one, may run again (once its pods have all exited)."""
    return status in FINAL_JOB_STATUSES or stays_preempted(status, stop_outcome, finished=finished)


def choices(states: type[StrEnum]) -> list[tuple[str, str]]:
    """A model field's choices: (stored value, label)."""
    return [(state.value, state.label) for state in states]

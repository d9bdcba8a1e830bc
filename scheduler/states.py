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
"""

from __future__ import annotations

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


POD_STATUS_OF_OUTCOME = {
    PodOutcome.SUCCEEDED: PodStatus.SUCCEEDED,
    PodOutcome.FAILED: PodStatus.FAILED,
    PodOutcome.PREEMPTED: PodStatus.PREEMPTED,
    PodOutcome.STOPPED: PodStatus.STOPPED,
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


def choices(states: type[StrEnum]) -> list[tuple[str, str]]:
    """A model field's choices: (stored value, label)."""
    return [(state.value, state.label) for state in states]

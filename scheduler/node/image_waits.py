"""A pod whose image cannot be had stays Pending with the reason (DESIGN §3): not a failure.

The node agent retries its start with a backoff (agent.py); each try's outcome is the pod's reason
("waiting for its image: …; next try in 40 s"), and a new cause is one event on the job's page,
not one per retry.
"""

from __future__ import annotations

from django.db import transaction

from scheduler.models import Pod
from scheduler.publish import publish_jobs_changed_on_commit
from scheduler.services.events import job_event
from scheduler.states import EventKind, PodStatus

IMAGE_RETRY_BASE_S = 5.0
IMAGE_RETRY_CAP_S = 300.0


def image_retry_delay(failures: int) -> float:
    """Seconds before the next try after `failures` consecutive ones: 5, 10, 20, … up to 5 min."""
    return min(IMAGE_RETRY_CAP_S, IMAGE_RETRY_BASE_S * 2 ** max(0, failures - 1))


@transaction.atomic
def pod_waits_for_image(*, pod_id: int, attempt: int, cause: str, retry_in_s: float, new_cause: bool) -> bool:
    """Record on a Pending pod why its image is not here; False when the pod moved on (stale)."""
    pod = Pod.objects.select_related("job").filter(pk=pod_id, attempt=attempt, status=PodStatus.PENDING).first()
    if pod is None:
        return False
    reason = f"waiting for its image: {cause}; next try in {retry_in_s:.0f} s"
    if len(reason) > 300:  # Pod.reason's column: keep the retry's time, cut the cause
        reason = f"waiting for its image: {cause[:300 - 60]}…; next try in {retry_in_s:.0f} s"
    Pod.objects.filter(pk=pod.pk, attempt=attempt, status=PodStatus.PENDING).update(reason=reason)
    if new_cause:
        job_event(pod.job, EventKind.IMAGE_WAIT,
                  f"pod {pod.role}-{pod.index} waits for its image ({cause}); retried with backoff, not a failure"[:500])
    publish_jobs_changed_on_commit([(pod.job_id, pod.job.workspace_id)])
    return True


def pod_image_here(*, pod_id: int, attempt: int, image: str) -> None:
    """The pod is starting with `image` (as this node names it; "" for a host pod): any waiting
    reason goes, and the job page shows the image."""
    Pod.objects.filter(pk=pod_id, attempt=attempt, status=PodStatus.PENDING).update(reason="", image=image[:255])

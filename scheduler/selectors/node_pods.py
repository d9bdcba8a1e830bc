"""What a node may see of the database, as its key's node (DESIGN §6), for the node API.

`node_pod` is the node API's one authorisation check: every request of a node about a pod (a
report, a log window) names the pod and its attempt, and is served only when the database places
that pod, at that attempt, on the node whose key made the request. A key stolen from node A is
refused for node B's pods, whatever it sends.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from scheduler.models import Pod
from scheduler.states import LIVE_POD_STATUSES

# Pods that ended (in the database) this recently may still have a process on the node: an agent
# that starts is told of them, adopts any it finds still running and stops it (fenced).
RECENTLY_ENDED = timedelta(days=1)


class NotThisNodesPod(Exception):
    """The pod is not placed on the asking node at that attempt (or does not exist): refused."""


def node_pod(*, node_name: str, pod_id: int, attempt: int) -> Pod:
    """The pod `pod_id` at `attempt`, when the database places it on `node_name`; else NotThisNodesPod.

    The same refusal whether the pod is another node's, another attempt's or unknown, so a node
    learns nothing of pods that are not its own.
    """
    pod = Pod.objects.select_related("job", "job__workspace", "node").filter(pk=pod_id).first()
    if pod is None or pod.node is None or pod.node.name != node_name or pod.attempt != attempt:
        raise NotThisNodesPod(f"pod {pod_id} attempt {attempt} is not placed on node {node_name}")
    return pod


def node_pods(*, node_name: str, recently_ended: bool = False) -> list[Pod]:
    """The live pods the database places on `node_name` (and, with `recently_ended`, those that
    ended there in the last day), with their jobs and roles (their run specs need them), oldest first."""
    which = Q(status__in=LIVE_POD_STATUSES)
    if recently_ended:
        which |= Q(finished_at__gte=timezone.now() - RECENTLY_ENDED)
    return list(Pod.objects.filter(which, node__name=node_name)
                .select_related("job", "job__workspace", "node").prefetch_related("job__roles").order_by("pk"))


def attempt_pods(pods: list[Pod]) -> dict[tuple[int, int], list[Pod]]:
    """Every pod of each of these pods' job attempts, with its node (for the world size and rank 0's
    address), by (job id, attempt): one query however many pods a node runs (agents ask every poll)."""
    wanted = {(pod.job_id, pod.attempt) for pod in pods}
    by_attempt: dict[tuple[int, int], list[Pod]] = {key: [] for key in wanted}
    for sibling in Pod.objects.select_related("node").filter(
            job_id__in={job_id for job_id, _ in wanted}).order_by("pk"):
        if (sibling.job_id, sibling.attempt) in wanted:
            by_attempt[(sibling.job_id, sibling.attempt)].append(sibling)
    return by_attempt

"""What a node's report does: the one authorisation check (selectors/node_pods.node_pod), then the
service that applies it, in the control plane's process (the node holds no database credentials).

| event | fields | applied by |
|---|---|---|
| running | pid | services.lifecycle.pod_running |
| exited | exit_code, outcome, reason | services.lifecycle.pod_exited |
| never_started | reason | services.lifecycle.pod_never_started |
| progress | progress (the pod's progress file, as JSON) | services.lifecycle.job_progress |
| image_wait | cause, retry_in_s, new_cause | node.image_waits.pod_waits_for_image |
| image_here | image | node.image_waits.pod_image_here |

A report for a pod that moved on (a later attempt, already ended) is accepted and changes nothing
(`applied: false`): the services fence by attempt and state, as for every node.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rest_framework import serializers

from scheduler.node.image_waits import pod_image_here, pod_waits_for_image
from scheduler.node.runtime.progress import progress_from
from scheduler.selectors.node_pods import node_pod
from scheduler.services.lifecycle import job_progress, pod_exited, pod_never_started, pod_running
from scheduler.states import POD_STATUS_OF_OUTCOME

EVENTS = ("running", "exited", "never_started", "progress", "image_wait", "image_here")
REASON_CHARS = 300  # Pod.reason's column


class PodReportSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    event = serializers.ChoiceField(choices=EVENTS)
    pid = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=2**31 - 1)
    exit_code = serializers.IntegerField(required=False, allow_null=True, min_value=-255, max_value=255)
    outcome = serializers.ChoiceField(choices=[str(o) for o in POD_STATUS_OF_OUTCOME], required=False)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    progress = serializers.JSONField(required=False)
    cause = serializers.CharField(required=False, max_length=2000)
    retry_in_s = serializers.FloatField(required=False, min_value=0, max_value=86400)
    new_cause = serializers.BooleanField(required=False, default=True)
    image = serializers.CharField(required=False, allow_blank=True, max_length=255)

    REQUIRED = {"exited": ("outcome",), "never_started": ("reason",), "progress": ("progress",),
                "image_wait": ("cause", "retry_in_s"), "image_here": ("image",)}

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        missing = [name for name in self.REQUIRED.get(data["event"], ()) if name not in data]
        if missing:
            raise serializers.ValidationError({name: f"A {data['event']} report needs {name}." for name in missing})
        if data["event"] == "progress":
            progress = progress_from(data["progress"])
            if progress is None:
                raise serializers.ValidationError({"progress": "Not a progress report: an object with a "
                                                               "non-negative integer step."})
            data["progress"] = asdict(progress)
        return data


def pod_report_apply(*, node_name: str, pod_id: int, report: dict[str, Any]) -> bool:
    """Apply one validated report of node `node_name` about pod `pod_id`. Raises NotThisNodesPod
    (nothing changes) unless the database places that pod, at the report's attempt, on that node.
    Returns whether it changed anything (False: stale, fenced)."""
    attempt = report["attempt"]
    pod = node_pod(node_name=node_name, pod_id=pod_id, attempt=attempt)
    reason = (report.get("reason") or "")[:REASON_CHARS]
    match report["event"]:
        case "running":
            return pod_running(pod_id=pod.pk, attempt=attempt, pid=report.get("pid"))
        case "exited":
            return pod_exited(pod_id=pod.pk, attempt=attempt, exit_code=report.get("exit_code"),
                              outcome=report["outcome"], reason=reason)
        case "never_started":
            return pod_never_started(pod_id=pod.pk, attempt=attempt, reason=reason)
        case "progress":
            job_progress(job_id=pod.job_id, attempt=attempt, progress=report["progress"])
            return True
        case "image_wait":
            return pod_waits_for_image(pod_id=pod.pk, attempt=attempt, cause=report["cause"][:REASON_CHARS],
                                       retry_in_s=report["retry_in_s"], new_cause=report["new_cause"])
        case "image_here":
            pod_image_here(pod_id=pod.pk, attempt=attempt, image=report["image"])
            return True
    raise AssertionError(report["event"])  # the serializer admits only EVENTS

"""The node side of reading a pod's log: answer the console's `tidepool_read_pod_log` command.

Only a pod that the database records on this node, at that attempt; the path comes from the pod
row, never from the request; at most NODE_MAX_BYTES per answer.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from scheduler.models import Pod
from scheduler.node.runtime.logs import NODE_MAX_BYTES, read_chunk
from scheduler.paths import pod_log_path


def serve_pod_log(node_name: str, pod_id: int, attempt: int, offset: int, max_bytes: int) -> dict[str, Any]:
    """The node side of `ask_node`: this node's log of a pod it runs (or ran), as a reply dict.

    Only a pod that the database records on `node_name`, at that attempt; the path comes from the
    pod row, never from the request; at most NODE_MAX_BYTES.
    """
    pod = Pod.objects.select_related("node").filter(pk=pod_id).first()
    if pod is None or pod.node is None or pod.node.name != node_name:
        return {"node": node_name, "refused": f"pod {pod_id} does not run on node {node_name}"}
    if pod.attempt != attempt:
        return {"node": node_name, "refused": f"pod {pod_id} is attempt {pod.attempt}, not {attempt}"}
    chunk = read_chunk(str(pod_log_path(pod)), int(offset), max(0, min(int(max_bytes), NODE_MAX_BYTES)))
    return {"node": node_name, **asdict(chunk)}

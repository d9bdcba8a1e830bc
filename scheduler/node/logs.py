"""Reading a pod's log wherever it is: both sides of the node's log protocol, in one module.

- `read_pod_log(pod, offset, max_bytes)` (the console and the API, through scheduler/api/logs.py):
  a pod's stdout and stderr go to a file under TIDEPOOL_DATA_DIR on the machine that runs it
  (`specs.pod_log_path`). With the local executor that is this machine. With the Celery executor
  it is the pod's node: `read_pod_log` broadcasts the `tidepool_read_pod_log` control command;
  every node worker receives it, only the pod's node answers with the text. A log that exists here
  (shared storage, or a console host that is also the node) is read directly.
- With node agents (TIDEPOOL_EXECUTOR=agents) `read_pod_log` asks the pod's node's agent directly,
  with a one-use ticket signed by a key only the console and that node hold (`ask_agent`;
  scheduler/node/remote/log_tickets.py has the protocol, remote/log_server.py the node's side).
- `serve_pod_log` (the node worker's handler of that command, scheduler/node/worker.py): only a pod
  that the database records on that node, at that attempt, at the path it derives from the pod row
  itself (never a path it was sent), and at most NODE_MAX_BYTES per answer (`read_pod_log` asks
  again until it has what it wanted).

Offsets are byte offsets into the file. A negative offset counts from the end (`-65536`: the last
64 KiB). An offset past the end (the log was truncated or replaced) reads from the start again,
and the chunk's `start` says so.

This lives in node/, not executors/: executors/ is only the port the services call to start and
stop pods (DESIGN §5), and must not import the node side.
"""


from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from django.conf import settings

from scheduler.models import NodeKey, Pod
from scheduler.node.remote.log_tickets import SIGNATURE_HEADER, TicketRefused, check_answer, make_ticket
from scheduler.node.runtime.logs import NODE_MAX_BYTES, LogChunk, read_chunk
from scheduler.paths import pod_log_path
from scheduler.services.node_keys import node_log_ticket_key

log = logging.getLogger("tidepool.logs")

READ_LOG_COMMAND = "tidepool_read_pod_log"  # the control command the node worker registers (worker.py)
NODE_ANSWER_TIMEOUT_S = 2.0  # wait for the pod's node this long (after the last reply of any worker)


class LogUnavailable(Exception):
    """The log is on a node that did not answer (or refused): the message says which and why."""


def read_pod_log(pod: Pod, offset: int, max_bytes: int, *, timeout: float | None = None) -> LogChunk:
    """Up to `max_bytes` bytes of the pod's log from `offset`, read here or asked of its node.

    Raises LogUnavailable when the log is on a node that does not answer within `timeout`
    (default NODE_ANSWER_TIMEOUT_S) or that refuses.
    """
    path = pod_log_path(pod)
    if settings.TIDEPOOL_EXECUTOR == "agents" and pod.node_id is not None:
        key = NodeKey.objects.filter(node_name=pod.node.name, revoked_at=None).exclude(log_port=None).first()
        if key is not None:  # the node's agent serves it, to a ticket of ours (remote/log_tickets.py)
            return _read_in_windows(lambda at, size: ask_agent(pod, key, at, size, timeout=timeout), offset, max_bytes)
    if settings.TIDEPOOL_EXECUTOR != "celery" or pod.node_id is None or path.exists():
        return read_chunk(str(path), offset, max_bytes)
    node_name = pod.node.name
    return _read_in_windows(lambda at, size: ask_node(node_name, pod.pk, pod.attempt, at, size, timeout=timeout),
                            offset, max_bytes)


def _read_in_windows(ask: Callable[[int, int], LogChunk], offset: int, max_bytes: int) -> LogChunk:
    """`max_bytes` from `offset`, asked of a node NODE_MAX_BYTES at a time."""
    first = last = ask(offset, min(max_bytes, NODE_MAX_BYTES))
    parts = [first.text]
    wanted = max_bytes - (first.offset - first.start)
    while wanted > 0 and last.exists and last.start < last.offset < last.size:
        more = ask(last.offset, min(wanted, NODE_MAX_BYTES))
        if more.start != last.offset:  # truncated meanwhile: the next read will start over
            break
        parts.append(more.text)
        wanted -= more.offset - more.start
        last = more
    return LogChunk(text="".join(parts), start=first.start, offset=last.offset, size=last.size, exists=first.exists)


class _Answered(Exception):
    """Raised from the reply callback to stop waiting once the pod's node has answered."""


def ask_node(node_name: str, pod_id: int, attempt: int, offset: int, max_bytes: int, *,
             timeout: float | None = None) -> LogChunk:
    """One `tidepool_read_pod_log` round trip to the node's worker (through the broker)."""
    from celery import current_app as app

    timeout = NODE_ANSWER_TIMEOUT_S if timeout is None else timeout
    deadline = time.monotonic() + timeout
    answer: dict[str, Any] = {}

    def on_reply(body: dict[str, Any]) -> None:
        # {worker hostname: reply}; workers of other nodes answer {"skipped": ...}.
        for reply in body.values():
            if isinstance(reply, dict) and reply.get("node") == node_name:
                answer.update(reply)
                raise _Answered
        if time.monotonic() > deadline:  # replies of other workers keep coming: stop all the same
            raise _Answered

    try:
        app.control.broadcast(
            READ_LOG_COMMAND,
            arguments={"node": node_name, "pod_id": pod_id, "attempt": attempt, "offset": offset,
                       "max_bytes": max_bytes},
            reply=True, timeout=timeout, callback=on_reply,
        )
    except _Answered:
        pass
    except Exception as error:  # the broker itself is unreachable
        log.warning("could not ask node %s for the log of pod %s: %s", node_name, pod_id, error)
        raise LogUnavailable(f"node {node_name} could not be asked for the log: {error}") from error
    if not answer:
        raise LogUnavailable(f"node {node_name} did not answer: the log is on the node; is its worker running?")
    if "refused" in answer:
        raise LogUnavailable(f"node {node_name} refused: {answer['refused']}")
    return LogChunk(text=answer["text"], start=answer["start"], offset=answer["offset"], size=answer["size"],
                    exists=answer["exists"])


def ask_agent(pod: Pod, key: NodeKey, offset: int, max_bytes: int, *, timeout: float | None = None) -> LogChunk:
    """One window of `pod`'s log from its node's agent (TIDEPOOL_EXECUTOR=agents): a one-use ticket
    signed with the node's ticket key, sent to that node only; its answer must carry the node's
    signature. Raises LogUnavailable saying why not."""
    import urllib.error
    import urllib.parse
    import urllib.request

    node = pod.node
    ticket_key = node_log_ticket_key(key)
    ticket = make_ticket(ticket_key, node=node.name, pod=pod.pk, attempt=pod.attempt, path=str(pod_log_path(pod)),
                         offset=int(offset), max_bytes=max(0, min(int(max_bytes), NODE_MAX_BYTES)))
    url = f"http://{node.address or '127.0.0.1'}:{key.log_port}/log?{urllib.parse.urlencode({'ticket': ticket})}"
    try:
        with urllib.request.urlopen(url, timeout=NODE_ANSWER_TIMEOUT_S if timeout is None else timeout) as answer:
            body, signature = answer.read(), answer.headers.get(SIGNATURE_HEADER, "")
    except urllib.error.HTTPError as error:
        raise LogUnavailable(f"node {node.name} refused: {error.read()[:300].decode('utf-8', 'replace')}") from None
    except (urllib.error.URLError, OSError) as error:
        raise LogUnavailable(f"node {node.name} did not answer: the log is on the node; is its agent running? "
                             f"({error})") from None
    try:
        data = check_answer(ticket_key, body, signature)
    except (TicketRefused, ValueError) as error:
        raise LogUnavailable(f"node {node.name}'s answer is refused: {error}") from None
    return LogChunk(text=data["text"], start=data["start"], offset=data["offset"], size=data["size"],
                    exists=data["exists"])


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

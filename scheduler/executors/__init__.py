"""Executors turn admitted pods into processes and deliver terminations.

- `local` (embedded default): the demo's virtual nodes run their pods as processes of this machine.
- `celery` (production): each pod goes to its node's queue `node.<name>`, where that node's worker runs it.

Both expose `launch(launches)` and `terminate(refs, grace_s, outcome)`, called after commit. Pod
logs are read with `scheduler.executors.logs.read_pod_log`: here, or from the pod's node.
"""

from __future__ import annotations

import threading
from typing import Protocol

from django.conf import settings

from scheduler.models import Job, Pod

PodRef = tuple[int, int, str]  # (pod id, attempt, node name)


class Executor(Protocol):
    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None: ...

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None: ...


_executor: Executor | None = None
_lock = threading.Lock()


def get_executor() -> Executor:
    global _executor
    with _lock:
        if _executor is None:
            if settings.TIDEPOOL_EXECUTOR == "celery":
                from scheduler.executors.celery import CeleryExecutor

                _executor = CeleryExecutor()
            else:
                from scheduler.executors.local import LocalExecutor

                _executor = LocalExecutor()
        return _executor


def set_executor(executor: Executor | None) -> Executor | None:
    """Swap the executor (tests); returns the previous one."""
    global _executor
    with _lock:
        previous, _executor = _executor, executor
    return previous

"""The port the services call to start and stop pods (DESIGN §5).

Two adapters, named here by dotted path so that this port never imports the node side:
- `local` (embedded default, scheduler/node/local.py): the demo's virtual nodes run their pods
  as processes of the console;
- `celery` (production, scheduler/executors/celery.py): each pod goes to its node's queue
  `node.<name>`, where that node's worker runs it;
- `agents` (scheduler/executors/agents.py): node agents holding only their node's key read their
  pods through the node API (/api/node/v1/), so nothing is sent.

The adapter is chosen by TIDEPOOL_EXECUTOR and registered at start-up (`register_from_settings`,
called by the scheduler app's `ready()`); it is built on first use. Tests swap it with
`set_executor`. Every call happens after commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from scheduler.models import Job, Pod

PodRef = tuple[int, int, str]  # (pod id, attempt, node name)

ADAPTERS = {
    "local": "scheduler.node.local.LocalExecutor",
    "celery": "scheduler.executors.celery.CeleryExecutor",
    "agents": "scheduler.executors.agents.AgentExecutor",
}


class Executor(Protocol):
    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None: ...

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None: ...


_executor: Executor | None = None
_factory: Callable[[], Executor] | None = None
_lock = threading.Lock()


def register_from_settings(name: str) -> None:
    """Register the adapter named by TIDEPOOL_EXECUTOR (built on first use)."""
    register(lambda: import_string(ADAPTERS[name])())


def register(factory: Callable[[], Executor]) -> None:
    global _factory
    with _lock:
        _factory = factory


def get_executor() -> Executor:
    global _executor
    with _lock:
        if _executor is None:
            if _factory is None:
                raise RuntimeError("no executor registered: the scheduler app registers one at start-up")
            _executor = _factory()
        return _executor


def set_executor(executor: Executor | None) -> Executor | None:
    """Swap the executor (tests); returns the previous one."""
    global _executor
    with _lock:
        previous, _executor = _executor, executor
    return previous

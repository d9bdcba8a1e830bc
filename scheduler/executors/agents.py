"""The executor for node agents that hold only their node's key (TIDEPOOL_EXECUTOR=agents; DESIGN §6).

Such an agent cannot be sent anything: it asks. It reads its node's pods from the node API every
poll period (scheduler/node/remote/agent.py) and converges on what the database says, which the
services have already written by the time this port is called (new pods Pending, terminations as
`terminate_requested`). So a start or a termination reaches the node within one poll period
(TIDEPOOL_RECONCILE_SECONDS, the agent's default), and there is nothing to send here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.executors import PodRef

if TYPE_CHECKING:
    from scheduler.models import Job, Pod


class AgentExecutor:
    lease_owner: str = ""  # set by `manage.py serve` on every executor; unused here

    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        """Nothing to send: the pods' nodes read them from the database through the node API."""

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        """Nothing to send: the termination is the pods' `terminate_requested`, which their nodes read."""

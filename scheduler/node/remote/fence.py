"""The agent fences itself: a node cut off from the console stops its pods before the console gives
them to another node (DESIGN §3, §6: never two attempts of one job training at once).

The console marks a node lost when it has heard no heartbeat for TIDEPOOL_NODE_TIMEOUT by its own
clock, and then restarts the node's jobs elsewhere. A node that is cut off (a link down, a partition)
cannot be told; its pods would train on beside the new attempt, and write the same checkpoint
directory. So the agent counts, on its monotonic clock, the time since the console last answered a
heartbeat; once that passes `start_after_s` it sends SIGTERM to every pod it runs and SIGKILL
`grace_cap_s` later, all within the node timeout less a margin (`fence_schedule`). The agent's
count starts when the answer arrived, after the console stamped the heartbeat, so it never runs
ahead of the console's: the pods are gone before the console can call the node lost.

A fenced pod is not started again: its attempt is used up in the supervisor, and the agent starts
only what the console lists as Pending. Once the console answers again, the pods it still lists
(the cut was shorter than the node timeout) are reported as failed with `reason`, and restart
through the console's backoff like any failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from scheduler.node.runtime.process import STOPPED, PodSupervisor

log = logging.getLogger("tidepool.node-agent")


def fence_schedule(node_timeout_s: float, heartbeat_s: float) -> tuple[float, float]:
    """(start_after_s, grace_cap_s): when, without a heartbeat answered, the agent stops its pods, and
    the longest grace it gives them. SIGKILL comes by node_timeout − margin, margin = the larger of one
    heartbeat period and a tenth of the timeout (a request in flight, the scheduler's cycle); the grace
    is at most a quarter of the timeout (a pod saves its checkpoint on SIGTERM). Never before two
    heartbeat periods: one lost heartbeat is not a cut."""
    margin_s = max(heartbeat_s, 0.1 * node_timeout_s)
    grace_cap_s = 0.25 * node_timeout_s
    start_after_s = max(2 * heartbeat_s, node_timeout_s - margin_s - grace_cap_s)
    grace_cap_s = max(0.0, min(grace_cap_s, node_timeout_s - margin_s - start_after_s))
    return start_after_s, grace_cap_s


class SelfFence:
    """Tracks the console's last heartbeat answer and stops every pod once it is too old (thread-safe)."""

    def __init__(self, supervisor: PodSupervisor, *, node_timeout_s: float, heartbeat_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.supervisor = supervisor
        self.node_timeout_s = node_timeout_s
        self.start_after_s, self.grace_cap_s = fence_schedule(node_timeout_s, heartbeat_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._last_answer = clock()
        self._fenced: dict[tuple[int, int], str] = {}  # pod attempt -> why it was stopped
        self.active = False  # between a fence and the console's next answer
        if self.start_after_s + self.grace_cap_s >= node_timeout_s:
            log.warning("node timeout %.1f s is too short for heartbeats every %.1f s: a cut-off node may still run "
                        "its pods when the console calls it lost", node_timeout_s, heartbeat_s)

    def answered(self) -> None:
        """The console answered a heartbeat (or the registration): the node is alive on its clock."""
        with self._lock:
            self._last_answer = self._clock()
            if self.active:
                log.warning("the console answers again; pods stopped by the fence are not started again")
            self.active = False

    def reason(self, pod_id: int, attempt: int) -> str | None:
        """Why the fence stopped this attempt, or None if it did not."""
        with self._lock:
            return self._fenced.get((pod_id, attempt))

    def silent_s(self) -> float:
        with self._lock:
            return self._clock() - self._last_answer

    def check(self) -> int:
        """Stop every running pod if the console has not answered for start_after_s; the count stopped."""
        with self._lock:
            silent_s = self._clock() - self._last_answer
            if silent_s < self.start_after_s:
                return 0
            self.active = True
        reason = (f"stopped by its node agent: the console answered no heartbeat for {silent_s:.0f} s, and "
                  f"calls the node lost after {self.node_timeout_s:.0f} s (the node fenced itself)")
        stopped = 0
        for pod in self.supervisor.running():
            if pod.terminating is not None:
                continue
            with self._lock:
                self._fenced[(pod.pod_id, pod.attempt)] = reason
            self.supervisor.terminate(pod.pod_id, pod.attempt, self.grace_cap_s, STOPPED)
            stopped += 1
        if stopped:
            log.error("no heartbeat answered for %.1f s: stopping %s pods (SIGTERM, SIGKILL after at most %.1f s) "
                      "before the console calls this node lost", silent_s, stopped, self.grace_cap_s)
        return stopped

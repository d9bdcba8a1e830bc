"""The node agent fences itself (scheduler/node/remote/fence.py): cut off from the console, it stops its
pods (SIGTERM, then SIGKILL) before the console's node timeout passes, and once the console answers again
it starts none of them again and reports those still listed as failed. A real agent loop with real host
pod processes; the console is a fake of the node API whose link can be cut (no Django, no server)."""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from scheduler.node.remote.agent import NodeAgent, spec_from
from scheduler.node.remote.client import ConsoleUnreachable
from scheduler.node.remote.config import config_from_env
from scheduler.node.remote.fence import SelfFence, fence_schedule
from scheduler.node.runtime.process import PodSpec, PodSupervisor
from tests.waiting import wait_for

NODE_TIMEOUT_S, HEARTBEAT_S = 10.0, 1.0  # SIGTERM after 6.5 s of silence, SIGKILL by 9 s


class CuttableConsole:
    """The node API as the agent sees it; while `cut` is set every call fails as a link down does."""

    def __init__(self) -> None:
        self.cut = False
        self.rows: list[dict[str, Any]] = []
        self.reports: list[tuple[int, int, str, dict[str, Any]]] = []
        self.answered_at: list[float] = []  # monotonic times of heartbeats answered

    def _link(self) -> None:
        if self.cut:
            raise ConsoleUnreachable("POST heartbeat/: [Errno 101] Network is unreachable")

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        self._link()
        return {"node": "n1", "heartbeat_s": HEARTBEAT_S, "reconcile_s": 0.2, "node_timeout_s": NODE_TIMEOUT_S,
                "log_ticket_key": "00" * 32}

    def heartbeat(self, agent: str) -> dict[str, Any]:
        self._link()
        self.answered_at.append(time.monotonic())
        return {"node": "n1"}

    def release(self, agent: str) -> dict[str, Any]:
        self._link()
        return {"node": "n1"}

    def pods(self, *, recently_ended: bool = False) -> list[dict[str, Any]]:
        self._link()
        return [dict(row) for row in self.rows]

    def report(self, pod_id: int, attempt: int, event: str, **fields: Any) -> bool:
        self._link()
        self.reports.append((pod_id, attempt, event, fields))
        return True


def pod_row(tmp: Path, pod_id: int, command: str, *, status: str = "Pending") -> dict[str, Any]:
    pod_dir = tmp / f"pod-{pod_id}"
    spec = PodSpec(pod_id=pod_id, job_id=pod_id, attempt=1, command=command, env={}, gpu_indices=(), rank=0,
                   world_size=1, master_addr="127.0.0.1", master_port=29700 + pod_id,
                   checkpoint_dir=str(pod_dir / "ckpt"), restart_count=0, workdir=str(pod_dir),
                   log_path=str(pod_dir / "log"), progress_path=str(pod_dir / "progress.json"),
                   job_uid=f"fence-{pod_id}-{os.getpid()}", exit_path=str(pod_dir / "exit"),
                   dirs=((str(tmp), str(pod_dir)),))
    return {"pod_id": pod_id, "attempt": 1, "job_id": pod_id, "rank": 0, "status": status, "live": True,
            "wanted": True, "outcome": "stopped", "grace_s": 30.0, "spec": asdict(spec), "spec_error": ""}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def agent(monkeypatch):
    monkeypatch.setattr("scheduler.node.remote.agent.build_runtime",
                        lambda config, on_exit: (PodSupervisor(on_exit=on_exit), None, "host"))
    console = CuttableConsole()
    made = NodeAgent(config_from_env({"TIDEPOOL_CONSOLE_URL": "http://127.0.0.1:1", "TIDEPOOL_NODE_KEY": "tpn_x"}),
                     api=console)
    thread = threading.Thread(target=made.run, daemon=True)
    thread.start()
    yield made, console
    made.stop()
    thread.join(10)
    made.supervisor.shutdown(0)


def test_the_schedule_ends_every_pod_before_the_node_timeout() -> None:
    # Defaults (60 s, heartbeats every 10 s): SIGTERM after 35 s of silence, SIGKILL 15 s later, 10 s to spare.
    assert fence_schedule(60, 10) == (35, 15)
    assert fence_schedule(8, 1) == (5, 2)
    for timeout, beat in ((60, 10), (8, 1), (6, 0.5), (3, 1), (600, 10)):
        start, grace = fence_schedule(timeout, beat)
        assert start >= 2 * beat and start + grace < timeout, (timeout, beat)


def test_a_silent_console_fences_only_after_start_after_s(tmp_path: Path) -> None:
    now = [100.0]
    supervisor = PodSupervisor()
    fence = SelfFence(supervisor, node_timeout_s=8, heartbeat_s=1, clock=lambda: now[0])
    assert supervisor.start(spec_from(pod_row(tmp_path, 1, "sleep 30")["spec"]))
    try:
        now[0] += 4.9  # two heartbeats lost is not a cut
        assert fence.check() == 0 and supervisor.running()[0].terminating is None
        now[0] += 0.2
        assert fence.check() == 1 and fence.active
        assert "fenced itself" in fence.reason(1, 1)
        assert supervisor.wait(1, 1, 10) is not None
        fence.answered()
        assert not fence.active and fence.check() == 0
    finally:
        supervisor.shutdown(0)


def test_a_cut_off_agent_stops_its_pods_before_the_node_timeout_and_starts_none_again(agent, tmp_path) -> None:
    node, console = agent
    ignores_sigterm = (f"{sys.executable} -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                       "time.sleep(120)'")
    console.rows = [pod_row(tmp_path, 1, "sleep 120"), pod_row(tmp_path, 2, ignores_sigterm)]
    wait_for(lambda: len(node.supervisor.running()) == 2 and len(console.answered_at) >= 2, 30,
             "both pods to start and heartbeats to be answered", step=0.1)
    pids = [pod.pid for pod in node.supervisor.running()]
    for row in console.rows:
        row["status"] = "Running"

    time.sleep(0.5)  # a pass after the change, so that no Pending row is answered during the cut
    reports_before_cut = len(console.reports)
    console.cut = True
    last_answer = console.answered_at[-1]
    start_after, grace = fence_schedule(NODE_TIMEOUT_S, HEARTBEAT_S)
    wait_for(lambda: not any(alive(pid) for pid in pids), NODE_TIMEOUT_S + 10, "the fence to end both pods", step=0.05)
    gone_after = time.monotonic() - last_answer
    # Not on the first lost heartbeats, and before the console may call the node lost.
    assert start_after <= gone_after < NODE_TIMEOUT_S, (gone_after, start_after, grace)
    assert node.fence.active and len(console.reports) == reports_before_cut  # nothing got through the cut

    console.cut = False  # the link is back, the console still lists both pods as Running
    wait_for(lambda: sum(event == "exited" for _, _, event, _ in console.reports) == 2, 20,
             "the fenced pods' exits to be reported", step=0.1)
    exits = {pod_id: fields for pod_id, _, event, fields in console.reports if event == "exited"}
    assert {fields["outcome"] for fields in exits.values()} == {"failed"}  # a failure: the job restarts
    assert all("fenced itself" in fields["reason"] for fields in exits.values())
    assert exits[2]["exit_code"] == -9  # it ignored SIGTERM: SIGKILL after the grace
    time.sleep(1.0)  # several passes with the pods still listed: neither attempt is started again
    assert node.supervisor.running() == [] and not node.fence.active
    # Only exits (again on each pass: this fake console never applies them), never a start.
    assert {event for _, _, event, _ in console.reports[reports_before_cut:]} == {"exited"}

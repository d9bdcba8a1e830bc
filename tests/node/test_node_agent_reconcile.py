"""The node agent's reconcile table (scheduler/node/remote/agent.py), row by row, with real host pod
processes and a console that is a recording fake of the node API (no Django, no server)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from scheduler.node.remote.agent import NodeAgent
from scheduler.node.remote.client import ConsoleRefused
from scheduler.node.remote.config import config_from_env
from scheduler.node.runtime.process import PodSpec
from tests.waiting import wait_for


class FakeConsole:
    """The node API as the agent sees it: `rows` is what GET pods/ answers; reports are recorded."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.reports: list[tuple[int, int, str, dict[str, Any]]] = []
        self.refuse: set[int] = set()

    def pods(self, *, recently_ended: bool = False) -> list[dict[str, Any]]:
        return [dict(row) for row in self.rows]

    def report(self, pod_id: int, attempt: int, event: str, **fields: Any) -> bool:
        if pod_id in self.refuse:
            raise ConsoleRefused(403, f"pod {pod_id} attempt {attempt} is not placed on node n1")
        self.reports.append((pod_id, attempt, event, fields))
        return True

    def events(self, pod_id: int) -> list[str]:
        return [event for pid, _, event, _ in self.reports if pid == pod_id]


def spec(tmp: Path, pod_id: int, command: str) -> dict[str, Any]:
    pod_dir = tmp / f"pod-{pod_id}"
    return asdict(PodSpec(pod_id=pod_id, job_id=pod_id, attempt=1, command=command, env={}, gpu_indices=(),
                          rank=0, world_size=1, master_addr="127.0.0.1", master_port=29600 + pod_id,
                          checkpoint_dir=str(pod_dir / "ckpt"), restart_count=0, workdir=str(pod_dir),
                          log_path=str(pod_dir / "log"), progress_path=str(pod_dir / "progress.json"),
                          job_uid=f"uid-{pod_id}", exit_path=str(pod_dir / "exit"),
                          dirs=((str(tmp), str(pod_dir)),)))


def row(tmp: Path, pod_id: int, command: str = "sleep 30", *, status: str = "Pending", wanted: bool = True) -> dict:
    return {"pod_id": pod_id, "attempt": 1, "job_id": pod_id, "rank": 0, "status": status, "live": True,
            "wanted": wanted, "outcome": "stopped", "grace_s": 2.0, "spec": spec(tmp, pod_id, command),
            "spec_error": ""}


@pytest.fixture
def agent(monkeypatch):
    monkeypatch.setattr("scheduler.node.remote.agent.build_runtime", _host_runtime)
    console = FakeConsole()
    made = NodeAgent(config_from_env({"TIDEPOOL_CONSOLE_URL": "http://127.0.0.1:1", "TIDEPOOL_NODE_KEY": "tpn_x"}),
                     api=console)
    yield made, console
    made.supervisor.shutdown(0)


def _host_runtime(config, on_exit):
    from scheduler.node.runtime.process import PodSupervisor

    return PodSupervisor(on_exit=on_exit), None, "host"


def test_a_pending_pod_is_started_and_reported_running_then_its_exit(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1, "echo hi; sleep 0.3")]
    assert node.reconcile() == {"started": 1}
    assert console.events(1) == ["running"] and console.reports[0][3]["pid"]
    wait_for(lambda: node.supervisor.wait(1, 1, 0), 10, "the pod to exit")
    console.rows[0]["status"] = "Running"
    assert node.reconcile() == {"reported_exit": 1}
    exited = [fields for pid, _, event, fields in console.reports if event == "exited"]
    assert exited == [{"exit_code": 0, "outcome": "succeeded", "reason": "exit code 0"}]


def test_a_pod_no_longer_wanted_gets_sigterm_and_one_never_started_is_fenced(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1)]
    node.reconcile()
    console.rows = [row(tmp_path, 1, status="Running", wanted=False), row(tmp_path, 2, wanted=False)]
    assert node.reconcile() == {"terminated": 1, "fenced": 1}
    assert ("exited" in console.events(2)) and console.reports[-1][3]["reason"] == "stopped before it started"
    assert node.supervisor.start(PodSpec(**{**spec(tmp_path, 2, "true"), "dirs": ()})) is False  # fenced here
    wait_for(lambda: node.supervisor.wait(1, 1, 0), 10, "the terminated pod to exit")


def test_a_pod_running_here_that_the_console_no_longer_lists_is_stopped(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1)]
    node.reconcile()
    console.rows = []
    assert node.reconcile() == {"stopped_unlisted": 1}
    assert wait_for(lambda: node.supervisor.wait(1, 1, 0), 10, "the pod to be stopped").outcome == "stopped"


def test_a_running_pod_with_no_process_and_no_exit_is_reported_gone(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1, status="Running")]
    assert node.reconcile() == {"gone": 1}
    assert console.reports[-1][3]["reason"] == "the pod's process is gone without an exit status"


def test_an_exit_file_left_by_a_previous_agent_is_reported(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1, status="Running")]
    exit_file = Path(console.rows[0]["spec"]["exit_path"])
    exit_file.parent.mkdir(parents=True)
    exit_file.write_text("3\n")
    assert node.reconcile() == {"reported_exit": 1}
    assert console.reports[-1][3]["exit_code"] == 3 and console.reports[-1][3]["outcome"] == "failed"


def test_one_refused_report_does_not_hold_back_the_other_pods(agent, tmp_path) -> None:
    node, console = agent
    console.refuse = {1}
    console.rows = [row(tmp_path, 1), row(tmp_path, 2)]
    assert node.reconcile() == {"refused": 1, "started": 1}
    assert console.events(2) == ["running"]


def test_a_spec_the_console_could_not_build_is_reported_never_started(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [{**row(tmp_path, 1), "spec": None, "spec_error": "checkpoint directory /x is outside the roots"}]
    assert node.reconcile() == {"never_started": 1}
    assert console.reports[-1][3]["reason"] == "could not start: checkpoint directory /x is outside the roots"


def test_heartbeats_carry_nvml_readings_only_where_nvml_reads_them(agent, monkeypatch) -> None:
    import threading

    node, console = agent
    beats: list[dict[str, Any]] = []
    console.heartbeat = lambda owner, **fields: beats.append(fields) or {}
    reading = {"index": 0, "utilization_percent": 42.0, "memory_used_mib": 10, "memory_total_mib": 80}
    monkeypatch.setattr("scheduler.node.remote.agent.sample_gpus", lambda: [reading])
    node._heartbeat_s = 0.05
    node.fence = type("Fence", (), {"answered": lambda self: None})()  # made at registration otherwise
    beat = threading.Thread(target=node._beat, daemon=True)
    beat.start()
    wait_for(lambda: beats, 10, "a heartbeat")
    monkeypatch.setattr("scheduler.node.remote.agent.sample_gpus", lambda: [])  # no NVML: nothing sent
    count = len(beats)
    wait_for(lambda: len(beats) > count + 1, 10, "more heartbeats")
    node.stop()
    beat.join(5)
    assert beats[0] == {"gpus": [reading]} and beats[-1] == {}


def test_rank_zeros_progress_is_relayed_when_it_changes(agent, tmp_path) -> None:
    node, console = agent
    console.rows = [row(tmp_path, 1)]
    node.reconcile()
    progress = Path(console.rows[0]["spec"]["progress_path"])
    progress.write_text('{"step": 40, "last_checkpoint_step": 20}')
    console.rows[0]["status"] = "Running"
    node.reconcile()
    node.reconcile()  # unchanged: not sent again
    progress.write_text('{"step": 60, "last_checkpoint_step": 60}')
    node.reconcile()
    sent = [fields["progress"]["step"] for _, _, event, fields in console.reports if event == "progress"]
    assert sent == [40, 60]


def test_a_grown_pod_does_not_read_the_shrunk_pods_exit_file_at_its_path_as_its_own(agent, tmp_path) -> None:
    # §2c: a growth starts a pod with the shrunk one's attempt, role and index, so with its exit file's path.
    node, console = agent
    console.rows = [row(tmp_path, 1)]
    node.reconcile()
    console.rows = [{**row(tmp_path, 1, status="Running", wanted=False), "outcome": "shrunk"}]
    assert node.reconcile() == {"terminated": 1}
    wait_for(lambda: node.supervisor.wait(1, 1, 0), 10, "the shrunk pod to exit")
    exit_path = Path(console.rows[0]["spec"]["exit_path"])
    exit_path.write_text("134\n")  # as a container's shell wrote it when torch aborted in its teardown
    assert node.reconcile() == {"reported_exit": 1}
    assert console.reports[-1][3]["outcome"] == "shrunk" and not exit_path.exists()
    grown = row(tmp_path, 2)
    grown["spec"] = {**grown["spec"], "exit_path": str(exit_path), "log_path": console.rows[0]["spec"]["log_path"]}
    console.rows = [grown]
    assert node.reconcile() == {"started": 1}
    assert console.events(2) == ["running"]

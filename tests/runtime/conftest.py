"""A pod supervisor under test, plus checks that no process of a test outlives it.

Tests reach the helpers through the fixtures (`pods.wait_until`, `pods.alive`, ...) rather
than by importing this file, so they work under any pytest import mode.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.node.runtime.process import PodExit, PodSpec, PodSupervisor

TIMEOUT_S = 20.0  # generous: only reached when something is wrong


def wait_until(condition: Callable[[], object], timeout: float = TIMEOUT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped by its new parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


def processes_in_sessions(sessions: set[int]) -> list[int]:
    """Live processes whose session or process group is one of `sessions` (a pod's leader pid).

    Written independently of the supervisor's own group scan, so that it can catch its bugs.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        state, _ppid, pgrp, session = stat.rsplit(b")", 1)[1].split()[:4]
        if state not in (b"Z", b"X") and (int(pgrp) in sessions or int(session) in sessions):
            found.append(int(name))
    return found


def python_command(script: Path, *args: str) -> str:
    return shlex.join([sys.executable, str(script), *args])


class PodHarness:
    """Builds specs under a temporary directory, starts pods and records every exit report."""

    wait_until = staticmethod(wait_until)
    alive = staticmethod(pid_alive)
    python = staticmethod(python_command)

    def __init__(self, root: Path, on_exit: bool = True) -> None:
        self.root = root
        self.reports: list[tuple[int, int, int, str]] = []
        self.callback_error: Exception | None = None  # raised by on_exit after recording, if set
        self._lock = threading.Lock()
        self.supervisor = PodSupervisor(on_exit=self._record if on_exit else None)
        self.sessions: set[int] = set()

    def _record(self, pod_id: int, attempt: int, exit_code: int, outcome: str) -> None:
        with self._lock:
            self.reports.append((pod_id, attempt, exit_code, outcome))
        if self.callback_error is not None:
            raise self.callback_error

    def spec(self, command: str, pod_id: int = 1, attempt: int = 1, **overrides: object) -> PodSpec:
        pod_dir = self.root / f"pod-{pod_id}"
        values: dict[str, object] = {
            "pod_id": pod_id,
            "job_id": 100 + pod_id,
            "attempt": attempt,
            "command": command,
            "env": {},
            "gpu_indices": (),
            "rank": 0,
            "world_size": 1,
            "master_addr": "127.0.0.1",
            "master_port": 29500,
            "checkpoint_dir": str(pod_dir / "ckpt"),
            "restart_count": attempt - 1,
            "workdir": str(pod_dir / "work"),
            "log_path": str(pod_dir / f"attempt-{attempt}.log"),
            "progress_path": str(pod_dir / f"attempt-{attempt}.progress.json"),
        }
        values.update(overrides)
        return PodSpec(**values)  # type: ignore[arg-type]

    def start(self, spec: PodSpec) -> int:
        """Start the pod; returns its pid (= its process group and session)."""
        assert self.supervisor.start(spec) is True
        key = (spec.pod_id, spec.attempt)
        pid = next((p.pid for p in self.supervisor.running() if (p.pod_id, p.attempt) == key), None)
        if pid is None:  # a quick command may be done already
            pid = self.wait_exit(spec).pid
        self.sessions.add(pid)
        return pid

    def wait_exit(self, spec: PodSpec) -> PodExit:
        result = self.supervisor.wait(spec.pod_id, spec.attempt, timeout=TIMEOUT_S)
        assert result is not None, f"pod {spec.pod_id} attempt {spec.attempt} did not exit"
        return result

    def wait_for_log(self, spec: PodSpec, text: str) -> None:
        path = Path(spec.log_path)
        wait_until(lambda: path.exists() and text in path.read_text(), what=f"{text!r} in the log")

    def reports_for(self, spec: PodSpec) -> list[tuple[int, int, int, str]]:
        with self._lock:
            return [r for r in self.reports if r[:2] == (spec.pod_id, spec.attempt)]


def _finish(harness: PodHarness) -> None:
    harness.supervisor.shutdown(grace_s=1)
    wait_until(lambda: not processes_in_sessions(harness.sessions), what="every pod process to be gone")
    with harness._lock:
        counts = Counter(r[:2] for r in harness.reports)
    assert all(n == 1 for n in counts.values()), f"an exit was reported more than once: {counts}"


def host_cgroup_bases() -> dict[str, str]:
    """Where pod cgroups can be made here; skips the test, with the reason, where they cannot."""
    from scheduler.node.runtime.cgroups import writable_controllers

    if os.geteuid() != 0:
        pytest.skip("host pod cgroups need a root worker")
    bases, problem = writable_controllers()
    if problem:
        pytest.skip(f"host pod cgroups unavailable: {problem}")
    return bases


def cgroup_harness(root: Path, pids_max: int = 4096, default_memory_gib: float = 4.0) -> PodHarness:
    from scheduler.node.runtime.host_cgroups import CgroupSupervisor

    harness = PodHarness(root)
    harness.supervisor = CgroupSupervisor(host_cgroup_bases(), pids_max=pids_max,
                                          default_memory_gib=default_memory_gib, on_exit=harness._record)
    return harness


@pytest.fixture(params=["process-group", "cgroups"])
def pods(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PodHarness]:
    """A supervisor with an on_exit callback, as process groups and in cgroups (host_cgroups.py,
    skipped where they cannot be made): the same contract. Afterwards, no process of the test may
    be left."""
    harness = PodHarness(tmp_path) if request.param == "process-group" else cgroup_harness(tmp_path)
    yield harness
    _finish(harness)


@pytest.fixture
def polled_pods(tmp_path: Path) -> Iterator[PodHarness]:
    """Like `pods`, but without a callback: exits are read with poll()."""
    harness = PodHarness(tmp_path, on_exit=False)
    yield harness
    _finish(harness)

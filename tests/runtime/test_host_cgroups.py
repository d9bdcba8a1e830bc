"""Host pods in cgroups of their own (host_cgroups.py): what the process-group runtime could not
keep — detached survivors end with their pod, memory and processes are bounded. Skipped, with the
reason, without a root worker or writable cgroup v1 memory, pids and freezer controllers."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.conftest import _finish, cgroup_harness, pid_alive


@pytest.fixture
def host_pods(tmp_path: Path) -> Iterator:
    harness = cgroup_harness(tmp_path, pids_max=64)
    yield harness
    _finish(harness)


def survivor_command(pid_file: Path, how: str) -> str:
    """A pod that leaves a process behind which ignores SIGTERM and left the pod's process group."""
    detached = f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; exec sleep 300'"
    starts = {
        "setsid": f"setsid {detached} &",
        "double fork": f"( setsid {detached} & ) ",
        "nohup": f"nohup setsid {detached} >/dev/null 2>&1 &",
    }
    return f"{starts[how]}\nwhile [ ! -s {pid_file} ]; do sleep 0.05; done\necho detached\nsleep 300"


@pytest.mark.parametrize("how", ["setsid", "double fork", "nohup"])
def test_a_detached_survivor_is_dead_when_a_stop_is_reported(host_pods, tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "survivor.pid"
    spec = host_pods.spec(survivor_command(pid_file, how))
    leader = host_pods.start(spec)
    host_pods.wait_for_log(spec, "detached")
    survivor = int(pid_file.read_text())
    assert os.getpgid(survivor) != leader  # it really left the pod's process group
    host_pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=0.5, outcome="stopped")
    result = host_pods.wait_exit(spec)
    assert result.outcome == "stopped" and result.killed
    assert not pid_alive(survivor), "a detached process outlived its pod's reported exit"


def test_a_survivor_of_a_pod_that_ended_on_its_own_is_killed_before_the_exit(host_pods, tmp_path: Path) -> None:
    pid_file = tmp_path / "survivor.pid"
    detached = f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; exec sleep 300'"
    spec = host_pods.spec(f"setsid {detached} &\nwhile [ ! -s {pid_file} ]; do sleep 0.05; done\nexit 0")
    host_pods.start(spec)
    result = host_pods.wait_exit(spec)
    assert result.outcome == "succeeded"
    assert not pid_alive(int(pid_file.read_text()))


def test_a_survivor_gets_sigterm_too_so_it_can_save(host_pods, tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    script = tmp_path / "saver.sh"
    script.write_text(f"trap 'echo yes > {saved}; exit 0' TERM\nwhile :; do sleep 0.05; done\n")
    spec = host_pods.spec(f"setsid sh {script} &\nsleep 0.3; echo ready; sleep 300")
    host_pods.start(spec)
    host_pods.wait_for_log(spec, "ready")
    host_pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=5, outcome="preempted")
    assert host_pods.wait_exit(spec).outcome == "preempted"
    assert saved.read_text() == "yes\n"


def test_memory_over_the_limit_is_killed_and_reported_with_the_limit(host_pods, tmp_path: Path) -> None:
    script = tmp_path / "hog.py"
    script.write_text("data = b'x' * (1 << 30)\nprint('allocated', len(data))\n")
    spec = host_pods.spec(host_pods.python(script), memory_gib=0.25)
    host_pods.start(spec)
    result = host_pods.wait_exit(spec)
    assert result.outcome == "failed"
    assert result.reason == "out of memory (limit 0.25 GiB)"
    assert "allocated" not in Path(spec.log_path).read_text()


def test_a_pod_within_its_memory_is_not_called_out_of_memory(host_pods, tmp_path: Path) -> None:
    script = tmp_path / "small.py"
    script.write_text("import sys\ndata = b'x' * (32 << 20)\nsys.exit(3)\n")
    spec = host_pods.spec(host_pods.python(script), memory_gib=0.25)
    host_pods.start(spec)
    result = host_pods.wait_exit(spec)
    assert (result.exit_code, result.reason) == (3, "")


def test_a_fork_bomb_stops_at_the_pids_limit(host_pods, tmp_path: Path) -> None:
    script = tmp_path / "bomb.py"
    script.write_text(textwrap.dedent("""
        import os, time
        started = 0
        for _ in range(500):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            started += 1
        print("forked", started, flush=True)
        time.sleep(60)
    """))
    spec = host_pods.spec(host_pods.python(script))
    host_pods.start(spec)
    host_pods.wait_for_log(spec, "forked ")
    started = int(Path(spec.log_path).read_text().split("forked ")[1].split()[0])
    assert started < 64  # pids.max = 64 for the whole pod: its shells and python count too
    host_pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=0, outcome="stopped")
    assert host_pods.wait_exit(spec).outcome == "stopped"


@pytest.mark.parametrize("round_number", range(5))
def test_the_pods_cgroups_are_gone_when_its_exit_is_reported(host_pods, round_number: int) -> None:
    """Its orphans (reaped by init, a moment after they die) must not keep a cgroup behind."""
    spec = host_pods.spec("setsid sleep 300 & sleep 300", pod_id=round_number + 1)
    host_pods.start(spec)
    group = host_pods.supervisor._cgroups[(spec.pod_id, spec.attempt)]
    memory = Path(group.dirs["memory"])
    assert int((memory / "memory.limit_in_bytes").read_text()) == 4 << 30  # a role asking none: the default
    host_pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=0.2, outcome="stopped")
    host_pods.wait_exit(spec)
    assert [path for path in group.dirs.values() if Path(path).exists()] == []


def test_without_writable_cgroups_the_node_says_what_host_pods_give_up(monkeypatch, caplog) -> None:
    from scheduler.node import runtimes
    from scheduler.node.runtime import cgroups
    from scheduler.node.runtime.process import PodSupervisor

    monkeypatch.setattr(cgroups, "writable_controllers", lambda: ({}, "/sys/fs/cgroup/memory is not writable"))
    with caplog.at_level("WARNING", logger="tidepool.node"):
        supervisor = runtimes.host_supervisor()
    assert type(supervisor) is PodSupervisor
    assert "without cgroups (/sys/fs/cgroup/memory is not writable)" in caplog.text
    assert "setsid" in caplog.text

"""The hostile suite (DESIGN §6, issue 22): each wall of a container pod, tried by a real container.

Needs root and Podman with runc (apt-get install -y podman runc debootstrap); the image is built once
per session with debootstrap (bin/build-pod-image, cached in Podman's store). Skipped with the
reason otherwise. Each test runs one or two containers of about a second each.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.node.runtime.container import ContainerConfig, ContainerSupervisor, podman_available
from scheduler.node.runtime.image import ImageBuildError, build_image
from scheduler.node.runtime.network import NetworkConfig
from scheduler.node.runtime.process import PodExit, PodSpec
from scheduler.node.runtime.sandbox import read_exit_file

TIMEOUT_S = 30.0


@pytest.fixture(scope="session")
def pod_image() -> str:
    missing = podman_available()
    if missing is not None:
        pytest.skip(f"container walls need rootful Podman: {missing}")
    try:
        return build_image(log=lambda line: None)
    except ImageBuildError as error:
        pytest.skip(f"the pod image could not be built: {error}")


class Pods:
    """A ContainerSupervisor over a temporary data root; pods get their directories as on a node."""

    def __init__(self, root: Path, image: str, **config) -> None:
        self.root = root
        self.supervisor = ContainerSupervisor(ContainerConfig(default_image=image, **config))
        self.next_id = 1

    def spec(self, command: str, job_uid: str | None = None, rank: int = 0, world_size: int = 1, **overrides) -> PodSpec:
        pod_id, self.next_id = self.next_id, self.next_id + 1
        uid = job_uid or str(uuid.uuid4())
        pods, ckpt = self.root / "pods", self.root / "checkpoints"
        attempt_dir = pods / uid / "attempt-1"
        values = dict(
            pod_id=pod_id, job_id=pod_id, attempt=1, command=command, env={}, gpu_indices=(), rank=rank,
            world_size=world_size, master_addr="127.0.0.1", master_port=29500,
            checkpoint_dir=str(ckpt / uid), restart_count=0, workdir=str(pods / uid / "work"),
            log_path=str(attempt_dir / f"main-{rank}.log"), progress_path=str(attempt_dir / f"progress-{rank}.json"),
            job_uid=uid, exit_path=str(attempt_dir / f"main-{rank}.exit"),
            dirs=((str(pods), str(attempt_dir)), (str(pods), str(pods / uid / "work")), (str(ckpt), str(ckpt / uid))),
        )
        values.update(overrides)
        return PodSpec(**values)

    def run(self, spec: PodSpec) -> PodExit:
        assert self.supervisor.start(spec)
        return self.wait(spec)

    def wait(self, spec: PodSpec) -> PodExit:
        result = self.supervisor.wait(spec.pod_id, spec.attempt, TIMEOUT_S)
        assert result is not None, f"pod {spec.pod_id} did not exit; log:\n{self.log(spec)}"
        return result

    @staticmethod
    def log(spec: PodSpec) -> str:
        return Path(spec.log_path).read_text() if os.path.exists(spec.log_path) else ""

    def wait_for_log(self, spec: PodSpec, text: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while text not in self.log(spec):
            assert time.monotonic() < deadline, f"{text!r} never in the log:\n{self.log(spec)}"
            time.sleep(0.05)


@pytest.fixture
def pods(tmp_path: Path, pod_image: str) -> Iterator[Pods]:
    harness = Pods(tmp_path, pod_image)
    yield harness
    harness.supervisor.shutdown(grace_s=0)


def _command_lines() -> dict[int, str]:
    lines = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                lines[int(name)] = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return lines


def host_processes(text: str) -> list[int]:
    """Host pids whose command line contains `text`."""
    return [pid for pid, line in _command_lines().items() if text in line]


def host_processes_exactly(command_lines: list[str]) -> list[int]:
    """Host pids whose whole command line (arguments joined by spaces) is one of `command_lines`."""
    return [pid for pid, line in _command_lines().items() if line in command_lines]


def test_memory_over_the_limit_is_killed_and_reported_out_of_memory(pods):
    spec = pods.spec('python3 -c "x = bytearray(400 * 1024 * 1024); print(\'survived\')"', memory_gib=0.25)
    result = pods.run(spec)
    assert result.outcome == "failed"
    assert result.reason == "out of memory (limit 0.25 GiB)"
    assert "survived" not in pods.log(spec)


def test_a_fork_bomb_stops_at_the_pids_limit(tmp_path, pod_image):
    harness = Pods(tmp_path, pod_image, pids_limit=48)
    script = (
        "import os, time\n"
        "children = 0\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60); os._exit(0)\n"
        "        children += 1\n"
        "except OSError as error:\n"
        "    print('fork refused after', children, error.strerror)\n"
    )
    spec = harness.spec(f"python3 -c \"{script}\"")
    try:
        result = harness.run(spec)
    finally:
        harness.supervisor.shutdown(grace_s=0)
    log = harness.log(spec)
    assert "fork refused after" in log, log
    children = int(log.split("fork refused after", 1)[1].split()[0])
    assert children < 48
    assert result.outcome == "succeeded"
    assert not host_processes("time.sleep(60)")  # its children died with its pid namespace


def test_proc_shows_only_the_pods_own_processes(pods):
    spec = pods.spec("ls /proc | grep -c '^[0-9][0-9]*$'; cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert pods.run(spec).exit_code == 0
    lines = pods.log(spec).splitlines()
    count = int(lines[1])
    assert count <= 6, lines  # init, the pod's shells, ls, grep
    # The host's processes (this test's own interpreter among them) are not there to see.
    assert sys.executable not in pods.log(spec) and "celery" not in pods.log(spec)


def test_another_jobs_checkpoint_directory_is_not_there(pods):
    victim = pods.spec("true")
    os.makedirs(victim.checkpoint_dir)
    Path(victim.checkpoint_dir, "ckpt-100.pkl").write_text("another team's weights")
    spec = pods.spec(f"ls {victim.checkpoint_dir}; cat {victim.checkpoint_dir}/ckpt-100.pkl; "
                     f"echo mine > $TIDEPOOL_CHECKPOINT_DIR/ckpt-1 && echo wrote own")
    pods.run(spec)
    log = pods.log(spec)
    assert "another team's weights" not in log and "No such file or directory" in log
    assert "wrote own" in log
    assert Path(spec.checkpoint_dir, "ckpt-1").read_text() == "mine\n"


def test_a_pod_cannot_signal_another_pod(pods):
    victim = pods.spec("echo victim up; sleep 30")
    assert pods.supervisor.start(victim)
    pods.wait_for_log(victim, "victim up")
    victim_pid = next(r.pid for r in pods.supervisor.running() if r.pod_id == victim.pod_id)
    attacker = pods.spec(f"kill -9 {victim_pid}; kill -9 -1; echo attacker done")
    pods.run(attacker)
    time.sleep(0.3)
    assert any(r.pod_id == victim.pod_id for r in pods.supervisor.running())
    assert "victim up" in pods.log(victim) and victim_pid in [
        int(line.split()[0]) for line in subprocess.run(["ps", "-eo", "pid"], capture_output=True, text=True).stdout.split()[1:]
    ]


def _host_addresses() -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines() if " lo " not in line]


def test_the_control_plane_is_out_of_reach_and_the_jobs_pods_reach_each_other(pods):
    # A service of the host's listening on every address, as a console or broker might.
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    port = listener.getsockname()[1]
    accepted: list[str] = []

    def accept() -> None:
        listener.settimeout(15)
        try:
            conn, peer = listener.accept()
            accepted.append(peer[0])
            conn.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    job = str(uuid.uuid4())
    master = pods.spec(
        "python3 -c \"import socket; s=socket.socket(); s.bind(('0.0.0.0', 29500)); s.listen(); "
        "print('listening', flush=True); c, a = s.accept(); print('peer', a[0])\"", job_uid=job, world_size=2)
    assert pods.supervisor.start(master)
    pods.wait_for_log(master, "listening")
    network = json.loads(subprocess.run(["podman", "network", "inspect", f"tidepool-job-{job}"],
                                        capture_output=True, text=True, check=True).stdout)[0]
    gateway = network["subnets"][0]["gateway"]  # the host, seen from the job's network
    targets = [("127.0.0.1", 5432), ("127.0.0.1", 6379)] + [
        (address, p) for address in [gateway, *_host_addresses()] for p in (5432, 6379, port)
    ]
    probe = (
        "import socket, os\n"
        f"for host, port in {targets!r}:\n"
        "    s = socket.socket(); s.settimeout(0.3)\n"  # a reachable local port answers in well under 1 ms
        "    try:\n"
        "        s.connect((host, port)); print('REACHED', host, port)\n"
        "    except OSError as e:\n"
        "        print('blocked', host, port, type(e).__name__)\n"
        "s = socket.create_connection((os.environ['MASTER_ADDR'], 29500), timeout=5); print('rank 0 reached')\n"
    )
    worker = pods.spec(f"python3 -c \"{probe}\"", job_uid=job, rank=1, world_size=2)
    pods.run(worker)
    pods.wait(master)
    log = pods.log(worker)
    listener.close()
    assert "REACHED" not in log, log
    assert log.count("blocked") == len(targets)
    assert "rank 0 reached" in log and "peer 10.213." in pods.log(master)
    assert accepted == []


def test_a_detached_process_does_not_survive_stop(pods):
    tag = uuid.uuid4().int % 10**6  # each survivor sleeps a duration only this test uses
    setsid, double, new_session = (f"sleep 300.{tag}{n}" for n in (1, 2, 3))
    spec = pods.spec(
        f"setsid {setsid} & ( {double} & ) ; "
        f"python3 -c \"import subprocess; subprocess.Popen('{new_session}'.split(), start_new_session=True)\"; "
        "echo all started; sleep 300"
    )
    assert pods.supervisor.start(spec)
    pods.wait_for_log(spec, "all started")
    survivors = [setsid + " ", double + " ", new_session + " "]
    assert len(host_processes_exactly(survivors)) == 3
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=1, outcome="stopped")
    result = pods.wait(spec)
    assert result.outcome == "stopped"
    # Reported only once nothing of the pod is left on the host.
    assert host_processes_exactly(survivors) == []
    assert subprocess.run(["podman", "container", "exists", f"tp-{spec.job_uid}-a1-r0"]).returncode == 1


def test_the_environment_is_clean_and_the_user_is_not_root(pods, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "worker-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tidepool")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    spec = pods.spec("id -u; grep CapEff /proc/self/status; env; touch /usr/bin/x 2>&1 || echo image read-only")
    assert pods.run(spec).exit_code == 0
    log = pods.log(spec)
    lines = log.splitlines()
    assert lines[1] != "0" and int(lines[1]) == 65534
    assert "CapEff:\t0000000000000000" in log
    for secret in ("worker-secret", "DATABASE_URL", "REDIS_URL", "SECRET_KEY"):
        assert secret not in log
    assert "image read-only" in log
    assert read_exit_file(spec.exit_path) == 0


def test_the_example_trains_inside_and_saves_on_preemption(pods):
    spec = pods.spec("python3 /opt/tidepool/examples/train_linear.py --steps 100000 --checkpoint-every 50 "
                     "--step-sleep 0.01")
    assert pods.supervisor.start(spec)
    pods.wait_for_log(spec, "saving a checkpoint")
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=5, outcome="preempted")
    result = pods.wait(spec)
    assert result.outcome == "preempted" and result.exit_code == 0, pods.log(spec)
    assert "stop requested: checkpoint saved" in pods.log(spec)
    assert any(name.startswith("ckpt-") for name in os.listdir(spec.checkpoint_dir))


def test_network_mode_none_has_no_network(tmp_path, pod_image):
    harness = Pods(tmp_path, pod_image, network=NetworkConfig(mode="none"))
    spec = harness.spec("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    try:
        harness.run(spec)
    finally:
        harness.supervisor.shutdown(grace_s=0)
    assert harness.log(spec).splitlines()[1:-1] == ["lo"]

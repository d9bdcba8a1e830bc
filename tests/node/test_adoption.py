"""A node agent that stops leaves its pods running; the next one adopts them (issue 23, DESIGN §6).

Each test starts a pod under a supervisor in another process, which then exits without stopping
it (as a node worker does on an upgrade), and hands the pod to a new supervisor in this process.
Runtimes: host process groups (always), host pods in cgroups (a root worker with writable cgroup
v1 controllers) and Podman containers (rootful Podman and the pod image); skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.models import Job, Pod, Workspace
from scheduler.node import agent as agent_module
from scheduler.node.agent import PodAgent
from scheduler.node.orphans import release_orphaned_pods
from scheduler.node.reconcile import reconcile
from scheduler.node.runtime.cgroups import writable_controllers
from scheduler.node.runtime.process import PodSpec, PodSupervisor
from scheduler.node.specs import pod_spec
from scheduler.node.workplace import prepare_workplace
from scheduler.services.jobs import job_stop, job_submit
from scheduler.services.leases import lease_acquire, node_role, this_owner
from scheduler.services.lifecycle import pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 30.0

# The supervisor of the "previous agent": starts one pod, prints its pid, and exits without stopping it.
PREVIOUS_AGENT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from scheduler.node.runtime.process import PodSpec, PodSupervisor
kind, image, raw = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
raw["gpu_indices"] = tuple(raw["gpu_indices"]); raw["dirs"] = tuple(tuple(d) for d in raw["dirs"])
raw["env_allow"] = tuple(raw["env_allow"]); raw["mounts"] = tuple(raw["mounts"])
spec = PodSpec(**raw)
if kind == "cgroups":
    from scheduler.node.runtime.cgroups import writable_controllers
    from scheduler.node.runtime.host_cgroups import CgroupSupervisor
    supervisor = CgroupSupervisor(writable_controllers()[0], pids_max=256, default_memory_gib=1)
elif kind == "podman":
    from scheduler.node.runtime.container import ContainerConfig, ContainerSupervisor
    supervisor = ContainerSupervisor(ContainerConfig(default_image=image))
else:
    supervisor = PodSupervisor()
assert supervisor.start(spec)
print(supervisor.running()[0].pid, flush=True)
os._exit(0)  # no shutdown, no stop: the agent is gone, its pod is not
"""


def _cgroups_problem() -> str:
    return writable_controllers()[1] if os.geteuid() == 0 else "host pods in cgroups need a root worker"


@pytest.fixture(params=["process", "cgroups", "podman"])
def runtime(request) -> tuple[str, str]:
    """(kind, image): the runtime under test, skipped with the reason where it cannot run here."""
    kind = request.param
    if kind == "cgroups" and (problem := _cgroups_problem()):
        pytest.skip(f"host pods in cgroups: {problem}")
    if kind == "podman":
        return kind, request.getfixturevalue("pod_image")
    return kind, ""


@pytest.fixture(scope="session")
def pod_image() -> str:
    from scheduler.node.runtime.container import podman_available
    from scheduler.node.runtime.image import ImageBuildError, build_image

    missing = podman_available()
    if missing is not None:
        pytest.skip(f"container adoption needs rootful Podman: {missing}")
    try:
        return build_image(log=lambda line: None)
    except ImageBuildError as error:
        pytest.skip(f"the pod image could not be built: {error}")


def supervisor_of(kind: str, image: str, reports: list) -> PodSupervisor:
    def on_exit(*report) -> None:
        reports.append(report)

    if kind == "cgroups":
        from scheduler.node.runtime.host_cgroups import CgroupSupervisor

        return CgroupSupervisor(writable_controllers()[0], pids_max=256, default_memory_gib=1, on_exit=on_exit)
    if kind == "podman":
        from scheduler.node.runtime.container import ContainerConfig, ContainerSupervisor

        return ContainerSupervisor(ContainerConfig(default_image=image), on_exit=on_exit)
    return PodSupervisor(on_exit=on_exit)


def spec_for(root: Path, command: str) -> PodSpec:
    uid = str(uuid.uuid4())
    pods, checkpoints = root / "pods", root / "checkpoints"
    attempt = pods / uid / "attempt-1"
    return PodSpec(
        pod_id=7, job_id=7, attempt=1, command=command, env={}, gpu_indices=(), rank=0, world_size=1,
        master_addr="127.0.0.1", master_port=29500, checkpoint_dir=str(checkpoints / uid), restart_count=0,
        workdir=str(pods / uid / "work"), log_path=str(attempt / "main-0.log"),
        progress_path=str(attempt / "progress-0.json"), job_uid=uid, exit_path=str(attempt / "main-0.exit"),
        dirs=((str(pods), str(attempt)), (str(pods), str(pods / uid / "work")),
              (str(checkpoints), str(checkpoints / uid))),
    )


def start_under_previous_agent(kind: str, image: str, spec: PodSpec) -> int:
    """Start `spec` in another process that then exits, leaving the pod running. Returns its pid."""
    done = subprocess.run([sys.executable, "-c", PREVIOUS_AGENT, str(ROOT), kind, image, json.dumps(asdict(spec))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def wait_for_log(spec: PodSpec, text: str) -> str:
    return wait_for(lambda: text in Path(spec.log_path).read_text(errors="replace") and Path(spec.log_path)
                    .read_text(errors="replace"), TIMEOUT_S, f"{text!r} in the pod's log")


def process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


# Waits in its workdir for a file named "go", then ends with its own code (3): no signal involved.
WAITS_THEN_EXITS_3 = "echo up; while [ ! -f go ]; do sleep 0.05; done; echo bye; exit 3"


def test_a_running_pod_is_adopted_and_its_own_exit_reported_once(runtime, tmp_path):
    kind, image = runtime
    spec = spec_for(tmp_path, WAITS_THEN_EXITS_3)
    pid = start_under_previous_agent(kind, image, spec)
    wait_for_log(spec, "up")
    assert process_alive(pid)
    reports: list = []
    supervisor = supervisor_of(kind, image, reports)
    try:
        assert supervisor.adopt(spec)
        [running] = supervisor.running()
        assert (running.pod_id, running.attempt, running.pid) == (spec.pod_id, spec.attempt, pid)  # the same pod
        assert not supervisor.start(spec)  # its attempt is known here: never a second copy
        time.sleep(0.5)
        assert process_alive(pid) and reports == []  # adopting killed nothing
        Path(spec.workdir, "go").touch()
        result = supervisor.wait(spec.pod_id, spec.attempt, TIMEOUT_S)
        assert result is not None, Path(spec.log_path).read_text()
        assert (result.exit_code, result.outcome, result.killed) == (3, "failed", False)
        wait_for(lambda: reports, 5, "the exit report")
        time.sleep(0.3)
        assert reports == [(spec.pod_id, spec.attempt, 3, "failed")]  # once, with its real code
        assert "bye" in Path(spec.log_path).read_text() and supervisor.running() == []
    finally:
        supervisor.shutdown(grace_s=0)


def test_an_adopted_pod_that_is_stopped_gets_sigterm_and_its_grace(runtime, tmp_path):
    kind, image = runtime
    command = "trap 'echo saved > saved; exit 0' TERM; echo up; while :; do sleep 0.05; done"
    spec = spec_for(tmp_path, command)
    start_under_previous_agent(kind, image, spec)
    wait_for_log(spec, "up")
    reports: list = []
    supervisor = supervisor_of(kind, image, reports)
    try:
        assert supervisor.adopt(spec)
        supervisor.terminate(spec.pod_id, spec.attempt, grace_s=20, outcome="stopped")
        result = supervisor.wait(spec.pod_id, spec.attempt, TIMEOUT_S)
        assert result is not None and result.outcome == "stopped" and not result.killed
        assert Path(spec.workdir, "saved").read_text().strip() == "saved"  # it had its chance to save
    finally:
        supervisor.shutdown(grace_s=0)


def test_a_pod_that_exited_while_no_agent_ran_is_reported_with_its_code(runtime, tmp_path):
    kind, image = runtime
    spec = spec_for(tmp_path, "echo up; exit 3")
    start_under_previous_agent(kind, image, spec)
    wait_for(lambda: Path(spec.exit_path).exists(), TIMEOUT_S, "the pod to end")
    reports: list = []
    supervisor = supervisor_of(kind, image, reports)
    try:
        if kind == "podman":  # the container is still there, exited: Podman keeps its exit code
            assert supervisor.adopt(spec)
            result = supervisor.wait(spec.pod_id, spec.attempt, TIMEOUT_S)
            assert result is not None and (result.exit_code, result.outcome) == (3, "failed")
            wait_for(lambda: reports, 5, "the exit report")
            assert reports == [(spec.pod_id, spec.attempt, 3, "failed")]
        else:  # nothing left to adopt: the node reads the exit file (orphans.py, reconcile.py)
            time.sleep(0.3)
            assert not supervisor.adopt(spec)
            assert Path(spec.exit_path).read_text().strip() == "3"
    finally:
        supervisor.shutdown(grace_s=0)


# -- through the node agent and the database (host runtime) -------------------------------------

@pytest.fixture
def placed_pod(transactional_db, settings, tmp_path):
    """A one-pod job placed on gpu-01 (as the scheduler would), its pod spec as the node builds it."""
    settings.TIDEPOOL_POD_RUNTIME = "host"
    node = node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, heartbeat=True)
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team")
    space.members.add(user)
    quota = quota_create(name="team", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64, workspaces=[space])

    def place(command: str) -> tuple[Job, Pod, PodSpec]:
        job = job_submit(user=user, workspace=space, quota=quota, name="adopted", command=command,
                         roles=[{"name": "worker", "pod_count": 1, "gpus": 1}], fault_tolerance=False,
                         max_restarts=0)
        from scheduler.executors import set_executor
        from scheduler.loop.cycle import schedule_once

        class NoLaunch:  # the start "went to the previous agent": the test starts the pod itself
            def launch(self, launches) -> None:
                pass

            def __getattr__(self, name):
                return lambda *args, **kwargs: None

        previous = set_executor(NoLaunch())
        try:
            schedule_once()
        finally:
            set_executor(previous)
        pod = Pod.objects.select_related("job", "job__workspace", "node").get(job=job)
        assert pod.node == node
        spec = pod_spec(pod, job, world_size=1, master_addr="127.0.0.1")
        prepare_workplace(job, pod, spec)
        return job, pod, spec

    return node, place


def host_kind() -> str:
    return "process" if _cgroups_problem() else "cgroups"


def test_a_restarted_agent_adopts_the_pod_and_the_attempt_goes_on(placed_pod, monkeypatch):
    node, place = placed_pod
    job, pod, spec = place(WAITS_THEN_EXITS_3)
    pid = start_under_previous_agent(host_kind(), "", spec)
    assert pod_running(pod_id=pod.pk, attempt=pod.attempt, pid=pid)  # the previous agent's report
    wait_for_log(spec, "up")
    exits: list = []
    real_pod_exited = agent_module.pod_exited

    def counted(**report):
        exits.append(report)
        return real_pod_exited(**report)

    monkeypatch.setattr(agent_module, "pod_exited", counted)
    agent = PodAgent()
    role = node_role(node.name)
    assert lease_acquire(role=role, owner=this_owner())[0]
    try:
        counts = release_orphaned_pods(node=node, reason="node gpu-01's worker restarted", owner=this_owner(),
                                       role=role, agent=agent)
        assert counts["adopted"] == 1 and counts["killed"] == 0
        assert [(r.pod_id, r.pid) for r in agent.supervisor.running()] == [(pod.pk, pid)]
        assert reconcile(agent, [node.name]).get("terminated", 0) == 0
        pod.refresh_from_db()
        assert pod.status == PodStatus.RUNNING and pod.attempt == 1 and process_alive(pid)
        Path(spec.workdir, "go").touch()
        wait_for(lambda: Pod.objects.get(pk=pod.pk).status == PodStatus.FAILED, TIMEOUT_S, "the exit report")
        time.sleep(0.3)
        reconcile(agent, [node.name])  # nothing more to report
        pod.refresh_from_db()
        assert (pod.exit_code, pod.attempt, pod.reason) == (3, 1, "exit code 3")
        assert [report["exit_code"] for report in exits] == [3]
        job.refresh_from_db()
        assert job.attempt == 1 and job.restart_count == 0
    finally:
        agent.shutdown(grace_s=0)


def test_an_adopted_pod_whose_job_was_stopped_meanwhile_is_stopped_with_its_grace(placed_pod):
    node, place = placed_pod
    command = "trap 'echo saved > saved; exit 0' TERM; echo up; while :; do sleep 0.05; done"
    job, pod, spec = place(command)
    pid = start_under_previous_agent(host_kind(), "", spec)
    pod_running(pod_id=pod.pk, attempt=pod.attempt, pid=pid)
    wait_for_log(spec, "up")
    job_stop(job=job, user=None, reason="no longer wanted")  # while no agent ran the node
    agent = PodAgent()
    role = node_role(node.name)
    assert lease_acquire(role=role, owner=this_owner())[0]
    try:
        assert release_orphaned_pods(node=node, reason="x", owner=this_owner(), role=role, agent=agent)["adopted"] == 1
        reconcile(agent, [node.name])  # stops it if the adoption did not already (the pod ended or fenced)
        wait_for(lambda: not agent.supervisor.running(), TIMEOUT_S, "the pod to stop")
        assert Job.objects.get(pk=job.pk).status == JobStatus.STOPPED
        assert Path(spec.workdir, "saved").read_text().strip() == "saved"  # SIGTERM and its grace, not a kill
        assert not process_alive(pid)
    finally:
        agent.shutdown(grace_s=0)

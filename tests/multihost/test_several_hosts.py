"""Several hosts on one machine (issue 23's Must show, DESIGN §6), on the bed `bin/testbed up` makes as
docs/operations.md says: the control plane (console + scheduler on PostgreSQL) at 10.231.0.1, five node
hosts, each a network namespace with its own address and its own `bin/node-agent` holding only its node's
key, host-5's wall clock 5 minutes ahead, checkpoints on storage every host shares.

- the bed: every node registered from its own address, each agent in its host's namespace with no
  control-plane credential, the host with the clock 5 minutes off alive with correct heartbeats and lease;
- a 2-pod torchrun DDP job (gloo, examples/ddp_multinode.py) on two hosts (rank 1 meets rank 0 at rank
  0's host address), preempted by draining its two nodes, resumed on two other hosts from the shared
  checkpoint, from the epoch of the last snapshot the first attempt saved; pod logs stay on their hosts;
- a host cut off (its link down in its namespace): its agent fences itself, the node is marked lost after
  the node timeout and its job runs elsewhere; with the link back, the old pod is gone and no attempt was
  ever alive twice, sampled from every host's processes all along; the figure: cut -> running elsewhere;
- an agent restart with 10 running pods: every pod adopted (same processes, same attempts), the figure.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from tests.multihost.bed import (
    ROOT,
    Bed,
    bed_environment,
    bed_unavailable,
    environ,
    host_pids,
    pod_processes,
    running_pods,
    started_bed,
)
from tests.waiting import wait_for

HOSTS = 5
NODE_TIMEOUT_S = 12
CONTROL_PLANE_SECRETS = ("DATABASE_URL", "SECRET_KEY", "REDIS_URL", "CELERY_BROKER_URL")

UNAVAILABLE = bed_unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    base = tmp_path_factory.mktemp("testbed")
    env = bed_environment(base, "tidepool_testbed_pytest", NODE_TIMEOUT_S)
    try:
        yield started_bed(base, env, HOSTS, "--clock", "host-5=+5m")
    finally:
        Bed(base, env).testbed("down", timeout=180)
        for host in [f"host-{k}" for k in range(1, HOSTS + 1)]:
            assert not os.path.exists(f"/run/netns/tp-{host}"), f"namespace tp-{host} left behind"


def submit(bed: Bed, name: str, command: str, *, pods: int = 1, gpus: int = 4, env: dict | None = None) -> int:
    body = {"name": name, "workspace": "language", "quota": "general", "command": command, "idle_mode": "off",
            "fault_tolerance": True, "environment": env or {},
            "roles": [{"name": "worker", "pod_count": pods, "gpus": gpus, "cpu": 1, "memory_gib": 1,
                       **({"gpu_type": "A100"} if gpus else {"cpu_only": True})}]}
    return bed.api("admin", "POST", "jobs/", body)["id"]


def test_the_bed_each_host_its_address_and_key_only_and_a_clock_5_minutes_off(bed: Bed) -> None:
    status = bed.testbed("status")
    assert f"{HOSTS + 2} of {HOSTS + 2} processes running" in status and f"console answers at {bed.url}/" in status
    assert "host-3 at 10.231.0.13: link UP" in status, status
    assert bed.addresses() == {
        f"host-{k}": f"10.231.0.{10 + k}" for k in range(1, HOSTS + 1)}
    for host in bed.hosts():
        pid = bed.agent_pid(host)
        assert pid in host_pids(host), f"{host}'s agent is not in its namespace"
        held = environ(pid)
        assert not [name for name in CONTROL_PLANE_SECRETS if name in held], held.keys()
        assert held["TIDEPOOL_NODE_KEY"].startswith("tpn_") and held["TIDEPOOL_CONSOLE_URL"] == bed.url
    # host-5's wall clock is 5 minutes ahead (its own log says so) ...
    first = re.search(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", bed.agent_log("host-5"), re.M).group(1)
    skew_s = (datetime.strptime(first, "%Y-%m-%d %H:%M:%S") - datetime.utcnow()).total_seconds()
    assert 240 < skew_s < 330, skew_s
    # ... and past two node timeouts the console, by its own clock, still has it alive, its heartbeat fresh
    # (not 5 minutes ahead) and the node's lease held by that agent and expiring within the lease period.
    time.sleep(2 * NODE_TIMEOUT_S)
    check = ("import json; from django.utils import timezone; from scheduler.models import Node, InstanceLease as Lease;"
             "n = Node.objects.get(name='host-5'); l = Lease.objects.get(role='node:host-5'); now = timezone.now();"
             "print(json.dumps({'lost': n.lost, 'beat_age': (now - n.last_heartbeat).total_seconds(),"
             "'lease_left': (l.expires_at - now).total_seconds(), 'owner': l.owner}))")
    seen = json.loads(bed.shell(check))
    assert not seen["lost"] and 0 <= seen["beat_age"] < 3, seen
    assert 0 < seen["lease_left"] <= 3.5 and seen["owner"].split(":")[1] == str(bed.agent_pid("host-5")), seen
    assert not bed.nodes()["host-5"]["lost"]


def test_ddp_on_two_hosts_preempted_and_resumed_on_two_others_from_the_shared_checkpoint(bed: Bed) -> None:
    pytest.importorskip("torch", reason="torch is not installed in the venv (.ci/run installs it)")
    command = f"torchrun {ROOT / 'examples' / 'ddp_multinode.py'} 100000 3"
    job_id = submit(bed, "ddp-two-hosts", command, pods=2, env={"PYTHONUNBUFFERED": "1"})
    first = wait_for(lambda: running_pods(bed, job_id), 120, "the DDP job to run on two hosts", step=0.5)
    first_hosts = [pod["node"] for pod in first]
    assert len(set(first_hosts)) == 2, first_hosts
    rank0_addr = bed.addresses()[first_hosts[0]]
    for pod, host in zip(first, first_hosts, strict=True):  # each pod's processes in its own host's namespace
        pids = pod_processes(host).get((job_id, 1))
        assert pids, f"no process of pod {pod['id']} in {host}'s namespace"
        assert environ(pids[0])["MASTER_ADDR"] == rank0_addr

    def saved_epochs(pod_id: int) -> list[int]:
        text = bed.api("admin", "GET", f"jobs/{job_id}/logs/?pod={pod_id}&lines=400")["text"]
        return [int(n) for n in re.findall(r"Epoch (\d+) \| Training snapshot saved", text)]

    wait_for(lambda: len(saved_epochs(first[0]["id"])) >= 2, 180, "rank 0 to save two snapshots", step=1)
    for host in first_hosts:
        bed.api("admin", "POST", f"nodes/{host}/drain/")
    wait_for(lambda: bed.job(job_id)["attempt"] >= 2, 60, "the preempted job to go back to the queue", step=0.5)
    last_saved = max(saved_epochs(first[0]["id"]))  # the first attempt's pods have exited: its log is complete
    detail = bed.job(job_id)
    assert detail["preemption_count"] == 1 and detail["restart_count"] == 0, detail

    second = wait_for(lambda: running_pods(bed, job_id), 120, "the job to run again", step=0.5)
    second_hosts = [pod["node"] for pod in second]
    assert len(set(second_hosts)) == 2 and not set(second_hosts) & set(first_hosts), (first_hosts, second_hosts)
    for host in first_hosts:
        assert (job_id, 1) not in pod_processes(host), f"the first attempt still runs on {host}"

    def resumed_from(pod_id: int) -> list[int]:
        text = bed.api("admin", "GET", f"jobs/{job_id}/logs/?pod={pod_id}&lines=400")["text"]
        return [int(n) for n in re.findall(r"Resuming training from snapshot at Epoch (\d+)", text)]

    for pod in second:  # every rank loaded rank 0's snapshot from the storage the hosts share
        assert wait_for(lambda p=pod: resumed_from(p["id"]), 120, "the second attempt to resume", step=1) == [last_saved]
    # The snapshot is on the storage every host shares; the pods' logs stay in their hosts' own data directories.
    assert len(list((bed.base / "shared" / "checkpoints").glob("*/snapshot.pt"))) == 1
    assert not list((bed.base / "data").rglob("*.log")), "a host's data directory is seen outside it"
    bed.api("admin", "POST", f"jobs/{job_id}/stop/")
    bed.shell("from scheduler.models import Node; from scheduler.services.nodes import node_set_schedulable as s;"
              f"[s(node=n, schedulable=True) for n in Node.objects.filter(name__in={first_hosts!r})]; print('ok')")
    wait_for(lambda: bed.job(job_id)["status"] == "Stopped", 60, "the DDP job to stop", step=0.5)


def test_a_host_cut_off_is_lost_its_job_runs_elsewhere_and_its_old_pod_is_fenced(bed: Bed) -> None:
    job_id = submit(bed, "cut-off", "while true; do sleep 0.2; done")
    pod = wait_for(lambda: running_pods(bed, job_id), 60, "the job to run", step=0.3)[0]
    cut_host = pod["node"]
    wait_for(lambda: (job_id, 1) in pod_processes(cut_host), 10, "its pod's process on its host")

    alive_together: list[tuple[float, dict]] = []
    samples = [0]
    stop = threading.Event()

    def sample() -> None:  # every host's processes, over and over: which attempts of the job run where
        while not stop.is_set():
            seen = {host: sorted(a for (j, a) in pod_processes(host) if j == job_id) for host in bed.hosts()}
            attempts = {a for found in seen.values() for a in found}
            if len(attempts) > 1:
                alive_together.append((time.monotonic(), seen))
            samples[0] += 1
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        cut_at = time.monotonic()
        bed.testbed("cut", cut_host)
        wait_for(lambda: (job_id, 1) not in pod_processes(cut_host), NODE_TIMEOUT_S, "the agent to fence its pod",
                 step=0.1)
        fenced_after = time.monotonic() - cut_at
        wait_for(lambda: bed.nodes()[cut_host]["lost"], NODE_TIMEOUT_S + 30, "the node to be marked lost", step=0.2)
        lost_after = time.monotonic() - cut_at
        elsewhere = wait_for(lambda: running_pods(bed, job_id), 60, "the job to run elsewhere", step=0.2)
        running_after = time.monotonic() - cut_at
        assert elsewhere[0]["node"] != cut_host and bed.job(job_id)["attempt"] == 2
        bed.testbed("mend", cut_host)
        wait_for(lambda: not bed.nodes()[cut_host]["lost"], 30, "the host to heartbeat again", step=0.3)
        time.sleep(3)  # passes of the returned agent: it starts nothing of attempt 1 again
    finally:
        stop.set()
        sampler.join(10)
    assert samples[0] > 20 and not alive_together, alive_together[:3]
    assert (job_id, 1) not in pod_processes(cut_host)
    assert (job_id, 2) in pod_processes(elsewhere[0]["node"])
    assert fenced_after < NODE_TIMEOUT_S <= lost_after + 1, (fenced_after, lost_after)
    detail = bed.job(job_id)
    assert any(f"node {cut_host} lost" in event["reason"] for event in detail["events"]), detail["events"]
    figure = {"figure": "cut -> running elsewhere", "node_timeout_s": NODE_TIMEOUT_S,
              "pod_fenced_s": round(fenced_after, 1), "node_lost_s": round(lost_after, 1),
              "running_elsewhere_s": round(running_after, 1), "load": os.getloadavg()}
    print(json.dumps(figure))
    (bed.base / "figure-cut.json").write_text(json.dumps(figure))
    bed.api("admin", "POST", f"jobs/{job_id}/stop/")


def test_an_agent_restart_with_10_running_pods_adopts_them_all(bed: Bed) -> None:
    jobs = [submit(bed, f"adopt-{k}", "sleep 600", gpus=0) for k in range(10)]
    wait_for(lambda: all(running_pods(bed, job_id) for job_id in jobs), 120, "10 jobs to run", step=0.5)
    hosts = {running_pods(bed, job_id)[0]["node"] for job_id in jobs}
    assert len(hosts) == 1, hosts  # best fit packs them on one node
    host = hosts.pop()
    before = {key: pids for key, pids in pod_processes(host).items() if key[0] in jobs}
    assert len(before) == 10

    stop_at, stop_wall = time.monotonic(), time.time()
    bed.testbed("stop-agent", host)
    stopped_s = time.monotonic() - stop_at
    bed.testbed("start-agent", host)
    wait_for(lambda: "adopted 10 running pods" in bed.agent_log(host), 60, "the new agent to adopt 10 pods", step=0.1)
    adopted_s = time.monotonic() - stop_at

    def new_heartbeat() -> float:  # seconds from the stop to the console's stamp (its clock, this machine's)
        stamp = bed.nodes()[host]["last_heartbeat"]
        seconds = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - stop_wall
        return seconds if seconds > adopted_s else 0.0

    reported_s = wait_for(new_heartbeat, 30, "the new agent's first heartbeat after the adoption", step=0.1)
    assert {key: pids for key, pids in pod_processes(host).items() if key[0] in jobs} == before  # same processes
    for job_id in jobs:
        detail = bed.job(job_id)
        assert (detail["status"], detail["attempt"], detail["preemption_count"], detail["restart_count"]) == (
            "Running", 1, 0, 0), detail
    figure = {"figure": "agent restart, 10 running pods", "agent_stop_s": round(stopped_s, 1),
              "adopted_s": round(adopted_s, 1), "first_heartbeat_after_adoption_s": round(reported_s, 1),
              "load": os.getloadavg()}
    print(json.dumps(figure))
    (bed.base / "figure-restart.json").write_text(json.dumps(figure))
    for job_id in jobs:
        bed.api("admin", "POST", f"jobs/{job_id}/stop/")

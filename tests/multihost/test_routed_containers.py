"""A job's containers on several hosts (issue 22, DESIGN §6): the routed pod network, on the bed that
`bin/testbed up --pods containers` makes as docs/operations.md says: four hosts, each agent running its
pods as Podman containers with its own pod subnet (10.214.K.0/24), routes to the others' (host-gw), the
bed's whole subnet (console, database, every host) blocked to pods.

- the pods of one job on two hosts meet at MASTER_ADDR:MASTER_PORT (rank 0's pod address, chosen by the
  console), and rank 0 sees rank 1's own address (pod-to-pod traffic is not NATed); pods of another job,
  on other hosts and on the same host, reach neither of them, nor the console, nor a node agent, which
  the machine itself reaches;
- pytorch/examples' DDP tutorial (examples/ddp_multinode.py, gloo) under a bare torchrun in the torch
  image, one container on each of two hosts: it trains, both hosts are drained (preemption), and it
  resumes in containers on the two other hosts from the epoch of its last snapshot.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import subprocess
from collections.abc import Iterator

import pytest

from scheduler.node.runtime.container import podman_available
from tests.multihost.bed import ROOT, Bed, bed_environment, bed_unavailable, running_pods, started_bed
from tests.waiting import wait_for

HOSTS = 4
CONSOLE = ("10.231.0.1", 8900)

UNAVAILABLE = bed_unavailable() or podman_available()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))

# Rank 0 listens on MASTER_PORT and prints who connects; rank 1 connects to MASTER_ADDR:MASTER_PORT, then
# listens on MASTER_PORT + 1 (so another job's pod can try both hosts). Neither uses a single quote.
MEET = """
import os, socket, time
addr, port, rank = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), os.environ["RANK"]
def serve(port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(8)
    print("LISTENING", port, flush=True)
    while True:
        conn, peer = server.accept()
        print("ACCEPTED", peer[0], flush=True)
        conn.close()
if rank == "0":
    serve(port)
deadline = time.time() + 120
while True:
    try:
        socket.create_connection((addr, port), timeout=3).close()
        print("REACHED", addr, port, flush=True)
        break
    except OSError as error:
        if time.time() > deadline:
            raise SystemExit(f"rank 1 could not reach rank 0: {error}")
        time.sleep(1)
serve(port + 1)
"""

PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=4).close()
        print("REACHED", target, flush=True)
    except OSError as error:
        print("BLOCKED", target, type(error).__name__, flush=True)
"""


def python_command(code: str, *args: str) -> str:
    assert "'" not in code
    return "python3 -c '" + code + "' " + " ".join(args)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    base = tmp_path_factory.mktemp("testbed-containers")
    env = bed_environment(base, "tidepool_testbed_containers", 20)
    built = subprocess.run([str(ROOT / "bin" / "build-pod-image")], cwd=ROOT, capture_output=True, text=True,
                           timeout=1800)
    if built.returncode != 0:
        pytest.skip(f"the pod image could not be built: {built.stderr.strip()[-1500:]}")
    try:
        yield started_bed(base, env, HOSTS, "--pods", "containers")
    finally:
        Bed(base, env).testbed("down", timeout=300)
        left = subprocess.run(["podman", "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True)
        assert "tidepool-pods-10-214-1-0-24" not in left.stdout, "the bed left its pod networks behind"


def submit(bed: Bed, name: str, command: str, *, pods: int, gpus: int, image: str = "") -> int:
    role = {"name": "worker", "pod_count": pods, "gpus": gpus, "cpu": 1, "memory_gib": 2,
            **({"gpu_type": "A100"} if gpus else {"cpu_only": True})}
    body = {"name": name, "workspace": "language", "quota": "general", "command": command,
            "idle_mode": "acceptable", "fault_tolerance": True, "environment": {"PYTHONUNBUFFERED": "1"},
            "roles": [role], **({"image": image} if image else {})}
    return bed.api("admin", "POST", "jobs/", body)["id"]


def log_of(bed: Bed, job_id: int, pod_id: int) -> str:
    return bed.api("admin", "GET", f"jobs/{job_id}/logs/?pod={pod_id}&lines=400")["text"]


def pod_rows(bed: Bed, job_id: int) -> dict[int, dict]:
    """pod id -> its address, node and node's subnet, as the console chose and stored them."""
    code = ("import json; from scheduler.models import Pod;"
            f"print(json.dumps({{p.pk: {{'address': p.address, 'node': p.node.name, 'subnet': p.node.pod_subnet,"
            f"'attempt': p.attempt}} for p in Pod.objects.select_related('node').filter(job_id={job_id})}}))")
    return {int(key): value for key, value in json.loads(bed.shell(code)).items()}


def reachable_from_here(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=4).close()
        return True
    except OSError:
        return False


def test_one_jobs_pods_meet_across_hosts_and_no_other_pod_reaches_them(bed: Bed) -> None:
    meet = submit(bed, "meet", python_command(MEET), pods=2, gpus=4)
    rank0, rank1 = wait_for(lambda: running_pods(bed, meet), 180, "the 2-pod job to run on two hosts", step=0.5)
    assert rank0["node"] != rank1["node"]
    rows = pod_rows(bed, meet)
    for pod in (rank0, rank1):  # each pod at an address of its own node's subnet
        row = rows[pod["id"]]
        assert ipaddress.ip_address(row["address"]) in ipaddress.ip_network(row["subnet"]), row
    addr0, addr1 = rows[rank0["id"]]["address"], rows[rank1["id"]]["address"]
    wait_for(lambda: f"REACHED {addr0} " in log_of(bed, meet, rank1["id"]), 150, "rank 1 to reach rank 0", step=1)
    # Rank 0 saw rank 1's own address: pod-to-pod traffic crosses the hosts unNATed.
    wait_for(lambda: f"ACCEPTED {addr1}" in log_of(bed, meet, rank0["id"]), 30, "rank 0 to see rank 1", step=1)
    port = int(re.search(r"LISTENING (\d+)", log_of(bed, meet, rank0["id"])).group(1))
    wait_for(lambda: f"LISTENING {port + 1}" in log_of(bed, meet, rank1["id"]), 30, "rank 1 to listen", step=1)

    log_ports = json.loads(bed.shell("import json; from scheduler.models import NodeKey;"
                                     "print(json.dumps({k.node_name: k.log_port for k in NodeKey.objects.all()"
                                     " if k.log_port}))"))
    agent = next(iter(sorted(log_ports.items())))
    agent_target = (bed.addresses()[agent[0]], agent[1])
    # The machine itself reaches the console and an agent's log server: what a pod is refused exists.
    assert reachable_from_here(*CONSOLE) and reachable_from_here(*agent_target)
    targets = [f"{addr0}:{port}", f"{addr1}:{port + 1}", f"{CONSOLE[0]}:{CONSOLE[1]}",
               f"{agent_target[0]}:{agent_target[1]}"]

    def probe(name: str, pods: int, gpus: int) -> dict[str, list[str]]:
        job_id = submit(bed, name, python_command(PROBE, *targets), pods=pods, gpus=gpus)
        wait_for(lambda: bed.job(job_id)["status"] in ("Succeeded", "Failed"), 180, f"{name} to end", step=1)
        job = bed.job(job_id)
        assert job["status"] == "Succeeded", job
        return {pod["node"]: log_of(bed, job_id, pod["id"]).splitlines() for pod in job["pods"]}

    # Another job's pods on the two other hosts (routed across hosts), then one on a host of `meet` (its bridge).
    seen = probe("probe-other-hosts", 2, 4)
    assert not set(seen) & {rank0["node"], rank1["node"]}
    seen |= probe("probe-same-host", 1, 0)
    assert set(seen) & {rank0["node"], rank1["node"]}, seen
    for node, lines in seen.items():
        for target in targets:
            assert any(line.startswith(f"BLOCKED {target} ") for line in lines), (node, target, lines)
    bed.api("admin", "POST", f"jobs/{meet}/stop/")
    wait_for(lambda: bed.job(meet)["status"] == "Stopped", 60, "the meet job to stop", step=0.5)


def test_ddp_tutorial_in_containers_on_two_hosts_preempted_and_resumed_on_two_others(bed: Bed) -> None:
    built = subprocess.run([str(ROOT / "bin" / "build-pod-image"), "--with-torch", "--print-name"], cwd=ROOT,
                           capture_output=True, text=True, timeout=3600)
    if built.returncode != 0:
        pytest.skip(f"the torch pod image could not be built: {built.stderr.strip()[-1500:]}")
    image = built.stdout.strip().splitlines()[-1]
    job_id = submit(bed, "ddp-containers", "torchrun /opt/tidepool/examples/ddp_multinode.py 100000 3", pods=2,
                    gpus=4, image=image)
    first = wait_for(lambda: running_pods(bed, job_id), 180, "the DDP job to run on two hosts", step=0.5)
    first_hosts = {pod["node"] for pod in first}
    assert len(first_hosts) == 2

    def saved_epochs(pod_id: int) -> list[int]:
        return [int(n) for n in re.findall(r"Epoch (\d+) \| Training snapshot saved", log_of(bed, job_id, pod_id))]

    wait_for(lambda: len(saved_epochs(first[0]["id"])) >= 2, 300, "rank 0 to save two snapshots", step=1)
    assert "Epoch" in log_of(bed, job_id, first[1]["id"])  # rank 1 trains too: the gradients cross the hosts
    for host in first_hosts:
        bed.api("admin", "POST", f"nodes/{host}/drain/")
    wait_for(lambda: bed.job(job_id)["attempt"] >= 2, 90, "the preempted job to go back to the queue", step=0.5)
    wait_for(lambda: all(p["status"] != "Running" for p in bed.job(job_id)["pods"] if p["attempt"] == 1), 90,
             "the first attempt's containers to end", step=0.5)
    last_saved = max(saved_epochs(first[0]["id"]))
    assert bed.job(job_id)["preemption_count"] == 1

    second = wait_for(lambda: running_pods(bed, job_id), 180, "the job to run again", step=0.5)
    assert not {pod["node"] for pod in second} & first_hosts
    rows = pod_rows(bed, job_id)
    assert {rows[pod["id"]]["node"] for pod in second} == {pod["node"] for pod in second}

    def resumed_from(pod_id: int) -> list[int]:
        return [int(n) for n in re.findall(r"Resuming training from snapshot at Epoch (\d+)", log_of(bed, job_id, pod_id))]

    for pod in second:  # every rank, in its container on a new host, loaded rank 0's last snapshot
        assert wait_for(lambda p=pod: resumed_from(p["id"]), 180, "the second attempt to resume", step=1) == [last_saved]
    bed.api("admin", "POST", f"jobs/{job_id}/stop/")

"""A bare `torchrun train.py` in every pod forms the job's gang: the PET_* variables and the one
process per pod ones (DESIGN §3), and a MASTER_PORT that no other job on the same machines holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.models import Job, Pod
from scheduler.node.ports import NoFreePort, attempt_master_port, choose_port
from scheduler.node.runtime.container import container_environment
from scheduler.node.runtime.sandbox import pod_environment
from scheduler.node.specs import master_address, pod_spec
from scheduler.states import PodStatus
from tests.factories import JobFactory, NodeFactory, make_running

pytestmark = pytest.mark.django_db


def running_job(job_id: int, *nodes, pods_per_node: int = 1) -> tuple[Job, list[Pod]]:
    job = JobFactory(id=job_id, roles=[{"pod_count": pods_per_node}])
    pods = make_running(job, nodes[0])
    for node in nodes[1:]:  # one more pod on each further node, ranks after the first ones
        pods.append(Pod.objects.create(job=job, role="worker", index=len(pods), rank=len(pods), attempt=job.attempt,
                                       node=node, gpu_indices=[0], status=PodStatus.RUNNING))
    return job, pods


def spec_of(pod: Pod):
    pod = Pod.objects.select_related("job", "node").get(pk=pod.pk)
    everyone = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=pod.attempt))
    return pod_spec(pod, pod.job, world_size=len(everyone), master_addr=master_address(everyone))


def test_every_pod_gets_torchruns_variables_for_one_process_per_pod(settings, tmp_path: Path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    first, second = NodeFactory(name="gpu-a", address="10.0.0.1"), NodeFactory(name="gpu-b", address="10.0.0.2")
    _job, pods = running_job(4, first, second)
    specs = [spec_of(pod) for pod in pods]
    for rank, spec in enumerate(specs):
        env = pod_environment(spec, base={})
        assert {key: env[key] for key in (
            "RANK", "WORLD_SIZE", "MASTER_ADDR", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
            "PET_MASTER_ADDR", "PET_RDZV_BACKEND", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE")} == {
            "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "PET_NNODES": "2",
            "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "1", "PET_MASTER_ADDR": "10.0.0.1",
            "PET_RDZV_BACKEND": "static", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(rank),
            "GROUP_WORLD_SIZE": "2", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": "2"}
        # One port for the whole attempt, on both nodes, in the range, and not torchrun's default.
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == str(specs[0].master_port)
    assert 29600 <= specs[0].master_port <= 29999


def test_the_job_cannot_give_itself_another_rank_through_its_environment(settings, tmp_path: Path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    job, pods = running_job(5, NodeFactory(address="10.0.0.1"))
    job.environment = {"PET_NODE_RANK": "3", "LOCAL_RANK": "2", "PET_NNODES": "9"}
    job.save()
    env = pod_environment(spec_of(pods[0]), base={})
    assert (env["PET_NODE_RANK"], env["LOCAL_RANK"], env["PET_NNODES"]) == ("0", "0", "1")


def test_in_a_container_torchrun_meets_rank_0_by_its_container_name(settings, tmp_path: Path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    _job, pods = running_job(6, NodeFactory(address="10.0.0.1"))
    env = container_environment(spec_of(pods[0]), master_addr="tp-uid-a1-r0", base={})
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "tp-uid-a1-r0"


def test_jobs_whose_ids_are_10000_apart_on_one_node_get_different_ports(settings, tmp_path: Path) -> None:
    """The old `29500 + id % 10000` gave both 29503; the range's own probe start collides too."""
    settings.TIDEPOOL_DATA_DIR = tmp_path
    node = NodeFactory(address="10.0.0.1")
    _first, first_pods = running_job(3, node)
    _second, second_pods = running_job(10003, node)
    ports = {spec_of(first_pods[0]).master_port, spec_of(second_pods[0]).master_port}
    assert len(ports) == 2 and 29500 not in ports


def test_nodes_with_one_address_are_one_machine_and_other_machines_may_reuse_a_port(settings) -> None:
    settings.TIDEPOOL_MASTER_PORT_RANGE = (31000, 31001)
    demo_a, demo_b = NodeFactory(name="demo-a", address="127.0.0.1"), NodeFactory(name="demo-b", address="127.0.0.1")
    elsewhere = NodeFactory(name="far", address="10.0.0.9")
    _a, pods_a = running_job(1, demo_a)
    _b, pods_b = running_job(2, demo_b)  # another node row, the same host: must not share the port
    _c, pods_c = running_job(3, elsewhere)
    port_a, port_b, port_c = (attempt_master_port(pods[0]) for pods in (pods_a, pods_b, pods_c))
    assert port_a != port_b
    assert port_c == 31000 + 3 % 2  # nothing runs on that machine: its first choice stands


def test_a_port_is_free_again_once_its_job_stopped_and_a_full_range_refuses_the_start(settings, tmp_path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    settings.TIDEPOOL_MASTER_PORT_RANGE = (31000, 31000)
    node = NodeFactory(address="10.0.0.1")
    _first, first_pods = running_job(1, node)
    assert attempt_master_port(first_pods[0]) == 31000
    _second, second_pods = running_job(2, node)
    with pytest.raises(NoFreePort, match="TIDEPOOL_MASTER_PORT_RANGE=31000-31000"):
        spec_of(second_pods[0])  # OSError: the agent reports the pod never started; the job queues again
    Pod.objects.filter(pk=first_pods[0].pk).update(status=PodStatus.STOPPED)
    assert spec_of(second_pods[0]).master_port == 31000


def test_the_port_chosen_once_is_kept_for_the_attempt() -> None:
    node = NodeFactory(address="10.0.0.1")
    _job, pods = running_job(7, node, pods_per_node=2)
    chosen = attempt_master_port(pods[0])
    assert set(Pod.objects.filter(pk__in=[p.pk for p in pods]).values_list("master_port", flat=True)) == {chosen}
    assert attempt_master_port(Pod.objects.get(pk=pods[1].pk)) == chosen


def test_choose_port_probes_past_used_ports_and_wraps() -> None:
    assert choose_port(100, 103, used={102, 103}, seed=2) == 100
    assert choose_port(100, 103, used=set(), seed=5) == 101
    with pytest.raises(NoFreePort):
        choose_port(100, 101, used={100, 101}, seed=0)

"""An elastic job's pods form one torchrun rendezvous (DESIGN §2c): min:max nodes, c10d, the job's uid, the
store at rank 0's address (a base pod), the store torch 2.13 needs for a joining node."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.models import Pod
from scheduler.node.runtime.sandbox import pod_environment
from scheduler.node.specs import master_address, pod_spec
from tests.factories import JobFactory, NodeFactory, make_running

pytestmark = pytest.mark.django_db


def _env(pod: Pod) -> dict[str, str]:
    pod = Pod.objects.select_related("job", "node").get(pk=pod.pk)
    everyone = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=pod.attempt))
    return pod_environment(pod_spec(pod, pod.job, world_size=len(everyone), master_addr=master_address(everyone)),
                           base={})


def test_elastic_pods_get_the_rendezvous_variables(settings, tmp_path: Path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    job = JobFactory(idle_mode="only", roles=[{"name": "master", "pod_count": 1},
                                              {"name": "worker", "pod_count": 4, "min_pod_count": 1}])
    pods = make_running(job, NodeFactory(name="gpu-e", address="10.0.0.7"))
    for pod in pods:
        env = _env(pod)
        port = env["MASTER_PORT"]
        assert {key: env[key] for key in ("TIDEPOOL_MIN_PODS", "TIDEPOOL_MAX_PODS", "PET_NNODES", "PET_RDZV_BACKEND",
                                          "PET_RDZV_ID", "PET_RDZV_ENDPOINT", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE")} == {
            "TIDEPOOL_MIN_PODS": "2", "TIDEPOOL_MAX_PODS": "5", "PET_NNODES": "2:5", "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ID": str(job.uid), "PET_RDZV_ENDPOINT": f"10.0.0.7:{port}",
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
        assert "PET_NODE_RANK" not in env  # the rendezvous numbers the nodes
        # Rank 0 (the master role's pod, a base pod) hosts the store; every other agent is its client.
        assert env["PET_RDZV_CONF"] == ("last_call_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=5,"
                                        f"is_host={1 if pod.rank == 0 else 0}")
        assert env["PET_MAX_RESTARTS"] == "1000"  # each shrink uses one of torchrun's restarts
    assert sorted(pod.rank for pod in pods) == [0, 1, 2, 3, 4]


def test_a_plain_job_cannot_make_itself_elastic(settings, tmp_path: Path) -> None:
    settings.TIDEPOOL_DATA_DIR = tmp_path
    job = JobFactory(roles=[{"pod_count": 2}], environment={"TIDEPOOL_MIN_PODS": "1", "TIDEPOOL_MAX_PODS": "4"})
    env = _env(make_running(job, NodeFactory(address="10.0.0.8"))[0])
    assert "TIDEPOOL_MIN_PODS" not in env and env["PET_NNODES"] == "2" and env["PET_RDZV_BACKEND"] == "static"

"""The node worker's heartbeat samples NVML for its pods' GPUs (issue 14's hook in worker._beat) —
only on a node whose GPUs NVML detected; a declared node (TIDEPOOL_NODE_GPUS set) records nothing."""

from __future__ import annotations

import sys
import threading

import pytest

from scheduler.models import GpuSample
from scheduler.node.worker import NodeWorker
from tests.factories import JobFactory, World, make_running
from tests.runtime.test_gpu_sampling import MIB, SamplingNvml
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def beat_briefly(worker: NodeWorker, seconds: float) -> None:
    thread = threading.Thread(target=worker._beat, daemon=True)
    thread.start()
    try:
        threading.Event().wait(seconds)
    finally:
        worker._stop.set()
        worker.agent._stop.set()
        thread.join(5)


@pytest.mark.parametrize("declared", [None, 8], ids=["nvml-node", "declared-node"])
def test_heartbeat_records_gpu_samples_of_nvml_nodes(world: World, settings, monkeypatch, declared) -> None:
    settings.TIDEPOOL_HEARTBEAT_SECONDS = 0.05
    settings.TIDEPOOL_NODE_GPUS = declared
    monkeypatch.setitem(sys.modules, "pynvml", SamplingNvml([(91, 40_000 * MIB, 81_559 * MIB)] * 8))
    job = JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 2}])
    make_running(job, world.gpu1)
    worker = NodeWorker("gpu-01")
    if declared is None:
        beat_briefly_async = threading.Thread(target=beat_briefly, args=(worker, 3), daemon=True)
        beat_briefly_async.start()
        wait_for(lambda: GpuSample.objects.filter(job=job).count() >= 2, 3, "GPU samples of the job's two GPUs")
        beat_briefly_async.join(5)
        sample = GpuSample.objects.filter(job=job).first()
        assert sample.utilization_percent == 91 and sample.memory_used_mib == 40_000
        assert set(GpuSample.objects.values_list("gpu_index", flat=True)) == {0, 1}
    else:
        beat_briefly(worker, 0.5)
        assert not GpuSample.objects.exists()

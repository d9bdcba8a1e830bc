"""`sample_gpus`: NVML utilisation and memory per GPU through a stand-in pynvml module; nothing where
NVML is unusable, and a GPU NVML cannot read is left out rather than made up."""

from __future__ import annotations

import sys
import types

import pytest

from scheduler.node.runtime.gpus import sample_gpus

MIB = 1024**2


class SamplingNvml(types.ModuleType):
    """pynvml with per-GPU (utilisation %, used bytes, total bytes); `broken` indices raise."""

    class NVMLError(Exception):
        pass

    def __init__(self, gpus: list[tuple[int, int, int]], broken: set[int] = frozenset(), fail_init: bool = False):
        super().__init__("pynvml")
        self.gpus, self.broken, self.fail_init = gpus, broken, fail_init
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if index in self.broken:
            raise self.NVMLError("GPU is lost")
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:  # noqa: N802
        return types.SimpleNamespace(gpu=self.gpus[handle][0], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:  # noqa: N802
        _, used, total = self.gpus[handle]
        return types.SimpleNamespace(used=used, total=total, free=total - used)


def test_samples_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SamplingNvml([(97, 70_000 * MIB, 81_559 * MIB), (0, 3 * MIB, 81_559 * MIB)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert sample_gpus() == [
        {"index": 0, "utilization_percent": 97.0, "memory_used_mib": 70_000, "memory_total_mib": 81_559},
        {"index": 1, "utilization_percent": 0.0, "memory_used_mib": 3, "memory_total_mib": 81_559},
    ]
    assert fake.inits == fake.shutdowns == 1


def test_samples_only_the_indices_asked_and_skips_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SamplingNvml([(10, MIB, 2 * MIB)] * 4, broken={2})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert [r["index"] for r in sample_gpus([1, 2, 3, 9])] == [1, 3]  # 2 unreadable, 9 absent
    assert fake.shutdowns == 1


def test_nothing_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", SamplingNvml([], fail_init=True))
    assert sample_gpus() == []
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert sample_gpus() == []

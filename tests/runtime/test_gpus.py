"""GPU inventory: NVML through a stand-in pynvml module, declared inventories, the CLI."""

from __future__ import annotations

import json
import sys
import types

import pytest

from scheduler.node.runtime import gpus
from scheduler.node.runtime.gpus import GpuInventory, declared_inventory, detect_gpus, normalize_model


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A800-SXM4-80GB", "A800"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA RTX A6000", "A6000"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090"),
        ("  Some  Future GPU ", "Some-Future-GPU"),
    ],
)
def test_normalize_model(name: str, model: str) -> None:
    assert normalize_model(name) == model


class FakeNvml(types.ModuleType):
    """Enough of pynvml for detect_gpus; devices are (name, memory in bytes)."""

    class NVMLError(Exception):
        pass

    def __init__(
        self, devices: list[tuple[str | bytes, int]], fail_init: bool = False, fail_query: bool = False
    ):
        super().__init__("pynvml")
        self.devices = devices
        self.fail_init = fail_init
        self.fail_query = fail_query
        self.shut_down = False

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> bytes:  # noqa: N802 - old releases return bytes
        return b"550.54.15"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if self.fail_query:
            raise self.NVMLError("GPU is lost")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:  # noqa: N802
        return self.devices[handle][0]

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return f"GPU-{handle:04d}"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:  # noqa: N802
        return types.SimpleNamespace(total=self.devices[handle][1], free=0, used=0)


GIB = 1024**3


def test_detects_gpus_with_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([("NVIDIA H100 80GB HBM3", 80 * GIB)] * 2 + [(b"NVIDIA H100 80GB HBM3", 81559 * 1024**2)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)

    inventory = detect_gpus()

    assert inventory is not None
    assert (inventory.gpu_type, inventory.gpus, inventory.gpu_indices) == ("H100", 3, (0, 1, 2))
    assert inventory.gpu_memory_mib == 81559
    assert inventory.driver_version == "550.54.15"
    assert inventory.source == "nvml"
    assert inventory.cpu >= 1 and inventory.memory_gib >= 0
    assert [d.uuid for d in inventory.devices] == ["GPU-0000", "GPU-0001", "GPU-0002"]
    assert fake.shut_down


def test_a_mixed_machine_offers_its_most_common_model(monkeypatch: pytest.MonkeyPatch) -> None:
    devices = [
        ("NVIDIA A100-SXM4-40GB", 40 * GIB),
        ("NVIDIA L4", 24 * GIB),
        ("NVIDIA A100-SXM4-80GB", 80 * GIB),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(devices))

    inventory = detect_gpus()

    assert inventory is not None
    assert (inventory.gpu_type, inventory.gpus, inventory.gpu_indices) == ("A100", 2, (0, 2))
    assert inventory.gpu_memory_mib == 40 * 1024
    assert len(inventory.devices) == 3


@pytest.mark.parametrize(
    "fake",
    [FakeNvml([], fail_init=True), FakeNvml([("NVIDIA A100", GIB)], fail_query=True), FakeNvml([])],
    ids=["no-driver", "query-fails", "no-gpus"],
)
def test_no_usable_nvml_gives_none(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert detect_gpus() is None
    assert fake.shut_down or fake.fail_init


def test_pynvml_missing_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert detect_gpus() is None


def test_detect_on_this_machine_never_raises() -> None:
    # With or without GPUs here: an inventory or None, never an exception.
    inventory = detect_gpus()
    assert inventory is None or (isinstance(inventory, GpuInventory) and inventory.gpus > 0)


def test_declared_inventory() -> None:
    inventory = declared_inventory("NVIDIA A100-SXM4-80GB", gpus=8, cpu=96, memory_gib=768)
    assert (inventory.gpu_type, inventory.gpus, inventory.gpu_indices) == ("A100", 8, tuple(range(8)))
    assert (inventory.cpu, inventory.memory_gib, inventory.source) == (96, 768, "declared")

    cpu_only = declared_inventory(None, gpus=0, cpu=16, memory_gib=64)
    assert (cpu_only.gpu_type, cpu_only.gpus, cpu_only.gpu_indices) == (None, 0, ())


@pytest.mark.parametrize(
    ("gpu_type", "count", "cpu", "memory"), [(None, 2, 8, 64), ("A100", -1, 8, 64), ("A100", 1, -8, 64)]
)
def test_declared_inventory_rejects_nonsense(gpu_type: str | None, count: int, cpu: int, memory: int) -> None:
    with pytest.raises(ValueError):
        declared_inventory(gpu_type, gpus=count, cpu=cpu, memory_gib=memory)


def test_cli_prints_the_inventory_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([("NVIDIA H200", 141 * GIB)]))
    assert gpus.main() == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["gpu_type"], printed["gpus"], printed["source"]) == ("H200", 1, "nvml")
    assert printed["devices"][0]["name"] == "NVIDIA H200"


def test_cli_without_gpus_prints_null_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([], fail_init=True))
    assert gpus.main() == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) is None
    assert "NVML is not available" in captured.err

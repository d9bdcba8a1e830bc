"""What a node has to offer: GPUs detected with NVML, or an inventory declared by hand.

`detect_gpus()` is what a node worker calls when it registers: it never raises, and returns
None where NVML is unusable (no driver, no GPUs, pynvml missing), in which case the worker
falls back to `declared_inventory(...)` from its settings.

`python -m scheduler.node.runtime.gpus` prints the detected inventory as JSON (exit status 1, and
the reason on stderr, when there is none).

GPU indices are NVML's, which follow PCI bus order; pods get CUDA_DEVICE_ORDER=PCI_BUS_ID
(see `process.pod_environment`) so that CUDA numbers the devices the same way.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)

SOURCE_NVML = "nvml"
SOURCE_DECLARED = "declared"

# Short model names as quotas and pods name them ("A100", not "NVIDIA A100-SXM4-80GB"). NVML
# names carry the model as one token among vendor, form factor and memory size; the first
# token found here wins. Longer names that share a prefix (A10G/A10, L40S/L40/L4, H200/H20)
# are distinct tokens, so no ordering is needed.
KNOWN_MODELS = frozenset(
    {
        "B100", "B200", "GB200", "GH200",
        "H100", "H200", "H800", "H20",
        "A100", "A800", "A40", "A30", "A16", "A10", "A10G", "A2",
        "A4000", "A5000", "A6000",
        "L40S", "L40", "L20", "L4",
        "V100", "T4", "P100", "P40", "P4",
    }
)  # fmt: skip

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


@dataclass(frozen=True)
class GpuDevice:
    index: int  # NVML index, as used in CUDA_VISIBLE_DEVICES
    name: str  # as NVML reports it, e.g. "NVIDIA H100 80GB HBM3"
    model: str  # short model, e.g. "H100"
    memory_mib: int
    uuid: str | None


@dataclass(frozen=True)
class GpuInventory:
    """A node's schedulable resources. One GPU model per node (DESIGN §1)."""

    gpu_type: str | None  # short model; None for a node without GPUs
    gpus: int
    gpu_indices: tuple[int, ...]  # the indices Tidepool hands out to pods
    gpu_memory_mib: int | None  # per GPU (the smallest, if they differ)
    driver_version: str | None
    cpu: int  # cores
    memory_gib: int
    source: str  # "nvml" | "declared"
    devices: tuple[GpuDevice, ...] = ()  # every GPU NVML saw, including ones left out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_model(name: str) -> str:
    """The short model for an NVML device name; unknown ones keep the whole name, spaces → dashes."""
    for token in re.split(r"[\s\-_/]+", name.upper()):
        if token in KNOWN_MODELS:
            return token
    return "-".join(name.split())


def detect_gpus() -> GpuInventory | None:
    """The GPUs NVML sees plus this machine's CPU and memory; None when NVML is unusable.

    On a machine with several GPU models, the most common one is used (the lowest index wins a
    tie) and the other GPUs are left out of `gpus` and `gpu_indices`: a node has one model.
    """
    inventory, reason = _detect()
    if inventory is None:
        log.info("no GPUs detected: %s", reason)
    return inventory


def declared_inventory(gpu_type: str | None, gpus: int, cpu: int, memory_gib: int) -> GpuInventory:
    """The inventory of a node without NVML, from its settings (e.g. the demo's virtual nodes)."""
    if gpus < 0 or cpu < 0 or memory_gib < 0:
        raise ValueError("gpus, cpu and memory_gib must not be negative")
    if gpus and not gpu_type:
        raise ValueError("a node with GPUs needs a gpu_type")
    return GpuInventory(
        gpu_type=normalize_model(gpu_type) if gpus and gpu_type else None,
        gpus=gpus,
        gpu_indices=tuple(range(gpus)),
        gpu_memory_mib=None,
        driver_version=None,
        cpu=cpu,
        memory_gib=memory_gib,
        source=SOURCE_DECLARED,
    )


def host_cpu() -> int:
    """CPU cores this process may use (its affinity mask honours cpusets and taskset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_memory_gib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _GIB
    except (AttributeError, ValueError, OSError):
        return 0


def _detect() -> tuple[GpuInventory | None, str]:
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...; never raise
        return None, f"NVML is not available: {exc}"
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(pynvml.nvmlDeviceGetName(handle))
            try:
                uuid: str | None = _text(pynvml.nvmlDeviceGetUUID(handle))
            except Exception:  # not essential
                uuid = None
            devices.append(
                GpuDevice(
                    index=index,
                    name=name,
                    model=normalize_model(name),
                    memory_mib=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB,
                    uuid=uuid,
                )
            )
    except Exception as exc:
        return None, f"NVML query failed: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    if not devices:
        return None, "NVML reports no GPUs"
    model = Counter(d.model for d in devices).most_common(1)[0][0]
    used = [d for d in devices if d.model == model]
    return (
        GpuInventory(
            gpu_type=model,
            gpus=len(used),
            gpu_indices=tuple(d.index for d in used),
            gpu_memory_mib=min(d.memory_mib for d in used),
            driver_version=driver,
            cpu=host_cpu(),
            memory_gib=host_memory_gib(),
            source=SOURCE_NVML,
            devices=tuple(devices),
        ),
        "",
    )


def sample_gpus(indices: list[int] | None = None) -> list[dict[str, Any]]:
    """One NVML reading per GPU (`indices`, default all): utilisation and memory in use.

    [{"index", "utilization_percent", "memory_used_mib", "memory_total_mib"}, ...]; an empty list where
    NVML is unusable (no pynvml, no driver, no GPUs) and without the GPUs NVML cannot read: nothing
    is ever made up. Never raises, so a node worker may call it on every heartbeat.
    """
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    readings: list[dict[str, Any]] = []
    try:
        count = pynvml.nvmlDeviceGetCount()
        for index in indices if indices is not None else range(count):
            if not 0 <= index < count:
                continue
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as exc:  # one GPU that cannot be read (fallen off the bus, ...) is left out
                log.warning("NVML could not read GPU %s: %s", index, exc)
                continue
            readings.append(
                {
                    "index": index,
                    "utilization_percent": float(utilization.gpu),
                    "memory_used_mib": int(memory.used) // _MIB,
                    "memory_total_mib": int(memory.total) // _MIB,
                }
            )
    except Exception as exc:
        log.warning("NVML sampling failed: %s", exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return readings


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes.
    return value.decode() if isinstance(value, bytes) else value


def main() -> int:
    inventory, reason = _detect()
    if inventory is None:
        print(json.dumps(None))
        print(f"no GPUs detected: {reason}", file=sys.stderr)
        return 1
    print(json.dumps(inventory.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

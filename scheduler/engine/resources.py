"""Resource vectors: plain mappings from a resource key (`gpu:A100`, `cpu`, `memory`) to an integer amount.

Two readings of a missing key, both from DESIGN §2:
- in a quota's `min` (or any "available" amount) a key left out counts as 0: `fits`;
- in a quota's `max` a key left out is not capped: `within_max`.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import CPU, GPU_PREFIX, MEMORY, gpu_key

Resources = Mapping[str, int]


def vector(gpus: int, model: str | None, cpu_m: int, memory_mib: int) -> dict[str, int]:
    """A resource vector with zero amounts left out (GPUs need a model to be counted)."""
    out: dict[str, int] = {}
    if gpus and model is not None:
        out[gpu_key(model)] = gpus
    if cpu_m:
        out[CPU] = cpu_m
    if memory_mib:
        out[MEMORY] = memory_mib
    return out


def add(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    add_into(out, b)
    return out


def sub(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    add_into(out, b, sign=-1)
    return out


def add_into(target: dict[str, int], b: Resources, sign: int = 1) -> None:
    """In place: the quota accounting adds and removes the same vectors many times a cycle."""
    for key, amount in b.items():
        target[key] = target.get(key, 0) + sign * amount


def fits(request: Resources, available: Resources) -> bool:
    """Every requested amount is available; a key left out of `available` counts as 0."""
    return all(available.get(key, 0) >= amount for key, amount in request.items())


def within_max(request: Resources, used: Resources, maximum: Resources) -> bool:
    """`used + request` stays under `maximum`; a key left out of `maximum` is not capped."""
    return all(used.get(key, 0) + amount <= maximum[key] for key, amount in request.items() if key in maximum)


# --- words for reasons -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    """1.0 -> "1", 0.5 -> "0.5": reasons read like the numbers a person typed."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def cores(cpu_m: int) -> str:
    return _number(cpu_m / 1000)


def gib(memory_mib: int) -> str:
    return _number(memory_mib / 1024)


def describe_amount(key: str, amount: int) -> str:
    """"8 A100", "16 CPU cores", "64 GiB memory"."""
    if key.startswith(GPU_PREFIX):
        return f"{amount} {key[len(GPU_PREFIX):]}"
    if key == CPU:
        return f"{cores(amount)} CPU cores"
    if key == MEMORY:
        return f"{gib(amount)} GiB memory"
    return f"{amount} {key}"


def unit_name(key: str) -> str:
    """The unit a reason counts `key` in, for "needs 8 A100, 2 left of 16"-style sentences."""
    if key.startswith(GPU_PREFIX):
        return key[len(GPU_PREFIX):]
    return {CPU: "CPU cores", MEMORY: "GiB memory"}.get(key, key)


def amount_in_units(key: str, amount: int) -> str:
    if key == CPU:
        return cores(amount)
    if key == MEMORY:
        return gib(amount)
    return str(amount)


def describe_pod(gpus: int, model: str | None, cpu_m: int, memory_mib: int) -> str:
    """One pod's size: "8 A100, 32 CPU cores, 256 GiB memory"; an unnamed model reads "GPUs"."""
    parts = []
    if gpus:
        parts.append(f"{gpus} {model or 'GPUs'}")
    if cpu_m:
        parts.append(f"{cores(cpu_m)} CPU cores")
    if memory_mib:
        parts.append(f"{gib(memory_mib)} GiB memory")
    return ", ".join(parts) or "no resources"

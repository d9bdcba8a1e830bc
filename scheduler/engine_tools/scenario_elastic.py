"""Scenario files' keys for elastic jobs (DESIGN §2c, §4): a role's `min_count`, a running job's `nodes`
for the pods it runs now (base first, then extra pods in index order) and `resized_at`, the policy's
`grow_interval_s`, and the outputs `grown` and `shrunk`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.engine.types import IDLE_OFF, RUNNING, TERMINATING, Elastic, Pod

from .scenario_read import Reader


def elastic_pods(read: Reader, raw: Mapping[str, Any], pods: tuple[Pod, ...], path: str, state: str, idle: str
                 ) -> tuple[tuple[Pod, ...], Elastic | None]:
    """The job's pods as the engine takes them (the base, then the extra pods a running job runs now) and
    its elastic role; `pods` unchanged and None for a plain job."""
    found = None
    start = 0
    for i, item in enumerate(read.items(raw.get("pods"), f"{path}.pods")):
        count = item.get("count", 1)
        if item.get("min_count") is not None:
            mpath = f"{path}.pods[{i}].min_count"
            if found is not None:
                raise read.fail(mpath, "a job makes at most one role elastic (min_count on one role)")
            min_count = read.integer(item["min_count"], mpath, low=1, high=count)
            if idle == IDLE_OFF:
                raise read.fail(mpath, "an elastic role needs idle acceptable or only: its extra pods run Not in Quota")
            found = (item.get("role", "worker"), min_count, count, start)
        start += count
    if found is None:
        if "resized_at" in raw:
            raise read.fail(f"{path}.resized_at", "only an elastic job (a role with min_count) is resized")
        return pods, None
    role, min_count, count, first = found
    base = pods[:first + min_count] + pods[first + count:]
    extra: tuple[int, ...] = ()
    resized_at = None
    if state in (RUNNING, TERMINATING):
        running = len(read.items(raw.get("nodes"), f"{path}.nodes")) - len(base)
        extra = tuple(range(min_count, min_count + max(0, min(running, count - min_count))))
        if state == RUNNING and raw.get("resized_at") is not None:
            resized_at = read.number(raw["resized_at"], f"{path}.resized_at", low=None)
    if "resized_at" in raw and state != RUNNING:
        raise read.fail(f"{path}.resized_at", f"a {state} job has no resized_at (only running jobs)")
    return base + (pods[first],) * len(extra), Elastic(role, min_count, count, extra, resized_at)


def grown_and_shrunk(read: Reader, raw: Mapping[str, Any], known: Any) -> dict[str, Any]:
    """`expect.grown` (job -> nodes of its new pods) and `expect.shrunk` (job -> indexes removed)."""
    out: dict[str, Any] = {}
    for key in ("grown", "shrunk"):
        if key not in raw:
            continue
        value = read.mapping(raw[key] or {}, f"expect.{key}", tuple(raw[key] or ()))
        entries: dict[str, list[Any]] = {}
        for name, items in value.items():
            epath = f"expect.{key}.{name}"
            listed = read.items(items, epath)
            if key == "grown":
                entries[known(name, epath)] = [read.text(n, f"{epath}[{k}]") for k, n in enumerate(listed)]
            else:
                entries[known(name, epath)] = sorted(read.integer(n, f"{epath}[{k}]") for k, n in enumerate(listed))
        out[key] = entries
    return out


def compare_resizes(expect: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """Differences in `grown` and `shrunk`; a key left out of `expect` is compared as empty."""
    diff = []
    for key in ("grown", "shrunk"):
        want, have = expect.get(key, {}), got.get(key, {})
        for name in sorted(set(want) | set(have)):
            if want.get(name) != have.get(name):
                diff.append(f"{key}.{name}: expected {_show(want.get(name))}, got {_show(have.get(name))}")
    return diff


def _show(value: Any) -> str:
    return "nothing" if value is None else repr(value).replace("'", '"')


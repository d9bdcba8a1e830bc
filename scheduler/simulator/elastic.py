"""The declared model of elastic jobs in a replay (DESIGN §2c; `--elastic`, docs/simulator.md).

A trace says how many GPUs a job used and for how long, not whether it could change size. The model:

- **Which jobs.** A job of 2 GPUs or more whose idle mode is `acceptable` or `only` (§2c: an elastic job
  must be able to borrow) is elastic when its draw, seeded by its name alone, is below the share
  (`--elastic-share`, default 0.5): the same jobs whatever the window, limit or policy column.
- **Its pods.** The fewest equal pods, at least two, none larger than a node: a job of G GPUs on nodes of
  N GPUs runs as `n` pods of `G / n` GPUs, `n` the least divisor of G that is at least 2 with G / n ≤ N.
  On 8-GPU nodes: 2 GPUs = 2 × 1, 8 = 2 × 4, 12 = 2 × 6, 16 = 2 × 8, 24 = 3 × 8, 32 = 4 × 8, 128 = 16 × 8
  (a job of a multiple of 8 GPUs has the same pods as when it is not elastic).
- **Its minimum.** Half its pods, rounded up (`min_count`): 2 × 4 may shrink to 1 × 4, 4 × 8 to 2 × 8.
- **Throughput.** With `k` of its `n` pods a job does `(k / n) ** alpha` of the work per second it does
  at full size (the trace's duration is at full size); alpha (`--elastic-alpha`) defaults to 0.8.
- **A resize** (shrink or growth) restarts every worker from its last completed checkpoint, as a
  preemption does (work.py): the work since then is redone and the new run first spends the restart
  overhead; pods a shrink removes are SIGTERMed and hold their GPUs for the grace period.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from scheduler.engine.types import IDLE_OFF

DEFAULT_SHARE = 0.5
DEFAULT_ALPHA = 0.8
ROLE = "worker"  # the elastic role of a replayed job (its only role)


@dataclass(frozen=True, slots=True)
class ElasticShape:
    """An elastic job's one role: `count` pods (its maximum) of `pod_gpus` GPUs, at least `min_count`."""

    count: int
    min_count: int
    pod_gpus: int

    @property
    def base_gpus(self) -> int:
        return self.min_count * self.pod_gpus


def elastic_pods(gpus: int, max_per_pod: int) -> tuple[int, int] | None:
    """(pods, GPUs per pod) of an elastic job of `gpus` GPUs: the fewest equal pods, at least two, none over
    `max_per_pod`; None when the job cannot be split in two or more equal pods (1 GPU, or no node)."""
    if gpus < 2 or max_per_pod <= 0:
        return None
    for count in range(max(2, math.ceil(gpus / max_per_pod)), gpus + 1):
        if gpus % count == 0:
            return count, gpus // count
    raise AssertionError("count = gpus always divides")


def min_pods(count: int) -> int:
    """An elastic job's minimum: half its pods, rounded up."""
    return (count + 1) // 2


def is_elastic(name: str, gpus: int, idle: str, share: float) -> bool:
    """Whether the model makes this job elastic: 2 GPUs or more, allowed to borrow, and its draw (seeded by its
    name alone) below `share`."""
    if share <= 0 or gpus < 2 or idle == IDLE_OFF:
        return False
    return random.Random(f"elastic:{name}").random() < share


def shape_of(name: str, gpus: int, idle: str, share: float, max_per_pod: int) -> ElasticShape | None:
    """The job's elastic role under the model, or None for a plain job."""
    if not is_elastic(name, gpus, idle, share):
        return None
    split = elastic_pods(gpus, max_per_pod)
    if split is None:
        return None
    count, pod_gpus = split
    return ElasticShape(count=count, min_count=min_pods(count), pod_gpus=pod_gpus)


def throughput(pods: int, count: int, alpha: float) -> float:
    """Work per second with `pods` of `count` pods, relative to full size: (pods / count) ** alpha (1.0 at full
    size, exactly)."""
    if not 0 < pods <= count:
        raise ValueError(f"an elastic job runs 1 to {count} pods, not {pods}")
    return 1.0 if pods == count else (pods / count) ** alpha

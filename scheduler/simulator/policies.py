"""The policies a trace is replayed under, as engine inputs (quotas and per-job settings).

The engine is the same for all; a policy decides which quota tree the engine sees and which idle
mode each job asks for (and `fifo`, which jobs the replay offers it: fifo.py):

- `fifo`: strict's tree and settings with head-of-line blocking per quota (the Helios baseline).

- `strict`: the cluster's quota tree, every job `off`: a team gets its guarantee and nothing more.
  Jobs of teams without a guarantee, or larger than their guarantee, never start.
- `idle`: the same tree, jobs of teams with a guarantee `acceptable` (quota first, idle resources
  when the quota is full), jobs of teams without one `only` (a team with child quotas has only what it
  keeps beside their guarantees, `ownmin`); reclaim and promotion as in DESIGN §2.
  A job's own `idle` column (user traces) wins over these defaults.
- `pool`: no team quotas: one root quota per pool holding its whole capacity, every job `off`.
  The engine takes pending jobs by priority, then queue time, and places every one that fits, so
  a large job at the head does not block smaller ones behind it: "FIFO" here is greedy first-fit in
  queue order (backfilling), the utilization ceiling that ignores guarantees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.engine.quota import QuotaTree, effective_min, own_min
from scheduler.engine.types import (
    DEFAULT_POOL,
    GPU_PREFIX,
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    Node,
    Quota,
    gpu_key,
)

from .traces import Cluster, TraceJob

FIFO = "fifo"
STRICT = "strict"
IDLE = "idle"
POOL = "pool"
POLICIES = (FIFO, STRICT, IDLE, POOL)

POOL_QUOTA_PREFIX = "pool"


@dataclass(frozen=True, slots=True)
class PolicySetup:
    """What the engine sees under one policy: the quota tree and, per team, the quota jobs go to."""

    name: str
    quotas: tuple[Quota, ...]
    quota_of_team: Mapping[str, str]  # team (the trace's quota column) -> engine quota
    unguaranteed: tuple[str, ...]  # teams of the trace with no guarantee in the cluster

    def idle_mode(self, job: TraceJob) -> str:
        if self.name != IDLE:
            return IDLE_OFF
        if job.idle is not None:
            return job.idle
        return IDLE_ONLY if job.quota in self.unguaranteed else IDLE_ACCEPTABLE


def build_policy(name: str, cluster: Cluster, jobs: Iterable[TraceJob]) -> PolicySetup:
    """The engine's quota tree and job-to-quota map for `name` over `cluster`."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
    teams = sorted({job.quota for job in jobs})
    by_name = {q.name: q for q in cluster.quotas}
    unknown = [team for team in teams if team not in by_name]
    unguaranteed = tuple(
        t for t in teams if t in unknown or not _has_gpu_guarantee(_kept_for_own_jobs(t, cluster))
    )
    if name == POOL:
        pools = sorted({n.pool for n in cluster.nodes} | {q.pool for q in cluster.quotas})
        quotas = tuple(
            Quota(name=_pool_quota(pool), parent=None, min=cluster.capacity(pool), pool=pool) for pool in pools
        )
        team_pool = {team: by_name[team].pool if team in by_name else DEFAULT_POOL for team in teams}
        return PolicySetup(
            name=name,
            quotas=quotas,
            quota_of_team={team: _pool_quota(team_pool[team]) for team in teams},
            unguaranteed=unguaranteed,
        )
    # Teams the cluster does not know (Philly VCs missing from philly_vc.csv) get an empty quota
    # under the root of the default pool: no guarantee, so idle resources only.
    root = _default_root(cluster.quotas)
    extra = tuple(Quota(name=team, parent=root.name, min={}, pool=root.pool) for team in unknown)
    return PolicySetup(
        name=name,
        quotas=tuple(cluster.quotas) + extra,
        quota_of_team={team: team for team in teams},
        unguaranteed=unguaranteed,
    )


def fits_guarantee(job: TraceJob, quotas: Sequence[Quota], nodes: Sequence[Node], tree: QuotaTree | None = None) -> bool:
    """Whether the job's GPUs fit its team's guarantee on some GPU model: the engine's own test with
    the tree empty (`QuotaTree.could_fit`: the team's `min`, every ancestor's, and for a team with
    child quotas what it keeps beside their guarantees, `ownmin`, DESIGN §2). `tree`: that tree built
    once from `quotas` and `nodes`, when the caller asks for many jobs.

    A static property of the job and the cluster, independent of policy, so that "jobs that fit
    their own quota" is the same set of jobs in every policy's figures.
    """
    if tree is None:
        tree = QuotaTree(quotas, nodes)
    if job.quota not in tree:
        return job.gpus == 0
    if job.gpus == 0:
        return True
    if job.gpu_type:
        models = [job.gpu_type]
    else:
        path = list(quota_path(job.quota, {q.name: q for q in quotas}))
        models = sorted({k[len(GPU_PREFIX):] for q in path for k in effective_min(q, nodes) if k.startswith(GPU_PREFIX)})
    return any(tree.could_fit(job.quota, {gpu_key(model): job.gpus}) for model in models)


def quota_path(name: str, by_name: Mapping[str, Quota]) -> Iterable[Quota]:
    """The quota and its ancestors, nearest first."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None:
        if current in seen:
            raise ValueError(f"quota tree has a cycle through {current!r}")
        seen.add(current)
        quota = by_name[current]
        yield quota
        current = quota.parent


def _kept_for_own_jobs(name: str, cluster: Cluster) -> dict[str, int]:
    """What the quota guarantees the jobs submitted to exactly it: its min, or for a quota with child
    quotas only what it keeps beside their guarantees (`ownmin`, DESIGN §2)."""
    quota = next(q for q in cluster.quotas if q.name == name)
    kids = [effective_min(q, cluster.nodes) for q in cluster.quotas if q.parent == name]
    guaranteed = effective_min(quota, cluster.nodes)
    return own_min(guaranteed, kids) if kids else guaranteed


def _has_gpu_guarantee(guarantee: Mapping[str, int]) -> bool:
    return any(k.startswith(GPU_PREFIX) and v > 0 for k, v in guarantee.items())


def _default_root(quotas: Sequence[Quota]) -> Quota:
    roots = [q for q in quotas if q.parent is None]
    if not roots:
        raise ValueError("the cluster has no root quota")
    return next((q for q in roots if q.pool == DEFAULT_POOL), roots[0])


def _pool_quota(pool: str) -> str:
    return POOL_QUOTA_PREFIX if pool == DEFAULT_POOL else f"{POOL_QUOTA_PREFIX}-{pool}"

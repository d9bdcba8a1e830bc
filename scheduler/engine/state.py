"""One cycle's state (DESIGN §5): everything the rule modules read and change, in one explicit value.

`CycleState(snapshot, policies)` charges the snapshot's running and exiting jobs to their nodes and
quotas and lists the jobs to decide; each step of `cycle.run_cycle` then takes it as its first argument.
Its attributes are public and each has one meaning:

- `capacity` (free and being-released capacity per node), `quotas` (the quota tree and its sums);
- `queue`: pending and nominated jobs as `Demand`s, in pending order (`queue_order`);
- `victims`: the reclaim candidates (running Not in Quota jobs no policy protects), `victim_index` (built
  on the first search that can use it), `protected` (candidates a policy keeps out this cycle, and until
  when), `promotable` (running jobs promotion may move In Quota);
- `why` (job still pending -> why, filled by the passes) and `decisions` (what the cycle returns);
- `memos` (the failure memos), `never_fits_seen` (the never-fits answers by gang);
- `drain_sets` (starving job -> the nodes kept for it) and `keep_off` (job -> nodes it may not use),
  set by the starvation guard before the passes and read by placement, victim selection and, with
  §2c/§2d, growth and backfill; `allowed` caches the nodes left to such jobs;
- `policies`: the active §2b policies, hook by hook (`policies.base.PolicySet`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .capacity import Capacity, NodeState
from .demand import Demand, demand_of, named_models
from .memo import Memos
from .placement import AllowedNodes, unplaceable
from .quota import QuotaTree
from .reasons import NeverFits, Reason, Refused, Unplaceable
from .resources import vector
from .types import IDLE_ACCEPTABLE, RUNNING, TERMINATING, Decisions, Job, Snapshot
from .victims.candidates import Victim, VictimQueue, extra_units
from .victims.index import VictimIndex

if TYPE_CHECKING:
    from .policies.base import PolicySet


def _add_held(held: dict[tuple[str, bool], dict[str, int]], key: tuple[str, bool], request: dict[str, int]) -> None:
    total = held.get(key)
    if total is None:
        held[key] = dict(request)
    else:
        for resource, amount in request.items():
            total[resource] = total.get(resource, 0) + amount


def queue_order(job: Job) -> tuple[int, float, str]:
    """Pending order: priority (higher first), then queue time, then name."""
    return (-job.priority, job.submitted_at, job.name)


class CycleState:
    def __init__(self, snapshot: Snapshot, policies: PolicySet) -> None:
        self.snapshot = snapshot
        self.nodes = snapshot.nodes
        self.now = snapshot.now
        self.policies = policies
        self.capacity = Capacity(snapshot.nodes)
        self.quotas = QuotaTree(snapshot.quotas, snapshot.nodes)
        self.decisions = Decisions()
        self.queue: list[Demand] = []
        self.why: dict[str, Reason | None] = {}
        self.promotable: list[tuple[Job, dict[str, int]]] = []
        self.protected: list[tuple[Victim, float]] = []
        self.memos = Memos()
        self.never_fits_seen: dict[tuple, Unplaceable | None] = {}
        self.drain_sets: dict[str, tuple[str, ...]] = {}
        self.keep_off: dict[str, frozenset[NodeState]] = {}
        self.allowed: AllowedNodes = {}
        self.victim_index: VictimIndex | None = None
        self.has_elastic = False  # some running job is elastic with extra pods (§2c units)
        victims = self._load(snapshot)
        self.victims = VictimQueue(victims, has_units=self.has_elastic)
        self.queue.sort(key=lambda d: queue_order(d.job))

    def _load(self, snapshot: Snapshot) -> list[Victim]:
        """Charge running and terminating jobs, queue the others; returns the reclaim candidates."""
        victims: list[Victim] = []
        held: dict[tuple[str, bool], dict[str, int]] = {}  # (quota, in quota) -> what its running jobs hold
        for job in snapshot.jobs:
            if job.phase == RUNNING:
                units = self._hold_running(job, held)
                if units:
                    victims.extend(units)
            elif job.phase == TERMINATING:
                for pod, node in zip(job.pods, job.nodes, strict=False):
                    self.capacity.hold_releasing(node, pod.gpus, pod.cpu_m, pod.memory_mib, job.name)
            else:
                self.queue.append(demand_of(job, self.quotas.pool(job.quota)))
        for (quota, in_quota), request in held.items():  # one charge per quota, not one per running job
            self.quotas.charge(quota, request, in_quota=in_quota)
        self.capacity.open()
        return victims

    def _hold_running(self, job: Job, held: dict[tuple[str, bool], dict[str, int]]) -> list[Victim] | None:
        """Charge a running job to its nodes, and add it to what its quota's running jobs hold (`held`);
        returns its reclaim units, unless a policy protects it: a Not in Quota job whole, and each extra
        pod of an elastic job (§2c, In Quota or not)."""
        pods_at = []
        model = None
        hold = self.capacity.hold
        for pod, node_name in zip(job.pods, job.nodes, strict=False):
            node = hold(node_name, pod.gpus, pod.cpu_m, pod.memory_mib)
            if node is not None:
                pods_at.append((node, pod.gpus, pod.cpu_m, pod.memory_mib))
                if pod.gpus and model is None:
                    model = node.model
        if model is None:
            named = named_models(job.pods)
            model = named[0] if named else None
        elastic = job.elastic
        base_pods = job.pods if elastic is None else job.pods[:job.base_count]
        if len(base_pods) == 1:
            pod = base_pods[0]
            request = vector(pod.gpus, model, pod.cpu_m, pod.memory_mib)
        else:
            request = vector(sum(p.gpus for p in base_pods), model, sum(p.cpu_m for p in base_pods),
                             sum(p.memory_mib for p in base_pods))
        pool = self.quotas.pool(job.quota)
        if pool is None:
            return None
        total = held.get((job.quota, job.in_quota))
        if total is None:
            held[(job.quota, job.in_quota)] = dict(request)
        else:
            for key, amount in request.items():
                total[key] = total.get(key, 0) + amount
        extras: list[Victim] = []
        if elastic is not None and elastic.extra:
            self.has_elastic = True
            base = job.base_count
            extras = extra_units(job, pool, model, pods_at[base:])
            for unit in extras:  # extra pods always count Not in Quota (§2c)
                _add_held(held, (job.quota, False), unit.request)
            pods_at = pods_at[:base]
        policies = self.policies
        if job.in_quota:
            if policies.running_in_quota is not None:
                policies.running_in_quota(self, Victim(job=job, quota=job.quota, pool=pool, request=request,
                                                       pods=tuple(pods_at), in_quota=True, extras=tuple(extras),
                                                       key=job.name))
            whole = None
        else:
            if job.idle == IDLE_ACCEPTABLE or job.demoted:  # a demoted job comes back whatever its idle mode
                self.promotable.append((job, request))  # the base only: extra pods are never promoted
            whole = Victim(job=job, quota=job.quota, pool=pool, request=request, pods=tuple(pods_at),
                           extras=tuple(extras), key=job.name)
        if not extras:  # a plain job (the common case)
            if whole is None:
                return None
            if policies.protected_until is not None:
                until = policies.protected_until(self, whole)
                if until is not None:
                    self.protected.append((whole, until))
                    return None
            return [whole]
        units = ([whole] if whole is not None else []) + extras
        if policies.protected_until is not None:
            until = policies.protected_until(self, units[0])  # every unit of a job began its run together
            if until is not None:
                self.protected.extend((unit, until) for unit in units)
                return []
        return units

    # --- questions every pass asks about a job ------------------------------------------------------------

    def models(self, demand: Demand) -> list[str | None]:
        """The models to try, in order: the one the pods name; else the pool's models by name for a
        job with GPUs; else None (no GPU and no model named: any node of the pool)."""
        if demand.model is not None:
            return [demand.model]
        if demand.gpus:
            return list(self.capacity.models(demand.pool or ""))
        return [None]

    def refusal(self, demand: Demand) -> Refused | None:
        """Inputs no pass can schedule: unknown quota, no pods, pods naming two models."""
        if demand.pool is None:
            return Refused(quota=demand.job.quota)
        if not demand.order or len(demand.models_named) > 1:
            never = self.never_fits(demand)
            return Refused(never=never) if never else None
        return None

    def never_fits(self, demand: Demand) -> NeverFits | None:
        """The pool cannot hold the job even when empty."""
        # Sizes in placement order and the models named say all that matters about the pods.
        key = (demand.pool, demand.models_named, demand.order)
        if key not in self.never_fits_seen:
            self.never_fits_seen[key] = unplaceable(demand.job.pods, self.nodes, demand.pool or "")
        why = self.never_fits_seen[key]
        return NeverFits(why) if why else None

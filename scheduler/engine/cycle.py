"""One scheduling cycle (DESIGN §2): `run_cycle(snapshot) -> Decisions`.

Order of work, each step in queue order (priority desc, queue time asc, name):
0. nominated jobs of earlier cycles: admitted In Quota on their nodes once those have the free
   capacity, else they keep (re-take) their reservation; one whose nodes can no longer hold it, or
   whose quota no longer fits it, is withdrawn and goes through the in-quota pass like any job;
1. in-quota pass (`off` and `acceptable` jobs that fit in quota): place on free capacity; else
   nominate on free + unreserved being-released capacity (no new victim); else reclaim: preempt
   victims and nominate on what they release; else pending with a reason;
2. idle pass (`acceptable` and `only` jobs still pending): place on free unreserved capacity within
   `max`, Not in Quota; never preempts;
3. promotion: running Not in Quota `acceptable` jobs whose quota now fits them, oldest first.

A job that names no GPU model tries the pool's models in name order, and only the models its
quota fits; each step is tried on every model before the next step, so the job prefers landing
now on any model over nominating, and nominating over preempting.

Failure memo (`memo.FailureMemo`): free capacity only shrinks during a cycle, and free + being-released +
reclaimable capacity only shrinks during the in-quota pass (a victim's capacity moves from
"reclaimable" to "being released"). For a gang of equal pods, fitting is a count that can only
shrink with capacity, so once `n` such pods failed in a pool/model, `n` or more fail again for
the rest of the cycle: skipping them is exact, and it is what keeps a long queue on a full cluster
fast. Gangs of mixed pod sizes are always tried (best fit on mixed sizes is not monotone).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from .capacity import Capacity, NodeState
from .demand import Demand, demand_of, named_models
from .memo import FailureMemo as _Memo
from .placement import Placed, node_names_in_pod_order, place, unplaceable_reason
from .policies import PolicySteps, protected_until
from .quota import QuotaTree
from .reasons import (
    BothPaths,
    IdleOnly,
    NeverFits,
    NoIdleRoom,
    NoRoom,
    Reason,
    Refused,
    Starving,
    WaitingForVictims,
    any_model,
)
from .reclaim import CountingFit, GreedyFit, Victim, VictimQueue, select_victims
from .resources import vector
from .starvation import AllowedNodes, allowed_nodes, drain_sets, place_avoiding
from .types import (
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    NOMINATED,
    RUNNING,
    TERMINATING,
    Admission,
    Decisions,
    Job,
    Preemption,
    Snapshot,
)
from .victim_index import VictimIndex
from .within import WithinQuota


def run_cycle(snapshot: Snapshot) -> Decisions:
    """Decide one cycle. Pure: the snapshot is not changed, and the same snapshot (in any job order) gives
    the same decisions. The cyclic garbage collector is paused for the cycle: a cycle allocates hundreds of
    thousands of acyclic objects, and at 5,000 nodes the collections they trigger took a third of the time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Cycle(snapshot).run()
    finally:
        if collecting:
            gc.enable()


def queue_order(job: Job) -> tuple[int, float, str]:
    """Pending order: priority (higher first), then queue time, then name."""
    return (-job.priority, job.submitted_at, job.name)


class _Cycle(WithinQuota, PolicySteps):
    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = snapshot.nodes
        self.snapshot = snapshot
        self.protected: list[tuple[Victim, float]] = []  # min_runtime_s: no candidates yet, until when
        self._with_protected: VictimQueue | None = None
        self.no_protected_room = _Memo()
        self.within_quotas = {q.name for q in snapshot.quotas if q.preempt_within}
        self.in_quota_victims: dict[str, list[Victim]] = {}  # preempt_within quota -> its running In Quota jobs
        self.demoted_now: dict[str, Victim] = {}
        self.starving: dict[str, tuple[str, ...]] = {}  # starvation_s: starving job -> its drain set
        self.avoid: dict[str, frozenset[NodeState]] = {}  # job -> nodes of earlier starving jobs' drain sets
        self._allowed: AllowedNodes = {}  # drain sets: the nodes a job may use, per (pool, model, avoid)
        self.capacity = Capacity(snapshot.nodes)
        self.quotas = QuotaTree(snapshot.quotas, snapshot.nodes)
        self.decisions = Decisions()
        self.queue: list[Demand] = []  # pending and nominated jobs
        self.promotable: list[tuple[Job, dict[str, int]]] = []
        self.why: dict[str, Reason | None] = {}  # job still pending -> why
        self.no_free_room = _Memo()
        self.no_released_room = _Memo()  # forgets a (pool, model) when a preemption releases capacity there
        self.no_reclaim_room = _Memo()
        self._never_fits: dict[tuple, str | None] = {}
        victims: list[Victim] = []
        held: dict[tuple[str, bool], dict[str, int]] = {}  # (quota, in quota) -> what its running jobs hold
        for job in snapshot.jobs:
            if job.phase == RUNNING:
                victim = self._hold_running(job, held)
                if victim is not None:
                    victims.append(victim)
            elif job.phase == TERMINATING:
                for pod, node in zip(job.pods, job.nodes, strict=False):
                    self.capacity.hold_releasing(node, pod.gpus, pod.cpu_m, pod.memory_mib, job.name)
            else:
                self.queue.append(demand_of(job, self.quotas.pool(job.quota)))
        for (quota, in_quota), request in held.items():  # one charge per quota, not one per running job
            self.quotas.charge(quota, request, in_quota=in_quota)
        self.capacity.open()
        self.victims = VictimQueue(victims)
        self._victim_index: VictimIndex | None = None  # built on the first search that can use it
        self.queue.sort(key=lambda d: queue_order(d.job))

    def _hold_running(self, job: Job, held: dict[tuple[str, bool], dict[str, int]]) -> Victim | None:
        """Charge a running job to its nodes, and add it to what its quota's running jobs hold (`held`);
        a Not in Quota one is a reclaim candidate."""
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
        if len(job.pods) == 1:
            pod = job.pods[0]
            request = vector(pod.gpus, model, pod.cpu_m, pod.memory_mib)
        else:
            request = vector(sum(p.gpus for p in job.pods), model, sum(p.cpu_m for p in job.pods),
                             sum(p.memory_mib for p in job.pods))
        pool = self.quotas.pool(job.quota)
        if pool is None:
            return None
        total = held.get((job.quota, job.in_quota))
        if total is None:
            held[(job.quota, job.in_quota)] = dict(request)
        else:
            for key, amount in request.items():
                total[key] = total.get(key, 0) + amount
        if job.in_quota:
            if job.quota in self.within_quotas:
                self.in_quota_victims.setdefault(job.quota, []).append(
                    Victim(job=job, quota=job.quota, pool=pool, request=request, pods=tuple(pods_at)))
            return None
        if job.idle == IDLE_ACCEPTABLE or job.demoted:  # a demoted job comes back whatever its idle mode
            self.promotable.append((job, request))
        victim = Victim(job=job, quota=job.quota, pool=pool, request=request, pods=tuple(pods_at))
        until = protected_until(job, self.snapshot.policy_of(pool), self.snapshot.now)
        if until is not None:
            self.protected.append((victim, until))
            return None
        return victim

    # --- the cycle -------------------------------------------------------------------------------------

    def run(self) -> Decisions:
        self.starving, self.avoid = drain_sets(self)  # before nominated jobs are served
        waiting = [d for d in self.queue if not (d.job.phase == NOMINATED and self._renew_nomination(d))]
        self._in_quota_pass(waiting)
        self._idle_pass([d for d in waiting if d.job.name in self.why])
        self._promote()
        self.quotas.end_holds()  # starvation_hold
        gone = set(self.decisions.preempted) | set(self.decisions.promoted)
        self.decisions.demoted = sorted(name for name in self.demoted_now if name not in gone)
        self._pending()
        return self.decisions

    def _in_quota_pass(self, waiting: list[Demand]) -> None:
        for demand in waiting:
            if demand.job.idle == IDLE_ONLY:
                self.why[demand.job.name] = None  # still to be decided by the idle pass
                continue
            reason = self._in_quota(demand)
            if reason is not None:
                self.why[demand.job.name] = reason
                self.quotas.hold_for(demand.job.name)  # starvation_hold: a holder still pending

    def _idle_pass(self, still_pending: list[Demand]) -> None:
        for demand in self._idle_order(still_pending):
            name = demand.job.name
            earlier = self.why[name]
            if demand.job.idle == IDLE_OFF or isinstance(earlier, Refused):
                continue  # quota only, or nothing can place it (its reason says why)
            reason = self._idle(demand)
            if reason is None:
                del self.why[name]
                self.quotas.unhold_for(name)  # running now: its hold ends with its wait
            elif isinstance(reason, Refused):
                self.why[name] = reason
            elif demand.job.idle == IDLE_ONLY:
                self.why[name] = IdleOnly(reason)
            else:
                self.why[name] = BothPaths(earlier, reason)

    def _pending(self) -> None:
        """Every job neither admitted nor nominated, in queue order (the index is the queue position)."""
        decided = self.decisions
        for demand in self.queue:
            name = demand.job.name
            if name in decided.admitted or name in decided.nominated:
                continue
            decided.pending.append(name)
            why = self.why[name]
            # Whatever path it failed on, a job the pool cannot hold even when empty is told so.
            if not isinstance(why, Refused):
                why = self._never_fits_reason(demand) or why
            if name in self.starving and not isinstance(why, Refused | NeverFits):
                why = Starving(why, self.starving[name])
            decided.reasons[name] = why

    def _models(self, demand: Demand) -> list[str | None]:
        """The models to try, in order: the one the pods name; else the pool's models by name for a
        job with GPUs; else None (no GPU and no model named: any node of the pool)."""
        if demand.model is not None:
            return [demand.model]
        if demand.gpus:
            return list(self.capacity.models(demand.pool or ""))
        return [None]

    def _refusal(self, demand: Demand) -> Refused | None:
        """Inputs no pass can schedule: unknown quota, no pods, pods naming two models."""
        if demand.pool is None:
            return Refused(f"unknown quota {demand.job.quota}")
        if not demand.order or len(demand.models_named) > 1:
            never = self._never_fits_reason(demand)
            return Refused(str(never), NeverFits.code) if never else None
        return None

    def _never_fits_reason(self, demand: Demand) -> NeverFits | None:
        # Sizes in placement order and the models named say all that matters about the pods.
        key = (demand.pool, demand.models_named, demand.order)
        if key not in self._never_fits:
            self._never_fits[key] = unplaceable_reason(demand.job.pods, self.nodes, demand.pool or "")
        why = self._never_fits[key]
        return NeverFits(why) if why else None

    # --- 0. nominated jobs -------------------------------------------------------------------------------

    def _renew_nomination(self, demand: Demand) -> bool:
        """Admit a nominated job on its nodes, or keep its reservation there; False: withdrawn."""
        job = demand.job
        if self._refusal(demand) is not None or len(job.nodes) != demand.count:
            return False
        nodes: list[NodeState] = []
        for pod, name in zip(job.pods, job.nodes, strict=True):
            node = self.capacity.nodes.get(name)
            if node is None or not node.schedulable or node.pool != demand.pool:
                return False
            if pod.gpu_type and node.model != pod.gpu_type:
                return False
            nodes.append(node)
        gpu_models = {node.model for node, pod in zip(nodes, job.pods, strict=True) if pod.gpus}
        if len(gpu_models) > 1:
            return False
        model = demand.model or next(iter(gpu_models), None)
        request = demand.request(model)
        if self.quotas.shortfall(job.quota, request) is not None:
            return False
        need: dict[NodeState, list[int]] = {}
        for node, pod in zip(nodes, job.pods, strict=True):
            amounts = need.setdefault(node, [0, 0, 0])
            amounts[0] += pod.gpus
            amounts[1] += pod.cpu_m
            amounts[2] += pod.memory_mib
        on_free = all(n.free_g >= g and n.free_c >= c and n.free_m >= m for n, (g, c, m) in need.items())
        if not on_free and not all(
            n.free_g + n.rel_g >= g and n.free_c + n.rel_c >= c and n.free_m + n.rel_m >= m
            for n, (g, c, m) in need.items()
        ):
            return False
        placed: list[Placed] = [
            (i, node, self.capacity.take(node, pod.gpus, pod.cpu_m, pod.memory_mib, releasing_first=not on_free))
            for i, (node, pod) in enumerate(zip(nodes, job.pods, strict=True))
        ]
        self._hold_in_quota(demand, model, placed)
        return True

    # --- 1. in-quota pass ----------------------------------------------------------------------------------

    def _in_quota(self, demand: Demand) -> Reason | None:
        """Admit, nominate (maybe preempting) or return why not."""
        if demand.job.quota not in self.within_quotas:
            return self._in_quota_steps(demand, None)
        demoted: list[Victim] = []
        reason = self._in_quota_steps(demand, demoted)
        if demoted:
            self._settle_demotions(demand, demoted, admitted=reason is None)
        return reason

    def _in_quota_steps(self, demand: Demand, demoted: list[Victim] | None) -> Reason | None:
        """`demoted`: None, or (preempt_within) filled with the jobs demoted for this one."""
        refusal = self._refusal(demand)
        if refusal is not None:
            return refusal
        quota = demand.job.quota
        fitting: list[str | None] = []
        short: list[Reason] = []
        for model in self._models(demand):
            reason = self.quotas.shortfall(quota, demand.request(model))
            if reason is None:
                fitting.append(model)
            else:
                short.append(reason)
        if not fitting and demoted is not None:
            fitting = next(([m] for m in self._models(demand) if self._demote_for(demand, m, demoted)), [])
        if not fitting:
            return any_model(short) if short else NoRoom(demand.describe())
        for model in fitting:
            placed = self._place(demand, model, releasing=False)
            if placed is not None:
                self._hold_in_quota(demand, model, placed)
                return None
        pool = demand.pool or ""
        # One model and equal pods with GPUs: the victim search itself answers "fits on free + being
        # released capacity, no victim needed" (an empty list), exactly when this placement would succeed.
        skip_releasing = len(fitting) == 1 and self._indexed(demand, fitting[0]) and not (demoted or self.avoid)
        for model in fitting:
            if not skip_releasing and self.capacity.has_releasing(pool, model):
                placed = self._place(demand, model, releasing=True)
                if placed is not None:
                    self._hold_in_quota(demand, model, placed)
                    return None
        for model in fitting:
            if demoted is None:
                victims = self._select_victims(demand, model)
            else:
                victims = self._walk(demand, model, self._within_queue(demand, demoted))
            if victims is not None:
                for victim in victims:
                    self._preempt(victim, demand)
                placed = self._place(demand, model, releasing=True, use_memo=False)  # room was just made
                assert placed is not None, f"victims chosen for {demand.job.name} did not make room"
                self._hold_in_quota(demand, model, placed)
                return None
        return self._protected_reason(demand, fitting) or NoRoom(demand.describe())

    def _place(self, demand: Demand, model: str | None, *, releasing: bool, use_memo: bool = True
               ) -> list[Placed] | None:
        avoid = self.avoid.get(demand.job.name)
        if avoid is not None:
            return place_avoiding(self.capacity, self._allowed, demand, model, avoid, releasing=releasing)
        if not use_memo:
            return place(self.capacity, demand, model, releasing=releasing)
        memo = self.no_released_room if releasing else self.no_free_room
        if memo.known_to_fail(demand, model):
            return None
        placed = place(self.capacity, demand, model, releasing=releasing)
        if placed is None:
            memo.failed(demand, model)
        return placed

    def _select_victims(self, demand: Demand, model: str | None) -> list[Victim] | None:
        if demand.job.name in self.avoid:
            return self._walk(demand, model, self.victims)  # the index knows no drain sets
        if self.no_reclaim_room.known_to_fail(demand, model):
            return None
        victims = self._search_victims(demand, model)
        if victims is None:
            self.no_reclaim_room.failed(demand, model)
        return victims

    @staticmethod
    def _indexed(demand: Demand, model: str | None) -> bool:
        """Victims for this job are found with the node index: equal pods that ask for GPUs, on a model."""
        return demand.shape is not None and demand.shape[0] > 0 and model is not None

    def _search_victims(self, demand: Demand, model: str | None) -> list[Victim] | None:
        """The victims for `demand` on `model` (DESIGN §2); None when reclaiming every candidate would
        not make room. Gangs of equal pods with GPUs use the node index (`victim_index`); the rest (mixed
        pod sizes, GPU-less pods) walk the candidates with a fit that places them."""
        shape = demand.shape
        if shape is not None and self._indexed(demand, model):
            if self._victim_index is None:
                self._victim_index = VictimIndex(self.victims.untaken(), self.capacity)
            return self._victim_index.select(demand.pool or "", model, shape, demand.count)
        return self._walk(demand, model, self.victims)

    def _walk(self, demand: Demand, model: str | None, queue: VictimQueue) -> list[Victim] | None:
        """§2's victim walk over `queue`'s candidates."""
        pool = demand.pool or ""
        shape = demand.shape
        avoid = self.avoid.get(demand.job.name, frozenset())
        if avoid and not allowed_nodes(self.capacity, self._allowed, pool, model, avoid):
            return None  # every node it could use is in an earlier drain set
        could_host = self._host_test(demand, model)
        fit: CountingFit | GreedyFit
        if shape is not None:
            base = [n for n in self.capacity.nodes_with_room(pool, model, shape[0]) if n not in avoid]
            fit = CountingFit(shape, demand.count, base, could_host)
        else:
            fit = GreedyFit(demand.order, self.capacity.schedulable_nodes(pool, model), could_host)
        return select_victims(queue.candidates(pool, model, could_host), fit)

    def _host_test(self, demand: Demand, model: str | None) -> Callable[[NodeState], bool]:
        """Whether the job could be placed on a node: right pool and model, schedulable, big enough for
        one of its pods, and in no drain set it must keep off."""
        avoid = self.avoid.get(demand.job.name, frozenset())
        pool = demand.pool or ""
        shape = demand.shape
        sizes = [size[1:] for size in demand.order] if shape is None else [shape]

        answers: dict[NodeState, bool] = {}  # asked for the same nodes again and again while choosing

        def could_host(node: NodeState) -> bool:
            answer = answers.get(node)
            if answer is None:
                answer = answers[node] = (
                    node.schedulable
                    and node not in avoid
                    and node.pool == pool
                    and (model is None or node.model == model)
                    and any(node.holds(*size) for size in sizes)
                )
            return answer

        return could_host

    def _preempt(self, victim: Victim, demand: Demand) -> None:
        self.victims.take(victim)
        if self._with_protected is not None:
            self._with_protected.take(victim)
        if self._victim_index is not None:
            self._victim_index.take(victim)
        for node, g, c, m in victim.pods:
            self.capacity.release(node, g, c, m, victim.job.name)
        name = victim.job.name
        if victim.job.in_quota and name not in self.demoted_now:
            # An In Quota victim (§2b) stops counting against its quota once chosen; a Not in Quota one
            # keeps counting towards `max` until the cycle ends: its pods still run.
            self.quotas.release(victim.quota, victim.request)
            self.quotas.demote(victim.quota, victim.request)
        self.decisions.preempted[name] = Preemption(name, demand.job.name, demand.job.quota, victim.job.in_quota)
        # more capacity is being released now, on the victim's nodes
        self.no_released_room.forget({(node.pool, node.model) for node, *_ in victim.pods})

    def _hold_in_quota(self, demand: Demand, model: str | None, placed: list[Placed]) -> None:
        """Admit In Quota when every pod got free capacity; otherwise the job is nominated and what
        it took is its reservation, waiting for the jobs releasing that capacity to exit."""
        self.quotas.charge(demand.job.quota, demand.request(model), in_quota=True)
        nodes = node_names_in_pod_order(placed)
        exiting = sorted({job for _, node, from_rel in placed if any(from_rel) for job in node.releasing})
        if not exiting:
            self.decisions.admitted[demand.job.name] = Admission(in_quota=True, nodes=nodes, gpu_type=model)
        else:
            self.decisions.nominated[demand.job.name] = nodes
            self.decisions.reasons[demand.job.name] = WaitingForVictims(tuple(exiting))

    # --- 2. idle pass ----------------------------------------------------------------------------------

    def _idle(self, demand: Demand) -> Reason | None:
        refusal = self._refusal(demand)
        if refusal is not None:
            return refusal
        maxed: list[Reason] = []
        models = self._models(demand)
        for model in models:
            reason = self.quotas.max_shortfall(demand.job.quota, demand.request(model))
            if reason is not None:
                maxed.append(reason)
                continue
            placed = self._place(demand, model, releasing=False)
            if placed is not None:
                self.quotas.charge(demand.job.quota, demand.request(model), in_quota=False)
                self.decisions.admitted[demand.job.name] = Admission(
                    in_quota=False, nodes=node_names_in_pod_order(placed), gpu_type=model
                )
                return None
        if models and len(maxed) == len(models):
            return any_model(maxed)
        return NoIdleRoom(demand.describe())

    # --- 3. promotion ----------------------------------------------------------------------------------

    def _promote(self) -> None:
        def oldest_first(entry: tuple[Job, dict[str, int]]) -> tuple[float, str]:
            return (entry[0].started_at if entry[0].started_at is not None else entry[0].submitted_at, entry[0].name)

        for job, request in sorted(self.promotable, key=oldest_first):
            if job.name in self.decisions.preempted:
                continue
            if self.quotas.min_shortfall(job.quota, request) is None:
                self.quotas.promote(job.quota, request)
                self.decisions.promoted.append(job.name)

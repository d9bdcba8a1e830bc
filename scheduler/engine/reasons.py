"""Why a job waits, and why a job was preempted: values made where the decision is made, turned into
text only here, only when read.

Each kind of reason is a small frozen value with a stable `code` (its kind, for programs: the API,
filters, the loop's stored code) and its parts as fields (the quota, the resource, the amounts, the
jobs waited for). The cycle passes values around, combines them (an `acceptable` job fails both the
quota and the idle path) and hands them out in `Decisions.reasons`. Text is made by `render(reason,
to)` (`str(reason)` is the staff text with the engine's job keys): for a `MEMBER` of the job's
workspace, who may not read other workspaces' job names, no other job is named; for `staff(name)`,
jobs are named by `name`. `preemption_text` does the same for a `types.Preemption`. The text names the
quota, the resource and the numbers, so a person knows what to change (a smaller job, a larger quota,
idle resources on, or just wait). Programs never read meaning back out of the text: they use `code`
and the parts.

Codes (also in docs/scheduling.md): see `REASON_CODES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .resources import amount_in_units, cores, describe_pod, gib, unit_name

if TYPE_CHECKING:
    from .types import Preemption


@dataclass(frozen=True, slots=True)
class Audience:
    """Who reads a text: a member of the job's workspace (`member`: no other job is named, since jobs of
    other workspaces are not theirs to see) or staff (`name`: an engine job key -> the name shown)."""

    member: bool
    name: Callable[[str], str] = str


MEMBER = Audience(member=True)
STAFF = Audience(member=False)  # job keys as the engine knows them (scenario files, the simulator)


def staff(name: Callable[[str], str]) -> Audience:
    """Staff, with job keys shown as `name` gives them."""
    return Audience(member=False, name=name)


class Reason:
    """A reason value: `code` names its kind; `text(to)` renders it (`str()`: for `STAFF`)."""

    __slots__ = ()
    code: ClassVar[str] = ""

    def text(self, to: Audience) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text(STAFF)


def render(reason: Reason, to: Audience) -> str:
    """The text of a reason for one reader."""
    return reason.text(to)


def preemption_text(preemption: Preemption, to: Audience) -> str:
    """Why a victim was preempted, for one reader: a reclaim names the quota that took the capacity back
    (and, for staff, the job it was for); a preemption inside a quota names nothing (DESIGN §2b)."""
    if preemption.within:
        return "preempted by a higher-priority job of the same quota"
    if to.member:
        return f"reclaimed for a queued job of quota {preemption.by_quota}"
    return f"reclaimed by quota {preemption.by_quota} for job {to.name(preemption.for_job)}"


@dataclass(frozen=True, slots=True)
class Asked:
    """What a job asks for, as reasons word it: "8 A100, 32 CPU cores", "4 pods of 8 A100, 32 CPU
    cores each", "3 pods (20 A100, 56 CPU cores in all)". `equal`: all pods are this size (else the
    amounts are the job's totals)."""

    count: int
    gpus: int
    model: str | None
    cpu_m: int
    memory_mib: int
    equal: bool

    def __str__(self) -> str:
        pod = describe_pod(self.gpus, self.model, self.cpu_m, self.memory_mib)
        if self.count == 1:
            return pod
        if self.equal:
            return f"{self.count} pods of {pod} each"
        return f"{self.count} pods ({pod} in all)"


@dataclass(frozen=True, slots=True)
class QuotaFull(Reason):
    """In Quota use plus the request would pass the `min` of the job's quota or an ancestor."""

    code: ClassVar[str] = "quota_full"
    quota: str
    key: str
    need: int
    left: int
    limit: int
    held: int = 0  # starvation_hold: of the guarantee not in use, what is kept for earlier starving jobs
    own: bool = False  # the part of `min` the quota keeps for its own jobs (`ownmin`), not its subtree's

    def text(self, to: Audience) -> str:
        if self.own:
            return self.own_text()
        out = (
            f"quota {self.quota} full: needs {amount_in_units(self.key, self.need)} {unit_name(self.key)}, "
            f"{amount_in_units(self.key, max(self.left, 0))} left of {amount_in_units(self.key, self.limit)}"
        )
        if self.held > 0:  # names no job: members may not see other workspaces' jobs
            out += f" ({amount_in_units(self.key, self.held)} kept for earlier jobs that have waited too long)"
        return out

    def own_text(self) -> str:
        """DESIGN §2: a child's guarantee is the child's; a job of the parent itself fits in quota only
        within what the parent keeps for itself."""
        units = unit_name(self.key)
        if self.limit <= 0:
            return (f"quota {self.quota} keeps no {units} for its own jobs (its whole min is its child quotas' "
                    f"guarantee): runs on idle resources only")
        out = (f"quota {self.quota} full for its own jobs: needs {amount_in_units(self.key, self.need)} {units}, "
                f"{amount_in_units(self.key, max(self.left, 0))} left of the {amount_in_units(self.key, self.limit)} "
                f"it keeps beside its child quotas' guarantees")
        if self.held > 0:
            out += f" ({amount_in_units(self.key, self.held)} kept for earlier jobs that have waited too long)"
        return out


@dataclass(frozen=True, slots=True)
class MaxReached(Reason):
    """Everything the subtree uses plus the request would pass a `max` (in or out of quota)."""

    code: ClassVar[str] = "max_reached"
    quota: str
    key: str
    need: int
    left: int
    limit: int

    def text(self, to: Audience) -> str:
        return (
            f"quota {self.quota} max reached: needs {amount_in_units(self.key, self.need)} "
            f"{unit_name(self.key)}, {amount_in_units(self.key, max(self.left, 0))} left of max "
            f"{amount_in_units(self.key, self.limit)}"
        )


@dataclass(frozen=True, slots=True)
class NoRoom(Reason):
    """The quota fits but the pool does not: no free room and no idle jobs worth reclaiming."""

    code: ClassVar[str] = "no_capacity"
    demand: Asked

    def text(self, to: Audience) -> str:
        return f"no room for {self.demand} on free capacity; reclaiming all idle jobs would not free enough"


@dataclass(frozen=True, slots=True)
class NoIdleRoom(Reason):
    """Idle pass: no free capacity left that no nominated job has reserved."""

    code: ClassVar[str] = "no_idle_capacity"
    demand: Asked

    def text(self, to: Audience) -> str:
        return f"no free unreserved capacity for {self.demand}"


@dataclass(frozen=True, slots=True)
class ProtectedVictims(Reason):
    """Fits in quota, and would fit if Not in Quota jobs protected by the pool's `min_runtime_s` (or
    `starved_min_runtime_s`) were reclaimed (DESIGN §2b): `until` is the earliest time one of them stops
    being protected."""

    code: ClassVar[str] = "protected_victims"
    demand: Asked
    until: float

    def text(self, to: Audience) -> str:
        return (f"no room for {self.demand} until idle jobs have run their minimum runtime: the first "
                f"can be reclaimed at {self.until:g}")


@dataclass(frozen=True, slots=True)
class Starving(Reason):
    """starvation_s (DESIGN §2b): the job waited too long; `nodes` are kept for it (later jobs stay off
    them) and fill as their jobs end. `why`: what blocks it now."""

    code: ClassVar[str] = "starving"
    why: Reason
    nodes: tuple[str, ...]

    def text(self, to: Audience) -> str:
        if not self.nodes:
            return f"{self.why.text(to)}; waiting too long, but no set of nodes could hold it even when empty"
        return f"{self.why.text(to)}; waiting too long: nodes {', '.join(self.nodes)} are kept for it as they empty"


@dataclass(frozen=True, slots=True)
class WaitingForVictims(Reason):
    """Nominated: the reservation includes capacity of jobs whose pods are still exiting."""

    code: ClassVar[str] = "waiting_for_victims"
    jobs: tuple[str, ...]

    def text(self, to: Audience) -> str:
        count = len(self.jobs)
        if to.member:  # how many, never which: they may be other workspaces' jobs
            return f"waiting for {count} preempted job{'s' if count != 1 else ''} to exit"
        return f"waiting for {count} job(s) to exit: {', '.join(to.name(job) for job in self.jobs)}"


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """Why a job could never run in `pool`, even with every schedulable node empty, as parts (made by
    `placement.unplaceable`; the submission check shows its text). `rule` names the case:

    - `no_pods`; `two_models` (`models`: those the pods name); `no_nodes` (no schedulable node);
    - `no_model` (`label`: the model no node has); `no_gpus` (no node has GPUs);
    - `pod_gpus`, `pod_cpu`, `pod_memory`: one pod asks `need` (GPUs, CPU millicores, memory MiB) and
      the largest node (with the pod's `gpus`, for CPU and memory) has `largest`;
    - `gang`: every pod fits some node but not all `pods` at once (`need` GPUs asked, `largest` in the
      pool).
    `label` is the GPU model the pods name, or "GPUs"."""

    rule: str
    pool: str
    label: str = ""
    models: tuple[str, ...] = ()
    need: int = 0
    largest: int = 0
    gpus: int = 0
    pods: int = 0

    def __str__(self) -> str:
        pool, label = self.pool, self.label
        holding = f" with {self.gpus} {label}" if self.gpus else ""
        if self.rule == "no_pods":
            return "the job has no pods"
        if self.rule == "two_models":
            return f"pods ask for different GPU models ({', '.join(self.models)}); all pods of a job use one model"
        if self.rule == "no_nodes":
            return f"the {pool} pool has no schedulable nodes"
        if self.rule == "no_model":
            return f"no {pool} node has {label} GPUs"
        if self.rule == "no_gpus":
            return f"no {pool} node has GPUs"
        if self.rule == "pod_gpus":
            return f"no {pool} node has {self.need} {label}; the largest has {self.largest}"
        if self.rule == "pod_cpu":
            return (f"no {pool} node{holding} has {cores(self.need)} CPU cores; the largest has "
                    f"{cores(self.largest)}")
        if self.rule == "pod_memory":
            return f"no {pool} node{holding} has {gib(self.need)} GiB memory; the largest has {gib(self.largest)}"
        detail = f" ({self.need} {label} asked, {self.largest} in the pool)" if self.need > self.largest else ""
        return f"the {pool} pool cannot hold all {self.pods} pods at once, even when empty{detail}"


@dataclass(frozen=True, slots=True)
class NeverFits(Reason):
    """The pool cannot hold the job even when empty (nodes were removed after submission)."""

    code: ClassVar[str] = "never_fits"
    why: Unplaceable

    def text(self, to: Audience) -> str:
        return f"can never run: {self.why}"


@dataclass(frozen=True, slots=True)
class IdleOnly(Reason):
    """An `only` job never takes the quota path: its one reason is the idle one, and so is its code
    (`no_idle_capacity` or `max_reached`); the text says why only that path was tried."""

    idle: Reason

    @property
    def code(self) -> str:  # type: ignore[override]
        return self.idle.code

    def text(self, to: Audience) -> str:
        return f"idle mode only: {self.idle.text(to)}"


@dataclass(frozen=True, slots=True)
class BothPaths(Reason):
    """An `acceptable` job that neither fits its quota nor finds idle capacity; each part keeps its own
    code."""

    code: ClassVar[str] = "quota_and_idle"
    in_quota: Reason
    idle: Reason

    def text(self, to: Audience) -> str:
        return f"{self.in_quota.text(to)}; idle resources: {self.idle.text(to)}"


@dataclass(frozen=True, slots=True)
class AnyModel(Reason):
    """A job that names no GPU model failed on every model; one reason per model, in model order. Its
    code is theirs when they all share one (`quota_full` on every model), else `any_model`."""

    reasons: tuple[Reason, ...]

    @property
    def code(self) -> str:  # type: ignore[override]
        codes = {reason.code for reason in self.reasons}
        return codes.pop() if len(codes) == 1 else "any_model"

    def text(self, to: Audience) -> str:
        return "; ".join(dict.fromkeys(reason.text(to) for reason in self.reasons))


@dataclass(frozen=True, slots=True)
class Refused(Reason):
    """Inputs the engine cannot schedule at all: an unknown `quota` (`unknown_quota`), or pods no pool
    could ever run (`never`: no pods, pods naming two models; `never_fits`)."""

    quota: str = ""
    never: NeverFits | None = None

    @property
    def code(self) -> str:  # type: ignore[override]
        return NeverFits.code if self.never is not None else "unknown_quota"

    def text(self, to: Audience) -> str:
        return self.never.text(to) if self.never is not None else f"unknown quota {self.quota}"


def any_model(reasons: list[Reason]) -> Reason:
    return reasons[0] if len(reasons) == 1 else AnyModel(tuple(reasons))


# Every code a reason can carry, for programs that store or filter them (stable: renaming one is a
# breaking change for the API and the stored codes).
REASON_CODES = (
    "quota_full",  # the guarantee (min) of the job's quota or an ancestor is used up
    "max_reached",  # a max on the way up would be passed
    "no_capacity",  # fits in quota, but no room even if every idle job were reclaimed
    "starving",  # waited past the pool's starvation_s: nodes are kept for it (the inner reason says why now)
    "protected_victims",  # would fit by reclaiming idle jobs still within the pool's min_runtime_s
    "no_idle_capacity",  # no free unreserved capacity for a job on idle resources
    "quota_and_idle",  # an `acceptable` job blocked on both paths (each part has its own code)
    "waiting_for_victims",  # nominated: the jobs it preempted (or others) are still exiting
    "never_fits",  # the pool cannot hold the job even when empty
    "any_model",  # a job naming no model, blocked for different reasons on different models
    "unknown_quota",  # the job's quota does not exist
)

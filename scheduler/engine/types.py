"""Plain data the engine takes in and gives back (DESIGN §2, §4).

No Django here: the scenario command, the simulator and the live loop all build a
`Snapshot`, call `scheduler.engine.cycle.run_cycle`, and read the `Decisions`.

Units are integers so that sums never drift: CPU in millicores, memory in MiB, GPUs
per model. A resource vector is a plain mapping from a resource key to an amount:
`gpu_key("A100")` ("gpu:A100"), `CPU` ("cpu") and `MEMORY` ("memory").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reasons import Reason

CPU = "cpu"  # millicores
MEMORY = "memory"  # MiB
GPU_PREFIX = "gpu:"

IDLE_OFF = "off"
IDLE_ACCEPTABLE = "acceptable"
IDLE_ONLY = "only"
IDLE_MODES = (IDLE_OFF, IDLE_ACCEPTABLE, IDLE_ONLY)

PENDING = "pending"
RUNNING = "running"
TERMINATING = "terminating"  # pods still exiting: capacity being released, counts against no quota
NOMINATED = "nominated"  # waiting for victims to exit, holding a reservation on `nodes`
PHASES = (PENDING, RUNNING, TERMINATING, NOMINATED)

DEFAULT_POOL = "general"

IDLE_SHARE_FIFO = "fifo"
IDLE_SHARE_FAIR = "fair"
IDLE_SHARES = (IDLE_SHARE_FIFO, IDLE_SHARE_FAIR)


def gpu_key(model: str) -> str:
    return f"{GPU_PREFIX}{model}"


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpu_type: str
    gpus: int
    cpu_m: int
    memory_mib: int
    pool: str = DEFAULT_POOL
    schedulable: bool = True  # cordoned or lost nodes: False (nothing new is placed there)


@dataclass(frozen=True, slots=True)
class Quota:
    name: str
    parent: str | None
    # Guaranteed resources; a key left out counts as 0.
    min: Mapping[str, int] = field(default_factory=dict)
    # Ceiling on everything the subtree's jobs use; None = no max, a key left out = not capped.
    max: Mapping[str, int] | None = None
    pool: str = DEFAULT_POOL
    # DESIGN §2b: a higher-priority job of this quota first demotes, then may preempt, its own
    # lower-priority In Quota jobs
    preempt_within: bool = False


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod instance (a role with count 3 gives three entries)."""

    role: str
    gpus: int = 0
    gpu_type: str | None = None  # None: any model, but one model for the whole job
    cpu_m: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class Elastic:
    """DESIGN §2c: the one elastic role of a job. Its pods `0 … min_count−1` belong to the base (with every
    fixed role's pods); pods `min_count … count−1` are extra: always Not in Quota, never promoted."""

    role: str
    min_count: int
    count: int  # the maximum
    # running job: the role index of each extra pod it runs now, in the order of its `nodes` (after the base)
    extra: tuple[int, ...] = ()
    resized_at: float | None = None  # running job: its last resize (None: its start)

    def missing(self) -> list[int]:
        """The extra indexes not running, lowest first (growth's order)."""
        running = set(self.extra)
        return [i for i in range(self.min_count, self.count) if i not in running]


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    quota: str
    pods: tuple[Pod, ...]
    priority: int = 1  # 1..9, higher first
    idle: str = IDLE_OFF
    submitted_at: float = 0.0  # queue time, kept across automatic restarts
    phase: str = PENDING
    in_quota: bool = False  # running / terminating jobs: admitted against the guarantee
    started_at: float | None = None
    nodes: tuple[str, ...] = ()  # node of each pod, in pod order (all phases but pending)
    # last checkpoint the current run reported (running jobs); a safe point only when after started_at
    checkpointed_at: float | None = None
    # running Not in Quota because preempt_within demoted it: promoted back whatever its idle mode
    demoted: bool = False
    # DESIGN §2d: the maximum running time in seconds (None: the pool's default_time_limit_s, if any)
    time_limit_s: float | None = None
    # §2c: None for a plain job. `pods` holds the base (a pending job's gang), then the extra pods it runs.
    elastic: Elastic | None = None

    @property
    def base_count(self) -> int:
        """How many of `pods` are the base (all of them for a plain job)."""
        return len(self.pods) - len(self.elastic.extra) if self.elastic is not None else len(self.pods)

    @property
    def run_started_at(self) -> float:
        """When the current run began: the start, or an elastic job's last resize (every worker restarts
        then, §2c); queue time when the start is unknown."""
        if self.elastic is not None and self.elastic.resized_at is not None:
            return self.elastic.resized_at
        return self.started_at if self.started_at is not None else self.submitted_at

    @property
    def safe_point(self) -> float:
        """DESIGN §2: the last checkpoint if reported after the start, else the start (queue time when
        the start is unknown); an elastic job's run starts at its last resize (§2c)."""
        started = self.run_started_at if self.elastic is not None else (
            self.started_at if self.started_at is not None else self.submitted_at)
        checkpoint = self.checkpointed_at
        return checkpoint if checkpoint is not None and checkpoint > started else started


@dataclass(frozen=True, slots=True)
class Policy:
    """A pool's opt-in policies (DESIGN §2b); the defaults are §2's rules, decision for decision."""

    idle_share: str = IDLE_SHARE_FIFO  # fifo | fair: the idle pass's order
    min_runtime_s: float = 0.0  # a Not in Quota job that has run less than this is no reclaim candidate
    starvation_s: float = 0.0  # a job waiting longer gets a drain set (0: off)
    # Tidepool's extension of the guard (docs/scheduling.md): a starving job also holds the guarantee
    # its quota frees for it, and the first job of each quota kept out by the quota's own use counts as starving.
    starvation_hold: bool = False
    # Tidepool's extension (docs/scheduling.md): a Not in Quota job whose run began after its wait passed
    # starvation_s is no reclaim candidate before that run has lasted this long (0: only min_runtime_s).
    starved_min_runtime_s: float = 0.0
    # §2c: an elastic job grows at most this often (a resize restarts every worker from its checkpoint)
    grow_interval_s: float = 300.0
    # DESIGN §2d: the time limit of jobs that give none (0: none); it changes no decision by itself
    default_time_limit_s: float = 0.0

    @property
    def is_default(self) -> bool:
        return (self.idle_share == IDLE_SHARE_FIFO and self.min_runtime_s <= 0 and self.starvation_s <= 0
                and not self.starvation_hold and self.starved_min_runtime_s <= 0)


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...]
    jobs: tuple[Job, ...]
    now: float | None = None  # the cycle's time (seconds); needed by min_runtime_s and starvation_s
    policy: Policy = DEFAULT_POLICY  # every pool's policy, unless `policies` names the pool
    policies: Mapping[str, Policy] = field(default_factory=dict)  # pool -> its policy

    def policy_of(self, pool: str) -> Policy:
        return self.policies.get(pool, self.policy)


@dataclass(frozen=True, slots=True)
class Admission:
    in_quota: bool
    nodes: tuple[str, ...]  # node of each pod, in the job's pod order
    gpu_type: str | None = None  # the model the job landed on (None for GPU-less jobs)


# What made a victim (`Preemption.kind`): reclaim by an owner of the capacity (DESIGN §2), or a
# higher-priority job of the victim's own quota (§2b preempt_within). §2c's shrink is not a preemption.
PREEMPT_RECLAIM = "reclaim"
PREEMPT_WITHIN = "priority_within"
PREEMPT_KINDS = (PREEMPT_RECLAIM, PREEMPT_WITHIN)


@dataclass(frozen=True, slots=True)
class Preemption:
    """A victim of this cycle: who, for which job of which quota, and why (`kind`); its text is
    `reasons.preemption_text`."""

    victim: str
    for_job: str
    by_quota: str
    kind: str = PREEMPT_RECLAIM

    @property
    def within(self) -> bool:
        """preempt_within: the victim was In Quota in the same quota."""
        return self.kind == PREEMPT_WITHIN

    @property
    def code(self) -> str:
        return "preempted_within_quota" if self.within else "reclaimed"


@dataclass(frozen=True, slots=True)
class Shrink:
    """§2c: extra pods of a running elastic job taken by reclaim (it keeps running); `indexes` are role
    indexes of its elastic role, `for_job`/`by_quota` as in `Preemption`."""

    indexes: tuple[int, ...]
    for_job: str
    by_quota: str


@dataclass(frozen=True, slots=True)
class Growth:
    """§2c: extra pods placed for a running elastic job: their role indexes and nodes, in index order."""

    indexes: tuple[int, ...]
    nodes: tuple[str, ...]


# Why a pending job has no start estimate (`Estimate.unknown`); the texts are `Estimate.text`'s.
UNKNOWN_NO_LIMIT = "no_limit"  # it waits for capacity or quota held by a job with no time limit
UNKNOWN_FAR_BACK = "far_back"  # past the jobs of its pool that the plan estimates exactly
UNKNOWN_NEVER = "never"  # the pool or its quota can never hold it as it is
ESTIMATE_ROUGH = "rough"  # stored beside a rough estimate's time (services, `Estimate.rough`)
UNKNOWN_TEXT = {
    UNKNOWN_NO_LIMIT: "unknown: depends on jobs with no time limit",
    UNKNOWN_FAR_BACK: "unknown: far back in the queue",
    UNKNOWN_NEVER: "unknown: it cannot run in this pool as it is",
}


@dataclass(frozen=True, slots=True)
class Estimate:
    """DESIGN §2d: the earliest time (seconds, >= now) a pending job could start; None with a reason code
    in `unknown` when there is none. `rough`: planned on the pool's aggregate capacity, not on its nodes
    (a job past the exact ones of its pool, `plan_rough.py`)."""

    start: float | None
    unknown: str | None = None
    rough: bool = False

    @property
    def text(self) -> str:
        if self.unknown:
            return UNKNOWN_TEXT[self.unknown]
        return f"at about {self.start:g} (rough)" if self.rough else f"at {self.start:g}"


@dataclass(slots=True)
class Decisions:
    admitted: dict[str, Admission] = field(default_factory=dict)
    preempted: dict[str, Preemption] = field(default_factory=dict)
    nominated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> reserved node per pod
    promoted: list[str] = field(default_factory=list)
    demoted: list[str] = field(default_factory=list)  # preempt_within: now running Not in Quota
    pending: list[str] = field(default_factory=list)  # queue order: index = queue position
    # pending and nominated jobs -> why: a reason value (`.code`, and its text by `str()`), never
    # rendered by the engine itself
    reasons: dict[str, Reason] = field(default_factory=dict)
    grown: dict[str, Growth] = field(default_factory=dict)  # §2c
    shrunk: dict[str, Shrink] = field(default_factory=dict)  # §2c: never a job preempted this cycle
    # §2d: pending job -> its start estimate (engine/plan.py); empty when the snapshot has no `now`
    estimates: dict[str, Estimate] = field(default_factory=dict)

    def as_contract(self) -> dict:
        """The printed form of DESIGN §4: eight keys plus `reasons`, lists sorted."""
        return {
            "admitted": {
                name: {"in_quota": a.in_quota, "nodes": list(a.nodes)}
                for name, a in sorted(self.admitted.items())
            },
            "preempted": sorted(self.preempted),
            "nominated": sorted(self.nominated),
            "promoted": sorted(self.promoted),
            "demoted": sorted(self.demoted),
            "pending": sorted(self.pending),
            "grown": {name: list(g.nodes) for name, g in sorted(self.grown.items())},
            "shrunk": {name: sorted(s.indexes) for name, s in sorted(self.shrunk.items())},
            "reasons": {name: str(reason) for name, reason in sorted(self.reasons.items())},
            "estimated_start": {name: e.start for name, e in sorted(self.estimates.items())},
        }

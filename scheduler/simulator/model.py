"""What a replay is told (`ReplayConfig`) and what it gives back (`JobOutcome`, `ReplayResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.engine.types import IDLE_SHARES, Policy

from .elastic import DEFAULT_ALPHA
from .work import RunRecord, WorkModel


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    policy: str
    cycle_s: float = 10.0
    grace_s: float = 30.0
    checkpoint_s: float = 600.0  # work between two checkpoints of a job
    checkpoint_cost_s: float = 30.0  # wall time of one save
    restart_s: float = 60.0  # wall time before a run resumed after a preemption makes progress
    checkpoint_seed: int | None = 0  # random phase of each job's checkpoints; None: first one an interval in
    prune: bool = True  # snapshot only the pending jobs that could be admitted (see replay's doc)
    skip_unchanged: bool = True  # no engine call when nothing changed since the last one
    label: str = ""  # shown in progress lines
    progress_every: float = 0.05  # progress line every this fraction of arrivals; 0: none
    # DESIGN §2b pool policies given to the engine (every pool), and §2's safe points for victims
    idle_share: str = "fifo"
    min_runtime_s: float = 0.0
    starvation_s: float = 0.0
    starvation_hold: bool = False  # starving jobs also hold their quota's guarantee (engine/starvation.py)
    starved_min_runtime_s: float = 0.0  # runs begun after starving are not reclaimed before this (engine/policies.py)
    safe_point: bool = False  # give running borrowers their last checkpoint time (victim order)
    preempt_within: bool = False  # every quota's preempt_within (DESIGN §2b)
    name: str = ""  # the column's name in tables and reports (default: the policy)
    limits: str = "none"  # §2d time limits given to the jobs (simulator/limits.py)
    estimates: int = 200  # pending jobs per pool the engine estimates exactly, when jobs have limits
    # DESIGN §2c: the share of the jobs of 2+ GPUs that are elastic (0: none) and their throughput exponent
    # (elastic.py, the declared model)
    elastic_share: float = 0.0
    elastic_alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        if self.cycle_s < 0 or self.grace_s < 0:
            raise ValueError("cycle and grace periods must not be negative")
        self.work_model()  # checks the checkpoint and restart settings
        if self.limits not in ("none", "exact", "x2", "round") or self.estimates < 0:
            raise ValueError("limits are none, exact, x2 or round, and estimates must not be negative")
        self.engine_policy()  # checks the policy values
        if not 0 <= self.elastic_share <= 1 or not 0 < self.elastic_alpha <= 1:
            raise ValueError("the elastic share is between 0 and 1, and alpha above 0 and at most 1")
        if self.elastic_share > 0 and self.policy != "idle":
            raise ValueError("elastic jobs need idle mode acceptable or only (DESIGN §2c): only the idle policy "
                             "has them")

    def engine_policy(self) -> Policy:
        if self.idle_share not in IDLE_SHARES or min(self.min_runtime_s, self.starvation_s,
                                                     self.starved_min_runtime_s) < 0:
            raise ValueError("idle share is fifo or fair; min runtimes and starvation must not be negative")
        if self.starvation_hold and self.starvation_s <= 0:
            raise ValueError("the starvation hold needs a starvation time (--starvation)")
        if self.starved_min_runtime_s > 0 and self.starvation_s <= 0:
            raise ValueError("the starved minimum runtime needs a starvation time (--starvation)")
        return Policy(idle_share=self.idle_share, min_runtime_s=self.min_runtime_s, starvation_s=self.starvation_s,
                      starvation_hold=self.starvation_hold, starved_min_runtime_s=self.starved_min_runtime_s)

    @property
    def timed(self) -> bool:
        """Policies that read the cycle's time: a cycle with nothing new may still decide otherwise."""
        return self.min_runtime_s > 0 or self.starvation_s > 0

    def work_model(self) -> WorkModel:
        return WorkModel(
            interval_s=self.checkpoint_s, cost_s=self.checkpoint_cost_s, restart_s=self.restart_s,
            seed=self.checkpoint_seed,
        )


@dataclass(slots=True)
class JobOutcome:
    """What happened to one job of the trace. GPU-seconds are split by where they went (work.py)."""

    name: str
    team: str
    gpus: int
    submit_s: float
    duration_s: float
    fits_guarantee: bool  # its GPUs fit its team's guarantee (same set under every policy)
    priority: int = 1
    rejected: bool = False  # cannot fit the pool even when empty: refused at submission
    first_start_s: float | None = None
    first_in_quota: bool | None = None  # how its first run was admitted
    end_s: float | None = None
    preemptions: int = 0
    queued_s: float = 0.0  # all time queued: to the first start and after every preemption
    censored: bool = False  # still queued when the replay ended: `queued_s` runs to that end
    useful_gpu_s: float = 0.0  # work kept (gpus x duration once finished)
    redone_gpu_s: float = 0.0  # work lost to preemptions, done again
    checkpoint_gpu_s: float = 0.0  # checkpoint saves
    restart_gpu_s: float = 0.0  # restart overhead of runs after a preemption
    grace_gpu_s: float = 0.0  # SIGTERM to exit of preempted runs
    # §2d: the first start estimate the engine gave it (None: unknown), and when (None: never estimated)
    estimated_start_s: float | None = None
    estimate_made_s: float | None = None
    estimate_rough: bool = False  # that first estimate was a rough one (past the exact ones of its pool)
    # §2c: elastic under the model (elastic.py); its shrinks and growths, and what they cost: work redone,
    # the restart overhead of the runs after them, the grace period of the pods a shrink removed
    elastic: bool = False
    shrinks: int = 0
    growths: int = 0
    resize_lost_gpu_s: float = 0.0
    growth_lost_gpu_s: float = 0.0  # the part of it that growths cost (the rest: shrinks)

    @property
    def wait_s(self) -> float | None:
        """Submission to first start (None if it never started): the classic, flattering wait."""
        return None if self.first_start_s is None else self.first_start_s - self.submit_s

    @property
    def lost_gpu_s(self) -> float:
        """What preemptions and resizes cost: redone work, grace periods and restart overhead."""
        return self.redone_gpu_s + self.grace_gpu_s + self.restart_gpu_s

    @property
    def held_gpu_s(self) -> float:
        return self.useful_gpu_s + self.checkpoint_gpu_s + self.lost_gpu_s


@dataclass(slots=True)
class ReplayResult:
    policy: str
    config: ReplayConfig
    total_gpus: int
    jobs: list[JobOutcome]
    reclaim_latencies_s: list[float]  # queue entry to start, for runs that needed a reclaim
    nominated_to_start_s: list[float]  # first nomination to start, for the same runs
    allocation: list[tuple[float, int]]  # (time, GPUs held by pods from then on), time-ordered
    runs: list[RunRecord] = field(default_factory=list)  # every run, in the order it ended
    preemptions: int = 0
    demotions: int = 0  # preempt_within: In Quota jobs moved to idle resources (and left running) by higher-priority ones
    in_quota_preemptions: int = 0  # preempt_within: victims that were In Quota (demoted and reclaimed at once, or taken)
    shrinks: int = 0  # §2c: the engine's shrink decisions (a job that lost extra pods in one cycle: one)
    growths: int = 0
    pods_shrunk: int = 0
    pods_grown: int = 0
    cycles: int = 0
    engine_calls: int = 0
    engine_s: float = 0.0
    wall_s: float = 0.0
    end_s: float = 0.0  # time of the last arrival, completion or exit
    notes: list[str] = field(default_factory=list)

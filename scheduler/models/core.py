"""Tidepool's domain model: workspaces, quotas, nodes, jobs, pods, events.

Models hold data and the invariants that need no other row; rules that span rows
(children's min within the parent's, a pod that must fit some node) live in the
services, which validate before they write.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from scheduler import states
from scheduler.engine.types import CPU, MEMORY, gpu_key
from scheduler.models.gpu_time import JobGpuTime
from scheduler.models.time_limits import JobTimeLimits, PoolTimeLimits
from scheduler.states import (
    LIVE_POD_STATUSES,
    JobStatus,
    PodStatus,
    choices,
)
from scheduler.validation import (
    DEFAULT_GROW_INTERVAL_S,
    MAX_GRACE_SECONDS,
    MAX_GROW_INTERVAL_S,
    guard_extension_problems,
)

GRACE_SECONDS_MAX = MAX_GRACE_SECONDS  # the longest grace period a job may ask for (SIGTERM → SIGKILL)


class ResourceType(models.TextChoices):
    GENERAL = "general", "General"
    LINGJUN = "lingjun", "Lingjun"


class IdleMode(models.TextChoices):
    OFF = "off", "Off"
    ACCEPTABLE = "acceptable", "Acceptable"
    ONLY = "only", "Idle Resources Only"


class JobType(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch"
    TENSORFLOW = "tensorflow", "TensorFlow"
    MPI = "mpi", "MPI"
    XGBOOST = "xgboost", "XGBoost"
    RAY = "ray", "Ray"
    CUSTOM = "custom", "Custom"


def cpu_to_milli(cores: Decimal | float | int) -> int:
    return int(Decimal(str(cores)) * 1000)


def gib_to_mib(gib: Decimal | float | int) -> int:
    return int(Decimal(str(gib)) * 1024)


class Workspace(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="workspaces", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ResourceQuota(models.Model):
    """A node of one pool's quota tree. `min` is guaranteed; `max` (optional) caps everything used.

    GPUs are kept per model as {"A100": 8}. In `min` a model left out counts as 0; in `max`
    a resource left out (None / model absent) is not capped.
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    resource_type = models.CharField(max_length=16, choices=ResourceType.choices, default=ResourceType.GENERAL)
    min_gpus = models.JSONField(default=dict, blank=True)
    min_cpu = models.DecimalField(max_digits=10, decimal_places=3, default=Decimal(0))
    min_memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal(0))
    max_gpus = models.JSONField(null=True, blank=True)
    max_cpu = models.DecimalField(max_digits=10, decimal_places=3, null=True, blank=True)
    max_memory_gib = models.DecimalField(max_digits=12, decimal_places=3, null=True, blank=True)
    workspaces = models.ManyToManyField(Workspace, related_name="quotas", blank=True)
    preempt_within = models.BooleanField(
        default=False,
        help_text="A higher-priority job of this quota first moves its lower-priority In Quota jobs to idle "
        "resources, then may preempt them (DESIGN §2b).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["resource_type", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_max(self) -> bool:
        return self.max_gpus is not None or self.max_cpu is not None or self.max_memory_gib is not None

    def min_vector(self) -> dict[str, int]:
        vector = {gpu_key(model): int(count) for model, count in (self.min_gpus or {}).items()}
        vector[CPU] = cpu_to_milli(self.min_cpu)
        vector[MEMORY] = gib_to_mib(self.min_memory_gib)
        return vector

    def max_vector(self) -> dict[str, int] | None:
        if not self.has_max:
            return None
        vector = {gpu_key(model): int(count) for model, count in (self.max_gpus or {}).items()}
        if self.max_cpu is not None:
            vector[CPU] = cpu_to_milli(self.max_cpu)
        if self.max_memory_gib is not None:
            vector[MEMORY] = gib_to_mib(self.max_memory_gib)
        return vector

    @property
    def min_gpu_total(self) -> int:
        return sum(int(v) for v in (self.min_gpus or {}).values())


class Node(models.Model):
    class InventorySource(models.TextChoices):
        DECLARED = "declared"
        NVML = "nvml"
        DEMO = "demo"

    name = models.SlugField(max_length=64, unique=True)
    resource_type = models.CharField(max_length=16, choices=ResourceType.choices, default=ResourceType.GENERAL)
    gpu_type = models.CharField(max_length=32)
    gpu_count = models.PositiveIntegerField()
    cpu = models.DecimalField(max_digits=10, decimal_places=3)
    memory_gib = models.DecimalField(max_digits=12, decimal_places=3)
    address = models.CharField(max_length=128, blank=True)
    schedulable = models.BooleanField(default=True, help_text="Off: cordoned, nothing new is placed here.")
    draining = models.BooleanField(default=False)
    lost = models.BooleanField(default=False)
    worker_drained = models.BooleanField(
        default=False, help_text="Cordoned by its own worker's drain: re-registering uncordons it."
    )
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    inventory_source = models.CharField(
        max_length=16, choices=InventorySource.choices, default=InventorySource.DECLARED
    )
    gpu_memory_mib = models.PositiveIntegerField(null=True, blank=True)
    driver_version = models.CharField(max_length=64, blank=True)
    pod_runtime = models.CharField(max_length=32, blank=True,
                                   help_text="How its pods run (podman, host (cgroups), host), as its worker reported.")
    pod_image = models.CharField(max_length=255, blank=True, help_text="Its default image (podman), as reported.")
    pod_subnet = models.CharField(
        max_length=43, blank=True,
        help_text="Its pods' addresses (routed pod network, docs/runtime.md): an IPv4 network no other node's overlaps.")
    previous_inventory = models.JSONField(
        null=True, blank=True,
        help_text="What it registered before its inventory last changed: gpu_type, gpu_count, cpu, memory_gib.",
    )
    inventory_changed_at = models.DateTimeField(null=True, blank=True, help_text="When it registered other resources.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["resource_type", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.resource_type == ResourceType.LINGJUN and not self.gpu_type:
            raise ValidationError({"gpu_type": "A Lingjun node needs a GPU model."})

    @property
    def accepts_pods(self) -> bool:
        return self.schedulable and not self.draining and not self.lost


# Preempted jobs queued again to resume automatically (states.resumes_automatically, as a query):
# pending for the scheduler, though they show Preempted.
REQUEUED_PREEMPTED = models.Q(
    status=states.REQUEUED_FIELDS["status"],
    stop_outcome=states.REQUEUED_FIELDS["stop_outcome"],
    finished_at__isnull=not states.REQUEUED_FIELDS["finished"],
)


class Job(JobTimeLimits, JobGpuTime):
    name = models.SlugField(max_length=100)
    # Names the job's directories (scheduler/paths.py) and its processes: unlike the id, never
    # reused, even after a database reset.
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="jobs")
    quota = models.ForeignKey(ResourceQuota, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    job_type = models.CharField(max_length=16, choices=JobType.choices, default=JobType.PYTORCH)
    image = models.CharField(max_length=255, blank=True)
    command = models.TextField()
    environment = models.JSONField(default=dict, blank=True)
    data_mount = models.CharField(max_length=255, blank=True)
    code_mount = models.CharField(max_length=255, blank=True)
    priority = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(9)]
    )
    idle_mode = models.CharField(max_length=16, choices=IdleMode.choices, default=IdleMode.OFF)
    max_running_minutes = models.PositiveIntegerField(null=True, blank=True)
    fault_tolerance = models.BooleanField(default=False)
    max_restarts = models.PositiveIntegerField(default=3)
    checkpoint_dir = models.CharField(max_length=255, blank=True)
    grace_seconds = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(GRACE_SECONDS_MAX)],
        help_text="Seconds between SIGTERM and SIGKILL (0–3600). Empty: the cluster default.",
    )

    status = models.CharField(max_length=16, choices=choices(JobStatus), default=JobStatus.CREATING)
    in_quota = models.BooleanField(null=True, blank=True)
    gpu_type = models.CharField(max_length=32, blank=True, help_text="The GPU model the job runs on.")
    restart_count = models.PositiveIntegerField(default=0, help_text="Automatic restarts after failures.")
    preemption_count = models.PositiveIntegerField(default=0, help_text="Preemptions: never use max_restarts.")
    shrink_count = models.PositiveIntegerField(default=0, help_text="§2c shrinks: neither preemptions nor restarts.")
    grow_count = models.PositiveIntegerField(default=0, help_text="§2c growths onto idle resources.")
    resized_at = models.DateTimeField(null=True, blank=True, help_text="Last resize of this attempt (§2c).")
    run_seconds = models.FloatField(default=0, help_text="Run time of the attempts that have ended.")
    gpu_seconds = models.FloatField(default=0, help_text="GPU time of the attempts that have ended.")
    attempt = models.PositiveIntegerField(default=0, help_text="Increments at each admission; fences pods.")
    queue_time = models.DateTimeField(null=True, blank=True, help_text="First submission; kept on restarts.")
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    waiting_reason_code = models.CharField(
        max_length=32, blank=True, help_text="The kind of the waiting reason (docs/scheduling.md: reason codes)."
    )
    waiting_reason = models.CharField(max_length=500, blank=True, help_text="Names no other job: members see it.")
    waiting_reason_staff = models.CharField(max_length=500, blank=True, help_text="With job names; empty: the same.")
    nominated_nodes = models.JSONField(null=True, blank=True, help_text="Reservation while victims exit.")
    restart_after = models.DateTimeField(null=True, blank=True)
    stop_outcome = models.CharField(max_length=16, blank=True)
    start_failures = models.PositiveIntegerField(
        default=0, help_text="Attempts requeued because a pod never started (no restart used)."
    )
    progress = models.JSONField(default=dict, blank=True)
    demoted = models.BooleanField(default=False, help_text="Moved to idle resources by a higher-priority job "
                                  "of its quota (preempt_within); promoted back whatever its idle mode.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["workspace", "status"]),
            models.Index(fields=["quota", "status"]),
            models.Index(fields=["created_at", "id"]),  # the job list's default order
            models.Index(fields=["idle_mode"]),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def engine_key(self) -> str:
        """The job's unique name inside a scheduling snapshot."""
        return f"{self.name}#{self.pk}"

    @property
    def is_active(self) -> bool:
        return states.is_active(self.status)

    @property
    def total_gpus(self) -> int:
        return sum(role.pod_count * role.gpus for role in self.roles.all())

    def move_to(self, status: JobStatus) -> None:
        """Set the status along DESIGN §3's table (states.JOB_TRANSITIONS): an illegal change raises
        states.IllegalTransition, before anything is written."""
        states.check_job_transition(self.status, status)
        self.status = status

    # The questions about the job's state: each answered by one function of scheduler/states.py.
    @property
    def preempted_phase(self) -> states.PreemptedPhase | None:
        return states.preempted_phase(self.status, self.stop_outcome, finished=self.finished_at is not None)

    @property
    def preempted_exiting(self) -> bool:
        return states.preempted_exiting(self.status, self.stop_outcome)

    @property
    def resumes_automatically(self) -> bool:
        """Preempted and queued again: the scheduler treats it as pending; it shows Preempted until it runs."""
        return states.resumes_automatically(self.status, self.stop_outcome, finished=self.finished_at is not None)

    @property
    def stays_preempted(self) -> bool:
        return states.stays_preempted(self.status, self.stop_outcome, finished=self.finished_at is not None)

    @property
    def is_waiting(self) -> bool:
        """In the queue: pending, or preempted and waiting to resume."""
        return states.is_waiting(self.status, self.stop_outcome, finished=self.finished_at is not None)

    @property
    def attempt_open(self) -> bool:
        """The current attempt holds (or is releasing) its GPUs: its run time is still counting."""
        return self.started_at is not None and states.holds_capacity(self.status, self.stop_outcome)

    def open_attempt_seconds(self, now: datetime | None = None) -> float:
        if not self.attempt_open:
            return 0.0
        return max(0.0, ((now or timezone.now()) - self.started_at).total_seconds())

    def total_run_seconds(self, now: datetime | None = None) -> float:
        """Run time across every attempt: the ended ones plus the current one."""
        return self.run_seconds + self.open_attempt_seconds(now)

    def total_gpu_seconds(self, now: datetime | None = None) -> float:
        """Every attempt's GPU time: the ended ones plus the current one at the GPUs it holds (models/gpu_time.py)."""
        return self.gpu_seconds + (self.attempt_gpu_seconds(now) if self.attempt_open else 0.0)


class JobRole(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="roles")
    order = models.PositiveSmallIntegerField(default=0)
    name = models.SlugField(max_length=32)
    pod_count = models.PositiveIntegerField(validators=[MinValueValidator(1)])  # an elastic role's maximum
    min_pod_count = models.PositiveIntegerField(null=True, blank=True, help_text="Elastic (§2c): its minimum.")
    gpu_type = models.CharField(max_length=32, blank=True, help_text="Empty: any model.")
    gpus = models.PositiveIntegerField(default=0)
    cpu = models.DecimalField(max_digits=10, decimal_places=3, default=Decimal(0))
    memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal(0))
    shared_memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal(0))
    cpu_only = models.BooleanField(default=False, help_text="A role that asks no GPU, on purpose.")

    class Meta:
        ordering = ["job", "order", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="unique_role_per_job")]

    def __str__(self) -> str:
        return f"{self.name}×{self.pod_count}"


class Pod(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pods")
    role = models.CharField(max_length=32)
    index = models.PositiveIntegerField()
    rank = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField()
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="pods")
    gpu_indices = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=choices(PodStatus), default=PodStatus.PENDING)
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    terminate_requested = models.CharField(max_length=16, blank=True, help_text="preempted / stopped")
    pid = models.PositiveIntegerField(null=True, blank=True, help_text="Process group id on its node.")
    image = models.CharField(max_length=255, blank=True, help_text="The image it runs, as its node names it (containers).")
    master_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="MASTER_PORT of its attempt (the same on every pod), chosen at its first start.")
    address = models.GenericIPAddressField(
        protocol="IPv4", null=True, blank=True,
        help_text="Its address in its node's pod subnet (routed pod network), chosen with its attempt's others.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "-attempt", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["job", "role", "index", "attempt"], name="unique_pod_attempt")
        ]
        indexes = [models.Index(fields=["node", "status"])]

    def __str__(self) -> str:
        return f"{self.job.name}-{self.role}-{self.index} (attempt {self.attempt})"

    @property
    def is_live(self) -> bool:
        return self.status in LIVE_POD_STATUSES

    def move_to(self, status: PodStatus) -> None:
        """Set the status along states.POD_TRANSITIONS: an illegal change raises states.IllegalTransition."""
        states.check_pod_transition(self.status, status)
        self.status = status


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=32)
    code = models.CharField(max_length=32, blank=True, help_text="The reason's kind, where the scheduler gave one.")
    reason = models.CharField(max_length=500, help_text="Names no other job: members see it.")
    staff_reason = models.CharField(max_length=500, blank=True, help_text="With job names; empty: the same.")

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.reason}"


class JobPreemption(models.Model):
    """One preemption of one attempt and the work it cost (DESIGN §3: counted apart from failures).

    Filled in two steps: at the preemption (time, reasons, GPUs) and once the pods have exited
    (`settled_at`): the attempt's GPU time, and the steps and GPU time since its last checkpoint,
    from the attempt's last progress report (the checkpoint helper saves on SIGTERM).
    """

    class Kind(models.TextChoices):
        RECLAIM = "reclaim", "Reclaim"
        PRIORITY = "priority", "Priority preemption"
        DRAIN = "drain", "Node drain"
        SHUTDOWN = "shutdown", "Shutdown"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="preemptions")
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.RECLAIM)
    time = models.DateTimeField(db_index=True)
    reason = models.CharField(max_length=500, help_text="Names no other job: members see it.")
    staff_reason = models.CharField(max_length=500, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    ran_gpu_seconds = models.FloatField(default=0, help_text="GPU time of the attempt until the preemption.")
    lost_gpu_seconds = models.FloatField(null=True, blank=True, help_text="GPU time since the last checkpoint.")
    lost_steps = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: no progress reported.")
    step = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_step = models.PositiveIntegerField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.job.name} attempt {self.attempt}: {self.reason}"


class PoolPolicy(PoolTimeLimits):
    """A pool's opt-in scheduling policies (DESIGN §2b); a pool without a row uses the defaults, §2's rules."""

    class IdleShare(models.TextChoices):
        FIFO = "fifo", "In pending order"
        FAIR = "fair", "Fair share: lowest borrowed share of its quota first"

    resource_type = models.CharField(max_length=16, choices=ResourceType.choices, unique=True)
    idle_share = models.CharField(max_length=8, choices=IdleShare.choices, default=IdleShare.FIFO)
    min_runtime_s = models.PositiveIntegerField(
        default=0, help_text="A job on idle resources is not reclaimed before it has run this long (0: off)."
    )
    starvation_s = models.PositiveIntegerField(
        default=0, help_text="A job waiting longer than this gets nodes kept for it as they empty (0: off)."
    )
    starvation_hold = models.BooleanField(
        default=False,
        help_text="Extends the starvation guard (needs a starvation time above 0): a starving job also holds the "
        "guarantee its quota frees for it, and the first job of each quota blocked only by the quota's own use "
        "counts as starving.",
    )
    starved_min_runtime_s = models.PositiveIntegerField(
        default=0,
        help_text="Extends the starvation guard (needs a starvation time above 0): a job that starts on idle "
        "resources after waiting longer than the starvation time is not reclaimed before it has run this long "
        "(0: off).",
    )
    grow_interval_s = models.PositiveIntegerField(
        default=DEFAULT_GROW_INTERVAL_S,
        help_text="An elastic job grows at most this often: every resize restarts its workers from their "
        "checkpoint (DESIGN §2c).",
    )

    class Meta:
        ordering = ["resource_type"]
        verbose_name_plural = "pool policies"

    def clean(self) -> None:
        """The admin's check; the console's `pool_policy_set` refuses the same (scheduler.validation)."""
        problems = guard_extension_problems(starvation_s=self.starvation_s or 0, starvation_hold=self.starvation_hold,
                                            starved_min_runtime_s=self.starved_min_runtime_s or 0)
        if (self.grow_interval_s or 0) > MAX_GROW_INTERVAL_S:
            problems["grow_interval_s"] = f"At most {MAX_GROW_INTERVAL_S:,} s (1 day)."
        if problems:
            raise ValidationError({field: [problem] for field, problem in problems.items()})

    def __str__(self) -> str:
        return f"{self.resource_type} policies"

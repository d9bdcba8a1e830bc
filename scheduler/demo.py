"""The demo cluster the embedded default starts with (idempotent)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from scheduler.models import Job, Node, ResourceQuota, ResourceType, Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create, quota_update

DEMO_USERS = (
    # username, password, staff, workspaces
    ("admin", "tidepool-admin", True, ("vision", "language", "research")),
    ("alice", "tidepool-alice", False, ("vision",)),
    ("bob", "tidepool-bob", False, ("language",)),
)


@dataclass(frozen=True)
class DemoQuota:
    name: str
    parent: str | None
    pool: str
    gpus: dict[str, int]
    cpu: int
    memory_gib: int
    workspaces: tuple[str, ...]


# General pool: 4 × 8 A100 = 32 GPUs; Lingjun pool: 2 × 8 H800 = 16 GPUs.
# The roots `general` and `lingjun` give their whole min to the team quotas, and a guarantee given to
# a child is the child's (DESIGN §2): they keep nothing for jobs submitted to them. Every workspace may
# still submit there, but such a job only borrows (idle resources, reclaimed when a team needs its
# guarantee back; with idle resources off it is refused), so no team can take another's guarantee.
DEMO_NODES = [(f"gpu-{i:02d}", ResourceType.GENERAL, "A100", 8, 96, 768) for i in range(1, 5)] + [
    (f"lingjun-{i:02d}", ResourceType.LINGJUN, "H800", 8, 128, 1024) for i in range(1, 3)
]
DEMO_QUOTAS = (
    DemoQuota("general", None, ResourceType.GENERAL, {"A100": 32}, 384, 3072, ("vision", "language", "research")),
    DemoQuota("team-vision", "general", ResourceType.GENERAL, {"A100": 16}, 192, 1536, ("vision",)),
    DemoQuota("team-language", "general", ResourceType.GENERAL, {"A100": 12}, 144, 1152, ("language",)),
    # Deliberately small: its jobs borrow idle GPUs.
    DemoQuota("team-research", "general", ResourceType.GENERAL, {"A100": 4}, 48, 384, ("research", "vision")),
    DemoQuota("lingjun", None, ResourceType.LINGJUN, {"H800": 16}, 256, 2048, ("vision", "language", "research")),
    DemoQuota("lj-vision", "lingjun", ResourceType.LINGJUN, {"H800": 8}, 128, 1024, ("vision",)),
    DemoQuota("lj-language", "lingjun", ResourceType.LINGJUN, {"H800": 6}, 96, 768, ("language",)),
    DemoQuota("lj-research", "lingjun", ResourceType.LINGJUN, {"H800": 2}, 32, 256, ("research",)),
)


def example_command(steps: int = 600, step_sleep: float = 0.05) -> str:
    script = Path(settings.BASE_DIR) / "examples" / "train_linear.py"
    return f"{sys.executable} {script} --steps {steps} --checkpoint-every 50 --step-sleep {step_sleep}"


@dataclass(frozen=True)
class SampleJob:
    name: str
    owner: str
    workspace: str
    quota: str
    gpus: int
    pods: int
    idle_mode: str
    steps: int


# A few minutes of real training each (the example script, checkpointing every 50 steps).
# research-sweep borrows idle GPUs far beyond team-research's 4; it is in workspace vision (which
# shares team-research) so that alice, as the README tells, sees her 8-GPU team-vision job reclaim
# it, and watches it save its checkpoint and resume elsewhere.
SAMPLE_JOBS = (
    SampleJob("vision-resnet", "alice", "vision", "team-vision", 4, 2, "off", 4000),
    SampleJob("language-bert", "bob", "language", "team-language", 8, 1, "acceptable", 3000),
    SampleJob("research-sweep", "admin", "vision", "team-research", 8, 2, "only", 6000),
)


def seed_sample_jobs() -> list[str]:
    """Submit the sample jobs that do not exist yet (through the normal submission service)."""
    User = get_user_model()
    created = []
    for sample in SAMPLE_JOBS:
        if Job.objects.filter(name=sample.name).exists():
            continue
        job_submit(
            user=User.objects.get(username=sample.owner),
            workspace=Workspace.objects.get(name=sample.workspace),
            quota=ResourceQuota.objects.get(name=sample.quota),
            name=sample.name,
            command=example_command(steps=sample.steps, step_sleep=0.1),
            roles=[{"name": "worker", "pod_count": sample.pods, "gpu_type": "A100", "gpus": sample.gpus,
                    "cpu": 4, "memory_gib": 16}],
            idle_mode=sample.idle_mode,
            fault_tolerance=True,
            max_restarts=5,
        )
        created.append(sample.name)
    return created


def seed_demo_users(workspaces: dict[str, Workspace]) -> None:
    """The demo logins (README), members of their workspaces; passwords set only when created."""
    User = get_user_model()
    for username, password, staff, spaces in DEMO_USERS:
        user = User.objects.filter(username=username).first()
        if user is None:
            user = User(username=username, email=f"{username}@tidepool.local")
            user.set_password(password)
        user.is_staff = user.is_superuser = staff
        user.save()
        for space in spaces:
            workspaces[space].members.add(user)


@transaction.atomic
def seed_demo() -> dict[str, int]:
    workspaces = {}
    for name in ("vision", "language", "research"):
        workspaces[name], _ = Workspace.objects.get_or_create(name=name, defaults={"description": f"Team {name}"})
    for name, pool, model, gpus, cpu, memory in DEMO_NODES:
        node = Node.objects.filter(name=name).first()
        if node is None:
            node_register(
                name=name, resource_type=pool, gpu_type=model, gpu_count=gpus, cpu=cpu, memory_gib=memory,
                address="127.0.0.1", inventory_source=Node.InventorySource.DEMO,
            )
    for spec in DEMO_QUOTAS:
        parent = ResourceQuota.objects.get(name=spec.parent) if spec.parent else None
        fields = dict(
            resource_type=spec.pool, parent=parent, min_gpus=spec.gpus, min_cpu=spec.cpu,
            min_memory_gib=spec.memory_gib,
        )
        members = [workspaces[w] for w in spec.workspaces]
        quota = ResourceQuota.objects.filter(name=spec.name).first()
        if quota is None:
            quota_create(name=spec.name, workspaces=members, **fields)
        else:
            quota_update(quota=quota, workspaces=members, **fields)
    seed_demo_users(workspaces)
    return {
        "nodes": Node.objects.count(),
        "quotas": ResourceQuota.objects.count(),
        "workspaces": Workspace.objects.count(),
        "users": get_user_model().objects.count(),
    }

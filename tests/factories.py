"""factory-boy factories for the domain models, shared by the test packages.

Factories write rows directly, the way a fixture would: use them to set up state (10,000 jobs,
a running job on a node) and the services to exercise behaviour. `JobFactory` gives a job one
role (`roles=[...]` to choose them) and, with `running_on=node`, pods holding GPUs there.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduler.models import IdleMode, Job, JobRole, Node, Pod, ResourceQuota, ResourceType, Workspace
from scheduler.states import JobStatus, PodStatus


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@tidepool.test")
    is_staff = False

    @factory.post_generation
    def password(self, create: bool, extracted: str | None, **kwargs: Any) -> None:
        """password="..." to log in with it; by default none (tests use force_login; hashing is slow)."""
        if extracted:
            self.set_password(extracted)
        else:
            self.set_unusable_password()
        if create:
            self.save(update_fields=["password"])


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"ws-{n}")

    @factory.post_generation
    def members(self, create: bool, extracted: list | None, **kwargs: Any) -> None:
        if create and extracted:
            self.members.add(*extracted)


class ResourceQuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ResourceQuota
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"quota-{n}")
    resource_type = ResourceType.GENERAL
    min_gpus = factory.LazyFunction(lambda: {"A100": 8})
    min_cpu = Decimal(96)
    min_memory_gib = Decimal(768)

    @factory.post_generation
    def workspaces(self, create: bool, extracted: list | None, **kwargs: Any) -> None:
        if create and extracted:
            self.workspaces.add(*extracted)


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"gpu-{n:02d}")
    resource_type = ResourceType.GENERAL
    gpu_type = "A100"
    gpu_count = 8
    cpu = Decimal(96)
    memory_gib = Decimal(768)
    inventory_source = Node.InventorySource.DEMO


class JobRoleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobRole

    job = None
    order = 0
    name = "worker"
    pod_count = 1
    gpu_type = "A100"
    gpus = 1
    cpu = Decimal(4)
    memory_gib = Decimal(32)
    shared_memory_gib = Decimal(8)


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"job-{n}")
    workspace = factory.SubFactory(WorkspaceFactory)
    quota = factory.SubFactory(ResourceQuotaFactory)
    owner = None
    command = "sleep 60"
    status = JobStatus.QUEUING
    idle_mode = IdleMode.OFF
    queue_time = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def roles(self, create: bool, extracted: list[dict[str, Any]] | None, **kwargs: Any) -> None:
        """roles=[{"name": "worker", "pod_count": 2, "gpus": 4}, ...]; default: one worker with 1 GPU."""
        if not create:
            return
        for order, spec in enumerate(extracted if extracted is not None else [{}]):
            JobRoleFactory(job=self, order=order, **spec)

    @factory.post_generation
    def running_on(self, create: bool, extracted: Node | None, **kwargs: Any) -> None:
        """running_on=node: the job is Running there, its pods holding the first free GPU indices."""
        if not create or extracted is None:
            return
        make_running(self, extracted, in_quota=kwargs.get("in_quota", True))


def make_running(job: Job, node: Node, *, in_quota: bool = True) -> list[Pod]:
    """Admit `job` on `node` as the scheduler would: a new attempt, pods Running on free GPU indices."""
    used = {
        index
        for indices in Pod.objects.filter(node=node, status__in=(PodStatus.PENDING, PodStatus.RUNNING)).values_list(
            "gpu_indices", flat=True
        )
        for index in indices or []
    }
    free = [i for i in range(node.gpu_count) if i not in used]
    now = timezone.now()
    job.attempt += 1
    job.status = JobStatus.RUNNING
    job.in_quota = in_quota
    job.gpu_type = node.gpu_type
    job.started_at = now
    job.queue_position = None
    job.waiting_reason = ""
    job.save()
    pods = []
    rank = 0
    for role in job.roles.all():
        for index in range(role.pod_count):
            take, free = free[: role.gpus], free[role.gpus :]
            pods.append(
                Pod.objects.create(
                    job=job, role=role.name, index=index, rank=rank, attempt=job.attempt, node=node,
                    gpu_indices=take, status=PodStatus.RUNNING, started_at=now,
                )
            )
            rank += 1
    return pods


@dataclass
class World:
    """A small cluster with two teams that must never see each other's jobs.

    - alice: member of `vision` (quotas team-vision, team-shared, and the root `general`)
    - bob:   member of `language` (quotas team-language and `general`)
    - admin: staff
    Nodes gpu-01, gpu-02 (8 × A100 each); root quota `general` (16 GPUs).
    """

    alice: Any
    bob: Any
    admin: Any
    vision: Workspace
    language: Workspace
    general: ResourceQuota
    team_vision: ResourceQuota
    team_language: ResourceQuota
    team_shared: ResourceQuota
    gpu1: Node
    gpu2: Node


def build_world() -> World:
    alice = UserFactory(username="alice")
    bob = UserFactory(username="bob")
    admin = UserFactory(username="admin", is_staff=True, is_superuser=True)
    vision = WorkspaceFactory(name="vision", members=[alice])
    language = WorkspaceFactory(name="language", members=[bob])
    gpu1 = NodeFactory(name="gpu-01")
    gpu2 = NodeFactory(name="gpu-02")
    general = ResourceQuotaFactory(name="general", min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536,
                                   workspaces=[vision, language])
    team_vision = ResourceQuotaFactory(name="team-vision", parent=general, min_gpus={"A100": 8}, workspaces=[vision])
    team_language = ResourceQuotaFactory(name="team-language", parent=general, min_gpus={"A100": 6},
                                         min_cpu=72, min_memory_gib=576, workspaces=[language])
    team_shared = ResourceQuotaFactory(name="team-shared", parent=general, min_gpus={"A100": 2}, min_cpu=24,
                                       min_memory_gib=192, workspaces=[vision])
    return World(alice, bob, admin, vision, language, general, team_vision, team_language, team_shared, gpu1, gpu2)

"""Workspaces, users and quotas for a cluster whose nodes register themselves (bin/cluster --seed).

Unlike seed_demo, no node is created: the node workers register theirs. The quota tree is sized
for `--nodes` nodes of `--gpus` GPUs each, so it is valid before any worker has started (the root
states its min instead of taking the pool's capacity, which is 0 until the nodes register).
team-vision is guaranteed one node; the root `general` keeps the rest for the jobs submitted to it
(its `ownmin`, DESIGN §2), which every workspace shares: team-language and team-research guarantee
nothing of their own, so their members run In Quota through `general`, and no job of `general`
can take team-vision's node (it only borrows it, and is reclaimed when team-vision needs it).
Idempotent: existing quotas are updated, existing users keep their passwords.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from scheduler.demo import DEMO_USERS, seed_demo_users
from scheduler.models import ResourceQuota, Workspace
from scheduler.services.quotas import quota_create, quota_update


class Command(BaseCommand):
    help = "Create the workspaces, demo users and a quota tree sized for N self-registering nodes."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=2)
        parser.add_argument("--gpus", type=int, default=4, help="GPUs per node")
        parser.add_argument("--gpu-type", default="A100")
        parser.add_argument("--cpu", type=int, default=16, help="CPU cores per node")
        parser.add_argument("--memory-gib", type=int, default=64, help="memory per node")

    @transaction.atomic
    def handle(self, *args, nodes, gpus, gpu_type, cpu, memory_gib, **options):
        spaces = {}
        for name in ("vision", "language", "research"):
            spaces[name], _ = Workspace.objects.get_or_create(name=name, defaults={"description": f"Team {name}"})
        per_gpu_cpu, per_gpu_mem = cpu // max(gpus, 1), memory_gib // max(gpus, 1)
        # root: the whole pool; team-vision: one node; team-research: nothing guaranteed (it borrows).
        vision = gpus
        tree = [
            ("general", None, nodes * gpus, nodes * cpu, nodes * memory_gib, ("vision", "language", "research")),
            ("team-vision", "general", vision, vision * per_gpu_cpu, vision * per_gpu_mem, ("vision",)),
            ("team-language", "general", 0, 0, 0, ("language",)),
            ("team-research", "general", 0, 0, 0, ("research", "vision")),
        ]
        for name, parent, quota_gpus, quota_cpu, quota_mem, members in tree:
            fields = {
                "parent": ResourceQuota.objects.get(name=parent) if parent else None,
                "min_gpus": {gpu_type: quota_gpus}, "min_cpu": quota_cpu, "min_memory_gib": quota_mem,
            }
            workspaces = [spaces[w] for w in members]
            quota = ResourceQuota.objects.filter(name=name).first()
            if quota is None:
                quota_create(name=name, workspaces=workspaces, **fields)
            else:
                quota_update(quota=quota, workspaces=workspaces, **fields)
        seed_demo_users(spaces)
        self.stdout.write(self.style.SUCCESS(
            f"Cluster seeded for {nodes} × {gpus} {gpu_type}: quotas general (keeps {nodes * gpus - vision} for "
            f"its own jobs), team-vision ({vision}), team-language, team-research; users "
            + ", ".join(f"{u}/{p}" for u, p, _, _ in DEMO_USERS)))

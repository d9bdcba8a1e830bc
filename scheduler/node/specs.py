"""From a Pod row to the runtime's PodSpec: paths, rank, master address, user, environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings

from scheduler.models import Job, Pod
from scheduler.node.addresses import attempt_pod_addresses
from scheduler.node.ports import attempt_master_port
from scheduler.node.runtime.process import PodSpec
from scheduler.paths import (
    default_checkpoint_dir,
    default_workdir,
    is_inside,
    pod_dir,
    pod_exit_path,
    pod_log_path,
    pod_progress_path,
    pod_user_name,
    root_of,
    workspace_data_root,
)
from scheduler.states import LIVE_POD_STATUSES


def checkpoint_dir_here(job: Job) -> str:
    """The job's checkpoint directory on this node: its own (inside its workspace's data root), or
    the default one, derived here from TIDEPOOL_CHECKPOINT_ROOT and the job's uid (the console that
    stored the path may name the root differently; the last component is the uid either way)."""
    own = job.checkpoint_dir
    if own and is_inside(own, workspace_data_root(job.workspace.name)):
        return own
    if not own or os.path.basename(os.path.normpath(own)) == str(job.uid):
        return str(default_checkpoint_dir(job))
    raise OSError(f"checkpoint directory {own} is outside the data roots this job may use")


# Set by Tidepool for an elastic job's pods only: a job's own environment cannot make itself elastic.
ELASTIC_VARIABLES = ("TIDEPOOL_MIN_PODS", "TIDEPOOL_MAX_PODS")


def job_pod_count(job: Job) -> int:
    """Pods of the job at its largest (an elastic role at its maximum)."""
    return sum(role.pod_count for role in job.roles.all())


def pod_spec(pod: Pod, job: Job, *, world_size: int, master_addr: str, siblings: list[Pod] | None = None) -> PodSpec:
    """Raises OSError when one of the job's directories lies outside the roots it may use, or no
    MASTER_PORT is free (ports.NoFreePort), or its node's pod subnet is full (addresses.NoFreeAddress):
    the pod never starts and its job is queued again. `siblings`: every pod of its attempt with its
    node, where the caller has them (else read here, for a node with a routed pod network only).
    On a routed pod network MASTER_ADDR is rank 0's pod address, not `master_addr` (rank 0's node's)."""
    workdir = job.code_mount or str(default_workdir(job))
    checkpoint_dir = checkpoint_dir_here(job)
    env = {key: value for key, value in (job.environment or {}).items() if key not in ELASTIC_VARIABLES}
    elastic = next((r for r in job.roles.all() if r.min_pod_count is not None), None)
    if elastic is not None:  # §2c: torchrun's elastic rendezvous (runtime/sandbox.launcher_environment)
        env["TIDEPOOL_MIN_PODS"] = str(job_pod_count(job) - elastic.pod_count + elastic.min_pod_count)
        env["TIDEPOOL_MAX_PODS"] = str(job_pod_count(job))
    if job.data_mount:
        env.setdefault("TIDEPOOL_DATA_DIR", job.data_mount)
    attempt_dir = pod_dir(job, pod.attempt)
    dirs = tuple((str(root_of(job, path)), str(path)) for path in (attempt_dir, workdir, checkpoint_dir))
    role = next((r for r in job.roles.all() if r.name == pod.role), None)  # its limits (the container runtime's)
    network = routed_network(pod, siblings)
    if network is not None:
        master_addr = network.master_addr
    return PodSpec(
        pod_id=pod.pk,
        job_id=job.pk,
        attempt=pod.attempt,
        command=job.command,
        env=env,
        gpu_indices=tuple(pod.gpu_indices or ()),
        rank=pod.rank,
        world_size=world_size,
        master_addr=master_addr,
        master_port=attempt_master_port(pod),
        checkpoint_dir=checkpoint_dir,
        restart_count=job.restart_count,
        workdir=workdir,
        log_path=str(pod_log_path(pod)),
        progress_path=str(pod_progress_path(pod)),
        job_uid=str(job.uid),
        exit_path=str(pod_exit_path(pod)),
        user=pod_user_name(job),
        dirs=dirs,
        env_allow=tuple(settings.TIDEPOOL_POD_ENV_ALLOW),
        image=job.image,
        cpu=float(role.cpu) if role is not None else 0.0,
        memory_gib=float(role.memory_gib) if role is not None else 0.0,
        shared_memory_gib=float(role.shared_memory_gib) if role is not None else 0.0,
        mounts=tuple(path for path in (job.code_mount, job.data_mount) if path),
        **(network.spec_fields() if network is not None else {}),
    )


@dataclass(frozen=True)
class RoutedNetwork:
    """A pod's place in the routed pod network (node/addresses.py)."""

    pod_address: str
    master_addr: str
    peer_addresses: tuple[str, ...]
    routes: tuple[tuple[str, str], ...]

    def spec_fields(self) -> dict:
        return {"pod_address": self.pod_address, "peer_addresses": self.peer_addresses, "routes": self.routes}


def routed_network(pod: Pod, siblings: list[Pod] | None) -> RoutedNetwork | None:
    """None unless every pod of the attempt is on a node with a pod subnet."""
    if pod.node_id is None or not pod.node.pod_subnet:
        return None
    if siblings is None:
        siblings = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=pod.attempt))
    if pod.status not in LIVE_POD_STATUSES:
        # An ended pod (adoption, a late report): the address it had, no new one chosen for it, and
        # MASTER_ADDR as its attempt had it: rank 0's address (its own when rank 0's is gone).
        if not pod.address:
            return None
        rank0 = min(siblings, key=lambda p: p.rank, default=pod)
        return RoutedNetwork(pod.address, rank0.address or pod.address, (), ())
    addresses = attempt_pod_addresses(siblings)
    if addresses is None:
        return None
    own = addresses.by_pod.get(pod.pk)
    if own is None:  # ended between the two reads: as above, nothing new for it
        return None
    rank0 = min((p for p in siblings if p.pk in addresses.by_pod), key=lambda p: p.rank)
    pod.address = own
    routes = tuple(sorted(route for name, route in addresses.routes.items() if route[1]))
    return RoutedNetwork(own, addresses.by_pod[rank0.pk], tuple(sorted(set(addresses.by_pod.values()))), routes)


def master_address(pods: list[Pod]) -> str:
    rank0 = min(pods, key=lambda pod: pod.rank)
    return (rank0.node.address if rank0.node and rank0.node.address else "127.0.0.1")

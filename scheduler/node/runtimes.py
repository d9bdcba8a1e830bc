"""Which runtime runs this process's pods (TIDEPOOL_POD_RUNTIME), configured from the settings.

`host`: process groups on the node (runtime/process.py), for bin/start's embedded demo and nodes
without Podman. `podman`: containers (runtime/container.py), what `bin/cluster` runs when Podman is
installed. Both have one interface, so the agent, reconcile loop and executors do not care.
"""

from __future__ import annotations

import logging

from django.conf import settings

from scheduler.node.runtime.process import ExitCallback, PodSupervisor

HOST = "host"
PODMAN = "podman"

log = logging.getLogger("tidepool.node")


def container_config():
    """The node's ContainerConfig from the TIDEPOOL_POD_* settings (config/settings.py)."""
    from scheduler.node.runtime.container import ContainerConfig
    from scheduler.node.runtime.image import default_image
    from scheduler.node.runtime.network import NetworkConfig

    uid = settings.TIDEPOOL_POD_UID if settings.TIDEPOOL_POD_UID is not None else 65534
    return ContainerConfig(
        default_image=settings.TIDEPOOL_POD_IMAGE or default_image(),
        podman=settings.TIDEPOOL_PODMAN,
        oci_runtime=settings.TIDEPOOL_POD_OCI_RUNTIME,
        pull="never",  # the agent's ImagePuller has the image here before `podman run` (image_puller)
        uid=uid,
        gid=uid,
        pids_limit=settings.TIDEPOOL_POD_PIDS_LIMIT,
        default_memory_gib=settings.TIDEPOOL_POD_DEFAULT_MEMORY_GIB,
        network=NetworkConfig(
            mode=settings.TIDEPOOL_POD_NETWORK,
            subnet_pool=settings.TIDEPOOL_POD_SUBNETS,
            blocked_networks=tuple(settings.TIDEPOOL_POD_BLOCKED_NETWORKS),
        ),
    )


def runtime_label(supervisor: PodSupervisor) -> str:
    """How `supervisor` runs pods, for the Nodes page: podman, host (cgroups) or host."""
    from scheduler.node.runtime.container import ContainerSupervisor
    from scheduler.node.runtime.host_cgroups import CgroupSupervisor

    if isinstance(supervisor, ContainerSupervisor):
        return PODMAN
    return f"{HOST} (cgroups)" if isinstance(supervisor, CgroupSupervisor) else HOST


def image_puller():
    """How container pods get their image (TIDEPOOL_POD_PULL, _REGISTRY, _REGISTRY_AUTH_FILE); None
    for host pods, which have none."""
    if settings.TIDEPOOL_POD_RUNTIME != PODMAN:
        return None
    from scheduler.node.runtime.pulls import ImagePuller

    config = container_config()
    return ImagePuller(config.podman_command(), default_image=config.default_image, policy=settings.TIDEPOOL_POD_PULL,
                       registry=settings.TIDEPOOL_POD_REGISTRY, authfile=settings.TIDEPOOL_POD_REGISTRY_AUTH_FILE)


def pod_supervisor(on_exit: ExitCallback | None = None) -> PodSupervisor:
    """The supervisor TIDEPOOL_POD_RUNTIME names; the container one also needs root and Podman."""
    if settings.TIDEPOOL_POD_RUNTIME == PODMAN:
        from scheduler.node.runtime.container import ContainerSupervisor, podman_available

        missing = podman_available(settings.TIDEPOOL_PODMAN)
        if missing is not None:
            raise RuntimeError(f"TIDEPOOL_POD_RUNTIME=podman, but {missing}")
        return ContainerSupervisor(container_config(), on_exit=on_exit)
    return host_supervisor(on_exit)


def host_supervisor(on_exit: ExitCallback | None = None) -> PodSupervisor:
    """Host pods in cgroups of their own where this process may make them (a root worker on cgroup
    v1); otherwise process groups only, and the node's log says what that gives up."""
    from scheduler.node.runtime.cgroups import writable_controllers
    from scheduler.node.runtime.host_cgroups import CgroupSupervisor

    bases, problem = writable_controllers()
    if problem:
        log.warning("host pods run without cgroups (%s): no memory, process or CPU limit, and a stop ends only "
                    "the pod's process group (a setsid or double-forked process outlives it)", problem)
        return PodSupervisor(on_exit=on_exit)
    log.info("host pods run in cgroups of their own below %s", ", ".join(sorted(bases.values())))
    return CgroupSupervisor(bases, pids_max=settings.TIDEPOOL_POD_PIDS_LIMIT,
                            default_memory_gib=settings.TIDEPOOL_POD_DEFAULT_MEMORY_GIB, on_exit=on_exit)

"""A container pod's bookkeeping in its supervisor, and finding one a previous worker left (pure Python).

Apart from container.py (which keeps under the module size limit) and from adoption.py (which stays
free of Podman): `find_container` is `ContainerSupervisor._find`, used by `adopt` (adoption.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import TYPE_CHECKING

from scheduler.node.runtime.adoption import process_start_time
from scheduler.node.runtime.network import NETWORK_PREFIX, node_network_name
from scheduler.node.runtime.process import PodProcess, PodSpec

if TYPE_CHECKING:
    from scheduler.node.runtime.container import ContainerConfig, ContainerSupervisor

_GIB = 1024**3


def memory_limit_bytes(spec: PodSpec, config: ContainerConfig) -> int:
    gib = spec.memory_gib if spec.memory_gib > 0 else config.default_memory_gib
    return max(6 * 1024 * 1024, int(gib * _GIB))  # runc refuses less than 6 MiB


def global_oom_kills() -> int:
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


log = logging.getLogger(__name__)


class ContainerProcess(PodProcess):
    def __init__(self, spec: PodSpec, name: str, pid: int, started_at: float, network: str,
                 cgroup_dir: str | None, memory_bytes: int, oom_kills_at_start: int) -> None:
        super().__init__(spec, None, started_at, pid=pid)
        self.name = name
        self.network = network
        self.cgroup_dir = cgroup_dir  # the pod's parent memory cgroup (v1), or None
        self.memory_bytes = memory_bytes
        self.oom_kills_at_start = oom_kills_at_start


def find_container(supervisor: ContainerSupervisor, spec: PodSpec) -> ContainerProcess | None:
    """`spec`'s container, running or exited, found by its labels; None when Podman has none."""
    labels = (("job-uid", spec.job_uid), ("pod-id", spec.pod_id), ("attempt", spec.attempt))
    filters = [arg for key, value in labels for arg in ("--filter", f"label=tidepool.{key}={value}")]
    listed = supervisor._podman("ps", "--all", *filters, "--format", "{{.Names}}")
    names = listed.stdout.split()
    if listed.returncode != 0 or not names:
        return None
    name = names[0]
    state = supervisor._inspect_state(name)
    network = "none"
    if supervisor.config.network.mode == "job":
        network = NETWORK_PREFIX + (spec.job_uid or f"job{spec.job_id}")
    elif supervisor.config.network.mode == "routed":
        network = node_network_name(supervisor.config.network.subnet_pool)
        try:  # its pairs and routes, lost with the previous agent's firewall
            supervisor.connect_pod(spec)
        except RuntimeError as error:  # NetworkError: the agent's next pass tries again
            log.warning("container %s: its network could not be restored: %s", name, error)
    memory_root = supervisor._memory_cgroup_v1()
    cgroup_dir = None if memory_root is None else os.path.join(memory_root, supervisor.config.cgroup_parent, name)
    pid = int(state.get("Pid") or 0)
    return ContainerProcess(spec, name, pid, process_start_time(pid) if pid else time.time(), network,
                          cgroup_dir, memory_limit_bytes(spec, supervisor.config), global_oom_kills())


def podman_available(podman: str = "podman") -> str | None:
    """None when rootful Podman can run pods here; otherwise why not (for a skip or a log line)."""
    if shutil.which(podman) is None:
        return f"{podman} is not installed (apt-get install -y podman runc)"
    if shutil.which("runc") is None and not os.path.exists("/usr/sbin/runc"):
        return "runc is not installed (apt-get install -y runc)"
    if os.geteuid() != 0:
        return "the container runtime needs a root node worker (rootful Podman)"
    return None

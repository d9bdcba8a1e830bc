"""A container pod's bookkeeping in its supervisor, and finding one a previous worker left (pure Python).

Apart from container.py (which keeps under the module size limit) and from adoption.py (which stays
free of Podman): `find_container` is `ContainerSupervisor._find`, used by `adopt` (adoption.py).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from scheduler.node.runtime.adoption import process_start_time
from scheduler.node.runtime.network import NETWORK_PREFIX
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
    memory_root = supervisor._memory_cgroup_v1()
    cgroup_dir = None if memory_root is None else os.path.join(memory_root, supervisor.config.cgroup_parent, name)
    pid = int(state.get("Pid") or 0)
    return ContainerProcess(spec, name, pid, process_start_time(pid) if pid else time.time(), network,
                          cgroup_dir, memory_limit_bytes(spec, supervisor.config), global_oom_kills())

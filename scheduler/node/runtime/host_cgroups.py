"""Host pods held in cgroups of their own: the limits and the kill-all of containers, without one.

`CgroupSupervisor` is `PodSupervisor` (process.py) with each pod in its own cgroups (cgroups.py):
its memory, process and CPU limits; SIGTERM to every process of the pod, detached ones too; at the
end of the grace period (or when the pod's shell ends on its own) freeze, SIGKILL everything, thaw;
and the exit reported only once its cgroups are empty, so a `setsid` or double-forked survivor
cannot keep its GPUs past its pod. A pod the kernel killed for memory fails "out of memory
(limit N GiB)". What host mode still cannot promise is in docs/runtime.md ("Host pods").
"""

from __future__ import annotations

import logging
import signal
import subprocess

from scheduler.node.runtime.cgroups import PodCgroups
from scheduler.node.runtime.groups import live_group_members, signal_group
from scheduler.node.runtime.process import ExitCallback, PodProcess, PodSpec, PodSupervisor

log = logging.getLogger(__name__)

_GIB = 1024**3
# Prepended to the pod's outer shell: it waits on its stdin until the worker has put its pid in the
# pod's cgroups, so nothing of the pod runs outside them; then stdin is /dev/null as for any pod.
_GATE = "read -r tp_gate || exit 111\nexec </dev/null\n"


def limit_text(size_bytes: int) -> str:
    gib = size_bytes / _GIB
    return f"{gib:.0f}" if abs(gib - round(gib)) < 1e-9 else f"{gib:.2f}".rstrip("0").rstrip(".")


def cgroup_name(spec: PodSpec) -> str:
    return f"{spec.job_uid or f'job{spec.job_id}'}-p{spec.pod_id}-a{spec.attempt}"


class CgroupSupervisor(PodSupervisor):
    """`bases`: controller -> the directory pod cgroups are made in (cgroups.writable_controllers)."""

    def __init__(self, bases: dict[str, str], *, pids_max: int, default_memory_gib: float,
                 on_exit: ExitCallback | None = None) -> None:
        super().__init__(on_exit=on_exit)
        self._bases = dict(bases)
        self._pids_max = pids_max
        self._default_memory_gib = default_memory_gib
        self._cgroups: dict[tuple[int, int], PodCgroups] = {}  # guarded by the supervisor's lock

    def memory_bytes(self, spec: PodSpec) -> int:
        gib = spec.memory_gib if spec.memory_gib > 0 else self._default_memory_gib
        return int(gib * _GIB)

    def _spawn(self, spec: PodSpec, argv: list[str], **popen_kwargs) -> subprocess.Popen[bytes]:
        # Lock held (start → _launch).
        group = PodCgroups.create(self._bases, cgroup_name(spec), memory_bytes=self.memory_bytes(spec),
                                  pids_max=self._pids_max, cpu=spec.cpu)
        gated = [argv[0], argv[1], _GATE + argv[2], *argv[3:]]
        try:
            popen = subprocess.Popen(gated, **{**popen_kwargs, "stdin": subprocess.PIPE})
        except OSError:
            group.remove()
            raise
        try:
            group.add(popen.pid)
            popen.stdin.write(b"go\n")
            popen.stdin.close()
        except OSError as error:
            popen.kill()
            popen.wait()
            group.remove()
            raise OSError(f"could not put the pod in its cgroups: {error}") from None
        self._cgroups[(spec.pod_id, spec.attempt)] = group
        return popen

    def _find(self, spec: PodSpec) -> PodProcess | None:
        proc = super()._find(spec)
        group = PodCgroups.existing(self._bases, cgroup_name(spec), memory_bytes=self.memory_bytes(spec))
        if proc is not None and group is not None:
            with self._lock:
                self._cgroups[(spec.pod_id, spec.attempt)] = group
        return proc

    def _signal(self, proc: PodProcess, sig: int) -> None:
        # Lock held; the leader is not reaped yet, so its group id is still its own.
        signal_group(proc.pid, sig)
        group = self._cgroups.get((proc.spec.pod_id, proc.spec.attempt))
        if group is None:
            return
        if sig == signal.SIGKILL:
            group.kill_all()
        else:
            group.signal_all(sig, except_group=proc.pid)  # the detached ones

    def _alive(self, proc: PodProcess) -> list[int] | None:
        with_group = set(live_group_members(proc.pid) or ())
        group = self._cgroups.get((proc.spec.pod_id, proc.spec.attempt))
        return sorted(with_group | set(group.members() if group is not None else ()))

    def _settle(self, proc: PodProcess, exit_code: int) -> str:
        with self._lock:
            group = self._cgroups.pop((proc.spec.pod_id, proc.spec.attempt), None)
        if group is None:
            return ""
        out_of_memory = group.out_of_memory()
        group.remove()
        if out_of_memory and proc.requested_outcome is None and exit_code != 0:
            return f"out of memory (limit {limit_text(group.memory_bytes)} GiB)"
        return ""

"""A host pod's own cgroups (v1): its limits, and a kill nothing escapes (pure Python, no Django).

Each pod gets a cgroup in every writable controller of memory, pids, freezer and cpu, below the
worker's own cgroup (`<controller>/<worker's path>/tidepool-pods/<name>`), created before its first
instruction runs (the launcher waits at a gate until its pid is in them, so every process it starts
is inside: `setsid` and double forks leave a process group, never a cgroup):

- memory: `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`: no swap) = its memory;
  an out-of-memory kill shows in `memory.oom_control`'s `oom_kill` (or `memory.failcnt`);
- pids: `pids.max`;
- cpu: `cpu.cfs_quota_us` = cores × period, and `cpu.shares` in proportion;
- freezer: `kill_all` freezes the pod, SIGKILLs every process in it and thaws it, so nothing forks
  a new process between the listing and the kill.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

CONTROLLERS = ("memory", "pids", "freezer", "cpu")
_CFS_PERIOD_US = 100_000
_FREEZE_WAIT_S = 2.0


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _own_paths(proc_cgroup: str = "/proc/self/cgroup") -> dict[str, str]:
    """This process's cgroup in each v1 controller ("memory" -> "/process_api/abc")."""
    paths = {}
    try:
        with open(proc_cgroup) as f:
            for line in f:
                _id, names, path = line.rstrip("\n").split(":", 2)
                for name in names.split(","):
                    if name:
                        paths[name] = path
    except (OSError, ValueError):
        pass
    return paths


def writable_controllers(root: str = "/sys/fs/cgroup") -> tuple[dict[str, str], str]:
    """The v1 controllers this process may make pod cgroups in (controller -> base directory), and,
    when memory, pids or freezer is missing, why (for the node's log)."""
    own = _own_paths()
    bases: dict[str, str] = {}
    problems = []
    for controller in CONTROLLERS:
        mount = os.path.join(root, controller)
        if not os.path.isfile(os.path.join(mount, "cgroup.procs")):
            problems.append(f"no cgroup v1 {controller} controller at {mount}")
            continue
        base = os.path.join(mount, own.get(controller, "/").lstrip("/"), "tidepool-pods")
        try:
            os.makedirs(base, exist_ok=True)
            probe = os.path.join(base, f".probe-{os.getpid()}")
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as error:
            problems.append(f"{mount} is not writable ({error.strerror})")
            continue
        bases[controller] = base
    missing = [c for c in ("memory", "pids", "freezer") if c not in bases]
    return bases, "; ".join(problems) if missing else ""


@dataclass
class PodCgroups:
    """One pod's cgroups: controller -> directory."""

    name: str
    dirs: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 0

    @classmethod
    def create(cls, bases: dict[str, str], name: str, *, memory_bytes: int, pids_max: int, cpu: float) -> PodCgroups:
        """Make the pod's cgroups and set its limits; raises OSError (nothing left behind)."""
        group = cls(name, memory_bytes=memory_bytes)
        try:
            for controller, base in bases.items():
                path = os.path.join(base, name)
                os.makedirs(path, exist_ok=True)
                group.dirs[controller] = path
            if "memory" in group.dirs and memory_bytes > 0:
                _write(os.path.join(group.dirs["memory"], "memory.limit_in_bytes"), str(memory_bytes))
                memsw = os.path.join(group.dirs["memory"], "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    _write(memsw, str(memory_bytes))
            if "pids" in group.dirs and pids_max > 0:
                _write(os.path.join(group.dirs["pids"], "pids.max"), str(pids_max))
            if "cpu" in group.dirs and cpu > 0:
                _write(os.path.join(group.dirs["cpu"], "cpu.cfs_period_us"), str(_CFS_PERIOD_US))
                _write(os.path.join(group.dirs["cpu"], "cpu.cfs_quota_us"), str(max(1000, int(cpu * _CFS_PERIOD_US))))
                _write(os.path.join(group.dirs["cpu"], "cpu.shares"), str(max(2, int(cpu * 1024))))
        except OSError:
            group.remove()
            raise
        return group

    @classmethod
    def existing(cls, bases: dict[str, str], name: str, *, memory_bytes: int) -> PodCgroups | None:
        """The cgroups a previous worker made for pod `name` (to adopt it), or None."""
        dirs = {controller: os.path.join(base, name) for controller, base in bases.items()
                if os.path.isdir(os.path.join(base, name))}
        return cls(name, dirs, memory_bytes) if dirs else None

    def add(self, pid: int) -> None:
        for path in self.dirs.values():
            _write(os.path.join(path, "cgroup.procs"), str(pid))

    def members(self) -> list[int]:
        """Pids of the live (not zombie) processes in the pod's cgroups."""
        pids: set[int] = set()
        for path in self.dirs.values():
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids.update(int(line) for line in f if line.strip())
            except (OSError, ValueError):
                continue
        return sorted(pid for pid in pids if _alive(pid))

    def signal_all(self, sig: int, *, except_group: int | None = None) -> None:
        """`sig` to every process of the pod, but those of process group `except_group` (signalled
        as a group already: a handler must see one SIGTERM, not two)."""
        for pid in self.members():
            try:
                if except_group is not None and os.getpgid(pid) == except_group:
                    continue
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill_all(self) -> None:
        """Freeze, SIGKILL every process, thaw: nothing can fork past the kill."""
        frozen = self._set_freezer("FROZEN")
        self.signal_all(signal.SIGKILL)
        if frozen:
            self._set_freezer("THAWED")  # a frozen process cannot die: thawing lets the SIGKILLs land

    def _set_freezer(self, state: str) -> bool:
        path = self.dirs.get("freezer")
        if path is None:
            return False
        try:
            _write(os.path.join(path, "freezer.state"), state)
            deadline = time.monotonic() + _FREEZE_WAIT_S
            while state == "FROZEN" and time.monotonic() < deadline:
                with open(os.path.join(path, "freezer.state")) as f:
                    if f.read().strip() == "FROZEN":
                        break
                time.sleep(0.01)
        except OSError:
            return False
        return True

    def out_of_memory(self) -> bool:
        """The kernel killed something of this pod for memory (its own cgroup's counter)."""
        path = self.dirs.get("memory")
        if path is None:
            return False
        try:
            with open(os.path.join(path, "memory.oom_control")) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1]) > 0
            with open(os.path.join(path, "memory.failcnt")) as f:  # kernels without the oom_kill line
                return int(f.read()) > 0
        except (OSError, ValueError):
            return False
        return False

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the pod's cgroups. An exited process stays in its cgroup until it is reaped, and the
        pod's orphans are reaped by init a moment after they die: so try again for up to `wait_s`."""
        deadline = time.monotonic() + wait_s
        left = list(self.dirs.values())
        while left:
            for path in list(left):
                try:
                    os.rmdir(path)
                except FileNotFoundError:
                    pass
                except OSError:  # busy: zombies not reaped yet (or a process stuck in I/O)
                    continue
                left.remove(path)
            if not left or time.monotonic() > deadline:
                return
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")

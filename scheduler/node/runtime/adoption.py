"""Adopting the pods a previous supervisor of this node left running (pure Python, no Django).

A node agent that stops (an upgrade, a restart) leaves its pods running: host pods live in
sessions (and cgroups) of their own, containers under Podman's conmon. The next supervisor of the
node takes each one over with `PodSupervisor.adopt(spec)` and reports its exit as if it had
started it, with the pod's real exit status:

- **a host pod** is found by its process group, whose leader carries the job's uid, the pod id and
  the attempt in its environment (`sandbox.find_pod_processes`); in cgroups (host_cgroups.py) its
  cgroups are taken back by name. It is no longer our child, so it is watched by polling /proc, and
  its exit status is the one its shell wrote to the exit file;
- **a container** is found by its labels (`tidepool.job-uid`, `tidepool.pod-id`,
  `tidepool.attempt`; container_procs.py) and watched with `podman wait`, which works for any container, also one that
  exited while no agent ran: its exit code (and OOM) is read back from Podman.

Signals reach an adopted host pod's group only while something of it is alive: the kernel never
hands out a pid still used as a process group id, so the group cannot be a recycled one.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from scheduler.node.runtime.groups import live_group_members
from scheduler.node.runtime.sandbox import find_pod_processes, read_exit_file

if TYPE_CHECKING:
    from scheduler.node.runtime.process import PodProcess, PodSpec, PodSupervisor

log = logging.getLogger(__name__)

# How often an adopted host pod (not our child: no wait() on it) is looked at.
ADOPTED_POLL_S = 0.2
# The exit code reported for an adopted host pod whose shell left no exit file: it was killed by a
# signal it could not trap (SIGKILL), as -9 is for a pod this supervisor killed.
NO_EXIT_FILE_CODE = -9


def adopt_pod(supervisor: PodSupervisor, spec: PodSpec) -> bool:
    """Take over the running (or, for a container, exited) pod of `spec`; False when there is none
    or a newer attempt of the pod is known here. Raises RuntimeError after `shutdown`."""
    key = (spec.pod_id, spec.attempt)
    with supervisor._lock:
        if supervisor._closed:
            raise RuntimeError("the pod supervisor is shut down")
        if key in supervisor._procs:
            return True
        latest = supervisor._latest_attempt.get(spec.pod_id)
        if latest is not None and spec.attempt < latest:
            return False
    proc = supervisor._find(spec)  # outside the lock: /proc or Podman may take a while
    if proc is None:
        return False
    with supervisor._lock:
        if key in supervisor._procs:
            return True
        supervisor._latest_attempt[spec.pod_id] = spec.attempt
        supervisor._never_started.discard(key)
        supervisor._procs[key] = proc
    log.info("pod %s attempt %s adopted (pid %s)", spec.pod_id, spec.attempt, proc.pid)
    threading.Thread(target=supervisor._watch, args=(proc,), name=f"pod-{spec.pod_id}-{spec.attempt}",
                     daemon=True).start()
    return True


def find_host_pod(spec: PodSpec) -> int | None:
    """The process group id of `spec`'s running host pod, or None."""
    return find_pod_processes({(spec.pod_id, spec.attempt): spec.job_uid}).get((spec.pod_id, spec.attempt))


def process_start_time(pid: int) -> float:
    """When process `pid` started (epoch seconds); now when /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[-1].split()[19])
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def _leader_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return False
    return fields[0] not in (b"Z", b"X") and int(fields[2]) == pid  # still the leader of its own group


def watch_adopted_host_pod(supervisor: PodSupervisor, proc: PodProcess) -> None:
    """`PodSupervisor._watch` for a pod that is not our child: poll for its shell, then its group
    (and cgroups), then report the status from its exit file."""
    while _leader_alive(proc.pid):
        time.sleep(ADOPTED_POLL_S)
    with supervisor._lock:
        proc.leader_exited = True
        if proc.requested_outcome is None and live_group_members(proc.pid):
            proc.sigkill_sent = True  # finished on its own: what is left is an orphan of the pod
            supervisor._signal(proc, signal.SIGKILL)
    supervisor._wait_for_group(proc)
    with supervisor._lock:
        if proc.kill_timer is not None:
            proc.kill_timer.cancel()
        proc.reaped = True
    written = read_exit_file(proc.spec.exit_path) if proc.spec.exit_path else None
    exit_code = written if written is not None else NO_EXIT_FILE_CODE
    reason = supervisor._settle(proc, exit_code)
    if written is None and not reason:
        reason = "killed by signal 9 (its shell left no exit status)"
    supervisor._report(proc, exit_code, reason)


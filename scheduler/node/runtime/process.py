"""Starting, signalling and watching pod processes on one node (DESIGN §3).

A pod is one `/bin/sh -c COMMAND` process started in a session (and so a process group) of its
own. Everything the command starts stays in that group unless it calls setsid() itself, so
signals go to the whole group: the training script behind a shell, a launcher's workers and
their data-loader processes all see SIGTERM at once, and SIGKILL reaches grandchildren too.

Lifetime of a pod:
- `start(spec)` launches it; stdout and stderr are appended to `spec.log_path`.
- `terminate(pod_id, attempt, grace_s, outcome)` sends SIGTERM to the group and returns at
  once; a timer sends SIGKILL to the group when the grace period ends.
- The pod has exited when its leader has exited and no live process is left in its group:
  if the leader ends on its own, leftovers are killed at once (they are orphans of a finished
  pod); during a termination they keep the rest of the grace period to finish saving, then get
  SIGKILL. Only then is the exit reported, so the GPUs it held really are free.
- Each exit is reported exactly once: to `on_exit` when one is given, otherwise through `poll()`.
- `adopt(spec)` takes over a pod a previous supervisor of the node left running (adoption.py).

Attempts fence stale messages (docs/runtime.md): an attempt number is used at most once.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from scheduler.node.runtime import adoption
from scheduler.node.runtime.groups import live_group_members, signal_group
from scheduler.node.runtime.sandbox import (
    POD_WRAPPER,
    interconnect_environment,
    own_file,
    pod_environment,
    prepare_pod_dirs,
    resolve_pod_user,
)
from scheduler.states import PodOutcome

__all__ = ["PodSpec", "PodSupervisor", "PodExit", "RunningPod", "TerminateResult", "live_group_members",
           "pod_environment"]

log = logging.getLogger(__name__)

SUCCEEDED = PodOutcome.SUCCEEDED
FAILED = PodOutcome.FAILED
PREEMPTED = PodOutcome.PREEMPTED
STOPPED = PodOutcome.STOPPED
SHRUNK = PodOutcome.SHRUNK  # DESIGN §2c: an elastic job's extra pod taken away; its job keeps running
TERMINATION_OUTCOMES = (PREEMPTED, STOPPED, SHRUNK)

# How often the watcher looks for processes left in a pod's group after its leader exited.
_GROUP_POLL_S = 0.05
# How long to wait for processes that survive SIGKILL (uninterruptible I/O) before reporting anyway.
_UNKILLABLE_WAIT_S = 10.0
# Exits kept for `wait()` after they were reported.
_RECENT_EXITS = 4096
# Prepended to every command. Untrapped, the shell would die of SIGTERM at once and the pod would
# report -15 while the program it started is still saving. Trapped, the shell waits for its
# foreground program, then exits with that program's status and runs nothing after it. A caught
# signal is reset to the default in children, so the program still sees SIGTERM as usual.
SHELL_PREAMBLE = "trap 'exit $?' TERM\n"


@dataclass(frozen=True)
class PodSpec:
    """Everything needed to run one attempt of one pod on this node."""

    pod_id: int
    job_id: int
    attempt: int
    command: str  # run with /bin/sh -c
    env: dict[str, str]  # the job's environment; Tidepool's own variables win over it
    gpu_indices: tuple[int, ...]
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    checkpoint_dir: str
    restart_count: int
    workdir: str
    log_path: str
    progress_path: str
    job_uid: str = ""  # never reused (TIDEPOOL_JOB_UID): finds the pod's processes after a restart
    exit_path: str = ""  # where the pod's shell writes its exit status (sandbox.POD_WRAPPER)
    user: str = ""  # run as this user (setuid/setgid; root worker); "": this process's user
    # (root, path) pairs created 0700 for the pod's user below operator roots (sandbox.prepare_dir)
    dirs: tuple[tuple[str, str], ...] = ()
    env_allow: tuple[str, ...] = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "TMPDIR")
    # What the container runtime (container.py) enforces; the host runtime runs without them.
    image: str = ""  # the job's image; "": the node's default image
    cpu: float = 0  # cores (0: no CPU limit)
    memory_gib: float = 0  # 0: the node's default pod memory limit
    shared_memory_gib: float = 0  # size of /dev/shm (0: Podman's default, 64 MiB)
    mounts: tuple[str, ...] = ()  # the job's own directories (code, data), bound at the same path
    # The routed pod network (network.py, console side node/addresses.py); "" / (): not routed.
    pod_address: str = ""  # this pod's address in its node's pod subnet (master_addr is rank 0's)
    peer_addresses: tuple[str, ...] = ()  # the live pods of its attempt, itself included
    routes: tuple[tuple[str, str], ...] = ()  # (pod subnet, node address) of the attempt's nodes


ExitCallback = Callable[[int, int, int, str], None]  # (pod_id, attempt, exit_code, outcome)


@dataclass(frozen=True)
class PodExit:
    pod_id: int
    job_id: int
    attempt: int
    pid: int
    # The command's exit status as the shell reports it (128+N when the program died of signal
    # N, e.g. 143 for SIGTERM); negative when the shell itself was killed: -9 = SIGKILL after
    # the grace period.
    exit_code: int
    outcome: str  # succeeded | failed | preempted | stopped
    started_at: float  # epoch seconds
    ended_at: float
    killed: bool  # the supervisor had to SIGKILL something in the group
    reason: str = ""  # what ended it when the runtime knows better than the code: "out of memory (limit 4 GiB)"


@dataclass(frozen=True)
class RunningPod:
    pod_id: int
    job_id: int
    attempt: int
    pid: int  # also the process group id
    started_at: float
    terminating: str | None  # the requested outcome once terminate() was called


class TerminateResult(enum.StrEnum):
    TERMINATING = "terminating"  # SIGTERM sent now, SIGKILL scheduled after the grace period
    ALREADY_TERMINATING = "already_terminating"  # an earlier call did it; nothing changed
    EXITED = "exited"  # this attempt already ended on its own; its exit is (or will be) reported
    NOT_STARTED = "not_started"  # never started here; a later start of this attempt is refused
    STALE = "stale"  # a newer attempt of the pod exists here; ignored


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class PodProcess:
    """Mutable bookkeeping for one launched attempt; guarded by the supervisor's lock."""

    def __init__(
        self, spec: PodSpec, popen: subprocess.Popen[bytes] | None, started_at: float, pid: int | None = None
    ) -> None:
        self.spec = spec
        self.popen = popen  # None for a container (container.py): its runtime holds the processes
        self.pid = pid if pid is not None else popen.pid if popen is not None else 0
        self.started_at = started_at
        self.requested_outcome: str | None = None
        self.kill_timer: threading.Timer | None = None
        self.leader_exited = False
        self.reaped = False
        self.sigkill_sent = False
        self.killed = False  # SIGKILL reached a live process (reported in PodExit)
        self.done = threading.Event()


class PodSupervisor:
    """Runs the pods of one node as process groups and reports each exit exactly once.

    `on_exit(pod_id, attempt, exit_code, outcome)` is called from a watcher thread (one per
    pod), outside the supervisor's lock, so it may call back into the supervisor; it must be
    thread-safe. Without `on_exit`, exits queue up for `poll()`. All methods are thread-safe.
    """

    def __init__(self, on_exit: ExitCallback | None = None) -> None:
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._procs: dict[tuple[int, int], PodProcess] = {}
        self._latest_attempt: dict[int, int] = {}
        self._never_started: set[tuple[int, int]] = set()
        self._queued: list[PodExit] = []
        self._recent: OrderedDict[tuple[int, int], PodExit] = OrderedDict()
        self._closed = False

    # -- starting -------------------------------------------------------------------------

    def start(self, spec: PodSpec) -> bool:
        """Launch `spec`; returns False (and does nothing) for an attempt already used here.

        An attempt older than, or equal to, one already started or fenced by `terminate` is
        refused. A newer attempt supersedes an older one still running: the old one gets
        SIGKILL at once (outcome "stopped"), since the scheduler has already replaced it.
        Raises OSError when the pod cannot be launched (workdir or log not writable, ...), and
        RuntimeError after `shutdown`.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the pod supervisor is shut down")
            latest = self._latest_attempt.get(spec.pod_id)
            if latest is not None and spec.attempt <= latest:
                log.info(
                    "pod %s attempt %s not started: attempt %s already seen",
                    spec.pod_id,
                    spec.attempt,
                    latest,
                )
                return False
            for (pod_id, _), older in self._procs.items():
                if pod_id == spec.pod_id:
                    self._request_termination(older, 0, STOPPED)
            proc = self._launch(spec)
            self._latest_attempt[spec.pod_id] = spec.attempt
            self._procs[(spec.pod_id, spec.attempt)] = proc
        threading.Thread(
            target=self._watch, args=(proc,), name=f"pod-{spec.pod_id}-{spec.attempt}", daemon=True
        ).start()
        return True

    def adopt(self, spec: PodSpec) -> bool:
        """Take over `spec`'s pod that a previous supervisor of this node left running (adoption.py)."""
        return adoption.adopt_pod(self, spec)

    def _find(self, spec: PodSpec) -> PodProcess | None:
        pgid = adoption.find_host_pod(spec)
        return None if pgid is None else PodProcess(spec, None, adoption.process_start_time(pgid), pid=pgid)

    def _launch(self, spec: PodSpec) -> PodProcess:
        user = resolve_pod_user(spec.user)
        prepare_pod_dirs(spec, user)
        gpus = ",".join(str(i) for i in spec.gpu_indices) or "none"
        header = (
            f"=== tidepool: pod {spec.pod_id} (job {spec.job_id}) attempt {spec.attempt}, "
            f"rank {spec.rank}/{spec.world_size}, gpus {gpus}, started {now_iso()} ===\n"
        )
        switch = {}
        if user is not None and os.geteuid() == 0 and user.uid != 0:
            switch = {"user": user.uid, "group": user.gid, "extra_groups": []}
        # The child inherits the O_APPEND descriptor; ours is closed once it is launched.
        with open(spec.log_path, "ab", buffering=0) as log_file:
            own_file(spec.log_path, user)
            log_file.write(header.encode())
            popen = self._spawn(
                spec,
                ["/bin/sh", "-c", POD_WRAPPER, "tidepool-pod", SHELL_PREAMBLE + spec.command,
                 spec.exit_path or os.devnull],
                cwd=spec.workdir,
                env={**pod_environment(spec, home=user.home if user is not None else None),
                     **interconnect_environment(spec)},
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session => own process group, pgid == pid
                **switch,
            )
        log.info("pod %s attempt %s started as pid %s", spec.pod_id, spec.attempt, popen.pid)
        return PodProcess(spec, popen, time.time())

    # How a pod is started, signalled, found alive and settled (its reason, once nothing of it is
    # left): its process group here; its cgroups in host_cgroups.py.
    def _spawn(self, spec: PodSpec, argv: list[str], **popen_kwargs) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, **popen_kwargs)

    def _signal(self, proc: PodProcess, sig: int) -> None:
        signal_group(proc.pid, sig)

    def _alive(self, proc: PodProcess) -> list[int] | None:
        return live_group_members(proc.pid)

    def _settle(self, proc: PodProcess, exit_code: int) -> str:
        return ""

    # -- terminating ----------------------------------------------------------------------

    def terminate(
        self, pod_id: int, attempt: int, grace_s: float, outcome: str = PREEMPTED
    ) -> TerminateResult:
        """SIGTERM the pod's group now, SIGKILL it after `grace_s`; never blocks.

        Idempotent: a second call for the same attempt changes nothing (the first outcome and
        deadline stand). A terminate for an attempt that has not started here yet fences it, so
        a start task still in a queue cannot bring it up later.
        """
        if outcome not in TERMINATION_OUTCOMES:
            raise ValueError(f"outcome must be one of {TERMINATION_OUTCOMES}, not {outcome!r}")
        with self._lock:
            latest = self._latest_attempt.get(pod_id)
            if latest is not None and attempt < latest:
                return TerminateResult.STALE
            proc = self._procs.get((pod_id, attempt))
            if proc is not None:
                if proc.requested_outcome is not None:
                    return TerminateResult.ALREADY_TERMINATING
                if proc.leader_exited:
                    return TerminateResult.EXITED
                self._request_termination(proc, grace_s, outcome)
                return TerminateResult.TERMINATING
            if latest == attempt and (pod_id, attempt) not in self._never_started:
                return TerminateResult.EXITED
            self._latest_attempt[pod_id] = attempt
            self._never_started.add((pod_id, attempt))
            return TerminateResult.NOT_STARTED

    def _request_termination(self, proc: PodProcess, grace_s: float, outcome: str) -> None:
        # Lock held. The group id stays reserved until the watcher reaps the leader (it waits
        # with WNOWAIT) and the timer checks `reaped` under the lock, so no signal can reach a
        # recycled group.
        if proc.requested_outcome is not None or proc.leader_exited:
            return  # already terminating, or ended on its own (its outcome stands)
        proc.requested_outcome = outcome
        if grace_s <= 0:
            self._kill(proc)
            return
        self._signal(proc, signal.SIGTERM)
        timer = threading.Timer(grace_s, self._kill_after_grace, args=(proc,))
        timer.daemon = True
        proc.kill_timer = timer
        timer.start()

    def _kill_after_grace(self, proc: PodProcess) -> None:
        with self._lock:
            if not proc.reaped:
                self._kill(proc)

    def _kill(self, proc: PodProcess) -> None:
        # Lock held. Only count it as a kill when something was still alive to receive it.
        if not proc.leader_exited or self._alive(proc):
            proc.killed = True
            log.info(
                "pod %s attempt %s: SIGKILL to process group %s",
                proc.spec.pod_id,
                proc.spec.attempt,
                proc.pid,
            )
        proc.sigkill_sent = True
        self._signal(proc, signal.SIGKILL)

    # -- watching -------------------------------------------------------------------------

    def _watch(self, proc: PodProcess) -> None:
        """Wait for the leader, then for the rest of its group; then reap and report."""
        if proc.popen is None:  # adopted: not our child
            return adoption.watch_adopted_host_pod(self, proc)
        reserved = _wait_without_reaping(proc.popen)
        with self._lock:
            proc.leader_exited = True
            if proc.requested_outcome is None:
                # Finished on its own: anything left in the group is an orphan of this pod.
                proc.sigkill_sent = True
                self._signal(proc, signal.SIGKILL)
        if reserved:
            self._wait_for_group(proc)
        with self._lock:
            if proc.kill_timer is not None:
                proc.kill_timer.cancel()
            proc.reaped = True
        exit_code = proc.popen.wait()
        self._report(proc, exit_code, self._settle(proc, exit_code))

    def _report(self, proc: PodProcess, exit_code: int, reason: str = "") -> None:
        """Record and report the exit of a pod none of whose processes is left."""
        ended_at = time.time()
        outcome = proc.requested_outcome or (SUCCEEDED if exit_code == 0 else FAILED)
        spec = proc.spec
        result = PodExit(
            spec.pod_id,
            spec.job_id,
            spec.attempt,
            proc.pid,
            exit_code,
            outcome,
            proc.started_at,
            ended_at,
            proc.killed,
            reason,
        )
        _append_footer(spec.log_path, result)
        with self._lock:
            del self._procs[(spec.pod_id, spec.attempt)]
            self._recent[(spec.pod_id, spec.attempt)] = result
            while len(self._recent) > _RECENT_EXITS:
                self._recent.popitem(last=False)
            if self._on_exit is None:
                self._queued.append(result)
        log.info("pod %s attempt %s exited with %s (%s)", spec.pod_id, spec.attempt, exit_code, outcome)
        proc.done.set()
        if self._on_exit is not None:
            try:
                self._on_exit(spec.pod_id, spec.attempt, exit_code, outcome)
            except Exception:  # a failing callback must not lose the watcher's bookkeeping
                log.exception("on_exit callback failed for pod %s attempt %s", spec.pod_id, spec.attempt)

    def _wait_for_group(self, proc: PodProcess) -> None:
        # During a termination the kill timer ends the leftovers at the deadline; otherwise they
        # already got SIGKILL. Give up only on processes that survive SIGKILL (stuck in I/O).
        give_up_at: float | None = None
        while self._alive(proc):
            with self._lock:
                sigkill_sent = proc.sigkill_sent
            if sigkill_sent and give_up_at is None:
                give_up_at = time.monotonic() + _UNKILLABLE_WAIT_S
            if give_up_at is not None and time.monotonic() > give_up_at:
                log.warning(
                    "pod %s attempt %s: processes %s survive SIGKILL; reporting the exit anyway",
                    proc.spec.pod_id,
                    proc.spec.attempt,
                    self._alive(proc),
                )
                return
            time.sleep(_GROUP_POLL_S)

    # -- observing ------------------------------------------------------------------------

    def running(self) -> list[RunningPod]:
        """Pods launched and not yet reported as exited (terminating ones included)."""
        with self._lock:
            return [
                RunningPod(
                    p.spec.pod_id, p.spec.job_id, p.spec.attempt, p.pid, p.started_at, p.requested_outcome
                )
                for _, p in sorted(self._procs.items())
            ]

    def poll(self) -> list[PodExit]:
        """Exits not returned by an earlier poll(), oldest first; always empty with `on_exit`."""
        with self._lock:
            exits, self._queued = self._queued, []
        return exits

    def wait(self, pod_id: int, attempt: int, timeout: float | None = None) -> PodExit | None:
        """Block until this attempt has exited and return its exit; None on timeout or if unknown.

        Does not consume it: the exit is still reported through `on_exit` or `poll()`.
        """
        with self._lock:
            proc = self._procs.get((pod_id, attempt))
            if proc is None:
                return self._recent.get((pod_id, attempt))
        if not proc.done.wait(timeout):
            return None
        with self._lock:
            return self._recent.get((pod_id, attempt))

    def connect_pod(self, spec: PodSpec) -> None:
        """A running pod's network as its spec gives it now: only the container runtime's routed
        network has anything to do (container.py); host pods share the node's."""

    def detach(self) -> None:
        """Refuse new pods and leave the running ones be: the next supervisor of the node adopts them."""
        with self._lock:
            self._closed = True

    def shutdown(self, grace_s: float, outcome: str = PREEMPTED, timeout: float | None = None) -> bool:
        """Refuse new pods, terminate every running one and wait for all to exit.

        For a node worker that drains. The default outcome is "preempted": the node gives its
        capacity back, and the jobs restart elsewhere from their checkpoints. Returns False if
        some pod had not exited after `timeout` (default: grace_s plus a margin for SIGKILL).
        """
        if outcome not in TERMINATION_OUTCOMES:
            raise ValueError(f"outcome must be one of {TERMINATION_OUTCOMES}, not {outcome!r}")
        with self._lock:
            self._closed = True
            procs = list(self._procs.values())
            for proc in procs:
                if not proc.leader_exited:
                    self._request_termination(proc, grace_s, outcome)
        deadline = time.monotonic() + (grace_s + _UNKILLABLE_WAIT_S if timeout is None else timeout)
        return all(proc.done.wait(max(0.0, deadline - time.monotonic())) for proc in procs)


def _append_footer(log_path: str, result: PodExit) -> None:
    line = (
        f"=== tidepool: pod {result.pod_id} attempt {result.attempt} exited with code "
        f"{result.exit_code} ({result.outcome}{', killed' if result.killed else ''}) after "
        f"{result.ended_at - result.started_at:.1f} s{': ' + result.reason if result.reason else ''} ===\n"
    )
    try:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        log.warning("could not append to the log of pod %s", result.pod_id)


def _wait_without_reaping(popen: subprocess.Popen[bytes]) -> bool:
    """Wait until the leader exits but leave it a zombie, so its pid (the group id) stays
    reserved and the group can still be signalled safely. Returns False where that is not
    possible (no waitid, e.g. macOS): then the leader has been reaped already."""
    if hasattr(os, "waitid"):
        try:
            os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOWAIT)
            return True
        except ChildProcessError:  # reaped by someone else (a SIGCHLD handler reaping everything)
            pass
    popen.wait()
    return False

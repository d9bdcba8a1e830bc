"""The node agent's loop (DESIGN §6, the kubelet's shape): desired pods in, runtime calls out, reports back.

At start it registers its node (inventory detected with NVML, or declared) and so takes the node's
lease (one live agent per node; a second one waits), adopts the pods a previous agent of the node
left running (runtime/adoption.py: host process groups, cgroups or containers), then heartbeats on
one thread and converges on another, every poll period:

| the console says | here | action |
|---|---|---|
| Pending, wanted | not running, never ran | start it (container image first, per the pull policy) |
| Pending | running | report it running (the first report was lost) |
| live, not wanted (stop, preemption, moved on) | running, not terminating | SIGTERM, grace, SIGKILL |
| live, not wanted | not running | report it gone (fenced: a late start is refused) |
| live | exited (seen here, or its exit file) | report the exit (again: the first report may be lost) |
| Running | no process, no exit anywhere | report it failed: gone without an exit status |
| not listed (ended) | running | stop it at once (the database ended it: fencing) |

Every report goes through the node API, which accepts it only for a pod the database places on this
node at that attempt; a report that fails (the console unreachable) is made again on the next pass,
since each row of the table is read afresh. Stopping the agent (SIGTERM: an upgrade) leaves its pods
running and gives the lease back; the next agent adopts them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import fields
from typing import Any

from scheduler.node.remote.client import ConsoleRefused, ConsoleUnreachable, NodeApi
from scheduler.node.remote.config import AgentConfig
from scheduler.node.remote.fence import SelfFence
from scheduler.node.remote.log_server import LogServer
from scheduler.node.remote.log_tickets import TicketChecker
from scheduler.node.runtime.gpus import (
    GpuInventory,
    declared_inventory,
    detect_gpus,
    host_cpu,
    host_memory_gib,
    sample_gpus,
)
from scheduler.node.runtime.process import PodSpec, PodSupervisor, TerminateResult
from scheduler.node.runtime.progress import read_progress
from scheduler.node.runtime.pulls import ImageUnavailable
from scheduler.node.runtime.sandbox import read_exit_file

log = logging.getLogger("tidepool.node-agent")

IMAGE_RETRY_BASE_S, IMAGE_RETRY_CAP_S = 5.0, 300.0  # as the Celery worker's (node/image_waits.py)
LIVE = ("Pending", "Running")


def agent_owner() -> str:
    """host:pid:start-time of this process: the node's lease names it (services/leases.this_owner's form)."""
    try:
        with open(f"/proc/{os.getpid()}/stat", "rb") as f:
            ticks = f.read().rsplit(b")", 1)[-1].split()[19].decode()
    except (OSError, IndexError):
        ticks = "?"
    return f"{socket.gethostname()}:{os.getpid()}:{ticks}"


def spec_from(data: dict[str, Any]) -> PodSpec:
    """A PodSpec from the node API's JSON (lists back to tuples; unknown keys refused by PodSpec)."""
    known = {f.name for f in fields(PodSpec)}
    values = {key: value for key, value in data.items() if key in known}
    values["gpu_indices"] = tuple(values.get("gpu_indices") or ())
    values["dirs"] = tuple(tuple(pair) for pair in values.get("dirs") or ())
    values["env_allow"] = tuple(values.get("env_allow") or ())
    values["mounts"] = tuple(values.get("mounts") or ())
    values["peer_addresses"] = tuple(values.get("peer_addresses") or ())
    values["routes"] = tuple(tuple(pair) for pair in values.get("routes") or ())
    return PodSpec(**values)


def inventory_of(config: AgentConfig) -> GpuInventory:
    detected = detect_gpus() if config.gpus is None else None
    if detected is not None:
        return detected
    return declared_inventory(config.gpu_type or None, config.gpus or 0,
                              config.cpu if config.cpu is not None else host_cpu(),
                              config.memory_gib if config.memory_gib is not None else host_memory_gib())


def build_runtime(config: AgentConfig, on_exit) -> tuple[PodSupervisor, Any, str]:
    """The supervisor TIDEPOOL_POD_RUNTIME names, the image puller (None for host pods) and the runtime's label."""
    if config.pod_runtime == "podman":
        from scheduler.node.runtime.container import ContainerConfig, ContainerSupervisor, podman_available
        from scheduler.node.runtime.image import default_image
        from scheduler.node.runtime.network import NetworkConfig
        from scheduler.node.runtime.pulls import ImagePuller

        missing = podman_available(config.podman)
        if missing is not None:
            raise RuntimeError(f"TIDEPOOL_POD_RUNTIME=podman, but {missing}")
        container = ContainerConfig(
            default_image=config.pod_image or default_image(), podman=config.podman,
            oci_runtime=config.pod_oci_runtime, pull="never", uid=config.pod_uid, gid=config.pod_uid,
            pids_limit=config.pod_pids_limit, default_memory_gib=config.pod_default_memory_gib,
            network=NetworkConfig(mode=config.pod_network, subnet_pool=config.pod_subnets,
                                  blocked_networks=config.pod_blocked_networks,
                                  cluster_network=config.pod_cluster_network))
        puller = ImagePuller(container.podman_command(), default_image=container.default_image,
                             policy=config.pod_pull, registry=config.pod_registry,
                             authfile=config.pod_registry_auth_file)
        return ContainerSupervisor(container, on_exit=on_exit), puller, "podman"
    from scheduler.node.runtime.cgroups import writable_controllers
    from scheduler.node.runtime.host_cgroups import CgroupSupervisor

    bases, problem = writable_controllers()
    if problem:
        log.warning("host pods run without cgroups (%s): no memory, process or CPU limit", problem)
        return PodSupervisor(on_exit=on_exit), None, "host"
    return (CgroupSupervisor(bases, pids_max=config.pod_pids_limit, default_memory_gib=config.pod_default_memory_gib,
                             on_exit=on_exit), None, "host (cgroups)")


def exit_reason(exit_code: int) -> str:
    return f"killed by signal {-exit_code}" if exit_code < 0 else f"exit code {exit_code}"


class NodeAgent:
    def __init__(self, config: AgentConfig, api: NodeApi | None = None) -> None:
        self.config = config
        self.api = api or NodeApi(config.console_url, config.node_key, ca_file=config.ca_file)
        self.owner = agent_owner()
        self.supervisor, self.images, self.runtime_label = build_runtime(config, self._exited)
        self.routed = config.pod_runtime == "podman" and config.pod_network == "routed"
        self.node_name = ""
        self.log_server: LogServer | None = None
        self.fence: SelfFence | None = None  # made at registration, from the console's node timeout
        self.stop_event = threading.Event()
        self.lease_lost = False
        self.key_refused = False
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._image_waits: dict[tuple[int, int], tuple[int, str, float]] = {}  # failures, cause, next try
        self._progress_sent: dict[tuple[int, int], dict[str, Any]] = {}
        self._poll_s = config.poll_s or 5.0
        self._heartbeat_s = 10.0

    # -- the process -------------------------------------------------------------------------

    def run(self) -> int:
        """Register, adopt, then heartbeat and converge until stop(); 0 on a stop, 3 when another
        agent took the node over, 4 when the console refused the key (revoked, rotated)."""
        self.log_server = LogServer(self.config.log_address, self.config.log_port).start()
        try:
            return self._run()
        finally:
            self.log_server.stop()

    def _run(self) -> int:
        if not self._register():
            return 0
        self._adopt()
        beat = threading.Thread(target=self._beat, name="tidepool-heartbeat", daemon=True)
        beat.start()
        threading.Thread(target=self._watch_fence, name="tidepool-self-fence", daemon=True).start()
        while not self.stop_event.is_set():
            try:
                counts = self.reconcile()
                if counts:
                    log.info("reconciled: %s", counts)
            except ConsoleUnreachable as error:
                log.warning("console unreachable (%s); next try in %.1f s", error, self._poll_s)
            except ConsoleRefused as error:
                log.error("the console refused this agent: %s", error)
                if error.status == 401:  # revoked or rotated key: nothing more this process may do
                    self.key_refused = True
                    self.stop()
            self._wake.wait(self._poll_s)
            self._wake.clear()
        self._leave()
        return 3 if self.lease_lost else 4 if self.key_refused else 0

    def stop(self) -> None:
        """An agent stop (SIGTERM, an upgrade): leave the pods running for the next agent to adopt."""
        self.stop_event.set()
        self._wake.set()

    def _register(self) -> bool:
        inventory = inventory_of(self.config)
        body = {
            "agent": self.owner, "gpu_type": inventory.gpu_type or "", "gpu_count": inventory.gpus,
            "cpu": inventory.cpu, "memory_gib": inventory.memory_gib, "resource_type": self.config.resource_type,
            "address": self.config.address, "inventory_source": inventory.source,
            "gpu_memory_mib": inventory.gpu_memory_mib, "driver_version": inventory.driver_version or "",
            "pod_runtime": self.runtime_label,
            "pod_image": self.images.default_image if self.images is not None else "",
            "log_port": self.log_server.port,
            # A routed pod network: the console chooses this node's pods' addresses in it (node/addresses.py).
            "pod_subnet": self.config.pod_subnets if self.routed else "",
        }
        announced = False
        while not self.stop_event.is_set():
            try:
                answer = self.api.register(body)
            except ConsoleUnreachable as error:
                log.warning("could not register (%s); retrying", error)
            except ConsoleRefused as error:
                if error.status != 409:
                    raise
                if not announced:
                    log.warning("%s", error.detail)
                    announced = True
            else:
                self.node_name = answer["node"]
                self.log_server.checker = TicketChecker(self.node_name, bytes.fromhex(answer["log_ticket_key"]))
                self._heartbeat_s = float(answer.get("heartbeat_s") or 10.0)
                self._poll_s = self.config.poll_s or float(answer.get("reconcile_s") or 5.0)
                self.fence = SelfFence(self.supervisor, node_timeout_s=float(answer.get("node_timeout_s") or 60.0),
                                       heartbeat_s=self._heartbeat_s)
                log.info("node %s registered: %s × %s (%s), pods run as %s", self.node_name, inventory.gpus,
                         inventory.gpu_type, inventory.source, self.runtime_label)
                return True
            self.stop_event.wait(2.0)
        return False

    def _adopt(self) -> None:
        """Pods a previous agent of this node left running (and those the database ended meanwhile,
        which are then stopped by the first pass): taken over, none killed, no attempt lost."""
        while not self.stop_event.is_set():
            try:
                rows = self.api.pods(recently_ended=True)
                break
            except ConsoleUnreachable as error:
                log.warning("could not read the node's pods (%s); retrying", error)
                self.stop_event.wait(2.0)
        else:
            return
        adopted = 0
        for row in rows:
            if row["spec"] is None:
                continue
            try:
                adopted += bool(self.supervisor.adopt(spec_from(row["spec"])))
            except (OSError, RuntimeError) as error:
                log.warning("pod %s attempt %s could not be adopted: %s", row["pod_id"], row["attempt"], error)
        if adopted:
            log.warning("node %s: adopted %s running pods of the previous agent", self.node_name, adopted)

    def _beat(self) -> None:
        while not self.stop_event.wait(self._heartbeat_s):
            try:
                readings = sample_gpus() if self.config.gpus is None else []  # NVML's; none where it is absent
                self.api.heartbeat(self.owner, **({"gpus": readings} if readings else {}))
                self.fence.answered()
            except ConsoleUnreachable as error:
                log.warning("heartbeat failed: %s", error)
            except ConsoleRefused as error:
                log.error("heartbeat refused: %s", error)
                if error.status in (401, 409):  # key revoked, or another agent runs the node now
                    self.lease_lost = error.status == 409
                    self.key_refused = error.status == 401
                    self.stop()

    def _watch_fence(self) -> None:
        """Its own thread: a heartbeat request may hang for the client's timeout, the fence must not (fence.py)."""
        while not self.stop_event.wait(min(0.5, self._heartbeat_s / 2)):
            self.fence.check()

    def _leave(self) -> None:
        self.supervisor.detach()
        running = len(self.supervisor.running())
        log.info("node %s: agent stopping; its %s running pods go on for the next agent to adopt",
                 self.node_name, running)
        if not self.lease_lost:
            try:
                self.api.release(self.owner)
            except (ConsoleUnreachable, ConsoleRefused) as error:
                log.warning("could not give the node's lease back (%s): the next agent waits for it to expire", error)

    # -- one pass ----------------------------------------------------------------------------

    def reconcile(self) -> dict[str, int]:
        """One pass of the table above. Returns counts per action."""
        rows = self.api.pods()
        running = {(r.pod_id, r.attempt): r for r in self.supervisor.running()}  # read after the console
        counts: dict[str, int] = {}

        def count(action: str) -> None:
            counts[action] = counts.get(action, 0) + 1

        for row in rows:
            try:
                action = self._converge(row, running.get((row["pod_id"], row["attempt"])))
            except ConsoleRefused as error:
                if error.status == 401:
                    raise
                # One pod's refused report must not hold the others back; the next pass tries again.
                log.warning("pod %s attempt %s: the console refused a report: %s", row["pod_id"], row["attempt"],
                            error)
                action = "refused"
            if action:
                count(action)
        listed = {(row["pod_id"], row["attempt"]) for row in rows}
        for key, here in running.items():
            if key not in listed and here.terminating is None:
                log.warning("pod %s attempt %s runs here but the database ended it: stopping it", *key)
                self.supervisor.terminate(*key, 0, "stopped")
                count("stopped_unlisted")
        return counts

    def _converge(self, row: dict[str, Any], here: Any) -> str:
        """One row of the table for one pod; returns the action taken ("" for none)."""
        key = (row["pod_id"], row["attempt"])
        if here is not None:
            if not row["wanted"] and here.terminating is None:
                self.supervisor.terminate(*key, row["grace_s"], row["outcome"])
                return "terminated"
            if row["status"] == "Pending" and self.api.report(*key, "running", pid=here.pid):
                return "reported_running"
            self._relay_progress(row)
            if self.routed and row["spec"] is not None:
                self._connect(row)
            return ""
        if self._report_known_exit(row):
            return "reported_exit"
        if not row["wanted"]:
            self._fence(row)
            return "fenced"
        if row["status"] == "Pending":
            return self._start(row)
        if self.supervisor.wait(*key, 0) is None:
            self.api.report(*key, "exited", exit_code=None, outcome="failed",
                            reason="the pod's process is gone without an exit status")
            return "gone"
        return ""

    def _connect(self, row: dict[str, Any]) -> None:
        """A running pod's peers and routes as the console gives them now (an elastic job's change)."""
        try:
            self.supervisor.connect_pod(spec_from(row["spec"]))
        except RuntimeError as error:  # NetworkError: the next pass tries again
            log.warning("pod %s attempt %s: its network could not be updated: %s", row["pod_id"], row["attempt"],
                        error)

    def _fence(self, row: dict[str, Any]) -> None:
        key = (row["pod_id"], row["attempt"])
        with self._lock:
            self._image_waits.pop(key, None)
        if self.supervisor.terminate(*key, row["grace_s"], row["outcome"]) == TerminateResult.NOT_STARTED:
            self.api.report(*key, "exited", exit_code=None, outcome=row["outcome"],
                            reason=f"{row['outcome']} before it started")

    def _report_known_exit(self, row: dict[str, Any]) -> bool:
        key = (row["pod_id"], row["attempt"])
        seen = self.supervisor.wait(*key, 0)
        if seen is not None:
            self._relay_progress(row)  # the last one first: e.g. the checkpoint saved on SIGTERM
            fenced = self.fence.reason(*key) if self.fence is not None else None  # a failure, not a stop
            self.api.report(*key, "exited", exit_code=seen.exit_code, outcome="failed" if fenced else seen.outcome,
                            reason=fenced or seen.reason or exit_reason(seen.exit_code))
            self._forget_shrunk_exit(row)
            return True
        if row["spec"] is None or not row["spec"].get("exit_path"):
            return False
        code = read_exit_file(row["spec"]["exit_path"])
        if code is None:
            return False
        self.api.report(*key, "exited", exit_code=code, outcome="succeeded" if code == 0 else "failed",
                        reason=f"exit code {code} (read back from its exit file)")
        self._forget_shrunk_exit(row)
        return True

    @staticmethod
    def _forget_shrunk_exit(row: dict[str, Any]) -> None:
        """A shrunk pod's exit file, once its exit is reported: the pod that a growth starts in its place
        (same attempt, role and index: the same path) would otherwise read it back as its own exit before it
        starts, and the job would fail (§2c; seen on the production stack, a grown pod "exit code 134")."""
        if row["outcome"] == "shrunk" and not row["wanted"] and row["spec"] and row["spec"].get("exit_path"):
            try:
                os.unlink(row["spec"]["exit_path"])
            except FileNotFoundError:
                pass
            except OSError as error:
                log.warning("pod %s: could not remove its exit file: %s", row["pod_id"], error)

    def _start(self, row: dict[str, Any]) -> str:
        key = (row["pod_id"], row["attempt"])
        if row["spec"] is None:
            self.api.report(*key, "never_started", reason=f"could not start: {row['spec_error']}")
            return "never_started"
        with self._lock:
            waiting = self._image_waits.get(key)
        if waiting is not None and time.monotonic() < waiting[2]:
            return "waiting_for_image"
        spec = spec_from(row["spec"])
        try:
            if self.images is not None:
                spec = self.images.prepare(spec)
            started = self.supervisor.start(spec)
        except ImageUnavailable as error:
            self._image_unavailable(key, str(error), waiting)
            return "waiting_for_image"
        except RuntimeError:  # stopping: the pod stays Pending for the next agent
            return "not_started"
        except OSError as error:
            log.warning("pod %s attempt %s could not start: %s", *key, error)
            self.api.report(*key, "never_started", reason=f"could not start: {error}")
            return "never_started"
        if self.images is not None or waiting is not None:
            with self._lock:
                self._image_waits.pop(key, None)
            self.api.report(*key, "image_here", image=spec.image)
        if not started:
            return "not_started"
        pid = next((r.pid for r in self.supervisor.running() if (r.pod_id, r.attempt) == key), None)
        self.api.report(*key, "running", pid=pid)
        return "started"

    def _image_unavailable(self, key: tuple[int, int], cause: str, waiting: tuple[int, str, float] | None) -> None:
        failures = (waiting[0] if waiting else 0) + 1
        delay = min(IMAGE_RETRY_CAP_S, IMAGE_RETRY_BASE_S * 2 ** (failures - 1))
        with self._lock:
            self._image_waits[key] = (failures, cause, time.monotonic() + delay)
        log.warning("pod %s attempt %s waits for its image (try %s, next in %.0f s): %s", *key, failures, delay, cause)
        if not self.api.report(*key, "image_wait", cause=cause, retry_in_s=delay,
                               new_cause=waiting is None or waiting[1] != cause):
            with self._lock:
                self._image_waits.pop(key, None)

    def _relay_progress(self, row: dict[str, Any]) -> None:
        """Rank 0's progress file (the checkpoint helper's), sent when it changed."""
        if row["rank"] != 0 or row["spec"] is None:
            return
        progress = read_progress(row["spec"]["progress_path"])
        if progress is None:
            return
        key = (row["pod_id"], row["attempt"])
        data = progress.__dict__.copy()
        if self._progress_sent.get(key) == data:
            return
        self.api.report(*key, "progress", progress=data)
        self._progress_sent[key] = data

    def _exited(self, pod_id: int, attempt: int, exit_code: int, outcome: str) -> None:
        """The supervisor saw the pod exit: wake the loop, which reports it (from supervisor.wait) at once."""
        self._progress_sent.pop((pod_id, attempt), None)
        self._wake.set()

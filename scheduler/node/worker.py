"""The node worker: `celery -A config worker -Q node.<name>` (the node's name comes from the queue,
or from TIDEPOOL_NODE_NAME). Tasks run in threads (CELERY_WORKER_POOL=threads) so that the pods,
the heartbeat and the remote-control command share one process and one PodAgent.

At start it takes the node's lease (one live worker per node: a second one waits), registers
its node (GPUs detected with NVML where present, otherwise declared by TIDEPOOL_NODE_GPU_TYPE /
TIDEPOOL_NODE_GPUS / TIDEPOOL_NODE_CPU / TIDEPOOL_NODE_MEMORY_GIB), settles the pods a dead
predecessor left (orphans.py), then heartbeats every TIDEPOOL_HEARTBEAT_SECONDS and reconciles
its pods with the database every TIDEPOOL_RECONCILE_SECONDS (reconcile.py): start tasks and
terminate commands are hints that wake the reconcile. Pods run as process groups under a PodAgent. On a
warm shutdown (an upgrade) it leaves its pods running and gives the lease back; the next worker of
the node adopts them (orphans.py, runtime/adoption.py): no pod is killed, no attempt lost. Draining
is an explicit action (services/nodes.py: node_drain). Pod logs stay on the node: the console and the API read
them through the `tidepool_read_pod_log` control command (scheduler/node/logs.py).
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutting_down
from celery.worker.control import control_command
from django.conf import settings
from django.db import close_old_connections

from scheduler.executors.celery import TERMINATE_COMMAND
from scheduler.models import Node, Pod
from scheduler.node.agent import PodAgent
from scheduler.node.db import replace_connection, retrying_once
from scheduler.node.logs import READ_LOG_COMMAND, serve_pod_log
from scheduler.node.orphans import release_orphaned_pods
from scheduler.node.reconcile import ReconcileLoop
from scheduler.node.runtime.gpus import (
    declared_inventory,
    detect_gpus,
    host_cpu,
    host_memory_gib,
    sample_gpus,
)
from scheduler.node.runtimes import runtime_label
from scheduler.node.specs import master_address
from scheduler.services.gpu_samples import gpu_samples_record
from scheduler.services.leases import LeaseKeeper, lease_acquire, node_role, this_owner
from scheduler.services.nodes import node_heartbeat, node_register
from scheduler.states import LIVE_POD_STATUSES

log = logging.getLogger("tidepool.worker")


class NodeWorker:
    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.agent = PodAgent()
        self.owner = this_owner()
        self.lease: LeaseKeeper | None = None
        self.reconciler = ReconcileLoop(self.agent, lambda: [self.node_name], settings.TIDEPOOL_RECONCILE_SECONDS)
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="tidepool-heartbeat", daemon=True)
        self._starter = threading.Thread(target=self._take_over, name="tidepool-takeover", daemon=True)

    @property
    def active(self) -> bool:
        """This worker holds the node's lease: it runs the node's pods."""
        return self.lease is not None and not self._stop.is_set()

    def register(self) -> None:
        inventory = None if settings.TIDEPOOL_NODE_GPUS is not None else detect_gpus()
        if inventory is None:
            inventory = declared_inventory(
                settings.TIDEPOOL_NODE_GPU_TYPE,
                settings.TIDEPOOL_NODE_GPUS or 0,
                settings.TIDEPOOL_NODE_CPU if settings.TIDEPOOL_NODE_CPU is not None else host_cpu(),
                settings.TIDEPOOL_NODE_MEMORY_GIB if settings.TIDEPOOL_NODE_MEMORY_GIB is not None else host_memory_gib(),
            )
        self._inventory = inventory
        self._starter.start()

    def _take_over(self) -> None:
        """Wait for the node's lease (a live worker of the same node keeps it), then register the
        node, settle what a dead predecessor left, and start heartbeats and the reconcile loop."""
        role = node_role(self.node_name)
        announced = False
        while not self._stop.is_set():
            try:
                close_old_connections()
                acquired, lease = lease_acquire(role=role, owner=self.owner)
            except Exception:
                log.exception("node %s: could not reach the database for its lease; retrying", self.node_name)
                acquired, lease = False, None
            if acquired:
                break
            if lease is not None and not announced:
                log.warning("node %s is run by another live worker (%s, lease until %s): waiting", self.node_name,
                            lease.owner, lease.expires_at.isoformat())
                announced = True
            self._stop.wait(min(5.0, settings.TIDEPOOL_LEASE_SECONDS / 3))
        if self._stop.is_set():
            return
        keeper = LeaseKeeper(role, self.owner, on_lost=self._lease_lost).start()
        while not self._stop.is_set():
            try:
                close_old_connections()
                self._register_and_settle()
                break
            except Exception:
                log.exception("node %s: registration failed; retrying", self.node_name)
                self._stop.wait(2.0)
        if self._stop.is_set():
            keeper.stop(release=True)
            return
        self.lease = keeper  # only now: no pod starts here before the predecessor's are settled
        self._heartbeat.start()
        self.reconciler.start()
        self.reconciler.wake()

    def _register_and_settle(self) -> None:
        inventory = self._inventory
        node_register(
            name=self.node_name,
            resource_type=settings.TIDEPOOL_NODE_RESOURCE_TYPE,
            gpu_type=inventory.gpu_type or "",
            gpu_count=inventory.gpus,
            cpu=inventory.cpu,
            memory_gib=inventory.memory_gib,
            address=settings.TIDEPOOL_NODE_ADDRESS,
            inventory_source=inventory.source,
            gpu_memory_mib=inventory.gpu_memory_mib,
            driver_version=inventory.driver_version or "",
            heartbeat=True,
            pod_runtime=runtime_label(self.agent.supervisor),
            pod_image=self.agent.images.default_image if self.agent.images is not None else "",
        )
        log.info("node %s registered: %s × %s (%s)", self.node_name, inventory.gpus, inventory.gpu_type,
                 inventory.source)
        self._release_orphans()

    def _lease_lost(self) -> None:
        log.error("node %s: another worker took the node over; this one stops running pods", self.node_name)
        self.reconciler.stop()
        self.lease = None

    def _release_orphans(self) -> None:
        """Pods a previous worker of this node left (stopped or killed): adopt those still there,
        settle the others (orphans.py)."""
        node = Node.objects.get(name=self.node_name)
        counts = release_orphaned_pods(node=node, reason=f"node {self.node_name}'s worker restarted",
                                       owner=self.owner, role=node_role(self.node_name), agent=self.agent)
        if any(counts.values()):
            log.warning("node %s: pods of the previous worker: %s", self.node_name, counts)

    def _beat(self) -> None:
        while not self._stop.wait(settings.TIDEPOOL_HEARTBEAT_SECONDS):
            try:  # a connection the database closed is replaced, not reused (db.py)
                retrying_once("heartbeat", lambda: node_heartbeat(name=self.node_name))
                if settings.TIDEPOOL_NODE_GPUS is None:  # issue 14: NVML-detected GPUs' use per pod (docs/api.md)
                    gpu_samples_record(node_name=self.node_name, readings=sample_gpus())
            except Exception:
                log.exception("heartbeat of node %s failed", self.node_name)
                replace_connection()

    def start_pod(self, *, pod_id: int, attempt: int) -> str:
        """The start task: a hint. Starts the pod now if the database still wants it; the
        reconcile loop would start it within TIDEPOOL_RECONCILE_SECONDS anyway."""
        if not self.active:
            return "not running this node yet"
        close_old_connections()
        pod = Pod.objects.select_related("job", "job__workspace", "node").filter(pk=pod_id).first()
        if pod is None or pod.attempt != attempt or pod.status not in LIVE_POD_STATUSES or pod.terminate_requested:
            return "stale"  # superseded or terminated while the start was queued
        if pod.node is None or pod.node.name != self.node_name:
            return "wrong node"
        siblings = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=attempt))
        self.agent.start(pod.job, pod, world_size=len(siblings), master_addr=master_address(siblings))
        return "started"

    def terminate(self, pod_id: int, attempt: int, *, grace_s: float, outcome: str) -> None:
        if self.active:
            self.agent.terminate(pod_id, attempt, grace_s=grace_s, outcome=outcome)
            self.reconciler.wake()

    def stop(self) -> None:
        """A warm shutdown (an upgrade, a restart): stop reconciling and reporting, leave the pods
        running and give the node's lease back, so that the next worker of the node adopts them at
        once (orphans.py). Emptying the node is an explicit drain (Nodes page, CLI, API)."""
        self._stop.set()
        self.reconciler.stop()
        if self.lease is None:
            return  # never ran the node (another worker does): touch nothing
        self.agent.detach()
        running = len(self.agent.supervisor.running())
        log.info("node %s: worker stopping; its %s running pods go on for the next worker to adopt",
                 self.node_name, running)
        self.lease.stop(release=True)


_worker: NodeWorker | None = None


def current_agent() -> NodeWorker:
    if _worker is None:
        raise RuntimeError("not a Tidepool node worker: set TIDEPOOL_NODE_NAME and start with -Q node.<name>")
    return _worker


def _node_name_from_queues(consumer) -> str | None:
    try:
        queues = list(consumer.app.amqp.queues.consume_from or {})
    except AttributeError:
        return None
    names = [queue.removeprefix("node.") for queue in queues if queue.startswith("node.")]
    return names[0] if len(names) == 1 else None


@worker_ready.connect
def _on_worker_ready(sender=None, **kwargs) -> None:
    global _worker
    name = settings.TIDEPOOL_NODE_NAME or _node_name_from_queues(sender)
    if not name:
        log.warning("no node name (-Q node.<name> or TIDEPOOL_NODE_NAME): this worker runs no pods")
        return
    _worker = NodeWorker(name)
    _worker.register()


@worker_shutting_down.connect
def _on_worker_shutting_down(sig=None, how=None, exitcode=None, **kwargs) -> None:
    if _worker is not None:
        _worker.stop()


@control_command(
    name=TERMINATE_COMMAND,
    args=[("node", str), ("pod_id", int), ("attempt", int), ("grace_s", float), ("outcome", str)],
    signature="<node> <pod_id> <attempt> <grace_s> <outcome>",
)
def tidepool_terminate_pod(state, node: str, pod_id: int, attempt: int, grace_s: float, outcome: str) -> dict:
    """SIGTERM a pod now (not behind queued tasks); SIGKILL after grace_s. Fenced by attempt.

    Broadcast to every worker; only the pod's node acts, so workers need no particular -n name.
    """
    if _worker is None or _worker.node_name != node:
        return {"skipped": "not this node"}
    threading.Thread(
        target=_worker.terminate, args=(pod_id, attempt), kwargs={"grace_s": grace_s, "outcome": outcome},
        daemon=True,
    ).start()
    return {"ok": "terminating"}


@control_command(
    name=READ_LOG_COMMAND,
    args=[("node", str), ("pod_id", int), ("attempt", int), ("offset", int), ("max_bytes", int)],
    signature="<node> <pod_id> <attempt> <offset> <max_bytes>",
)
def tidepool_read_pod_log(state, node: str, pod_id: int, attempt: int, offset: int, max_bytes: int) -> dict:
    """Part of a pod's log, for the console and the API (the file is on this node).

    Broadcast to every worker; only the pod's node answers with text, and only for a pod the
    database records on it (scheduler/node/logs.py: serve_pod_log), at most 64 KiB a time.
    """
    if _worker is None or _worker.node_name != node:
        return {"skipped": "not this node"}
    try:
        close_old_connections()
        return serve_pod_log(node, pod_id, attempt, offset, max_bytes)
    except Exception as error:
        log.exception("could not read the log of pod %s", pod_id)
        return {"node": node, "refused": f"could not read the log: {error}"}

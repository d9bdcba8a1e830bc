"""The embedded executor: pods of the demo's virtual nodes run as processes on this machine.

Like a node worker it is level-triggered: `launch` and `terminate` act at once (hints), and a
reconcile loop (scheduler/node/reconcile.py) converges the demo nodes' pods on the database every
TIDEPOOL_RECONCILE_SECONDS, so a lost hint only delays.
"""

from __future__ import annotations

from django.conf import settings

from scheduler.executors import PodRef
from scheduler.models import Job, Node, Pod
from scheduler.node.agent import PodAgent
from scheduler.node.reconcile import ReconcileLoop
from scheduler.node.runtimes import runtime_label
from scheduler.publish import publish_cluster_change_on_commit
from scheduler.services.leases import EMBEDDED_CONSOLE, lease_held


class LocalExecutor:
    """`lease_owner`: set by the console that holds the "console:embedded" lease (manage.py serve);
    only then does the reconcile loop act, so no other instance (a second process, a test's
    default executor) ever starts or fails the demo nodes' pods."""

    def __init__(self, reconcile_s: float | None = None) -> None:
        self.agent = PodAgent()
        self.lease_owner: str | None = None
        period = settings.TIDEPOOL_RECONCILE_SECONDS if reconcile_s is None else reconcile_s
        self.reconciler = ReconcileLoop(self.agent, self._demo_nodes, period).start() if period > 0 else None

    def _demo_nodes(self) -> list[str]:
        if self.lease_owner is None or not lease_held(role=EMBEDDED_CONSOLE, owner=self.lease_owner):
            return []
        demo = Node.objects.filter(inventory_source=Node.InventorySource.DEMO)
        label = runtime_label(self.agent.supervisor)
        if demo.exclude(pod_runtime=label).update(pod_runtime=label):  # its pods run here: the Nodes page says how
            publish_cluster_change_on_commit()
        return list(demo.values_list("name", flat=True))

    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        for job, pods in launches:
            self.agent.start_job_pods(job, pods)

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        for pod_id, attempt, _node in refs:
            self.agent.terminate(pod_id, attempt, grace_s=grace_s, outcome=outcome)

    def shutdown(self, grace_s: float) -> None:
        if self.reconciler is not None:
            self.reconciler.stop()
        self.agent.shutdown(grace_s)

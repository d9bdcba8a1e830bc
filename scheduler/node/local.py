"""The embedded executor: pods of the demo's virtual nodes run as processes on this machine."""

from __future__ import annotations

from scheduler.executors import PodRef
from scheduler.models import Job, Pod
from scheduler.node.agent import PodAgent


class LocalExecutor:
    def __init__(self) -> None:
        self.agent = PodAgent()

    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        for job, pods in launches:
            self.agent.start_job_pods(job, pods)

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        for pod_id, attempt, _node in refs:
            self.agent.terminate(pod_id, attempt, grace_s=grace_s, outcome=outcome)

    def shutdown(self, grace_s: float) -> None:
        self.agent.shutdown(grace_s)

"""/metrics: a scrape during a reclaim sees the preemption counter and the Not in Quota gauge move;
counters come from the database; access needs the token or an allowed address."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from scheduler.loop.cycle import schedule_once
from scheduler.models import Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus

pytestmark = pytest.mark.django_db(transaction=True)

ROLE_8 = [{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 8, "cpu": 8, "memory_gib": 64}]


def scrape(client: Client | None = None, **headers: str) -> dict[tuple[str, tuple], float]:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def teams():
    for name in ("gpu-1", "gpu-2", "gpu-3"):
        node_register(name=name, gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    user = get_user_model().objects.create_user("ana", is_staff=True)
    space = Workspace.objects.create(name="all")
    space.members.add(user)
    root = quota_create(name="root", min_gpus={"A100": 24}, min_cpu=288, min_memory_gib=2304)
    a = quota_create(name="team-a", parent=root, min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536,
                     workspaces=[space])
    b = quota_create(name="team-b", parent=root, min_gpus={"A100": 8}, min_cpu=96, min_memory_gib=768,
                     workspaces=[space])

    def submit(quota, name: str, idle: str = "off"):
        return job_submit(user=user, workspace=space, quota=quota, name=name, command="train", roles=ROLE_8,
                          idle_mode=idle, fault_tolerance=True)

    return a, b, submit


def run_pods(executor) -> None:
    for pod_id, attempt in list(executor.launched):
        pod_running(pod_id=pod_id, attempt=attempt)


def test_scrape_during_a_reclaim(teams, recording_executor) -> None:
    a, b, submit = teams
    submit(b, "b-own")
    borrower = submit(b, "b-borrow", idle="only")
    schedule_once()
    run_pods(recording_executor)
    submit(a, "a-first")
    schedule_once()
    run_pods(recording_executor)
    before = scrape()
    assert value(before, "tidepool_quota_not_in_quota_gpus", pool="general", quota="team-b") == 8
    assert value(before, "tidepool_pool_gpus", pool="general", use="not_in_quota") == 8
    assert value(before, "tidepool_preemptions_total", pool="general", quota="team-b", reason="reclaim") == 0
    assert value(before, "tidepool_node_gpus", node="gpu-1", pool="general", gpu_type="A100", state="allocated") == 8

    submit(a, "bert-large")
    schedule_once()  # reclaim: the borrower is preempted, bert-large nominated
    borrower.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED
    during = scrape()
    assert value(during, "tidepool_preemptions_total", pool="general", quota="team-b", reason="reclaim") == 1
    assert value(during, "tidepool_quota_pending_jobs", pool="general", quota="team-a") == 1

    pod = borrower.pods.get()
    pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="preempted")
    schedule_once()
    run_pods(recording_executor)
    after = scrape()
    assert value(after, "tidepool_quota_not_in_quota_gpus", pool="general", quota="team-b") == 0
    assert value(after, "tidepool_pool_gpus", pool="general", use="not_in_quota") == 0
    assert value(after, "tidepool_quota_in_quota_gpus", pool="general", quota="team-a") == 16
    assert value(after, "tidepool_preemptions_total", pool="general", quota="team-b", reason="reclaim") == 1
    # A preemption is not a restart (DESIGN §3); the borrower reported no checkpoint, so its whole
    # attempt's GPU time is lost.
    assert value(after, "tidepool_restarts_total", pool="general", quota="team-b", reason="reclaim") == 0
    assert value(after, "tidepool_work_lost_gpu_seconds_total", pool="general", quota="team-b", reason="reclaim") > 0
    # Every admission so far waited: 4 admissions in the histogram, across the two quotas.
    admitted = sum(value(after, "tidepool_queue_wait_seconds_count", pool="general", quota=q)
                   for q in ("team-a", "team-b"))
    assert admitted == 4
    assert value(after, "tidepool_scheduler_cycle_phase_seconds_count", phase="engine") >= 4


def test_counters_come_from_the_database(teams, recording_executor) -> None:
    """A new collector (a restarted process) reads the same counters: nothing is kept in memory."""
    from scheduler.metrics.collector import TidepoolCollector

    a, b, submit = teams
    submit(b, "b-borrow", idle="only")
    schedule_once()
    first = {m.name: m.samples for m in TidepoolCollector().collect()}
    second = {m.name: m.samples for m in TidepoolCollector().collect()}
    assert first == second and "tidepool_queue_wait_seconds" in first


def test_access_needs_the_token_or_an_allowed_address(teams, settings) -> None:
    settings.TIDEPOOL_METRICS_ALLOW = ["10.0.0.0/8"]
    settings.TIDEPOOL_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 403  # the test client is 127.0.0.1
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert scrape(HTTP_AUTHORIZATION="Bearer s3cret")
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    settings.TIDEPOOL_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_grafana_dashboard_uses_only_exported_metrics(teams, recording_executor) -> None:
    import json
    import re
    from pathlib import Path

    a, b, submit = teams
    submit(b, "b-borrow", idle="only")
    schedule_once()
    exported = {name for name, _labels in scrape()}
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs/grafana/tidepool-dashboard.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"tidepool_[a-z_]+", target["expr"])}
    assert used and used <= exported | {"tidepool_preemptions_total", "tidepool_restarts_total",
                                        "tidepool_work_lost_gpu_seconds_total"}, used - exported
    counters = {"tidepool_preemptions_total", "tidepool_restarts_total", "tidepool_work_lost_gpu_seconds_total"}
    assert counters <= used  # … and those, absent from a young cluster's scrape, are the exported counters' names
    assert {"tidepool_queue_wait_seconds_bucket", "tidepool_scheduler_cycle_phase_seconds_bucket"} <= exported


def test_each_cycle_observes_every_phase_once(teams, recording_executor) -> None:
    phases = ("housekeeping", "snapshot", "engine", "apply", "commit")
    before = scrape()
    schedule_once()
    schedule_once()
    after = scrape()
    for phase in phases:
        count = "tidepool_scheduler_cycle_phase_seconds_count"
        assert value(after, count, phase=phase) - value(before, count, phase=phase) == 2, phase
        assert value(after, "tidepool_scheduler_cycle_phase_seconds_sum", phase=phase) > 0

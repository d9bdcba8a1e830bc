"""A node worker's database connection that PostgreSQL closed under it (pg_terminate_backend in the
middle of a reconcile pass or a heartbeat) is replaced and the call run once more, instead of a
failed pass (issue 23). PostgreSQL only: skipped on SQLite."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection, connections

from scheduler.models import Pod
from scheduler.node.agent import PodAgent
from scheduler.node.db import replace_connection, retrying_once
from scheduler.node.reconcile import reconcile
from scheduler.services.nodes import node_heartbeat
from scheduler.states import PodStatus
from tests.factories import JobFactory, World, make_running

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def terminate(pid: int) -> None:
    """As an administrator (or a database restart) would: from a connection of its own."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert cursor.fetchone()[0], f"backend {pid} was not terminated"
    finally:
        other.close()


@pytest.fixture
def agent(postgres_db, world: World):
    """An agent of gpu-01 whose supervisor, the first time the pass asks it what runs, finds the
    database gone: the pass's next query meets a terminated connection."""
    agent = PodAgent()
    real_running = agent.supervisor.running
    cuts: list[int] = []

    def running():
        if not cuts:
            cuts.append(backend_pid())
            terminate(cuts[0])
        return real_running()

    agent.supervisor.running = running
    agent.cuts = cuts
    yield agent
    agent.shutdown(grace_s=0)


@pytest.fixture
def vanished_pod(world: World) -> Pod:
    """Running on gpu-01 in the database, with no process and no exit file there: the pass reports it gone."""
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="vanished", owner=world.alice)
    (pod,) = make_running(job, world.gpu1)
    return pod


def test_without_the_retry_the_pass_fails_on_the_terminated_connection(agent, vanished_pod):
    with pytest.raises(OperationalError):
        reconcile(agent, ["gpu-01"])  # what the worker logged before: "terminating connection due to …"
    replace_connection()
    assert Pod.objects.get(pk=vanished_pod.pk).status == PodStatus.RUNNING


def test_a_reconcile_pass_cut_midway_is_run_again_on_a_new_connection(agent, vanished_pod, caplog):
    assert retrying_once("reconcile", lambda: reconcile(agent, ["gpu-01"])) == {"gone": 1}
    assert "reconcile: the database connection failed" in caplog.text
    assert backend_pid() != agent.cuts[0]
    pod = Pod.objects.get(pk=vanished_pod.pk)
    assert pod.status == PodStatus.FAILED and "gone without an exit status" in pod.reason


def test_a_heartbeat_after_pg_terminate_backend_still_lands(postgres_db, world: World):
    cut: list[int] = []

    def heartbeat():
        if not cut:  # the database drops the connection just before the heartbeat's query
            cut.append(backend_pid())
            terminate(cut[0])
        return node_heartbeat(name="gpu-01")

    before = world.gpu1.last_heartbeat
    node = retrying_once("heartbeat", heartbeat)
    assert node.last_heartbeat is not None and node.last_heartbeat != before

"""Pod logs from their node's agent to the console over an authenticated channel (DESIGN §6;
scheduler/node/remote/log_tickets.py): one-use tickets the console signs with a key only it and the
pod's node hold; the node's answer carries the same signature. No broadcast: the console asks the
pod's node only."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from django.test import override_settings

from scheduler.node.logs import LogUnavailable, read_pod_log
from scheduler.node.remote.log_server import LogServer
from scheduler.node.remote.log_tickets import LEEWAY_S, TicketChecker, TicketRefused, make_ticket
from scheduler.paths import pod_log_path
from scheduler.services.node_keys import node_key_create, node_key_log_port_set, node_log_ticket_key
from tests.factories import JobFactory, World, make_running

KEY = b"k" * 32


def ticket(**overrides) -> str:
    values = {"node": "gpu-01", "pod": 7, "attempt": 1, "path": "/var/pods/x/log", "offset": 0, "max_bytes": 100}
    return make_ticket(KEY, **{**values, **overrides})


def test_a_ticket_is_served_once_for_its_own_node() -> None:
    checker = TicketChecker("gpu-01", KEY)
    token = ticket()
    assert checker.check(token).path == "/var/pods/x/log"
    with pytest.raises(TicketRefused, match="already used"):
        checker.check(token)


def test_another_nodes_ticket_a_forged_one_and_a_tampered_one_are_refused() -> None:
    with pytest.raises(TicketRefused, match="for node gpu-02"):
        TicketChecker("gpu-01", KEY).check(ticket(node="gpu-02"))
    with pytest.raises(TicketRefused, match="bad signature"):
        TicketChecker("gpu-01", KEY).check(make_ticket(b"x" * 32, node="gpu-01", pod=7, attempt=1, path="/etc/shadow",
                                                       offset=0, max_bytes=100))
    encoded, _, signature = ticket().partition(".")
    import base64
    import json
    body = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    body["path"] = "/etc/shadow"
    tampered = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=") + "." + signature
    with pytest.raises(TicketRefused, match="bad signature"):
        TicketChecker("gpu-01", KEY).check(tampered)


def test_a_node_clock_five_minutes_off_still_serves_but_an_old_ticket_is_stale() -> None:
    import time

    now = time.time()
    assert TicketChecker("gpu-01", KEY).check(ticket(), now=now + 300).pod == 7
    assert TicketChecker("gpu-01", KEY).check(ticket(), now=now - 300).pod == 7
    with pytest.raises(TicketRefused, match="stale"):
        TicketChecker("gpu-01", KEY).check(ticket(), now=now + LEEWAY_S + 3600)


@pytest.fixture
def served(world: World, tmp_path):
    """gpu-01's agent's log server (in this process), its key registered with the port; a pod on gpu-01 with a log."""
    created = node_key_create(node_name="gpu-01")
    server = LogServer("127.0.0.1", 0).start()
    server.checker = TicketChecker("gpu-01", node_log_ticket_key(created.key))
    node_key_log_port_set(key=created.key, log_port=server.port)
    world.gpu1.address = "127.0.0.1"
    world.gpu1.save()
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="logged", owner=world.alice)
    pod = make_running(job, world.gpu1)[0]
    path = pod_log_path(pod)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {i}\n" for i in range(20_000)))
    yield pod, server, created
    server.stop()


@override_settings(TIDEPOOL_EXECUTOR="agents")
def test_the_console_reads_a_log_from_the_pods_agent(served) -> None:
    pod, _server, _key = served
    chunk = read_pod_log(pod, 0, 300_000)  # more than one answer: asked in NODE_MAX_BYTES windows
    assert chunk.text.startswith("line 0\n") and chunk.text.endswith("line 19999\n")
    assert chunk.offset == chunk.size == pod_log_path(pod).stat().st_size
    tail = read_pod_log(pod, -20, 20)
    assert tail.text.endswith("line 19999\n")


@override_settings(TIDEPOOL_EXECUTOR="agents")
def test_an_agent_with_another_key_is_not_believed_and_a_replayed_ticket_is_refused(served) -> None:
    pod, server, created = served
    server.checker = TicketChecker("gpu-01", b"another node's key".ljust(32))  # e.g. an impostor on the port
    with pytest.raises(LogUnavailable, match="refused"):
        read_pod_log(pod, 0, 100)
    server.checker = TicketChecker("gpu-01", node_log_ticket_key(created.key))
    token = make_ticket(node_log_ticket_key(created.key), node="gpu-01", pod=pod.pk, attempt=pod.attempt,
                        path=str(pod_log_path(pod)), offset=0, max_bytes=10)
    url = f"http://127.0.0.1:{server.port}/log?ticket={token}"
    with urllib.request.urlopen(url, timeout=5) as first:
        assert first.status == 200
    with pytest.raises(urllib.error.HTTPError) as again:
        urllib.request.urlopen(url, timeout=5)
    assert again.value.code == 403 and b"already used" in again.value.read()


@override_settings(TIDEPOOL_EXECUTOR="agents")
def test_without_a_ticket_the_log_server_serves_nothing(served) -> None:
    _pod, server, _key = served
    for path in ("/log", "/", "/log?ticket=abc.def"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5)
        assert refused.value.code in (403, 404), path

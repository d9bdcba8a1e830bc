"""`tidepool node-key add|rotate|revoke` and `tidepool node-keys` against a real server (pytest-django's
live server, a staff token): the key printed once, alone on stdout; the old key refused after a rotation."""

from __future__ import annotations

import json

import pytest

from scheduler.models import NodeKey
from scheduler.services.node_keys import NodeKeyRejected, node_key_authenticate
from scheduler.services.tokens import token_create
from tests.factories import UserFactory
from tidepool_cli.parser import run


@pytest.fixture
def staff_cli(live_server, tmp_path, monkeypatch, transactional_db):
    admin = UserFactory(username="admin", is_staff=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEPOOL_SERVER", live_server.url)
    monkeypatch.setenv("TIDEPOOL_TOKEN", token_create(user=admin, name="cli").secret)
    return live_server


def test_add_rotate_revoke_and_list_through_the_cli(staff_cli, capsys) -> None:
    assert run(["node-key", "add", "gpu-03"]) == 0
    out, err = capsys.readouterr()
    first = out.strip()
    assert first.startswith("tpn_") and "shown this once" in err
    assert node_key_authenticate(first).node_name == "gpu-03"

    assert run(["node-keys"]) == 0
    listed = capsys.readouterr().out
    assert "gpu-03" in listed and NodeKey.objects.get().prefix in listed and "live" in listed
    assert first not in listed

    assert run(["node-key", "rotate", "gpu-03", "-o", "json"]) == 0
    second = json.loads(capsys.readouterr().out)["key"]
    assert second != first and node_key_authenticate(second).node_name == "gpu-03"
    with pytest.raises(NodeKeyRejected):
        node_key_authenticate(first)

    assert run(["node-key", "revoke", "gpu-03"]) == 0
    assert "revoked" in capsys.readouterr().out
    with pytest.raises(NodeKeyRejected):
        node_key_authenticate(second)


def test_the_cli_says_why_an_add_is_refused(staff_cli, capsys) -> None:
    assert run(["node-key", "add", "gpu-03"]) == 0
    capsys.readouterr()
    assert run(["node-key", "add", "gpu-03"]) == 1
    assert "already has a key" in capsys.readouterr().err
    assert run(["node-key", "revoke", "gpu-99"]) == 1
    assert "no live key" in capsys.readouterr().err

"""The node agent's settings (scheduler/node/remote/config.py): a node holds its key and the console's
URL, and the agent refuses to start with any control-plane credential in its environment; the agent
imports no Django (so nothing on the node could read the database even by accident)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.node.remote.config import FORBIDDEN, AgentConfigError, config_from_env

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"TIDEPOOL_CONSOLE_URL": "https://tidepool.example.com/", "TIDEPOOL_NODE_KEY": "tpn_abcd1234_x"}


def test_the_key_and_the_url_are_enough() -> None:
    config = config_from_env(GOOD)
    assert (config.console_url, config.node_key, config.pod_runtime, config.gpus) == (
        "https://tidepool.example.com", "tpn_abcd1234_x", "host", None)


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_control_plane_credential_in_the_environment_is_refused_by_name(name: str) -> None:
    with pytest.raises(AgentConfigError, match=f"{name} is set: a node agent holds only its node's key"):
        config_from_env({**GOOD, name: "postgres://x"})


@pytest.mark.parametrize("env, named", [
    ({"TIDEPOOL_NODE_KEY": "tpn_x"}, "TIDEPOOL_CONSOLE_URL"),
    ({**GOOD, "TIDEPOOL_CONSOLE_URL": "ftp://x"}, "TIDEPOOL_CONSOLE_URL"),
    ({**GOOD, "TIDEPOOL_NODE_KEY": "tp_personal_token"}, "TIDEPOOL_NODE_KEY"),
    ({**GOOD, "TIDEPOOL_NODE_GPUS": "８"}, "TIDEPOOL_NODE_GPUS"),
    ({**GOOD, "TIDEPOOL_POD_RUNTIME": "docker"}, "TIDEPOOL_POD_RUNTIME"),
    ({**GOOD, "TIDEPOOL_POD_UID": "0"}, "TIDEPOOL_POD_UID"),
    ({**GOOD, "TIDEPOOL_AGENT_POLL_SECONDS": "0"}, "TIDEPOOL_AGENT_POLL_SECONDS"),
])
def test_a_bad_setting_is_named(env: dict[str, str], named: str) -> None:
    with pytest.raises(AgentConfigError, match=named):
        config_from_env(env)


def test_the_agent_process_refuses_to_start_with_the_database_url() -> None:
    env = {"PATH": "/usr/bin:/bin", **GOOD, "DATABASE_URL": "postgres://postgres@127.0.0.1/tidepool"}
    ran = subprocess.run([sys.executable, "-m", "scheduler.node.remote"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 2
    assert "DATABASE_URL is set: a node agent holds only its node's key" in ran.stderr


def test_importing_the_agent_loads_no_django() -> None:
    code = "import sys, scheduler.node.remote.agent, scheduler.node.remote.__main__; print('django' in sys.modules)"
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"

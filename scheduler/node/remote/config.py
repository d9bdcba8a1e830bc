"""The node agent's settings, from its environment (docs/operations.md, "Adding a node").

The agent holds its node's key (TIDEPOOL_NODE_KEY) and the console's URL (TIDEPOOL_CONSOLE_URL),
and nothing of the control plane: an environment that carries DATABASE_URL, SECRET_KEY, REDIS_URL,
a broker URL or a personal API token is refused at start, naming the variable, so that a node set up
by copying the console's environment fails loudly instead of holding the keys of the cluster.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

# Control-plane credentials a node must never hold (DESIGN §6).
FORBIDDEN = ("DATABASE_URL", "SECRET_KEY", "DJANGO_SECRET_KEY", "REDIS_URL", "CELERY_BROKER_URL", "BROKER_URL",
             "TIDEPOOL_BROKER_URL", "TIDEPOOL_TOKEN", "PGPASSWORD")


class AgentConfigError(Exception):
    """A setting is missing or wrong; the message names it and says what to do."""


@dataclass(frozen=True)
class AgentConfig:
    console_url: str  # e.g. https://tidepool.example.com (nginx in front of the console)
    node_key: str
    gpus: int | None  # None: detect with NVML
    gpu_type: str
    cpu: int | None  # None: this host's
    memory_gib: int | None
    resource_type: str
    address: str
    pod_runtime: str  # host | podman
    poll_s: float | None  # None: the console's TIDEPOOL_RECONCILE_SECONDS
    ca_file: str  # a CA bundle for an https console with its own CA ("": the system's)
    log_address: str = "127.0.0.1"  # where the log server listens (the console asks it: log_tickets.py)
    log_port: int = 0  # 0: any free port (registered with the console)
    pod_image: str = ""
    pod_pull: str = "missing"
    pod_registry: str = ""
    pod_registry_auth_file: str = ""
    pod_uid: int = 65534
    pod_pids_limit: int = 4096
    pod_default_memory_gib: float = 4.0
    pod_network: str = "job"
    pod_subnets: str = "10.213.0.0/16"
    pod_blocked_networks: tuple[str, ...] = ()
    pod_cluster_network: str = "10.213.0.0/16"  # routed: every node's pod subnet lies in it
    podman: str = "podman"
    pod_oci_runtime: str = "runc"


def _int(env: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or int(text) < minimum:
        raise AgentConfigError(f"{name}={text!r}: a whole number of at least {minimum}, in ASCII digits.")
    return int(text)


def _port(env: Mapping[str, str], name: str) -> int:
    port = _int(env, name) or 0
    if port > 65535:
        raise AgentConfigError(f"{name}={port}: a TCP port (1-65535), or 0 for any free one.")
    return port


def _float(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise AgentConfigError(f"{name}={text!r}: a number of seconds, e.g. 2 or 0.5.") from None
    if not 0 < value < 3600:
        raise AgentConfigError(f"{name}={text!r}: above 0 and below 3600.")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env.get(name, "").strip() or default
    if value not in choices:
        raise AgentConfigError(f"{name}={value!r}: use {' or '.join(repr(c) for c in choices)}.")
    return value


def config_from_env(env: Mapping[str, str]) -> AgentConfig:
    """The agent's settings from `env`; raises AgentConfigError naming the first problem."""
    held = [name for name in FORBIDDEN if env.get(name)]
    if held:
        raise AgentConfigError(f"{', '.join(held)} {'is' if len(held) == 1 else 'are'} set: a node agent holds only its "
                               "node's key (TIDEPOOL_NODE_KEY) and the console's URL (DESIGN §6). Unset "
                               f"{'it' if len(held) == 1 else 'them'} in the agent's environment.")
    url = env.get("TIDEPOOL_CONSOLE_URL", "").strip().rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise AgentConfigError(f"TIDEPOOL_CONSOLE_URL={url!r}: the console's URL, e.g. https://tidepool.example.com.")
    key = env.get("TIDEPOOL_NODE_KEY", "").strip()
    if not key.startswith("tpn_"):
        raise AgentConfigError("TIDEPOOL_NODE_KEY is not a node key (tpn_…): staff add the node on the console's "
                               "Nodes → Node keys (or `tidepool node-key add <node>`) and give its key to the agent.")
    uid = _int(env, "TIDEPOOL_POD_UID", minimum=1)
    return AgentConfig(
        console_url=url,
        node_key=key,
        gpus=_int(env, "TIDEPOOL_NODE_GPUS"),
        gpu_type=env.get("TIDEPOOL_NODE_GPU_TYPE", "").strip(),
        cpu=_int(env, "TIDEPOOL_NODE_CPU"),
        memory_gib=_int(env, "TIDEPOOL_NODE_MEMORY_GIB"),
        resource_type=_choice(env, "TIDEPOOL_NODE_RESOURCE_TYPE", "general", ("general", "lingjun")),
        address=env.get("TIDEPOOL_NODE_ADDRESS", "127.0.0.1").strip(),
        pod_runtime=_choice(env, "TIDEPOOL_POD_RUNTIME", "host", ("host", "podman")),
        poll_s=_float(env, "TIDEPOOL_AGENT_POLL_SECONDS", None),
        ca_file=env.get("TIDEPOOL_CONSOLE_CA_FILE", "").strip(),
        log_address=(env.get("TIDEPOOL_NODE_LOG_ADDRESS", "").strip()
                     or env.get("TIDEPOOL_NODE_ADDRESS", "").strip() or "127.0.0.1"),
        log_port=_port(env, "TIDEPOOL_NODE_LOG_PORT"),
        pod_image=env.get("TIDEPOOL_POD_IMAGE", "").strip(),
        pod_pull=_choice(env, "TIDEPOOL_POD_PULL", "missing", ("always", "missing", "never")),
        pod_registry=env.get("TIDEPOOL_POD_REGISTRY", "").strip().rstrip("/"),
        pod_registry_auth_file=env.get("TIDEPOOL_POD_REGISTRY_AUTH_FILE", "").strip(),
        pod_uid=uid if uid is not None else 65534,
        pod_pids_limit=_int(env, "TIDEPOOL_POD_PIDS_LIMIT", minimum=1) or 4096,
        pod_default_memory_gib=float(env.get("TIDEPOOL_POD_DEFAULT_MEMORY_GIB", "").strip() or 4),
        pod_network=_choice(env, "TIDEPOOL_POD_NETWORK", "job", ("job", "routed", "none")),
        pod_subnets=env.get("TIDEPOOL_POD_SUBNETS", "").strip() or "10.213.0.0/16",
        pod_blocked_networks=tuple(part.strip() for part in env.get("TIDEPOOL_POD_BLOCKED_NETWORKS", "").split(",")
                                   if part.strip()),
        pod_cluster_network=env.get("TIDEPOOL_POD_CLUSTER_NETWORK", "").strip() or "10.213.0.0/16",
        podman=env.get("TIDEPOOL_PODMAN", "").strip() or "podman",
        pod_oci_runtime=env.get("TIDEPOOL_POD_OCI_RUNTIME", "").strip() or "runc",
    )

"""The pods' network (DESIGN §6): each job its own bridge, none of them a way to the control plane.

- **One Podman network per job** (`tidepool-job-<uid>`), a /24 taken from TIDEPOOL_POD_SUBNETS
  (default 10.213.0.0/16), created `isolate=true`: the pods of one job reach each other (by
  container name through the network's DNS: MASTER_ADDR is rank 0's container name), pods of
  different jobs do not. It is removed when its last container on this host is gone.
- **A firewall in front of the host** (nftables table `inet tidepool_pods`): nothing from a pod
  subnet reaches any address of the host itself (loopback is the pod's own anyway; the bridge's
  gateway, the host's other addresses and every port on them are dropped), except DNS (53) of the
  network's resolver and replies to connections the host opened. The addresses an operator lists in
  TIDEPOOL_POD_BLOCKED_NETWORKS (the database, broker and console hosts of a multi-host cluster)
  are dropped on the way out too.
Pure Python, no Django. Limits: docs/runtime.md ("The pods' network").
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

FIREWALL_TABLE = "tidepool_pods"
NETWORK_PREFIX = "tidepool-job-"


class NetworkError(RuntimeError):
    """A pod network or the firewall could not be set up; the message says why."""


@dataclass(frozen=True)
class NetworkConfig:
    mode: str = "job"  # job: a bridge per job behind the firewall | none: no network at all
    subnet_pool: str = "10.213.0.0/16"
    blocked_networks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("job", "none"):
            raise ValueError(f"pod network mode {self.mode!r}: use 'job' or 'none'")
        pool = ipaddress.ip_network(self.subnet_pool)  # raises ValueError on a bad pool
        if pool.version != 4 or pool.prefixlen > 24:
            raise ValueError(f"pod subnet pool {self.subnet_pool}: an IPv4 network of /24 or larger is needed")
        for network in self.blocked_networks:
            ipaddress.ip_network(network, strict=False)


def firewall_rules(config: NetworkConfig) -> str:
    """The nftables script (idempotent: the table is replaced as a whole)."""
    pool = config.subnet_pool
    lines = [
        f"table inet {FIREWALL_TABLE} {{}}",
        f"delete table inet {FIREWALL_TABLE}",
        f"table inet {FIREWALL_TABLE} {{",
        "  chain input {",
        "    type filter hook input priority -10; policy accept;",
        f"    ip saddr {pool} meta l4proto {{ tcp, udp }} th dport 53 accept",
        f"    ip saddr {pool} ct state established,related accept",
        f"    ip saddr {pool} counter drop",
        "  }",
    ]
    blocked = [str(ipaddress.ip_network(n, strict=False)) for n in config.blocked_networks]
    if blocked:
        lines += [
            "  chain forward {",
            "    type filter hook forward priority -10; policy accept;",
            f"    ip saddr {pool} ip daddr {{ {', '.join(blocked)} }} counter drop",
            "  }",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def install_pod_firewall(config: NetworkConfig) -> None:
    """Install (or replace) the table; raises NetworkError where nftables cannot be used."""
    nft = shutil.which("nft") or ("/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else None)
    if nft is None:
        raise NetworkError("nft is not installed (apt-get install -y nftables)")
    result = subprocess.run([nft, "-f", "-"], input=firewall_rules(config), capture_output=True, text=True,
                            timeout=30)
    if result.returncode != 0:
        raise NetworkError(f"nft refused the pod firewall: {result.stderr.strip()}")


class JobNetworks:
    """Creates a job's network on first use and removes it when its last container is gone."""

    def __init__(self, podman: list[str], config: NetworkConfig) -> None:
        self._podman = podman
        self._config = config
        self._lock = threading.Lock()

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._podman, *args], capture_output=True, text=True, timeout=60)

    def _used_subnets(self) -> set[ipaddress.IPv4Network]:
        result = self._run("network", "ls", "--format", "json")
        used = set()
        try:
            for network in json.loads(result.stdout or "[]"):
                for subnet in network.get("subnets") or []:
                    net = ipaddress.ip_network(subnet.get("subnet", ""), strict=False)
                    if net.version == 4:
                        used.add(net)
        except (ValueError, AttributeError, TypeError):
            pass
        return used

    def ensure(self, job_key: str) -> str:
        """The job's network name, created if missing. Raises NetworkError."""
        name = NETWORK_PREFIX + job_key
        with self._lock:
            if self._run("network", "exists", name).returncode == 0:
                return name
            pool = ipaddress.ip_network(self._config.subnet_pool)
            for _try in range(8):  # another worker of this host may take the same subnet meanwhile
                used = self._used_subnets()
                free = next((s for s in pool.subnets(new_prefix=24) if not any(s.overlaps(u) for u in used)), None)
                if free is None:
                    raise NetworkError(f"no free /24 left in the pod subnet pool {pool}")
                result = self._run("network", "create", "--subnet", str(free), "--opt", "isolate=true",
                                   "--label", "tidepool.job", name)
                if result.returncode == 0:
                    return name
                if self._run("network", "exists", name).returncode == 0:
                    return name  # created by a sibling pod's worker
                log.info("network %s on %s not created (%s); retrying", name, free, result.stderr.strip())
            raise NetworkError(f"podman network create {name} failed: {result.stderr.strip()}")

    def release(self, name: str) -> None:
        """Remove the network unless a container still uses it (then its last one removes it)."""
        with self._lock:
            result = self._run("network", "rm", name)
            if result.returncode != 0 and "in use" not in result.stderr and "not found" not in result.stderr:
                log.info("network %s kept: %s", name, result.stderr.strip())

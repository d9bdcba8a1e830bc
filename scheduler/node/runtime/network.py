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

`routed` (TIDEPOOL_POD_NETWORK=routed; a job's pods on several hosts) instead: **one bridge per node**
(`tidepool-pods-<subnet>`) on the node's own pod subnet (TIDEPOOL_POD_SUBNETS, a part of
TIDEPOOL_POD_CLUSTER_NETWORK no other node has), each pod at the address the console chose for it
(`--ip`; MASTER_ADDR is rank 0's), **host-gw routes** to the subnets of the other nodes of its job via
their addresses, and the firewall lets one pod reach another only when both are pods of the same job
attempt (an nftables set of address pairs, kept by `RoutedPods`, checked on the bridge and where
traffic is routed; pod-to-pod traffic is not NATed, so the receiving node checks the real source
too). The rest of the walls are the same: nothing of the host, nothing of the blocked networks.
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


ROUTED_TABLE = "tidepool_pods_bridged"  # the bridge family's table of the routed mode
NETWORK_MODES = ("job", "routed", "none")


@dataclass(frozen=True)
class NetworkConfig:
    # job: a bridge per job behind the firewall | routed: a bridge per node, routed between nodes |
    # none: no network at all
    mode: str = "job"
    subnet_pool: str = "10.213.0.0/16"  # job: the pool of the jobs' /24s; routed: this node's pod subnet
    blocked_networks: tuple[str, ...] = ()
    cluster_network: str = "10.213.0.0/16"  # routed: every node's pod subnet lies in it

    def __post_init__(self) -> None:
        if self.mode not in NETWORK_MODES:
            raise ValueError(f"pod network mode {self.mode!r}: use 'job', 'routed' or 'none'")
        pool = ipaddress.ip_network(self.subnet_pool)  # raises ValueError on a bad pool
        if self.mode == "routed":
            cluster = ipaddress.ip_network(self.cluster_network)
            if pool.version != 4 or pool.prefixlen > 29 or not pool.subnet_of(cluster):  # type: ignore[arg-type]
                raise ValueError(f"this node's pod subnet {self.subnet_pool} must be an IPv4 network of /29 or larger "
                                 f"inside the pod cluster network {self.cluster_network} (TIDEPOOL_POD_SUBNETS, "
                                 "TIDEPOOL_POD_CLUSTER_NETWORK)")
        elif pool.version != 4 or pool.prefixlen > 24:
            raise ValueError(f"pod subnet pool {self.subnet_pool}: an IPv4 network of /24 or larger is needed")
        for network in self.blocked_networks:
            ipaddress.ip_network(network, strict=False)

    @property
    def pods_network(self) -> str:
        """Every address a pod may have: the node's pool (job mode) or the whole cluster's (routed)."""
        return self.cluster_network if self.mode == "routed" else self.subnet_pool


def firewall_rules(config: NetworkConfig) -> str:
    """The nftables script (idempotent: the tables are replaced as a whole)."""
    pool = config.pods_network
    routed = config.mode == "routed"
    lines = [
        f"table inet {FIREWALL_TABLE} {{}}",
        f"delete table inet {FIREWALL_TABLE}",
        f"table inet {FIREWALL_TABLE} {{",
    ]
    if routed:
        lines += [
            "  set peers { type ipv4_addr . ipv4_addr; }",  # (from, to) pairs of pods of one attempt
            "  chain untracked {",  # pod to pod is never NATed: the receiving node sees who sent it
            "    type filter hook prerouting priority -300; policy accept;",
            f"    ip saddr {pool} ip daddr {pool} notrack",
            "  }",
        ]
    lines += [
        "  chain input {",
        "    type filter hook input priority -10; policy accept;",
        f"    ip saddr {pool} meta l4proto {{ tcp, udp }} th dport 53 accept",
        f"    ip saddr {pool} ct state established,related accept",
        f"    ip saddr {pool} counter drop",
        "  }",
    ]
    blocked = [str(ipaddress.ip_network(n, strict=False)) for n in config.blocked_networks]
    if blocked or routed:
        lines += [
            "  chain forward {",
            "    type filter hook forward priority -10; policy accept;",
        ]
        if routed:
            lines += [f"    ip saddr {pool} ip daddr {pool} ip saddr . ip daddr @peers accept",
                      f"    ip daddr {pool} ct state established,related accept",  # replies from outside
                      f"    ip daddr {pool} counter drop"]  # other jobs' pods, and anything not a pod of ours
        if blocked:
            lines.append(f"    ip saddr {pool} ip daddr {{ {', '.join(blocked)} }} counter drop")
        lines.append("  }")
    lines.append("}")
    if routed:
        # Two pods of one node talk over its bridge: without br_netfilter the inet hooks never see it.
        lines += [
            f"table bridge {ROUTED_TABLE} {{}}",
            f"delete table bridge {ROUTED_TABLE}",
            f"table bridge {ROUTED_TABLE} {{",
            "  set peers { type ipv4_addr . ipv4_addr; }",
            "  chain forward {",
            "    type filter hook forward priority -10; policy accept;",
            f"    ip saddr {pool} ip daddr {pool} ip saddr . ip daddr @peers accept",
            f"    ip saddr {pool} ip daddr {pool} counter drop",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


def _nft() -> str:
    nft = shutil.which("nft") or ("/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else None)
    if nft is None:
        raise NetworkError("nft is not installed (apt-get install -y nftables)")
    return nft


def _run_nft(script: str) -> None:
    result = subprocess.run([_nft(), "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise NetworkError(f"nft refused the pod firewall: {result.stderr.strip()}")


def install_pod_firewall(config: NetworkConfig) -> None:
    """Install (or replace) the table; raises NetworkError where nftables cannot be used."""
    _run_nft(firewall_rules(config))


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


def peer_pairs(own: str, peers: tuple[str, ...]) -> set[tuple[str, str]]:
    """Both directions between a pod and each other pod of its attempt."""
    return {pair for peer in peers if peer != own for pair in ((own, peer), (peer, own))}


def peers_script(add: set[tuple[str, str]], remove: set[tuple[str, str]]) -> str:
    """nft commands adding and removing (from, to) pairs in both routed tables' sets."""
    lines = []
    for family, table in (("inet", FIREWALL_TABLE), ("bridge", ROUTED_TABLE)):
        if remove:
            elements = ", ".join(f"{a} . {b}" for a, b in sorted(remove))
            lines.append(f"delete element {family} {table} peers {{ {elements} }}")
        if add:
            elements = ", ".join(f"{a} . {b}" for a, b in sorted(add))
            lines.append(f"add element {family} {table} peers {{ {elements} }}")
    return "\n".join(lines) + "\n" if lines else ""


def node_network_name(subnet: str) -> str:
    return "tidepool-pods-" + subnet.replace(".", "-").replace("/", "-")


class RoutedPods:
    """The routed mode's node side: the node's bridge, the routes to the other nodes of each job, and
    which pods may reach which (pairs of addresses, per pod, added at its start and removed at its end)."""

    def __init__(self, podman: list[str], config: NetworkConfig) -> None:
        self._podman = podman
        self._config = config
        self._lock = threading.Lock()
        self._pairs: dict[tuple[int, int], set[tuple[str, str]]] = {}  # (pod, attempt) -> its pairs
        self._routes: dict[str, str] = {}  # subnet -> via, as installed by this process
        self.name = node_network_name(config.subnet_pool)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._podman, *args], capture_output=True, text=True, timeout=60)

    def ensure(self) -> str:
        """The node's network, created if missing. Raises NetworkError. DNS is off: pods meet by
        address, and a resolver would serve from whichever host's namespace started it first."""
        with self._lock:
            if self._run("network", "exists", self.name).returncode == 0:
                return self.name
            result = self._run("network", "create", "--subnet", self._config.subnet_pool, "--disable-dns",
                               "--label", "tidepool.node", self.name)
            if result.returncode != 0 and self._run("network", "exists", self.name).returncode != 0:
                raise NetworkError(f"podman network create {self.name} failed: {result.stderr.strip()}")
            return self.name

    def connect(self, key: tuple[int, int], own: str, peers: tuple[str, ...],
                routes: tuple[tuple[str, str], ...]) -> None:
        """Routes to the other nodes' subnets and the pod's pairs, as its spec gives them now (called at
        start, at adoption and on every pass: an elastic job's peers change). Raises NetworkError."""
        with self._lock:
            for subnet, via in routes:
                if subnet == self._config.subnet_pool or not via or self._routes.get(subnet) == via:
                    continue
                self._route(subnet, via)
            wanted = peer_pairs(own, peers)
            had = self._pairs.get(key, set())
            if wanted != had:
                # A pair another pod of this node also holds (two pods of one attempt here) stays.
                others = set().union(*(p for k, p in self._pairs.items() if k != key))
                script = peers_script(wanted - had - others, had - wanted - others)
                if script:
                    _run_nft(script)
                self._pairs[key] = wanted

    def disconnect(self, key: tuple[int, int]) -> None:
        """The pod is gone: its pairs go (its address may be given to another job's pod next)."""
        with self._lock:
            had = self._pairs.pop(key, set())
            others = set().union(*self._pairs.values()) if self._pairs else set()
            script = peers_script(set(), had - others)
            if script:
                try:
                    _run_nft(script)
                except NetworkError as error:
                    log.warning("pod %s: its firewall pairs stay: %s", key, error)

    def _route(self, subnet: str, via: str) -> None:
        ip = shutil.which("ip") or "/usr/sbin/ip"
        result = subprocess.run([ip, "route", "replace", subnet, "via", via], capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise NetworkError(f"could not route the pod subnet {subnet} via {via}: {result.stderr.strip()}")
        self._routes[subnet] = via

"""Host-process pods of a job spread over hosts name the interface towards rank 0 for gloo and NCCL
(GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME): without it gloo binds the address the host name resolves
to, 127.0.1.1 on a stock Debian host, and peers on other hosts cannot connect."""

from __future__ import annotations

import fcntl
import json
import socket
import struct
from pathlib import Path

import pytest

from scheduler.node.runtime.sandbox import interconnect_environment, interface_towards


def non_loopback_ipv4() -> tuple[str, str] | None:
    """(interface, address) of some IPv4 interface of this host other than loopback."""
    for _index, name in socket.if_nameindex():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as query:
                answer = fcntl.ioctl(query.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            continue
        address = socket.inet_ntoa(answer[20:24])
        if not address.startswith("127."):
            return name, address
    return None


HOST = non_loopback_ipv4()
needs_interface = pytest.mark.skipif(HOST is None, reason="this host has no IPv4 interface besides loopback")


def test_the_interface_towards_an_address_is_the_routing_tables_choice() -> None:
    assert interface_towards("127.0.0.1") == "lo"
    assert interface_towards("not an address, nor a host name!") is None
    if HOST is not None:
        assert interface_towards(HOST[1]) == HOST[0]  # rank 0 on this host: its own address's interface


@needs_interface
def test_only_a_job_over_hosts_gets_the_variables_and_its_own_setting_wins(pods) -> None:
    name, address = HOST  # type: ignore[misc]
    spread = pods.spec("true", rank=1, world_size=2, master_addr=address)
    assert interconnect_environment(spread) == {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name}
    assert interconnect_environment(pods.spec("true", world_size=1, master_addr=address)) == {}
    assert interconnect_environment(pods.spec("true", world_size=2, master_addr="127.0.0.1")) == {}
    own = pods.spec("true", rank=1, world_size=2, master_addr=address, env={"GLOO_SOCKET_IFNAME": "ib0"})
    assert interconnect_environment(own) == {"NCCL_SOCKET_IFNAME": name}


@needs_interface
def test_a_host_pod_of_a_job_over_hosts_sees_them(pods) -> None:
    name, address = HOST  # type: ignore[misc]
    script = pods.root / "dump_env.py"
    script.write_text("import json, os\njson.dump(dict(os.environ), open('env.json', 'w'))\n")
    spec = pods.spec(pods.python(script), rank=1, world_size=2, master_addr=address,
                     env={"NCCL_SOCKET_IFNAME": "=eth9"})
    pods.start(spec)
    assert pods.wait_exit(spec).outcome == "succeeded"
    env = json.loads((Path(spec.workdir) / "env.json").read_text())
    assert env["GLOO_SOCKET_IFNAME"] == name and env["NCCL_SOCKET_IFNAME"] == "=eth9"

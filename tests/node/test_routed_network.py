"""The routed pod network's console side (issue 22, docs/runtime.md "Across hosts"): each node registers its
own pod subnet, the console gives every pod of an attempt an address in its node's subnet before any of
them starts, MASTER_ADDR is rank 0's pod address, and the spec names the pod's peers and the routes to the
other nodes. The node side's rules are checked as text here and for real in tests/multihost."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from scheduler.api.node.views import desired_pod
from scheduler.models import Node, Pod
from scheduler.node.addresses import NoFreeAddress, attempt_pod_addresses, choose_address
from scheduler.node.runtime.network import NetworkConfig, firewall_rules, peer_pairs, peers_script
from scheduler.node.specs import pod_spec
from scheduler.services.node_keys import node_key_create
from scheduler.states import PodStatus
from tests.factories import JobFactory, NodeFactory, World, make_running

pytestmark = pytest.mark.django_db

CLIENTS: dict[str, Client] = {}
INVENTORY = {"agent": "host-a:100:1", "gpu_type": "A100", "gpu_count": 8, "cpu": 96, "memory_gib": 768}


def register(node_name: str, **extra: Any):
    if node_name not in CLIENTS:
        CLIENTS[node_name] = Client(HTTP_AUTHORIZATION=f"Bearer {node_key_create(node_name=node_name).secret}")
    return CLIENTS[node_name].post("/api/node/v1/register/", {**INVENTORY, **extra}, content_type="application/json")


def routed_nodes(world: World) -> tuple[Node, Node]:
    for node, subnet, address in ((world.gpu1, "10.213.1.0/24", "10.0.0.1"), (world.gpu2, "10.213.2.0/24", "10.0.0.2")):
        node.pod_subnet, node.address = subnet, address
        node.save()
    return world.gpu1, world.gpu2


def two_node_job(world: World, first: Node, second: Node) -> list[Pod]:
    """A 2-pod job with rank 0 on `first` and rank 1 on `second`."""
    job = JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"pod_count": 2, "gpus": 4}])
    pods = make_running(job, first)
    Pod.objects.filter(pk=pods[1].pk).update(node=second)
    return list(Pod.objects.select_related("node", "job").filter(job=job).order_by("rank"))


def test_each_node_registers_its_own_pod_subnet_and_an_overlapping_one_is_refused(world: World) -> None:
    CLIENTS.clear()
    assert register("gpu-01", address="10.0.0.1", pod_subnet="10.213.1.0/24").status_code == 200
    assert Node.objects.get(name="gpu-01").pod_subnet == "10.213.1.0/24"
    answer = register("gpu-02", address="10.0.0.2", pod_subnet="10.213.1.128/25")
    assert answer.status_code == 400
    assert "overlaps node gpu-01's (10.213.1.0/24)" in answer.json()["pod_subnet"][0]
    assert "TIDEPOOL_POD_SUBNETS" in answer.json()["pod_subnet"][0]
    assert Node.objects.get(name="gpu-02").pod_subnet == ""  # nothing changed
    for bad in ("10.213.2.1/24", "fd00::/64", "10.213.2.0/30", "ten"):
        answer = register("gpu-02", address="10.0.0.2", pod_subnet=bad)
        assert answer.status_code == 400 and "pod_subnet" in answer.json(), (bad, answer.content)
    assert register("gpu-02", address="10.0.0.2", pod_subnet="10.213.2.0/24").status_code == 200
    # An agent that no longer runs a routed network says so: its subnet is given back.
    assert register("gpu-02", agent="host-a:100:1", address="10.0.0.2", pod_subnet="").status_code == 200
    assert Node.objects.get(name="gpu-02").pod_subnet == ""


def test_an_attempts_pods_get_addresses_in_their_nodes_subnets_and_rank_0s_is_master_addr(world: World) -> None:
    gpu1, gpu2 = routed_nodes(world)
    rank0, rank1 = two_node_job(world, gpu1, gpu2)
    spec1 = pod_spec(rank1, rank1.job, world_size=2, master_addr="10.0.0.1")
    assert (spec1.pod_address, spec1.master_addr) == ("10.213.2.2", "10.213.1.2")  # .1 is each bridge's gateway
    assert spec1.peer_addresses == ("10.213.1.2", "10.213.2.2")
    assert spec1.routes == (("10.213.1.0/24", "10.0.0.1"), ("10.213.2.0/24", "10.0.0.2"))
    spec0 = pod_spec(rank0, rank0.job, world_size=2, master_addr="10.0.0.1")
    assert (spec0.pod_address, spec0.master_addr) == ("10.213.1.2", "10.213.1.2")  # chosen once, for both
    # Another job on gpu-01 gets the next address; an address comes free when its pod has ended.
    other = JobFactory(workspace=world.vision, quota=world.team_vision)
    other_pod = make_running(other, gpu1)[0]
    assert pod_spec(other_pod, other, world_size=1, master_addr="").pod_address == "10.213.1.3"
    # An ended pod's spec (adoption, a late report) keeps its address and rank 0's as MASTER_ADDR.
    Pod.objects.filter(pk=rank1.pk).update(status=PodStatus.SUCCEEDED)
    ended = Pod.objects.select_related("node", "job").get(pk=rank1.pk)
    spec_ended = pod_spec(ended, ended.job, world_size=2, master_addr="10.0.0.1")
    assert (spec_ended.pod_address, spec_ended.master_addr) == ("10.213.2.2", "10.213.1.2")
    Pod.objects.filter(pk=rank0.pk).update(status=PodStatus.SUCCEEDED)
    third = JobFactory(workspace=world.vision, quota=world.team_vision)
    assert pod_spec(make_running(third, gpu1)[0], third, world_size=1, master_addr="").pod_address == "10.213.1.2"


def test_the_node_api_gives_the_routed_fields_and_unrouted_nodes_are_left_as_they_were(world: World) -> None:
    gpu1, gpu2 = routed_nodes(world)
    rank0, rank1 = two_node_job(world, gpu1, gpu2)
    row = desired_pod(rank1, [rank0, rank1])
    assert row["spec"]["pod_address"] == "10.213.2.2" and row["spec"]["master_addr"] == "10.213.1.2"
    # A pod on a node without a pod subnet: its job is not routed; MASTER_ADDR stays rank 0's node's address.
    plain = NodeFactory(name="gpu-03", address="10.0.0.3")
    mixed0, mixed1 = two_node_job(world, gpu1, plain)
    assert attempt_pod_addresses([mixed0, mixed1]) is None
    spec = pod_spec(mixed1, mixed1.job, world_size=2, master_addr="10.0.0.1")
    assert (spec.pod_address, spec.master_addr, spec.peer_addresses, spec.routes) == ("", "10.0.0.1", (), ())


def test_a_full_subnet_refuses_the_pod_with_the_reason() -> None:
    assert choose_address("10.213.9.0/29", set()) == "10.213.9.2"
    used = {f"10.213.9.{i}" for i in range(2, 7)}
    with pytest.raises(NoFreeAddress, match="10.213.9.0/29 has no free address left"):
        choose_address("10.213.9.0/29", used)


def test_the_routed_firewall_lets_only_pairs_of_one_attempt_through() -> None:
    config = NetworkConfig(mode="routed", subnet_pool="10.213.1.0/24", cluster_network="10.213.0.0/16",
                           blocked_networks=("10.231.0.0/24",))
    rules = firewall_rules(config)
    assert "ip saddr 10.213.0.0/16 ip daddr 10.213.0.0/16 notrack" in rules  # pod to pod keeps its source
    assert "ip saddr 10.213.0.0/16 ip daddr 10.213.0.0/16 ip saddr . ip daddr @peers accept" in rules
    assert rules.index("@peers accept") < rules.index("ip daddr 10.213.0.0/16 counter drop")
    assert "ip saddr 10.213.0.0/16 counter drop" in rules  # nothing of the host
    assert "ip saddr 10.213.0.0/16 ip daddr { 10.231.0.0/24 } counter drop" in rules
    assert "table bridge tidepool_pods_bridged" in rules  # two pods of one node, over its bridge
    assert peer_pairs("10.213.1.2", ("10.213.1.2", "10.213.2.2")) == {("10.213.1.2", "10.213.2.2"),
                                                                     ("10.213.2.2", "10.213.1.2")}
    script = peers_script({("10.213.1.2", "10.213.2.2")}, set())
    assert "add element inet tidepool_pods peers { 10.213.1.2 . 10.213.2.2 }" in script
    assert "add element bridge tidepool_pods_bridged peers { 10.213.1.2 . 10.213.2.2 }" in script
    for bad in ({"subnet_pool": "10.214.1.0/24"}, {"subnet_pool": "10.213.1.0/30"}):
        with pytest.raises(ValueError, match="TIDEPOOL_POD_SUBNETS"):
            NetworkConfig(mode="routed", cluster_network="10.213.0.0/16", **bad)

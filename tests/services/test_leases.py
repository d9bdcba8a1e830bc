"""One live instance per role: leases, and orphan handling that needs one; a worker's own drain
is undone by its next registration, a person's cordon is not."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import InstanceLease, Node
from scheduler.node.orphans import release_orphaned_pods
from scheduler.services.leases import (
    _start_ticks,
    lease_acquire,
    lease_held,
    lease_renew,
    node_role,
    owner_is_dead,
    this_owner,
)
from scheduler.services.nodes import node_drain, node_register, node_set_schedulable

pytestmark = pytest.mark.django_db


def dead_owner() -> str:
    """The owner id a process of this host had, taken while it ran; the process has exited since."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    owner = f"{socket.gethostname()}:{process.pid}:{_start_ticks(process.pid)}"
    process.wait()
    return owner


def test_a_live_lease_is_refused_to_another_owner_and_renewed_by_its_own():
    ok, _ = lease_acquire(role="console:embedded", owner=this_owner())
    assert ok
    other = "elsewhere:1:1"  # another host: it cannot be proven dead from here
    refused, lease = lease_acquire(role="console:embedded", owner=other)
    assert not refused and lease.owner == this_owner()
    assert lease_renew(role="console:embedded", owner=this_owner())
    assert not lease_renew(role="console:embedded", owner=other)
    assert lease_held(role="console:embedded", owner=this_owner())


def test_an_expired_lease_or_a_dead_owner_is_taken_over():
    InstanceLease.objects.create(role="a", owner="elsewhere:1:1", expires_at=timezone.now() - timedelta(seconds=1),
                                 renewed_at=timezone.now())
    assert lease_acquire(role="a", owner=this_owner())[0]
    gone = dead_owner()
    assert owner_is_dead(gone) and not owner_is_dead(this_owner()) and not owner_is_dead("elsewhere:1:1")
    InstanceLease.objects.create(role="b", owner=gone, expires_at=timezone.now() + timedelta(hours=1),
                                 renewed_at=timezone.now())
    assert lease_acquire(role="b", owner=this_owner())[0]  # no need to wait for the expiry


def test_orphan_handling_refuses_without_the_nodes_lease():
    node = node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=8, memory_gib=64)
    InstanceLease.objects.create(role=node_role("gpu-1"), owner="elsewhere:1:1",
                                 expires_at=timezone.now() + timedelta(hours=1), renewed_at=timezone.now())
    with pytest.raises(ValueError, match="not held"):
        release_orphaned_pods(node=node, reason="x", owner=this_owner(), role=node_role("gpu-1"))


def register(name: str) -> Node:
    return node_register(name=name, gpu_type="A100", gpu_count=8, cpu=8, memory_gib=64, heartbeat=True)


def test_a_node_an_older_worker_drained_as_it_stopped_is_uncordoned_when_it_registers_again():
    node = register("gpu-1")  # before adoption, a stopping worker drained its node and marked it so
    Node.objects.filter(pk=node.pk).update(schedulable=False, draining=True, worker_drained=True)
    assert register("gpu-1").schedulable


def test_an_explicit_drain_survives_the_workers_registration():
    node = register("gpu-1")
    node_drain(node=node)
    assert not register("gpu-1").schedulable
    node = register("gpu-2")
    Node.objects.filter(pk=node.pk).update(schedulable=False, worker_drained=True)
    node_drain(node=Node.objects.get(pk=node.pk))  # a person drained it after an older worker's drain
    assert not register("gpu-2").schedulable
    node_set_schedulable(node=register("gpu-3"), schedulable=False)  # a person's cordon
    assert not register("gpu-3").schedulable

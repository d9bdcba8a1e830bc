"""One live instance per role: the embedded console ("console:embedded"), each node's worker
("node:<name>").

A lease is a row: role, owner id, expiry. Its owner renews it every third of
TIDEPOOL_LEASE_SECONDS (`LeaseKeeper`); another process may take it only once it has expired, or
at once when its owner is provably dead: an owner id names host, pid and the process's start
time, so a process on the same host that is gone (or whose pid was recycled) holds nothing.
Orphan handling (scheduler/node/orphans.py) runs only after its process took the lease, so a
second process never kills the first one's pods.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.utils import timezone

from scheduler.models import InstanceLease

log = logging.getLogger("tidepool.lease")

EMBEDDED_CONSOLE = "console:embedded"


def node_role(node_name: str) -> str:
    return f"node:{node_name}"


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[19].decode()
    except (OSError, IndexError):
        return None


def this_owner() -> str:
    """host:pid:start-time of this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid()) or '?'}"


def owner_is_dead(owner: str) -> bool:
    """True only when the owner ran on this host and its process is gone (or the pid was reused)."""
    host, _, rest = owner.partition(":")
    pid, _, ticks = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit() or ticks == "?":
        return False
    return _start_ticks(int(pid)) != ticks


@transaction.atomic
def lease_acquire(*, role: str, owner: str, seconds: float | None = None) -> tuple[bool, InstanceLease]:
    """Take or renew the lease. Returns (acquired, the lease row as it now stands)."""
    seconds = settings.TIDEPOOL_LEASE_SECONDS if seconds is None else seconds
    now = timezone.now()
    expires = now + timedelta(seconds=seconds)
    lease = InstanceLease.objects.select_for_update().filter(role=role).first()
    if lease is None:
        try:
            with transaction.atomic():
                return True, InstanceLease.objects.create(role=role, owner=owner, expires_at=expires, renewed_at=now)
        except IntegrityError:  # another process created it meanwhile
            lease = InstanceLease.objects.select_for_update().get(role=role)
    if lease.owner != owner and lease.expires_at > now and not owner_is_dead(lease.owner):
        return False, lease
    if lease.owner != owner:
        log.warning("lease %s taken over from %s (expired %s)", role, lease.owner, lease.expires_at.isoformat())
    lease.owner, lease.expires_at, lease.renewed_at = owner, expires, now
    lease.save(update_fields=["owner", "expires_at", "renewed_at"])
    return True, lease


def lease_renew(*, role: str, owner: str, seconds: float | None = None) -> bool:
    """Push the expiry forward; False when the lease is no longer this owner's."""
    seconds = settings.TIDEPOOL_LEASE_SECONDS if seconds is None else seconds
    now = timezone.now()
    return bool(InstanceLease.objects.filter(role=role, owner=owner).update(
        expires_at=now + timedelta(seconds=seconds), renewed_at=now))


def lease_held(*, role: str, owner: str) -> bool:
    return InstanceLease.objects.filter(role=role, owner=owner, expires_at__gt=timezone.now()).exists()


def lease_release(*, role: str, owner: str) -> None:
    InstanceLease.objects.filter(role=role, owner=owner).delete()


class LeaseKeeper:
    """Renews a held lease from a daemon thread every third of its duration.

    `on_lost` is called (once) when a renewal finds the lease taken by another owner; a renewal
    that fails because the database is unreachable is retried at the next beat.
    """

    def __init__(self, role: str, owner: str, on_lost: Callable[[], None] | None = None) -> None:
        self.role, self.owner = role, owner
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{role}", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(settings.TIDEPOOL_LEASE_SECONDS / 3):
            try:
                close_old_connections()
                if not lease_renew(role=self.role, owner=self.owner):
                    log.error("lease %s lost: another process owns it now", self.role)
                    if self._on_lost:
                        self._on_lost()
                    return
            except Exception:
                log.warning("could not renew lease %s; retrying", self.role, exc_info=True)
            finally:
                close_old_connections()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if release:
            try:
                lease_release(role=self.role, owner=self.owner)
            except Exception:
                log.warning("could not release lease %s", self.role, exc_info=True)

"""The embedded default in one process: the console (daphne), the scheduler loop and the local executor.

One embedded console per database: it takes the "console:embedded" lease before it touches any
pod, and refuses to start (exit status 1, a message naming the holder) while another live console
holds it, so a second console never kills the first one's pods as orphans.
"""

import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from scheduler.executors import get_executor
from scheduler.loop.runner import run_forever
from scheduler.node.orphans import release_demo_node_orphans
from scheduler.services.leases import EMBEDDED_CONSOLE, LeaseKeeper, lease_acquire, this_owner
from scheduler.services.lifecycle import local_nodes_release


class Command(BaseCommand):
    help = "Serve the console; with the embedded scheduler (default for the local executor) also schedule and run pods."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1")
        parser.add_argument("--port", default="8000")

    def handle(self, *args, addr, port, **options):
        stop = threading.Event()
        keeper = None
        if settings.TIDEPOOL_EMBEDDED_SCHEDULER:
            keeper = self._take_lease()
            counts = release_demo_node_orphans(owner=keeper.owner)
            if any(counts.values()):
                self.stdout.write(f"pods the previous console left: {counts}")
            executor = get_executor()
            executor.lease_owner = keeper.owner  # its reconcile acts only under this console's lease
            thread = threading.Thread(target=run_forever, args=(stop,), name="tidepool-scheduler", daemon=True)
            thread.start()
            self.stdout.write("embedded scheduler and local executor running")
        try:
            call_command("runserver", f"{addr}:{port}", use_reloader=False, use_threading=True)
        finally:
            stop.set()
            if keeper is not None:
                self._release_pods()
                keeper.stop(release=True)

    def _take_lease(self) -> LeaseKeeper:
        owner = this_owner()
        acquired, lease = lease_acquire(role=EMBEDDED_CONSOLE, owner=owner)
        if not acquired:
            raise CommandError(
                f"another Tidepool console with the embedded scheduler is running on this database "
                f"({lease.owner}, lease renewed until {lease.expires_at:%Y-%m-%d %H:%M:%S} UTC). "
                f"Stop it first; this one started nothing and touched no pod."
            )
        return LeaseKeeper(EMBEDDED_CONSOLE, owner, on_lost=self._lease_lost).start()

    def _lease_lost(self) -> None:
        self.stderr.write("the console lease was taken by another process: this console's pods may be killed")

    def _release_pods(self) -> None:
        """Pods are children of this process: preempt their jobs (checkpoint on SIGTERM) and wait for them."""
        count = local_nodes_release(reason="the console stopped: its local pods were preempted")
        self.stdout.write(f"stopping: {count} running job(s) preempted, waiting up to the grace period")
        executor = get_executor()
        if hasattr(executor, "shutdown"):
            executor.shutdown(grace_s=settings.TIDEPOOL_GRACE_SECONDS)

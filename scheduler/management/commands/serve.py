"""The embedded default in one process: the console (daphne), the scheduler loop and the local executor."""

import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from scheduler.executors import get_executor
from scheduler.loop.runner import run_forever
from scheduler.node.orphans import release_demo_node_orphans
from scheduler.services.lifecycle import local_nodes_release


class Command(BaseCommand):
    help = "Serve the console; with the embedded scheduler (default for the local executor) also schedule and run pods."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1")
        parser.add_argument("--port", default="8000")

    def handle(self, *args, addr, port, **options):
        stop = threading.Event()
        if settings.TIDEPOOL_EMBEDDED_SCHEDULER:
            release_demo_node_orphans()
            get_executor()
            thread = threading.Thread(target=run_forever, args=(stop,), name="tidepool-scheduler", daemon=True)
            thread.start()
            self.stdout.write("embedded scheduler and local executor running")
        try:
            call_command("runserver", f"{addr}:{port}", use_reloader=False, use_threading=True)
        finally:
            stop.set()
            if settings.TIDEPOOL_EMBEDDED_SCHEDULER:
                self._release_pods()

    def _release_pods(self) -> None:
        """Pods are children of this process: preempt their jobs (checkpoint on SIGTERM) and wait for them."""
        count = local_nodes_release(reason="the console stopped: its local pods were preempted")
        self.stdout.write(f"stopping: {count} running job(s) preempted, waiting up to the grace period")
        executor = get_executor()
        if hasattr(executor, "shutdown"):
            executor.shutdown(grace_s=settings.TIDEPOOL_GRACE_SECONDS)

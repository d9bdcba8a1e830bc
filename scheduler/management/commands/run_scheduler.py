import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from prometheus_client import start_http_server

from scheduler.loop.cycle import schedule_once
from scheduler.loop.runner import run_forever
from scheduler.metrics.cycle import CYCLE_REGISTRY


class Command(BaseCommand):
    help = "Run the scheduler loop (one leader per database; standbys wait on a PostgreSQL advisory lock)."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None, help="Seconds between cycles.")
        parser.add_argument("--once", action="store_true", help="Run one cycle and exit.")

    def handle(self, *args, interval=None, once=False, **options):
        if once:
            result = schedule_once()
            self.stdout.write(
                f"{result.admitted} admitted, {result.preempted} preempted, {result.nominated} nominated, "
                f"{result.promoted} promoted, {result.pending} pending in {result.seconds:.3f} s"
            )
            return
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if settings.TIDEPOOL_SCHEDULER_METRICS_PORT:  # the cycle histogram of this process (docs/metrics.md)
            start_http_server(settings.TIDEPOOL_SCHEDULER_METRICS_PORT, addr=settings.TIDEPOOL_SCHEDULER_METRICS_ADDR,
                              registry=CYCLE_REGISTRY)
        self.stdout.write("scheduler loop running (Ctrl-C to stop)")
        run_forever(stop, interval=interval)

"""`python manage.py simulate`: replay a trace under fifo / strict / idle / pool (scheduler/simulator/, docs/simulator.md)."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from scheduler.simulator.cli import SimulationError, add_arguments, run


class Command(BaseCommand):
    help = (
        "Replay a GPU-cluster trace in virtual time through the scheduling engine under each policy, at one "
        "scale or a sweep of scales; prints the figures (last line: one JSON object) and writes an HTML report. "
        "No database is used."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        quiet = options["quiet"]

        def write(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        def progress(line: str) -> None:
            if not quiet:
                self.stderr.write(line, style_func=lambda text: text)
                self.stderr.flush()

        try:
            run(options, write, progress)
        except SimulationError as exc:
            raise CommandError(str(exc)) from exc

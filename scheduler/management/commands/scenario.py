"""`manage.py scenario FILE...`: run scenario files (DESIGN §4) through the engine; no database needed."""

import sys

from django.core.management.base import BaseCommand

from scheduler.engine_tools.scenario import main


class Command(BaseCommand):
    help = (
        "Run one scheduling cycle per scenario file (YAML or JSON) and print the decisions as JSON. "
        "Exit 1 when a file's expect: block differs (the diff is printed), 2 when a file is malformed."
    )
    requires_system_checks: list[str] = []  # pure engine: runs without a configured database
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="scenario files (.yaml, .yml or .json)")

    def handle(self, *args, files, **options):
        code = main(files, self.stdout, self.stderr)
        if code:
            sys.exit(code)

from django.core.management.base import BaseCommand

from scheduler.demo import DEMO_USERS, seed_demo, seed_sample_jobs


class Command(BaseCommand):
    help = "Create (or refresh) the demo cluster: 2 pools, quota trees, workspaces and users. Idempotent."

    def add_arguments(self, parser):
        parser.add_argument(
            "--sample-jobs", action="store_true",
            help="also submit a few sample training jobs (examples/train_linear.py), once each",
        )

    def handle(self, *args, sample_jobs=False, **options):
        counts = seed_demo()
        self.stdout.write(self.style.SUCCESS("Demo cluster ready: " + ", ".join(f"{v} {k}" for k, v in counts.items())))
        for username, password, staff, _ in DEMO_USERS:
            self.stdout.write(f"  login {username} / {password}{' (staff)' if staff else ''}")
        if sample_jobs:
            created = seed_sample_jobs()
            self.stdout.write(f"Sample jobs submitted: {', '.join(created) or 'none (they exist already)'}")

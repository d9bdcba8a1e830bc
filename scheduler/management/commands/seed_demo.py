from django.core.management.base import BaseCommand

from scheduler.demo import DEMO_USERS, seed_demo


class Command(BaseCommand):
    help = "Create (or refresh) the demo cluster: 2 pools, quota trees, workspaces and users. Idempotent."

    def handle(self, *args, **options):
        counts = seed_demo()
        self.stdout.write(self.style.SUCCESS("Demo cluster ready: " + ", ".join(f"{v} {k}" for k, v in counts.items())))
        for username, password, staff, _ in DEMO_USERS:
            self.stdout.write(f"  login {username} / {password}{' (staff)' if staff else ''}")

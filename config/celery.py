"""The Celery app: node workers consume `node.<name>` queues (see scheduler/worker.py)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("tidepool")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["scheduler"])

# Node workers: the tasks and the remote-control command live here.
import scheduler.worker  # noqa: E402,F401

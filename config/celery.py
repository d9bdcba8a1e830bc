"""The Celery app, loaded with Django (config/__init__.py) so that every process sends through it.

Node workers (`celery -A config worker -Q node.<name>`) import the node's tasks and control
commands from `scheduler.node.tasks` (listed in `include`, loaded only by workers).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("tidepool", include=["scheduler.node.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")

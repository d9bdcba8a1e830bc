# The Celery app is loaded with Django, so that `run_scheduler` and the console send pod starts
# and terminations through Tidepool's broker (CELERY_BROKER_URL), not Celery's default.
from config.celery import app as celery_app

__all__ = ["celery_app"]

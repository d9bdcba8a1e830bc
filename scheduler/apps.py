from django.apps import AppConfig
from django.conf import settings


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Tidepool scheduler"

    def ready(self) -> None:
        from scheduler import executors

        executors.register_from_settings(settings.TIDEPOOL_EXECUTOR)

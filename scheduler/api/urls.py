"""/api/: the first REST API's paths, each answering 410 Gone naming its /api/v1/ replacement
(scheduler.api.gone). /api/v1/ is routed before this (config/urls.py); its unknown paths answer a JSON
404 (scheduler.api.v1.unknown)."""

from django.urls import re_path

from scheduler.api import gone

app_name = "api"

urlpatterns = [
    re_path(r"^(?!v1(?:/|$))(?P<old_path>.*)$", gone.removed, name="removed"),
]

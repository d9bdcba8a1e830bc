from django.urls import path

from console import consumers
from scheduler.validation import register_id_converter

register_id_converter()

websocket_urlpatterns = [
    path("ws/jobs/", consumers.JobListConsumer.as_asgi()),
    path("ws/jobs/<id:job_id>/", consumers.JobDetailConsumer.as_asgi()),
    path("ws/cluster/", consumers.ClusterConsumer.as_asgi()),
]

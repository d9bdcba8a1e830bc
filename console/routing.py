from django.urls import path

from console import consumers

websocket_urlpatterns = [
    path("ws/jobs/", consumers.JobListConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", consumers.JobDetailConsumer.as_asgi()),
    path("ws/cluster/", consumers.ClusterConsumer.as_asgi()),
]

from django.urls import path

from scheduler.api.node import views

app_name = "api-node"

urlpatterns = [
    path("register/", views.RegisterView.as_view(), name="register"),
    path("heartbeat/", views.HeartbeatView.as_view(), name="heartbeat"),
    path("release/", views.ReleaseView.as_view(), name="release"),
    path("pods/", views.PodsView.as_view(), name="pods"),
    path("pods/<int:pod_id>/report/", views.PodReportView.as_view(), name="pod_report"),
]

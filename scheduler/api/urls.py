from django.urls import path

from scheduler.api import views
from scheduler.validation import register_id_converter

register_id_converter()

app_name = "api"

urlpatterns = [
    path("", views.ApiRoot.as_view(), name="root"),
    path("jobs/", views.JobListView.as_view(), name="jobs"),
    path("jobs/<id:pk>/", views.JobDetailView.as_view(), name="job"),
    path("jobs/<id:pk>/stop/", views.JobActionView.as_view(action="stop"), name="job_stop"),
    path("jobs/<id:pk>/restart/", views.JobActionView.as_view(action="restart"), name="job_restart"),
    path("jobs/<id:pk>/log/", views.JobLogView.as_view(), name="job_log"),
    path("quotas/", views.QuotaListView.as_view(), name="quotas"),
    path("quotas/<id:pk>/", views.QuotaDetailView.as_view(), name="quota"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/<id:pk>/cordon/", views.NodeActionView.as_view(action="cordon"), name="node_cordon"),
    path("nodes/<id:pk>/uncordon/", views.NodeActionView.as_view(action="uncordon"), name="node_uncordon"),
    path("nodes/<id:pk>/drain/", views.NodeActionView.as_view(action="drain"), name="node_drain"),
    path("workspaces/", views.WorkspaceListView.as_view(), name="workspaces"),
]

from django.urls import path

from scheduler.api import views

app_name = "api"

urlpatterns = [
    path("", views.ApiRoot.as_view(), name="root"),
    path("jobs/", views.JobListView.as_view(), name="jobs"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="job"),
    path("jobs/<int:pk>/stop/", views.JobActionView.as_view(action="stop"), name="job_stop"),
    path("jobs/<int:pk>/restart/", views.JobActionView.as_view(action="restart"), name="job_restart"),
    path("jobs/<int:pk>/log/", views.JobLogView.as_view(), name="job_log"),
    path("quotas/", views.QuotaListView.as_view(), name="quotas"),
    path("quotas/<int:pk>/", views.QuotaDetailView.as_view(), name="quota"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/<int:pk>/cordon/", views.NodeActionView.as_view(action="cordon"), name="node_cordon"),
    path("nodes/<int:pk>/uncordon/", views.NodeActionView.as_view(action="uncordon"), name="node_uncordon"),
    path("nodes/<int:pk>/drain/", views.NodeActionView.as_view(action="drain"), name="node_drain"),
    path("workspaces/", views.WorkspaceListView.as_view(), name="workspaces"),
]

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from scheduler.api.v1 import cluster, node_keys, stream, unknown, views

app_name = "api-v1"

urlpatterns = [
    path("jobs/", views.JobListView.as_view(), name="jobs"),
    path("jobs/watch/", stream.watch, name="jobs_watch"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="job"),
    path("jobs/<int:pk>/stop/", views.JobActionView.as_view(action="stop"), name="job_stop"),
    path("jobs/<int:pk>/restart/", views.JobActionView.as_view(action="restart"), name="job_restart"),
    path("jobs/<int:pk>/clone/", views.JobCloneView.as_view(), name="job_clone"),
    path("jobs/<int:pk>/events/", views.JobEventsView.as_view(), name="job_events"),
    path("jobs/<int:pk>/pods/", views.JobPodsView.as_view(), name="job_pods"),
    path("jobs/<int:pk>/logs/", views.JobLogView.as_view(), name="job_logs"),
    path("jobs/<int:pk>/gpu/", views.JobGpuView.as_view(), name="job_gpu"),
    path("quotas/", cluster.QuotaListView.as_view(), name="quotas"),
    path("quotas/<int:pk>/", cluster.QuotaDetailView.as_view(), name="quota"),
    path("nodes/", cluster.NodeListView.as_view(), name="nodes"),
    path("nodes/<str:name>/drain/", cluster.NodeDrainView.as_view(), name="node_drain"),
    path("node-keys/", node_keys.NodeKeyListView.as_view(), name="node_keys"),
    path("node-keys/<str:node>/rotate/", node_keys.NodeKeyRotateView.as_view(), name="node_key_rotate"),
    path("node-keys/<str:node>/revoke/", node_keys.NodeKeyRevokeView.as_view(), name="node_key_revoke"),
    path("workspaces/", cluster.WorkspaceListView.as_view(), name="workspaces"),
    path("pools/", cluster.PoolListView.as_view(), name="pools"),
    path("me/", cluster.MeView.as_view(), name="me"),
    path("schema/", SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-v1:schema", authentication_classes=[],
                                                 permission_classes=[]), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-v1:schema", authentication_classes=[],
                                                permission_classes=[]), name="redoc"),
    # Last: any other path ending in "/" (or /api/v1/ itself) is a JSON 404. Paths without the slash are
    # left unmatched, so Django's APPEND_SLASH still redirects `jobs` to `jobs/` (and the rest here).
    re_path(r"^(?P<path>(?:.*/)?)$", unknown.unknown_path, name="unknown"),
]

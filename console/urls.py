from django.urls import path, re_path

from console import api_pages, assets, node_key_pages, pool_pages, views
from scheduler.validation import register_id_converter

register_id_converter()

app_name = "console"

urlpatterns = [
    path("", views.DashboardView.as_view(), name="dashboard"),
    path("jobs/", views.JobListView.as_view(), name="jobs"),
    path("jobs/new/", views.JobSubmitView.as_view(), name="job_new"),
    path("jobs/<id:pk>/", views.JobDetailView.as_view(), name="job_detail"),
    path("jobs/<id:pk>/stop/", views.JobActionView.as_view(action="stop"), name="job_stop"),
    path("jobs/<id:pk>/restart/", views.JobActionView.as_view(action="restart"), name="job_restart"),
    path("quotas/", views.QuotaListView.as_view(), name="quotas"),
    path("quotas/new/", views.QuotaFormView.as_view(), name="quota_new"),
    path("quotas/<id:pk>/edit/", views.QuotaFormView.as_view(), name="quota_edit"),
    path("quotas/<id:pk>/delete/", views.QuotaDeleteView.as_view(), name="quota_delete"),
    path("workspaces/new/", views.WorkspaceFormView.as_view(), name="workspace_new"),
    path("workspaces/<id:pk>/edit/", views.WorkspaceFormView.as_view(), name="workspace_edit"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/keys/", node_key_pages.NodeKeyListView.as_view(), name="node_keys"),
    path("nodes/keys/<slug:node>/<slug:action>/", node_key_pages.NodeKeyActionView.as_view(), name="node_key_action"),
    path("pools/", pool_pages.PoolPolicyView.as_view(), name="pools"),
    path("tokens/", api_pages.TokenListView.as_view(), name="tokens"),
    path("tokens/<id:pk>/revoke/", api_pages.TokenRevokeView.as_view(), name="token_revoke"),
    path("nodes/<id:pk>/<slug:action>/", views.NodeActionView.as_view(), name="node_action"),
    re_path(r"^assets/plotly-(?P<version>[0-9A-Za-z.+-]+)\.min\.js$", assets.plotly_js, name="plotly_js"),
]

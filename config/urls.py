from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from scheduler.metrics.http import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("scheduler.api.v1.urls")),
    path("api/node/v1/", include("scheduler.api.node.urls")),
    path("api/", include("scheduler.api.urls")),
    path("metrics", metrics),
    path("", include("console.urls")),
]

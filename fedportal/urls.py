from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from fedportal import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("audit/", include("fedportal.audit_urls")),
    path("clusters/", include("clusters.urls")),
    path("federation/", include("federation.urls")),
    path("changes/", include("federation.approvals.urls")),
    path("drift/", include("drift.urls")),
    path("admin/", admin.site.urls),
    path("", include("api.urls")),
]

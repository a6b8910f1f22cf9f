from django.urls import path

from drift import views

app_name = "drift"

# cluster names are <text:...> (fedportal.text.TextConverter): one with a NUL is a 404, not a query
# PostgreSQL refuses

urlpatterns = [
    path("", views.skew_matrix, name="skew_matrix"),
    path("matrix.csv", views.skew_export, name="skew_export"),
    path("pair/<text:a>/<text:b>/", views.skew_pair, name="skew_pair"),
    path("history/", views.version_history, name="version_history"),
    path("policy/", views.policy_edit, name="policy_edit"),
]

urlpatterns += [
    path("compat/", views.compat_matrix, name="compat_matrix"),
    path("compat.csv", views.compat_export, name="compat_export"),
    path("compat/<int:pk>/<text:cluster>/", views.compat_cell, name="compat_cell"),
]

urlpatterns += [
    path("compliance/", views.compliance_report, name="compliance_report"),
    path("compliance.csv", views.compliance_export, name="compliance_export"),
    path("compliance/snapshot/", views.compliance_snapshot, name="compliance_snapshot"),
    path("isolation/banner/", views.isolation_banner, name="isolation_banner"),
    path("isolation/<text:name>/isolate/", views.cluster_isolate, name="cluster_isolate"),
    path("isolation/<text:name>/restore/", views.cluster_restore, name="cluster_restore"),
]

urlpatterns += [path("summary/", views.drift_summary, name="summary")]
urlpatterns += [
    path("upgrade/<text:name>/", views.upgrade_request, name="upgrade_request"),
    path("lifecycle.csv", views.lifecycle_export, name="lifecycle_export"),
]

from django.urls import path

from clusters import views

app_name = "clusters"

urlpatterns = [
    path("", views.cluster_list, name="cluster_list"),
    path("new/", views.cluster_create, name="cluster_create"),
    path("new/test-connection/", views.cluster_test_connection, name="cluster_test_connection"),
    path("import/", views.cluster_import, name="cluster_import"),
    path("labels/", views.cluster_bulk_label, name="cluster_bulk_label"),
    path("summary/", views.summary, name="summary"),
    path("poll/", views.fleet_poll, name="fleet_poll"),
    path("polls/<int:pk>/", views.poll_status, name="poll_status"),
    path("lifecycle/", views.lifecycle, name="lifecycle"),
    path("lifecycle/<int:pk>/link/", views.lifecycle_link, name="lifecycle_link"),
    path("<int:pk>/", views.cluster_detail, name="cluster_detail"),
    path("<int:pk>/edit/", views.cluster_edit, name="cluster_edit"),
    path("<int:pk>/rotate-credentials/", views.cluster_rotate_credentials, name="cluster_rotate_credentials"),
    path("<int:pk>/unjoin/", views.cluster_unjoin, name="cluster_unjoin"),
    path("<int:pk>/poll/", views.cluster_poll, name="cluster_poll"),
]

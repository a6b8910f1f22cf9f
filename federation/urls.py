from django.urls import path

from federation import views

app_name = "federation"

urlpatterns = [
    path("", views.resource_list, name="resource_list"),
    path("new/", views.resource_create, name="resource_create"),
    path("rows/<str:kind>/", views.formset_row, name="formset_row"),
    path("drift/", views.drift_list, name="drift_list"),
    path("summary/", views.summary, name="summary"),
    path("watchers/", views.watcher_list, name="watcher_list"),
    path("types/", views.type_list, name="type_list"),
    path("types/new/", views.type_edit, name="type_create"),
    path("types/<int:pk>/edit/", views.type_edit, name="type_edit"),
    path("<int:pk>/", views.resource_detail, name="resource_detail"),
    path("<int:pk>/edit/", views.resource_edit, name="resource_edit"),
    path("<int:pk>/preview/", views.resource_preview, name="resource_preview"),
    path("<int:pk>/resync-failed/", views.resource_resync_failed, name="resource_resync_failed"),
    path("<int:pk>/resync/<int:cluster_pk>/", views.resource_resync, name="resource_resync"),
    path("<int:pk>/revisions/", views.revision_list, name="revision_list"),
    path("<int:pk>/revisions/<int:number>/", views.revision_detail, name="revision_detail"),
    path("<int:pk>/revisions/<int:number>/rollback/", views.revision_rollback, name="revision_rollback"),
]

from django.urls import path

from federation.approvals import views

app_name = "approvals"

urlpatterns = [
    path("", views.change_list, name="change_list"),
    path("inbox/", views.inbox, name="inbox"),
    path("badge/", views.badge, name="badge"),
    path("summary/", views.home_panel, name="summary"),
    path("new/resource/<int:resource_pk>/", views.change_create, name="change_create"),
    path("new/unjoin/<int:cluster_pk>/", views.change_create_unjoin, name="change_create_unjoin"),
    path("emergency/<int:resource_pk>/", views.emergency_apply, name="emergency_apply"),
    path("<int:pk>/", views.change_detail, name="change_detail"),
    path("<int:pk>/submit/", views.change_submit, name="change_submit"),
    path("<int:pk>/approve/", views.change_approve, name="change_approve"),
    path("<int:pk>/reject/", views.change_reject, name="change_reject"),
    path("<int:pk>/cancel/", views.change_cancel, name="change_cancel"),
    path("<int:pk>/apply/", views.change_apply, name="change_apply"),
    path("<int:pk>/refresh/", views.change_refresh, name="change_refresh"),
    path("<int:pk>/override/", views.change_override, name="change_override"),
    path("<int:pk>/comment/", views.change_comment, name="change_comment"),
    path("<int:pk>/rollout/", views.change_rollout, name="change_rollout"),
    path("<int:pk>/rollout/approve/", views.change_wave_approve, name="change_wave_approve"),
]

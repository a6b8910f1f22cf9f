from django.urls import path

from drift import views

app_name = "drift"

urlpatterns = [
    path("", views.skew_matrix, name="skew_matrix"),
    path("matrix.csv", views.skew_export, name="skew_export"),
    path("pair/<str:a>/<str:b>/", views.skew_pair, name="skew_pair"),
    path("history/", views.version_history, name="version_history"),
    path("policy/", views.policy_edit, name="policy_edit"),
]

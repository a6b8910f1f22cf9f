from django.urls import path

from fedportal import audit_views

app_name = "audit"

urlpatterns = [
    path("", audit_views.event_list, name="event_list"),
    path("export.csv", audit_views.event_export, name="event_export"),
    path("<int:pk>/", audit_views.event_detail, name="event_detail"),
]

app_name = "clusters"

urlpatterns: list = []

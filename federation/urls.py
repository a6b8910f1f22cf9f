app_name = "federation"

urlpatterns: list = []

app_name = "drift"

urlpatterns: list = []

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse


@login_not_required
def metrics_view(request):
    return HttpResponse(status=404)

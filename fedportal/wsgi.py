import os

from django.core.wsgi import get_wsgi_application

from fedportal.gc_tuning import prepare_web_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")
application = get_wsgi_application()
prepare_web_process()

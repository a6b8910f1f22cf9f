import os

from django.core.wsgi import get_wsgi_application

from fedportal.chunked_bodies import read_chunked_bodies
from fedportal.gc_tuning import prepare_web_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")
application = read_chunked_bodies(get_wsgi_application())
prepare_web_process()

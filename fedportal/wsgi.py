import os

from fedportal.chunked_bodies import get_application
from fedportal.gc_tuning import prepare_web_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedportal.settings")
application = get_application()
prepare_web_process()

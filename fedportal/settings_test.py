"""Test settings: the real settings, with per-run broker, cache and test-database paths so that
several test runs on one machine never share a queue or a database."""

import os

from fedportal import broker
from fedportal.settings import *  # noqa: F403
from fedportal.settings import CELERY_BROKER_URL, DATABASES, VAR_DIR

TEST_RUN_ID = os.environ.get("FEDPORTAL_TEST_RUN_ID") or str(os.getpid())
os.environ["FEDPORTAL_TEST_RUN_ID"] = TEST_RUN_ID

if CELERY_BROKER_URL.startswith("filesystem://"):
    TEST_BROKER_DIR = VAR_DIR / f"broker-test-{TEST_RUN_ID}"
    CELERY_BROKER_TRANSPORT_OPTIONS = broker.folder_options(TEST_BROKER_DIR)
else:
    TEST_BROKER_DIR = None

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_{TEST_RUN_ID}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_fedportal_{TEST_RUN_ID}"}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / f"cache-test-{TEST_RUN_ID}"),
    }
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Pages show what the database holds right now: tests change rows directly and reload. The cache
# itself is tested with the setting turned on (tests/drift/test_page_cache.py).
FEDPORTAL_FRAGMENT_CACHE_SECONDS = 0

# Audit checkpoints of test databases go to a directory of their own (tests that check them use tmp_path).
FEDPORTAL_AUDIT_CHECKPOINTS = VAR_DIR / f"audit-checkpoints-test-{TEST_RUN_ID}"

"""FedPortal settings, read from the environment (see README "Configuration").

Two profiles: ``development`` (default; SQLite and a filesystem broker under ``var/``) and
``production`` (``FEDPORTAL_PROFILE=production``; secrets required, secure cookies, HSTS).
"""

import ipaddress
import secrets
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from fedportal import broker
from fedportal.env import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("FEDPORTAL_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

PROFILE = env_str("FEDPORTAL_PROFILE", "development")
if PROFILE not in {"development", "production"}:
    raise ImproperlyConfigured(f"FEDPORTAL_PROFILE={PROFILE!r}: use 'development' or 'production'.")
PRODUCTION = PROFILE == "production"


def _dev_secret(filename: str, make) -> str:
    """A development secret generated once into var/ so restarts keep sessions and data readable."""
    path = VAR_DIR / filename
    if not path.exists():
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


def _required_in_production(name: str, dev_file: str, make) -> str:
    value = env_str(name)
    if value:
        return value
    if PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when FEDPORTAL_PROFILE=production.")
    return _dev_secret(dev_file, make)


SECRET_KEY = _required_in_production("SECRET_KEY", "secret_key", lambda: secrets.token_urlsafe(50))
# Comma-separated Fernet keys; the first encrypts, all decrypt (rotation).
FEDPORTAL_ENCRYPTION_KEYS = env_list(
    "FEDPORTAL_ENCRYPTION_KEY",
    [],
) or [_required_in_production("FEDPORTAL_ENCRYPTION_KEY", "encryption_key", lambda: Fernet.generate_key().decode())]
for _key in FEDPORTAL_ENCRYPTION_KEYS:
    try:
        Fernet(_key)
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "FEDPORTAL_ENCRYPTION_KEY must be 32 url-safe base64-encoded bytes (Fernet.generate_key())."
        ) from None

# The audit chain's HMAC key (never in the database) and where signed checkpoints are appended
# (a directory outside the database; one file per chain). See fedportal/audit.py.
FEDPORTAL_AUDIT_KEY = _required_in_production("FEDPORTAL_AUDIT_KEY", "audit_key", lambda: secrets.token_urlsafe(48))
if len(FEDPORTAL_AUDIT_KEY) < 32:
    raise ImproperlyConfigured("FEDPORTAL_AUDIT_KEY must be at least 32 characters (e.g. `openssl rand -base64 48`).")
FEDPORTAL_AUDIT_CHECKPOINTS = Path(env_str("FEDPORTAL_AUDIT_CHECKPOINTS", "") or VAR_DIR / "audit-checkpoints")
FEDPORTAL_AUDIT_CHECKPOINT_SECONDS = env_int("FEDPORTAL_AUDIT_CHECKPOINT_SECONDS", 300, minimum=1)

DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "testserver"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when FEDPORTAL_PROFILE=production.")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "django_celery_beat",
    "axes",
    "fedportal",
    "clusters",
    "federation",
    "federation.approvals",
    "drift",
    "ninja",  # django-ninja's templates and static files: the API docs page without a CDN
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "fedportal.middleware.RequestContextMiddleware",
    "fedportal.middleware.LoginRequiredEverywhereMiddleware",
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "fedportal.urls"
WSGI_APPLICATION = "fedportal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "fedportal.context_processors.navigation",
            ],
        },
    },
]

# Database: DATABASE_URL, default SQLite under var/.
_default_db_url = f"sqlite:///{VAR_DIR / 'fedportal.sqlite3'}"
try:
    _db = dj_database_url.parse(env_str("DATABASE_URL", _default_db_url) or _default_db_url)
except (ValueError, dj_database_url.UnknownSchemeError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests that need a real worker share the test database with it, so it must be a file.
    _db["TEST"] = {"NAME": str(VAR_DIR / f"test_{env_str('FEDPORTAL_TEST_DB_SUFFIX', 'db')}.sqlite3")}
else:
    _db["CONN_HEALTH_CHECKS"] = True
    # psycopg 3 sends the parameters apart from the SQL instead of quoting each into it in Python: the
    # API's list pages took 13-15 % less CPU in the web process than with Django's default
    # client-side binding. Statements are not prepared (Django's default), so poolers are unaffected.
    if env_bool("DATABASE_SERVER_SIDE_BINDING", True):
        _db.setdefault("OPTIONS", {})["server_side_binding"] = True
    if env_str("FEDPORTAL_TEST_DB_SUFFIX"):
        _db["TEST"] = {"NAME": f"test_fedportal_{env_str('FEDPORTAL_TEST_DB_SUFFIX')}"}
# Persistent connections on SQLite too: opening one (connect, Django's functions, the PRAGMAs) and
# closing it cost about 2.5 ms of CPU per request, half of an API list page's.
_db["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_cache_url = env_str("CACHE_URL", "")
if _cache_url.startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}}
elif _cache_url in ("", "file"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
            "OPTIONS": {"MAX_ENTRIES": 20000},
        }
    }
elif _cache_url == "locmem":
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    raise ImproperlyConfigured(f"CACHE_URL={_cache_url!r}: use redis://..., 'file' or 'locmem'.")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# plotly.js is served from the plotly package itself (no CDN): see fedportal.staticfinders.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "fedportal.staticfinders.PlotlyFinder",
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# Reverse proxies in front of the web app (0: none). With N, the client address is the N-th entry
# from the right of X-Forwarded-For (audit source address, login throttling: fedportal/client_ip.py)
# and X-Forwarded-Proto tells HTTPS (SECURE_PROXY_SSL_HEADER).
FEDPORTAL_TRUSTED_PROXIES = env_int("FEDPORTAL_TRUSTED_PROXIES", 0, minimum=0)

# Security. The production profile passes `manage.py check --deploy` with no warnings.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True  # htmx sends the token from hx-headers (base.html); no script reads the cookie
# Sessions end this long after login, and when the browser closes (FEDPORTAL_SESSION_HOURS).
SESSION_COOKIE_AGE = round(env_float("FEDPORTAL_SESSION_HOURS", 8.0, minimum=0.05) * 3600)
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy (django-csp), in every profile so tests and the demo run under it: scripts
# only from our own static files (no inline script, no eval; behaviour lives in static/js and
# drift/static), styles from our files plus inline style attributes (progress bars, plotly's charts).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    if FEDPORTAL_TRUSTED_PROXIES:  # only a proxy we trust may say the request came over HTTPS
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SILENCED_SYSTEM_CHECKS = [] if SECURE_SSL_REDIRECT else ["security.W008"]

# Login throttling (django-axes): failures are counted per client address and per user name
# separately; either reaching the limit locks out for the cool-off time. Attempts while locked out
# are refused without being counted (they neither extend the lockout nor fill the log).
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_HOURS", 0.25, minimum=0)
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "fedportal.client_ip.client_ip"
AXES_USERNAME_CALLABLE = "fedportal.security_events.axes_username"

# Celery. Default broker: kombu's filesystem transport under var/ (no server needed).
# Never eager mode: tasks always run in real worker processes.
_broker_dir = Path(env_str("FEDPORTAL_BROKER_DIR", str(VAR_DIR / "broker")))
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or "filesystem://"
_BROKER_SCHEMES = ("filesystem", "redis", "rediss", "amqp", "amqps", "pyamqp")  # sqla+ needed SQLAlchemy: not offered
if CELERY_BROKER_URL.split("://", 1)[0] not in _BROKER_SCHEMES or "://" not in CELERY_BROKER_URL:
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL must start with one of {', '.join(s + '://' for s in _BROKER_SCHEMES)} "
        f"(got a value starting {CELERY_BROKER_URL.split('://', 1)[0][:20]!r})."
    )
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = broker.folder_options(_broker_dir)
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes a task's database connections before and after every task (celery#9824
# reverted its use of CONN_MAX_AGE): a new PostgreSQL backend per task, whose start-up cost the
# database more CPU than the propagation chunk's queries (bench_propagate: 0.3 s against 0.2 s per
# 1,000 clusters). A reuse count it never reaches turns that off; fedportal/celery.py closes them
# around each task as Django does around a request instead (CONN_MAX_AGE, health checks, errors).
CELERY_DB_REUSE_MAX = 2**62
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 120, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 100, minimum=1)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "clusters.tasks.probe_cluster_task": {"queue": "probes"},
    "federation.tasks.propagate_to_cluster_task": {"queue": "propagation"},
    "federation.tasks.propagate_targets_task": {"queue": "propagation"},
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE

# Cluster health, with KubeFed's defaults (KubeFedConfig.spec.clusterHealthCheck).
FEDPORTAL_HEALTH_PERIOD_SECONDS = env_int("FEDPORTAL_HEALTH_PERIOD_SECONDS", 10, minimum=1)
FEDPORTAL_HEALTH_FAILURE_THRESHOLD = env_int("FEDPORTAL_HEALTH_FAILURE_THRESHOLD", 3, minimum=1)
FEDPORTAL_HEALTH_SUCCESS_THRESHOLD = env_int("FEDPORTAL_HEALTH_SUCCESS_THRESHOLD", 1, minimum=1)
FEDPORTAL_HEALTH_TIMEOUT_SECONDS = env_float("FEDPORTAL_HEALTH_TIMEOUT_SECONDS", 3.0, minimum=0.1)
FEDPORTAL_KUBE_TIMEOUT_SECONDS = env_float("FEDPORTAL_KUBE_TIMEOUT_SECONDS", 10.0, minimum=0.1)
# What one API server may send (clusters/kube.py): bytes per response, pages and items per list.
FEDPORTAL_KUBE_MAX_RESPONSE_BYTES = env_int("FEDPORTAL_KUBE_MAX_RESPONSE_BYTES", 64 * 1024 * 1024, minimum=1024)
FEDPORTAL_KUBE_MAX_LIST_PAGES = env_int("FEDPORTAL_KUBE_MAX_LIST_PAGES", 200, minimum=1)
FEDPORTAL_KUBE_MAX_LIST_ITEMS = env_int("FEDPORTAL_KUBE_MAX_LIST_ITEMS", 100_000, minimum=1)
# Link-local (169.254.0.0/16, fe80::/10) and cloud-metadata API server addresses are refused unless this is on.
FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS = env_bool("FEDPORTAL_ALLOW_LINK_LOCAL_API_SERVERS", False)
# "Test connection" (and registration's check) answers within this many seconds, whatever the server does.
FEDPORTAL_TEST_CONNECTION_SECONDS = env_float("FEDPORTAL_TEST_CONNECTION_SECONDS", 10.0, minimum=1)
# Every poll reads /version (reachability, credentials, version); /readyz and the node list (kubelet
# versions, zones) are read at least this often, and at once after an error, an upgrade or while a
# cluster is not Ready. 0 reads them at every poll. See clusters/probing.py.
FEDPORTAL_INVENTORY_REFRESH_SECONDS = env_int("FEDPORTAL_INVENTORY_REFRESH_SECONDS", 60, minimum=0)

# LOG_FORMAT=json: one JSON object per line with request id, user, cluster, change request
# (fedportal/logs.py), in web and worker processes alike.
LOG_FORMAT = env_str("LOG_FORMAT", "plain") or "plain"
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use 'plain' or 'json'.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "fedportal.logs.JsonFormatter"},
    },
    "filters": {"expected_refusal": {"()": "fedportal.logs.ExpectedRefusalWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own console handler (DEBUG only) printed every line a second time beside the root's
        "django": {"handlers": [], "level": "INFO"},
        "django.request": {"filters": ["expected_refusal"]},
        "kubernetes": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # the filesystem broker has no host name; kombu warns about that on every connection
        "kombu.connection": {"level": "ERROR"},
    },
}

# The lockout page (templates/axes_lockout.html) instead of axes' bare text response; status 429.
AXES_LOCKOUT_TEMPLATE = "axes_lockout.html"

# Federation propagation: per-cluster retries of transient errors (exponential backoff, capped).
FEDERATION_MAX_ATTEMPTS = env_int("FEDERATION_MAX_ATTEMPTS", 8, minimum=1)
FEDERATION_RETRY_BASE_SECONDS = env_float("FEDERATION_RETRY_BASE_SECONDS", 2.0, minimum=0.1)
FEDERATION_RETRY_MAX_SECONDS = env_float("FEDERATION_RETRY_MAX_SECONDS", 60.0, minimum=0.1)

# Change requests: approvals needed per target cluster (the max over a request's targets).
FEDPORTAL_APPROVALS_DEFAULT = env_int("FEDPORTAL_APPROVALS_DEFAULT", 1, minimum=1)
FEDPORTAL_APPROVALS_PROD = env_int("FEDPORTAL_APPROVALS_PROD", 2, minimum=1)
# Apply a request as soon as it has enough approvals (else an operator clicks Apply).
FEDPORTAL_APPROVALS_AUTO_APPLY = env_bool("FEDPORTAL_APPROVALS_AUTO_APPLY", True)
# Objects in these namespaces (or Namespace objects of these names) are propagated only through
# an admin's audited emergency apply (federation/protected.py). Comma-separated.
FEDPORTAL_PROTECTED_NAMESPACES = env_list(
    "FEDPORTAL_PROTECTED_NAMESPACES", ["kube-system", "kube-public", "kube-node-lease"]
)

# The fleet-wide tables (skew, compatibility, compliance) are cached this long; any audited action
# refreshes them at once (fedportal/fragments.py). 0 turns the cache off.
FEDPORTAL_FRAGMENT_CACHE_SECONDS = env_float("FEDPORTAL_FRAGMENT_CACHE_SECONDS", 30.0, minimum=0)

# Fleet-scale probing and propagation recovery (see clusters/probing.py, federation/propagation/).
FEDPORTAL_PROBE_BATCH_SIZE = env_int("FEDPORTAL_PROBE_BATCH_SIZE", 250, minimum=1)  # clusters per probe task
FEDPORTAL_PROBE_THREADS = env_int("FEDPORTAL_PROBE_THREADS", 16, minimum=1)  # probe threads inside one task
FEDERATION_BATCH_SIZE = env_int(
    "FEDERATION_BATCH_SIZE", 50, minimum=1
)  # clusters per propagation task (large runs: federation.propagation.common.chunked)
FEDERATION_THREADS = env_int(
    "FEDERATION_THREADS", 16, minimum=1
)  # apply threads per worker process, shared by its tasks
# A claimed propagation target whose worker died is taken over once its lease has run out; the
# stale-target sweep re-queues targets whose message was lost (a killed worker on the embedded broker).
FEDERATION_LEASE_SECONDS = env_int("FEDERATION_LEASE_SECONDS", 130, minimum=1)
FEDERATION_STALE_SECONDS = env_int("FEDERATION_STALE_SECONDS", 60, minimum=1)
# Staged rollouts (federation.approvals.rollout): how often a Progressing rollout is advanced
# (gates re-checked, bake counted down), and how long one advancing task holds it.
FEDPORTAL_ROLLOUT_POLL_SECONDS = env_float("FEDPORTAL_ROLLOUT_POLL_SECONDS", 1.0, minimum=0.1)
FEDPORTAL_ROLLOUT_LEASE_SECONDS = env_int("FEDPORTAL_ROLLOUT_LEASE_SECONDS", 130, minimum=1)
# The fleet watcher (manage.py watch_fleet, federation/watching): a watcher that has not renewed its
# lease for FEDERATION_WATCH_LEASE_SECONDS is dead and its clusters are taken over; a failed watch
# reconnects after a jittered backoff of at most FEDERATION_WATCH_BACKOFF_MAX_SECONDS; at most
# FEDERATION_WATCH_STARTUP_CONCURRENCY LISTs / connection openings are in flight at once. The
# safety-net sweep (the periodic drift task) lists clusters whose watch is healthy only every
# FEDERATION_SWEEP_SECONDS; the others every time it runs.
FEDERATION_WATCH_LEASE_SECONDS = env_float("FEDERATION_WATCH_LEASE_SECONDS", 30.0, minimum=1)
FEDERATION_WATCH_BACKOFF_MAX_SECONDS = env_float("FEDERATION_WATCH_BACKOFF_MAX_SECONDS", 30.0, minimum=0.1)
FEDERATION_WATCH_TIMEOUT_SECONDS = env_int("FEDERATION_WATCH_TIMEOUT_SECONDS", 300, minimum=1)
FEDERATION_WATCH_STARTUP_CONCURRENCY = env_int("FEDERATION_WATCH_STARTUP_CONCURRENCY", 32, minimum=1)
FEDERATION_WATCH_DB_THREADS = env_int("FEDERATION_WATCH_DB_THREADS", 4, minimum=1)
FEDERATION_SWEEP_SECONDS = env_float("FEDERATION_SWEEP_SECONDS", 3600.0, minimum=1)
# KubeFed's capacity estimate: replicas a member has not made ready for longer than this count as
# unschedulable there, and the replica scheduler moves them elsewhere (KubeFed's podanalyzer: 60 s).
FEDERATION_UNSCHEDULABLE_SECONDS = env_float("FEDERATION_UNSCHEDULABLE_SECONDS", 60.0, minimum=0)

# /metrics (api/metrics.py): Prometheus scrapes it with this bearer token, or from these networks
# (comma-separated CIDRs) without one. With neither set it answers 403 to everyone.
FEDPORTAL_METRICS_TOKEN = env_str("FEDPORTAL_METRICS_TOKEN", "") or ""
FEDPORTAL_METRICS_ALLOWED_NETWORKS = env_list("FEDPORTAL_METRICS_ALLOWED_NETWORKS", [])
for _network in FEDPORTAL_METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"FEDPORTAL_METRICS_ALLOWED_NETWORKS: {_network!r} is not a network (like 10.0.0.0/8 or 127.0.0.1/32)."
        ) from None
# prometheus-client's multiprocess mode for the few in-process histograms (fedportal/metrics.py).
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "") or ""

# A cluster that joins or is relabelled gets what the approved placements select at once (off), or a
# change request per resource to approve first (on).
FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST = env_bool("FEDPORTAL_JOIN_REQUIRES_CHANGE_REQUEST", False)

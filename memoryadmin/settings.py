"""memoryadmin settings: every value from the environment, with defaults that just work locally.

Defaults: SQLite under ``var/`` (WAL, IMMEDIATE transactions, busy timeout), django-q2 on the ORM
broker in the same database, Chroma at a local server on 127.0.0.1:8765. Scale out by setting
``DATABASE_URL`` (PostgreSQL), ``Q_REDIS_URL`` (Redis broker), ``CHROMA_*`` and ``OPENAI_*``.

Production defaults: ``DEBUG`` is off unless ``DEBUG=1``; without ``SECRET_KEY`` a key is made
once into ``var/secret_key`` (mode 0600); ``MEMORYADMIN_HTTPS=1`` behind TLS; a strict
Content-Security-Policy (django-csp) and login throttling (django-axes) are always on.
"""

from __future__ import annotations

import fnmatch
import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.getenv("MEMORYADMIN_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def envbool(name: str, default: bool) -> bool:
    """Read a boolean from the environment ("1", "true", "yes", "on" are true)."""
    value = os.getenv(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    """Read an integer from the environment."""
    value = os.getenv(name)
    return int(value) if value not in (None, "") else default


PLACEHOLDER_SECRET_KEY = "dev-only-insecure-placeholder-change-me"
"""The key this repository once shipped: public, so refused wherever it appears."""

DEBUG = envbool("DEBUG", False)


def load_secret_key(var_dir: Path) -> str:
    """``SECRET_KEY`` from the environment, else ``var_dir/secret_key`` (made once, mode 0600).

    So ``make run`` works with one command and the key survives restarts without ever being in
    the repository. Raises ``ImproperlyConfigured`` for the public placeholder key or an empty
    key file.
    """
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management.utils import get_random_secret_key

    key = os.getenv("SECRET_KEY", "").strip()
    if not key:
        path = var_dir / "secret_key"
        try:  # O_EXCL: two processes starting at once never write two different keys
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            key = path.read_text(encoding="utf-8").strip()
        else:
            key = get_random_secret_key()
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(key + "\n")
        if not key:
            raise ImproperlyConfigured(f"{path} is empty: delete it to generate a new key")
    if key == PLACEHOLDER_SECRET_KEY:
        raise ImproperlyConfigured(
            "SECRET_KEY is the public placeholder: unset it (a key is generated into var/) "
            "or set a real one"
        )
    return key


SECRET_KEY = load_secret_key(VAR_DIR)

ALLOWED_HOSTS = [h for h in os.getenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.getenv("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# Behind TLS (MEMORYADMIN_HTTPS=1): cookies only over HTTPS, HSTS, redirect plain HTTP, and trust
# the proxy's X-Forwarded-Proto (the proxy must set it, and strip it from clients).
HTTPS = envbool("MEMORYADMIN_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000) if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS and envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = HTTPS and envbool("SECURE_HSTS_PRELOAD", True)  # adds "preload" only
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "memoryadmin.core.error_pages.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "django_q",
    "axes",
    "csp",
    # django-ninja as an app: /api/v1/docs renders its own template with the Swagger UI files it
    # ships (static/ninja/, no CDN, no inline script), allowed by the CSP below and offline.
    "ninja",
    "memoryadmin.apps.ConsoleConfig",
    "memoryadmin.api",
]

MIDDLEWARE = [
    # Outermost, so their headers are on every answer, also Django's 400 for a disallowed Host
    # (raised by the middleware below them, answered before any inner middleware runs).
    "csp.middleware.CSPMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every error answer under /api/ as JSON, an out-of-range integer as a 400 (middleware.py).
    "memoryadmin.middleware.ApiJsonErrors",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # First, so a locked-out username/IP is refused before the password is even checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Login throttling (django-axes): AXES_FAILURE_LIMIT wrong passwords for one username from one
# address lock that pair out for AXES_COOLOFF_MINUTES; a successful login resets the count.
# OWASP's authentication cheat sheet suggests a lockout after a handful of failures; 5 per 15 min
# keeps a typo-prone human well inside and a guesser to ~480 tries a day.
AXES_ENABLED = envbool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_VERBOSE = False
# The client's address for the lockout: REMOTE_ADDR, or X-Forwarded-For's right-most address
# that is not a proxy only when REMOTE_ADDR is one of TRUSTED_PROXIES (addresses or networks of
# the TLS proxies in front; empty: the header is ignored). console/services/accounts.py.
AXES_CLIENT_IP_CALLABLE = "memoryadmin.ops.services.accounts.client_ip"
TRUSTED_PROXIES = [p.strip() for p in os.getenv("TRUSTED_PROXIES", "").split(",") if p.strip()]
# "Forgot your password?" requests an hour that send a mail: per client address, per e-mail.
PASSWORD_RESET_LIMITS = {
    "per_address": envint("PASSWORD_RESET_PER_ADDRESS", 10),
    "per_email": envint("PASSWORD_RESET_PER_EMAIL", 3),
}

# Content-Security-Policy (django-csp 4): only our own scripts, styles and images; no inline
# script or style anywhere (bars are SVG attributes, confirms and htmx settings live in app.js).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

ROOT_URLCONF = "memoryadmin.urls"
WSGI_APPLICATION = "memoryadmin.wsgi.application"

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
            ],
        },
    }
]

_sqlite_default = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(os.getenv("DATABASE_URL", _sqlite_default), conn_max_age=0)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the worker writes; IMMEDIATE takes the write lock at
    # BEGIN so two writers queue on the busy timeout instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": envint("SQLITE_BUSY_TIMEOUT", 20),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"].setdefault("TEST", {})["NAME"] = os.getenv("SQLITE_TEST_NAME") or None

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Mail: only when EMAIL_HOST is set; without it, "Forgot your password?" says that an
# administrator resets it (manage.py changepassword USERNAME) instead of pretending to send mail.
EMAIL_HOST = os.getenv("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "memoryadmin@localhost")

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.getenv("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on a missing root
# Static files are served by WhiteNoise straight from STATICFILES_DIRS (no collectstatic step), so
# `make run` works the same with DEBUG off.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# django-q2: Redis when Q_REDIS_URL is set (many workers on many hosts), else the ORM broker.
Q_CLUSTER: dict = {
    # Q_NAME: the queue's name (its Redis keys); clusters sharing a broker and name share work.
    "name": os.getenv("Q_NAME", "memoryadmin"),
    "workers": envint("Q_WORKERS", 2),
    "timeout": envint("Q_TIMEOUT", 1800),
    "retry": envint("Q_RETRY", 3600),
    "max_attempts": 1,
    # True, although we never want missed runs replayed: django-q2 only replays MINUTES/DAILY…
    # schedules (ours are CRON, whose next run is computed from "now" either way), and with False
    # its scheduler busy-loops at the autumn clock change (croniter's 02:30 CET compares "not
    # after" 02:30:20 CEST: same zone, wall-clock comparison) until the wall clock goes back,
    # for up to an hour. The repeated 02:30 is skipped by pass_request_scheduled (one run per
    # local slot).
    "catch_up": True,
    "sync": envbool("Q_SYNC", False),
    "poll": 0.5,
    "save_limit": 1000,
    "label": "Task queue",
}
if os.getenv("Q_REDIS_URL"):
    Q_CLUSTER["redis"] = os.getenv("Q_REDIS_URL")
else:
    Q_CLUSTER["orm"] = "default"

# Chroma: web and worker both use HttpClient (PersistentClient is not process-safe).
CHROMA_HOST = os.getenv("CHROMA_HOST", "127.0.0.1")
CHROMA_PORT = envint("CHROMA_PORT", 8765)
CHROMA_SSL = envbool("CHROMA_SSL", False)
CHROMA_TOKEN = os.getenv("CHROMA_TOKEN", "")
# "ephemeral" runs an in-process EphemeralClient (tests and single-process tools only).
CHROMA_MODE = os.getenv("CHROMA_MODE", "http")
CHROMA_PATH = Path(os.getenv("CHROMA_PATH", VAR_DIR / "chroma"))

# Largest JSONL upload on the agent page (the worker imports it; `manage.py import_memories` has
# no cap). 200 MB is ~100,000 memories with their 384-number embeddings (~2 KB a line).
MEMORYADMIN_MAX_UPLOAD_BYTES = envint("MEMORYADMIN_MAX_UPLOAD_MB", 200) * 1024 * 1024

# Dry runs (API, MCP, the agent page) are planned by the worker, never by the web process
# (services/dry_runs.py): at most one queued or running per agent (database constraint), this
# many per user at once; each within a time budget (seconds: checked as it plans, and django-q2
# stops the task 30 s later) and a memory budget (MB the worker process's data segment may grow
# by while it plans: RLIMIT_DATA; 0 = none). Results are kept this many hours; an API or MCP
# caller may wait up to MAX_WAIT seconds for one.
MEMORYADMIN_DRY_RUNS_PER_USER = envint("MEMORYADMIN_DRY_RUNS_PER_USER", 2)
MEMORYADMIN_DRY_RUN_SECONDS = envint("MEMORYADMIN_DRY_RUN_SECONDS", 300)
MEMORYADMIN_DRY_RUN_MAX_MB = envint("MEMORYADMIN_DRY_RUN_MAX_MB", 2048)
MEMORYADMIN_DRY_RUN_KEEP_HOURS = envint("MEMORYADMIN_DRY_RUN_KEEP_HOURS", 24)
MEMORYADMIN_DRY_RUN_MAX_WAIT = envint("MEMORYADMIN_DRY_RUN_MAX_WAIT", 30)

MEMORYADMIN_MODEL_DIR = Path(os.getenv("MEMORYADMIN_MODEL_DIR", VAR_DIR / "models"))
# Our embeddings of attached collections' texts and their own vectors, by content hash
# (consolidation/adapters/vector_cache.py): shared by web and worker, safe to delete.
VECTOR_CACHE_PATH = Path(
    os.getenv("MEMORYADMIN_VECTOR_CACHE", VAR_DIR / "cache" / "vectors.sqlite3")
)
os.environ.setdefault("MEMORYADMIN_MODEL_DIR", str(MEMORYADMIN_MODEL_DIR))
# The LLM judge's answers by the pair's content (consolidation/adapters/verdict_cache.py): only
# used with an LLM endpoint and policy llm_judge; safe to delete.
VERDICT_CACHE_PATH = Path(
    os.getenv("MEMORYADMIN_VERDICT_CACHE", VAR_DIR / "cache" / "verdicts.sqlite3")
)

# Days archived copies of removed memories are kept, for agents that do not set their own
# (Agent.archive_days); 0 keeps them forever (the default: nothing is ever lost). The worker
# purges older copies daily at ARCHIVE_PURGE_CRON; passes applied before then lose their Undo.
ARCHIVE_RETENTION_DAYS = envint("MEMORYADMIN_ARCHIVE_DAYS", 0)
ARCHIVE_PURGE_CRON = os.getenv("MEMORYADMIN_ARCHIVE_PURGE_CRON", "17 4 * * *")

# Operations per apply batch (memoryadmin/proposals/services/apply.py APPLY_BATCH: one Chroma
# read, upsert, read-back and delete per stage and batch; the journal resumes per batch).
APPLY_BATCH = envint("MEMORYADMIN_APPLY_BATCH", 1000)

# Optional OpenAI-compatible LLM (distill/summarize); unset means offline, extractive only.
OPENAI_BASE_URL = os.getenv("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.getenv("OPENAI_API_KEY", "")
MEMORYADMIN_LLM_MODEL = os.getenv("MEMORYADMIN_LLM_MODEL", "")
# Seconds per LLM attempt; unset: the engine's default (consolidation.adapters.llm
# DEFAULT_TIMEOUT_SECONDS), checked with the rest by llm_from_env (core/stores.llm_writer).
MEMORYADMIN_LLM_TIMEOUT = os.getenv("MEMORYADMIN_LLM_TIMEOUT", "").strip()
# What the model work costs (consolidation/llm_cost.py): USD per 1M tokens in and out, by model
# name. Defaults only for published prices (OpenAI's gpt-4o-mini, gpt-4.1-mini, gpt-4.1-nano);
# a local model has none, so its passes show "no price". MEMORYADMIN_LLM_PRICES (JSON,
# {"model": {"in": 0.15, "out": 0.6}}) adds to or overrides them.
# Published standard prices, openai.com/api/pricing.
LLM_PRICES: dict[str, dict[str, float]] = {
    "gpt-4o-mini": {"in": 0.15, "out": 0.60},
    "gpt-4.1-mini": {"in": 0.40, "out": 1.60},
    "gpt-4.1-nano": {"in": 0.10, "out": 0.40},
    **json.loads(os.getenv("MEMORYADMIN_LLM_PRICES", "") or "{}"),
}

# /metrics answers these client addresses (comma-separated, exact IPs) or a bearer API token.
MEMORYADMIN_METRICS_ALLOW = [
    a.strip()
    for a in os.getenv("MEMORYADMIN_METRICS_ALLOW", "127.0.0.1,::1").split(",")
    if a.strip()
]
# /healthz: the worker is failing when its heartbeat is older than this, or a task has waited
# in the queue longer than HEALTH_QUEUE_MAX_AGE (seconds).
HEALTH_WORKER_MAX_AGE = envint("HEALTH_WORKER_MAX_AGE", 120)
HEALTH_QUEUE_MAX_AGE = envint("HEALTH_QUEUE_MAX_AGE", 900)

# Outbound endpoints (consolidation/adapters/endpoints.py): the environment variables an attached
# collection's embedder may take its key from (glob patterns; a service secret never, whatever
# this says), and the hosts an embedder or LLM URL may be on (empty: any http(s) host).
EMBEDDER_KEY_ENV_ALLOWED = [
    p.strip()
    for p in os.getenv(
        "EMBEDDER_KEY_ENV_ALLOWED", "OPENAI_API_KEY,MEMORYADMIN_EMBEDDER_KEY*"
    ).split(",")
    if p.strip()
]
ENDPOINT_HOSTS_ALLOWED = [
    h.strip().lower() for h in os.getenv("ENDPOINT_HOSTS_ALLOWED", "").split(",") if h.strip()
]
# The values of the variables above that are set (read here once: the process's environment
# does not change while it runs); an agent's embedder setting names one, never stores the key.
EMBEDDER_KEYS = {
    name: value
    for name, value in os.environ.items()
    if any(fnmatch.fnmatchcase(name, p) for p in EMBEDDER_KEY_ENV_ALLOWED)
}

# Notifications (services/notifications*.py; docs/OPERATOR.md). Links in them start with
# MEMORYADMIN_BASE_URL (the console's public address). Webhook hosts: WEBHOOK_HOSTS_ALLOWED
# (glob patterns, trusted whatever they resolve to), else ENDPOINT_HOSTS_ALLOWED; with neither,
# a webhook must resolve to public addresses only (consolidation/adapters/endpoints.py).
MEMORYADMIN_BASE_URL = os.getenv("MEMORYADMIN_BASE_URL", "http://localhost:8000").rstrip("/")
WEBHOOK_HOSTS_ALLOWED = (
    [h.strip().lower() for h in os.environ["WEBHOOK_HOSTS_ALLOWED"].split(",") if h.strip()]
    if os.getenv("WEBHOOK_HOSTS_ALLOWED") is not None
    else list(ENDPOINT_HOSTS_ALLOWED)
)
# A delivery is tried NOTIFY_ATTEMPTS times: the first retry NOTIFY_RETRY_SECONDS after the
# first failure, each later one 4x longer (60 s, 4 min, 16 min, 64 min by default).
NOTIFY_ATTEMPTS = envint("NOTIFY_ATTEMPTS", 5)
NOTIFY_RETRY_SECONDS = envint("NOTIFY_RETRY_SECONDS", 60)
NOTIFY_TIMEOUT = float(os.getenv("NOTIFY_TIMEOUT", "10"))
# An apply (approved or applying) or an import not finished this many minutes after it started
# is reported "stuck"; the checks (and "waiting longer than N hours") run at NOTIFY_CHECK_CRON.
NOTIFY_STUCK_MINUTES = envint("NOTIFY_STUCK_MINUTES", 60)
NOTIFY_CHECK_CRON = os.getenv("NOTIFY_CHECK_CRON", "*/5 * * * *")

# Process start (core/stores.warm_up): build the Chroma client and load the embedder before
# the first request ("0", "false", "no", "off": on the first request that needs them).
MEMORYADMIN_WARM_UP = os.getenv("MEMORYADMIN_WARM_UP", "1").strip().lower() not in (
    "0",
    "false",
    "no",
    "off",
)
# Fault injection for the crash tests (core/services.failpoint): the step at which the process
# kills itself; empty (always, outside those tests): none.
MEMORYADMIN_FAILPOINT = os.getenv("MEMORYADMIN_FAILPOINT", "")
# `manage.py setup_demo`: the demo users' password (set before the first run) and the port
# `make run` serves the console on, for the login line it prints.
MEMORYADMIN_DEMO_PASSWORD = os.getenv("MEMORYADMIN_DEMO_PASSWORD", "memoryadmin-demo")
WEB_PORT = os.getenv("WEB_PORT") or "8000"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
    "loggers": {
        # Third-party INFO chatter (every worker start/stop, every heartbeat) stays out of
        # `make run`'s output; LIBS_LOG_LEVEL=INFO brings it back when debugging.
        "chromadb": {"level": os.getenv("LIBS_LOG_LEVEL", "WARNING")},
        "httpx": {"level": os.getenv("LIBS_LOG_LEVEL", "WARNING")},
        "django-q": {"level": os.getenv("LIBS_LOG_LEVEL", "WARNING")},
        # django-axes logs every successful login at INFO; lockouts and failures stay (WARNING).
        "axes": {"level": "WARNING"},
        # One handler for Django's messages (its own default would print each line twice), and
        # expected 4xx responses (403 for a viewer's POST) without a traceback; 500s still log.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

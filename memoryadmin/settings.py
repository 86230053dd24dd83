"""memoryadmin settings: every value from the environment, with defaults that just work locally.

Defaults: SQLite under ``var/`` (WAL, IMMEDIATE transactions, busy timeout), django-q2 on the ORM
broker in the same database, Chroma at a local server on 127.0.0.1:8765. Scale out by setting
``DATABASE_URL`` (PostgreSQL), ``Q_REDIS_URL`` (Redis broker), ``CHROMA_*`` and ``OPENAI_*``.
"""

from __future__ import annotations

import os
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
DEBUG = envbool("DEBUG", True)
SECRET_KEY = os.getenv("SECRET_KEY", PLACEHOLDER_SECRET_KEY)
if not DEBUG and SECRET_KEY == PLACEHOLDER_SECRET_KEY:
    raise RuntimeError("Set SECRET_KEY in the environment: refusing to start with DEBUG off")

ALLOWED_HOSTS = [h for h in os.getenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.getenv("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

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
    "memoryadmin.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

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
DATABASES = {"default": dj_database_url.parse(os.getenv("DATABASE_URL", _sqlite_default), conn_max_age=0)}
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.getenv("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on a missing root
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
    "catch_up": False,
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

MEMORYADMIN_MODEL_DIR = Path(os.getenv("MEMORYADMIN_MODEL_DIR", VAR_DIR / "models"))
os.environ.setdefault("MEMORYADMIN_MODEL_DIR", str(MEMORYADMIN_MODEL_DIR))

# Optional OpenAI-compatible LLM (distill/summarize); unset means offline, extractive only.
OPENAI_BASE_URL = os.getenv("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.getenv("OPENAI_API_KEY", "")
MEMORYADMIN_LLM_MODEL = os.getenv("MEMORYADMIN_LLM_MODEL", "")
MEMORYADMIN_LLM_TIMEOUT = float(os.getenv("MEMORYADMIN_LLM_TIMEOUT", "30"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
    "loggers": {
        "chromadb": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # One handler for Django's messages (its own default would print each line twice), and
        # expected 4xx responses (403 for a viewer's POST) without a traceback; 500s still log.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

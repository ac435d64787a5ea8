"""The integration tier: real Redis, a real Celery worker, a real Daphne and the simulator, all
sharing the test database (a SQLite file, or PostgreSQL when DATABASE_URL is set)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.stack import Stack

ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "artifacts"


# The modules that take longest (a stack or a launcher of their own, long streams, every page in
# both schemes), measured with --durations. They are handed out first, so that none is left running
# alone on one xdist worker at the end while the others idle.
LONGEST_FIRST = ("test_look_browser.py", "test_run_command.py", "test_recall_fidelity_smoke.py",
                 "test_supervision.py", "test_soak_smoke.py", "test_faults_stale.py", "test_chat_browser.py",
                 "test_console_clean_browser.py", "test_agent_workers.py", "test_agent_robustness.py",
                 "test_notices_browser.py", "test_mcp_stack.py")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items):
    """Before every other hook: the integration mark on this folder's tests (so `-m` selects by
    it). After them all (pytest-django orders by kind of database access): the longest first."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)
    result = yield
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # Stable, and the tests that flush the database still after those in a rolled-back transaction
    # (pytest-django's order: the flush also removes what the migrations seeded).
    if any(Path(item.fspath).name in rank for item in items):  # the fast tier keeps its order
        items.sort(key=lambda item: (_flushes(item), rank.get(Path(item.fspath).name, len(rank))))
    return result


def _flushes(item) -> bool:
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    return "transactional_db" in fixtures or "live_server" in fixtures or bool(marker and marker.kwargs.get("transaction"))


def _database_url(settings_dict: dict) -> str:
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgresql://{auth}{host}{port}/{settings_dict['NAME']}"


def _wait_for_other_sessions_to_close(django_db_blocker, timeout: float = 10.0) -> None:
    """PostgreSQL ends a stopped process's backend a moment after the process exits; the test
    database can only be dropped once they are gone."""
    import time

    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with django_db_blocker.unblock():
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()")
                if cursor.fetchone()[0] == 0:
                    return
            time.sleep(0.2)


@pytest.fixture(scope="session")
def stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """Redis, simulator, one worker and one Daphne, pointed at the test database."""
    from django.db import connection

    log_dir = tmp_path_factory.mktemp("stack-logs")
    env = dict(os.environ)
    env["DATABASE_URL"] = _database_url(connection.settings_dict)
    env["PYTHONUNBUFFERED"] = "1"
    s = Stack(env=env, log_dir=log_dir)
    try:
        s.start_redis()
        s.start_simulator()
        from django.conf import settings

        settings.HERMES_SIMULATOR_URL = s.env["HERMES_SIMULATOR_URL"]
        s.start_worker()
        s.web_port = s.start_web()
        yield s
    finally:
        s.stop()
        _wait_for_other_sessions_to_close(django_db_blocker)
        ARTIFACTS.mkdir(exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1: one stack each
        for log in log_dir.glob("*.log"):
            shutil.copy(log, ARTIFACTS / f"stack-{worker + '-' if worker else ''}{log.name}")


@pytest.fixture
def live(stack, transactional_db):
    """A running stack plus a test database visible to every process (committed, flushed after)."""
    return stack

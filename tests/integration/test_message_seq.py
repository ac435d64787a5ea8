"""Message order under concurrency, on the database the tier runs on (SQLite, or PostgreSQL when
DATABASE_URL is set): concurrent appends to one session, from threads and from separate
processes, get distinct consecutive `seq` values; a duplicate is refused; and the migration that
adds the constraint renumbers duplicates already stored."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from django.db import IntegrityError, connection, transaction

from sessions.models import Message
from sessions.services.context import message_append
from tests.integration.helpers import make_conversation
from tests.stack import ROOT

pytestmark = pytest.mark.integration

BURST = 20


def append_burst(session, count: int, label: str) -> list[BaseException]:
    """`count` threads, each on its own database connection, append at the same instant."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def append(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            message_append(session=session, role="user", content=f"{label} message {i}")
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def seqs(session) -> list[int]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))


def test_twenty_concurrent_appends_get_twenty_distinct_consecutive_seqs(transactional_db, alice):
    conversation = make_conversation(alice)
    session = conversation.sessions.get()
    for burst in range(4):
        assert append_burst(session, BURST, f"burst {burst}") == []
        assert seqs(session) == list(range(BURST * (burst + 1))), f"burst {burst}: {seqs(session)}"


APPENDER = textwrap.dedent("""
    import os, sys, time
    import django
    django.setup()
    from sessions.models import Session
    from sessions.services.context import message_append
    session = Session.objects.get(id=int(sys.argv[1]))
    start = float(sys.argv[2])
    time.sleep(max(0.0, start - time.time()))
    for i in range(int(sys.argv[3])):
        message_append(session=session, role="assistant", content=f"process {os.getpid()} message {i}")
""")


def test_appends_from_four_processes_at_once_get_distinct_consecutive_seqs(live, alice):
    conversation = make_conversation(alice)
    session = conversation.sessions.get()
    per_process, processes = 5, 4
    start = time.time() + 8  # every process has imported Django by then, and they start together
    env = {**live.env, "DJANGO_SETTINGS_MODULE": "hermes_web.settings"}
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(session.id), str(start), str(per_process)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for _ in range(processes)]
    outputs = [proc.communicate(timeout=120)[0].decode(errors="replace") for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * processes, "\n".join(outputs)[-3000:]
    assert seqs(session) == list(range(per_process * processes))


def test_the_database_refuses_a_duplicate_seq(transactional_db, alice):
    conversation = make_conversation(alice)
    session = conversation.sessions.get()
    first = message_append(session=session, role="user", content="first")
    with pytest.raises(IntegrityError), transaction.atomic():
        message_append(session=session, role="user", content="second", seq=first.seq)
    assert seqs(session) == [first.seq]


def postgres_admin(base: dict):
    """An autocommit connection to the server's `postgres` database (CREATE/DROP DATABASE)."""
    import psycopg

    params = {"host": base.get("HOST") or None, "port": base.get("PORT") or None, "user": base.get("USER") or None,
              "password": base.get("PASSWORD") or None}
    return psycopg.connect(dbname="postgres", autocommit=True, **{k: v for k, v in params.items() if v})


@pytest.fixture
def scratch_database(django_db_blocker, tmp_path):
    """An empty database of the tier's kind (SQLite or the DATABASE_URL server) under its own alias:
    migrations run forward on it from nothing, so the test neither reverses the test database nor
    depends on later migrations."""
    from django.conf import settings
    from django.db import connections

    alias, base = "migration_scratch", dict(settings.DATABASES["default"])
    if base["ENGINE"].endswith("sqlite3"):
        name = str(tmp_path / "scratch.sqlite3")
    else:
        name = f"hermes_migration_scratch_{os.getpid()}"
        with postgres_admin(base) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
    connections.databases[alias] = {**connections["default"].settings_dict, "NAME": name}
    try:
        with django_db_blocker.unblock():
            yield alias
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.databases[alias]
        if not base["ENGINE"].endswith("sqlite3"):
            with postgres_admin(base) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_migration_renumbers_stored_duplicates_before_adding_the_constraint(scratch_database):
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    db = connections[scratch_database]
    before, target = [("agent_sessions", "0001_initial")], [("agent_sessions", "0002_message_seq_unique")]
    executor = MigrationExecutor(db)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    User = old.get_model("auth", "User")
    Conversation, Session, Message_ = (old.get_model("agent_sessions", name)
                                       for name in ("Conversation", "Session", "Message"))
    owner = User.objects.using(scratch_database).create(username="migrating")
    conversation = Conversation.objects.using(scratch_database).create(owner=owner)
    clean, tangled = (Session.objects.using(scratch_database).create(conversation=conversation) for _ in range(2))
    rows = Message_.objects.using(scratch_database)
    for seq in (0, 1, 2):
        rows.create(conversation=conversation, session=clean, seq=seq, role="user", content=f"c{seq}")
    # As concurrent appends left them: two pairs of twins, and a gap.
    for seq, text in ((0, "a"), (1, "b"), (1, "c"), (2, "d"), (2, "e"), (5, "f")):
        rows.create(conversation=conversation, session=tangled, seq=seq, role="user", content=text)
    clean_rows = list(rows.filter(session=clean).order_by("id").values_list("id", "seq"))

    executor = MigrationExecutor(db)
    executor.migrate(target)
    new = executor.loader.project_state(target).apps.get_model("agent_sessions", "Message").objects.using(scratch_database)
    after = [(m.seq, m.content) for m in new.filter(session_id=tangled.id).order_by("seq")]
    assert after == [(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f")]
    assert list(new.filter(session_id=clean.id).order_by("id").values_list("id", "seq")) == clean_rows
    with pytest.raises(IntegrityError), transaction.atomic(using=scratch_database):
        new.create(conversation_id=conversation.id, session_id=tangled.id, seq=0, role="user", content="x")

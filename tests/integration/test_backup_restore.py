"""A backup taken during a running turn restores to a working installation: a stack on the
embedded defaults (its own data folder, SQLite, Redis, worker, Daphne, simulator) gets a
conversation with a compaction (archived messages), a changed setting, a workspace file and an
attachment; `manage.py backup` runs while a slow reply streams; the archive is restored into an
empty folder, migrated, and a second stack on it shows everything intact, closes the interrupted
turn and completes a new one. And a backup of an older schema restores and migrates forward.

The stacks run on their own databases, so the Django work on them runs in `manage.py shell` with
the stack's environment: the `phase_*` functions below, which print their result as JSON."""
from __future__ import annotations

import hashlib
import http.cookiejar
import json
import os
import re
import sqlite3
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.stack import ROOT, Stack, free_port

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stacks, on the embedded defaults

PASSWORD = "alice-password-1"
RESULT = "PHASE RESULT "
THRESHOLD = 0.62


# ---------------------------------------------------------------- run inside `manage.py shell`

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _messages(conversation) -> list[list]:
    from sessions.models import Message

    return [[m.id, m.session_id, m.seq, m.role, m.archived, m.is_summary, m.visible,
             _sha(json.dumps(m.content, sort_keys=True).encode())]
            for m in Message.objects.filter(conversation=conversation).order_by("id")]


def _turn(user, conversation, text: str, **kwargs):
    from sessions.services.turns import turn_submit
    from tests.integration.helpers import wait_turn

    turn = wait_turn(turn_submit(user=user, conversation_id=conversation.id, text=text, **kwargs).turn, timeout=90)
    assert turn.status == "done", (text, turn.error)
    return turn


def _emit(result: dict) -> None:
    print(RESULT + json.dumps(result))


def phase_seed() -> None:
    """A conversation with a compaction (in place: archived messages), a changed setting, a
    workspace file written by the agent, and an image attachment sent with a message."""
    import io

    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from PIL import Image

    from compression import settings_store
    from sessions.models import Attachment, CompressionEvent, Message
    from sessions.services.attachments import attachment_store
    from sessions.services.compaction import compression_request
    from tests.integration.helpers import make_conversation, wait_compressions_settled

    alice = get_user_model().objects.create_user("alice", password=PASSWORD)
    settings_store.save_groups({"compression": {"threshold": THRESHOLD, "in_place": True}}, source="admin")
    conversation = make_conversation(alice)
    for i in range(8):
        _turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 150)
    compression_request(conversation_id=conversation.id, trigger="manual", force=True)
    wait_compressions_settled(conversation, timeout=90)
    event = CompressionEvent.objects.filter(conversation=conversation).latest("id")
    assert event.status == "compressed", event.reason
    _turn(alice, conversation, 'write "launch on Friday at 09:30" to notes/plan.txt')
    plan = conversation.workspace / "notes" / "plan.txt"
    out = io.BytesIO()
    Image.new("RGB", (120, 80), "teal").save(out, "PNG")
    upload = SimpleUploadedFile("diagram.png", out.getvalue(), content_type="image/png")
    row = attachment_store(user=alice, conversation_id=conversation.id, upload=upload)
    _turn(alice, conversation, "what is in this picture?", attachment_ids=[row.id])
    row = Attachment.objects.get(id=row.id)
    _emit({"conversation": str(conversation.id), "messages": _messages(conversation),
           "archived": Message.objects.filter(conversation=conversation, archived=True).count(),
           "plan": _sha(plan.read_bytes()), "attachment": row.id, "attachment_sha": _sha(row.path.read_bytes()),
           "thumbnail_sha": _sha(row.thumbnail_path.read_bytes())})


def phase_slow_turn(conversation_id: str) -> None:
    """Start a long reply (the simulator is told to stream it slowly) and return once it streams."""
    from django.contrib.auth import get_user_model

    from sessions.models import Turn
    from sessions.services.turns import turn_submit
    from tests.integration.helpers import wait_for

    alice = get_user_model().objects.get(username="alice")
    turn = turn_submit(user=alice, conversation_id=conversation_id, text="reply with 600 words").turn
    wait_for(lambda: Turn.objects.filter(id=turn.id, status="running").exclude(partial_text="")
             .exclude(partial_text=None).exists(), 60, what="the slow reply to stream")
    _emit({"turn": turn.id})


def phase_check(conversation_id: str, turn_id: int) -> None:
    """What the restored installation holds, once its sweep closed the interrupted turn, and a new turn."""
    from compression import settings_store
    from compression.models import SettingsChange
    from sessions.models import Attachment, CompressionEvent, Conversation, Message, Turn
    from tests.integration.helpers import wait_for

    conversation = Conversation.objects.get(id=conversation_id)
    cfg = settings_store.current().compression
    attachment = Attachment.objects.get(conversation=conversation)
    interrupted = wait_for(lambda: Turn.objects.filter(id=turn_id).exclude(status="running").first(), 90,
                           what="the sweep to close the interrupted turn")
    done = _turn(conversation.owner, conversation, "hello after the restore")
    reply = Message.objects.filter(conversation=conversation, role="assistant").order_by("seq", "id").last()
    _emit({"messages": _messages(conversation),
           "archived": Message.objects.filter(conversation=conversation, archived=True).count(),
           "compressed": CompressionEvent.objects.filter(conversation=conversation, status="compressed").count(),
           "threshold": cfg.threshold, "in_place": cfg.in_place,
           "audited": list(SettingsChange.objects.filter(group="compression", field="threshold")
                           .values_list("old_value", "new_value")),
           "plan": _sha((conversation.workspace / "notes" / "plan.txt").read_bytes()),
           "attachment": attachment.id, "attachment_sha": _sha(attachment.path.read_bytes()),
           "attachment_recorded_sha": attachment.sha256, "thumbnail_sha": _sha(attachment.thumbnail_path.read_bytes()),
           "interrupted": [interrupted.status, interrupted.error], "new_turn": done.status, "reply": reply.content,
           "title": conversation.title})


# ---------------------------------------------------------------- the test process

def stack_env(data_dir: Path, **extra: str) -> dict:
    """The embedded defaults on a data folder of their own (no DATABASE_URL: SQLite in the folder)."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ANTHROPIC_API_KEY"}}
    env.update(HERMES_DATA_DIR=str(data_dir), REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", PYTHONUNBUFFERED="1",
               HERMES_TURN_LOCK_TTL="6", HERMES_SWEEP_INTERVAL="2", **extra)
    return env


def manage(env: dict, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"manage.py {' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def phase(env: dict, name: str, *args) -> dict:
    call = f"from tests.integration.test_backup_restore import phase_{name} as run; run(*{list(args)!r})"
    output = manage(env, "shell", "-c", call, timeout=300).stdout
    lines = [line for line in output.splitlines() if line.startswith(RESULT)]
    assert lines, output[-3000:]
    return json.loads(lines[-1][len(RESULT):])


def start(env: dict, log_dir: Path) -> Stack:
    log_dir.mkdir()
    stack = Stack(env=env, log_dir=log_dir)
    stack.start_redis()
    stack.start_simulator()
    stack.start_worker()
    stack.web_port = stack.start_web()
    return stack


def simulator_fault(stack: Stack, body: dict) -> None:
    request = urllib.request.Request(stack.env["HERMES_SIMULATOR_URL"] + "/_sim/faults", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(request, timeout=10).close()


def turn_status(database: Path, turn_id: int) -> str:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
        return db.execute("SELECT status FROM agent_sessions_turn WHERE id = ?", (turn_id,)).fetchone()[0]


def signed_in_page(port: int, path: str) -> str:
    """Log in as alice through the login form (her password hash came with the backup) and GET `path`."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    base = f"http://127.0.0.1:{port}"
    html = opener.open(base + "/accounts/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    form = urllib.parse.urlencode({"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token}).encode()
    landed = opener.open(urllib.request.Request(base + "/accounts/login/", data=form,
                                                headers={"Referer": base + "/accounts/login/"}), timeout=30)
    assert not landed.geturl().endswith("/accounts/login/"), "alice could not log in"
    with opener.open(base + path, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_a_backup_taken_during_a_running_turn_restores_to_a_working_installation(tmp_path):
    first_env = stack_env(tmp_path / "first")
    manage(first_env, "migrate", "--noinput")
    first = start(first_env, tmp_path / "first-logs")
    archive = tmp_path / "backups" / "hermes.tar.gz"
    archive.parent.mkdir()
    try:
        seeded = phase(first_env, "seed")
        simulator_fault(first, {"fault": "slow=1", "count": 1})  # 50 deltas, a second apart
        turn_id = phase(first_env, "slow_turn", seeded["conversation"])["turn"]
        backup = manage(first_env, "backup", str(archive))
        # The backup ran inside the turn: it was streaming before, and still is after.
        assert turn_status(tmp_path / "first" / "hermes.sqlite3", turn_id) == "running"
    finally:
        first.stop()
    assert "1 workspace file(s), 2 attachment file(s), the secret key" in backup.stdout, backup.stdout

    second_env = stack_env(tmp_path / "second")
    restore = manage(second_env, "restore", str(archive))
    assert "restored the backup of" in restore.stdout
    manage(second_env, "migrate", "--noinput")
    second = start(second_env, tmp_path / "second-logs")
    try:
        checked = phase(second_env, "check", seeded["conversation"], turn_id)
        page = signed_in_page(second.web_port, f"/conversations/{seeded['conversation']}/")
    finally:
        second.stop()

    # Conversations and their messages, the archived ones included, are there as they were.
    assert checked["messages"][:len(seeded["messages"])] == seeded["messages"]
    assert checked["archived"] == seeded["archived"] > 0 and checked["compressed"] == 1
    assert checked["title"] in page and "Tell me about topic 7." in page
    # The setting holds; the workspace file and the attachment (and its thumbnail) are byte for byte.
    assert (checked["threshold"], checked["in_place"]) == (THRESHOLD, True)
    assert len(checked["audited"]) == 1 and checked["audited"][0][1].startswith("0.62"), checked["audited"]
    assert checked["plan"] == seeded["plan"]
    assert checked["attachment"] == seeded["attachment"]
    assert checked["attachment_sha"] == seeded["attachment_sha"] == checked["attachment_recorded_sha"]
    assert checked["thumbnail_sha"] == seeded["thumbnail_sha"]
    # The turn that was running when the backup was taken is closed as interrupted; a new one completes.
    assert checked["interrupted"][0] == "failed" and "interrupted" in checked["interrupted"][1], checked["interrupted"]
    assert checked["new_turn"] == "done"
    assert checked["reply"].startswith('You said: "hello after the restore'), checked["reply"]


def test_a_backup_of_an_older_schema_restores_and_migrates_forward(tmp_path):
    old_env = stack_env(tmp_path / "old")
    manage(old_env, "migrate", "--noinput")
    manage(old_env, "migrate", "agent_sessions", "0011_conversation_words", "--noinput")  # back to an older schema
    manage(old_env, "ensure_admin")
    archive = tmp_path / "old.tar.gz"
    manage(old_env, "backup", str(archive))

    new_env = stack_env(tmp_path / "new")
    restore = manage(new_env, "restore", str(archive))
    assert "the backup predates" in restore.stdout and "run `python manage.py migrate` now" in restore.stdout
    migrate = manage(new_env, "migrate", "--noinput")
    assert "Applying agent_sessions.0012_sharelink... OK" in migrate.stdout, migrate.stdout
    manage(new_env, "migrate", "--check")  # nothing left to apply
    with sqlite3.connect(tmp_path / "new" / "hermes.sqlite3") as db:
        assert db.execute("SELECT username FROM auth_user").fetchall() == [("admin",)]

"""Seeding a benchmark's stack through ``manage.py shell``: users already logged in (a session
each, its key is the cookie a client sends) and conversations on the model simulator, each with
its session started, spread over the users in turn.

``seed`` prints and returns ``{"users": [{"id", "cookie"}], "conversations": [{"id", "user"}]}``,
``user`` being the owner's index in ``users``. ``shell_json`` runs any such script and reads back
the JSON it printed after its tag."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SEED = """
import json
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import transaction
from sessions.models import Conversation
from sessions.services.context import session_start

store = import_module(settings.SESSION_ENGINE).SessionStore
users, conversations = [], []
with transaction.atomic():
    for u in range({users}):
        user = get_user_model().objects.create_user(f"{username}{{u}}")  # unusable password: fast
        session = store()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        users.append({{"id": user.pk, "cookie": session.session_key}})
    for i in range({conversations}):
        owner = users[i % len(users)]
        conversation = Conversation.objects.create(owner_id=owner["id"], provider="simulator", model="{model}",
                                                   title=f"{title} {{i}}")
        session_start(conversation=conversation)
        conversations.append({{"id": str(conversation.id), "user": i % len(users)}})
print("{tag} " + json.dumps({{"users": users, "conversations": conversations}}))
"""


def shell_json(env: dict, code: str, tag: str, timeout: float = 180) -> dict:
    """Run ``code`` in ``manage.py shell`` and return the JSON it printed after ``tag``."""
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=timeout)
    lines = [line for line in shell.stdout.splitlines() if line.startswith(tag + " ")]
    if shell.returncode == 0 and lines:
        return json.loads(lines[0][len(tag) + 1:])
    raise RuntimeError(f"manage.py shell printed no {tag} line (exit {shell.returncode}):\n"
                       f"{shell.stdout[-2000:]}\n{shell.stderr[-3000:]}")


def seed(env: dict, *, users: int, conversations: int, model: str, username: str, title: str, tag: str,
         timeout: float = 120) -> dict:
    """``users`` users named ``<username><n>``, ``conversations`` conversations on ``model`` titled
    ``<title> <n>``, conversation n owned by user n mod ``users``."""
    code = SEED.format(users=users, conversations=conversations, model=model, username=username, title=title,
                       tag=tag)
    return shell_json(env, code, tag, timeout=timeout)

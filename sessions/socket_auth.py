"""Who a conversation socket belongs to, resolved in the same trip to the database thread as what
the connect reads.

Channels' ``AuthMiddlewareStack`` resolves the user before the consumer runs, in a trip of its own
(the session row, then the user row); the consumer then made a second trip for the conversation.
Each trip queues on the one thread Channels runs database code on, so a burst of connects waited
twice. `SocketSessionMiddleware` instead puts the cookie's session and a user resolved on first use
in the scope; `connect_state` resolves it on the database thread, then reads the conversation's
live state (`live.connect_state`): one trip.

The user is resolved as Channels' ``get_user`` resolves it (`socket_user`): the session's user, if
the session names a configured backend, that backend finds the user (active, for ModelBackend) and
the session's hash matches the user's; otherwise AnonymousUser, and a session whose hash does not
match (the password changed since it was made) is flushed.

Both rows are read through statements built once per database (building an ORM query costs several
times what running it does here): the session's, when the configured engine is Django's database
one, and the user's, when the session's backend looks users up as ModelBackend does. Anything else
takes the regular path.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends import db as db_sessions
from django.db import connections, router
from django.db.models.manager import BaseManager
from django.http.cookie import parse_cookie
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.functional import SimpleLazyObject

from sessions import live

_sql: dict[tuple[str, str, str], str] = {}  # (database alias, vendor, what it reads) -> `_statement`'s SQL


def _statement(db, model, what: str, where: str) -> str:
    """``SELECT <what> FROM <model's table> WHERE <where>``, built once per database; ``{name}`` in
    ``where`` is the column of the model's field ``name``, quoted."""
    key = (db.alias, db.vendor, f"{model._meta.label}:{what}:{where}")
    if key not in _sql:
        quote = db.ops.quote_name
        columns = {field.name: quote(field.column) for field in model._meta.concrete_fields}
        selected = "*" if what == "*" else columns[what]
        _sql[key] = f"SELECT {selected} FROM {quote(model._meta.db_table)} WHERE {where.format(**columns)}"
    return _sql[key]


def _session_data(model, session_key: str) -> str | None:
    """The stored data of the unexpired session ``session_key``: what Django's database store reads
    (``model.objects.get(session_key=..., expire_date__gt=now)``), in one prepared statement."""
    db = connections[router.db_for_read(model)]
    sql = _statement(db, model, "session_data", "{session_key} = %s AND {expire_date} > %s")
    now = model._meta.get_field("expire_date").get_db_prep_value(timezone.now(), db)
    with db.cursor() as cursor:
        cursor.execute(sql, [session_key, now])
        row = cursor.fetchone()
    return None if row is None else row[0]


class SessionStore(db_sessions.SessionStore):
    """Django's database session store, loading its row through `_session_data`. Named as Django's
    class is: the data is signed with a salt that includes the class's name."""

    def load(self) -> dict:
        data = _session_data(self.model, self.session_key)
        if data is None:
            self._set_session_key(None)  # as the database store does for a missing or expired row
            return {}
        return self.decode(data)


def session_store_class() -> Any:
    engine = import_module(settings.SESSION_ENGINE).SessionStore
    return SessionStore if engine is db_sessions.SessionStore else engine


def _finds_users_as_model_backend(backend, user_model) -> bool:
    """Whether ``backend.get_user`` is ModelBackend's lookup by primary key through an unfiltered
    default manager: then `_user` may read the row itself."""
    manager = user_model._default_manager
    return (getattr(type(backend), "get_user", None) is ModelBackend.get_user
            and type(manager).get_queryset is BaseManager.get_queryset)


def _user(backend, user_id):
    """``backend.get_user(user_id)``: the user, or None (no such user, or one it refuses)."""
    user_model = get_user_model()
    if not _finds_users_as_model_backend(backend, user_model):
        return backend.get_user(user_id)
    manager = user_model._default_manager
    db = connections[manager.db]
    sql = _statement(db, user_model, "*", "{" + user_model._meta.pk.name + "} = %s")
    user = next(iter(manager.raw(sql, [user_model._meta.pk.get_db_prep_value(user_id, db)])), None)
    return user if user is not None and backend.user_can_authenticate(user) else None


def socket_user(session):
    """The user ``session`` belongs to, as Channels' ``channels.auth.get_user`` finds it: the
    session's user and backend, a backend that is configured, the user it finds, and the session's
    hash equal to the user's (else the session is flushed: its user changed their password since).
    AnonymousUser when any of it fails."""
    user = None
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:
        pass
    else:
        if backend_path in settings.AUTHENTICATION_BACKENDS:
            user = _user(load_backend(backend_path), user_id)
            if hasattr(user, "get_session_auth_hash"):
                session_hash = session.get(HASH_SESSION_KEY)
                if not (session_hash and constant_time_compare(session_hash, user.get_session_auth_hash())):
                    session.flush()
                    user = None
    return user or AnonymousUser()


def without_session(scope) -> bool:
    """Whether the socket came without a session key (no cookie, or not a key): anonymous for
    sure, which is known without the database."""
    session = scope.get("session")
    return session is None or session.session_key is None


def connect_state(scope, *, conversation_id, shown: str = "") -> tuple[bool, object | None, str]:
    """A socket's connect on the database thread: whether its user is authenticated (resolving
    ``scope["user"]`` if it is not yet), then `live.connect_state` for that user: (authenticated,
    the conversation or None, what to send first)."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return False, None, ""
    conversation, html = live.connect_state(user=user, conversation_id=conversation_id, shown=shown)
    return True, conversation, html


class SocketSessionMiddleware:
    """What Channels' ``AuthMiddlewareStack`` puts in a socket's scope, without a database trip:
    ``cookies``, ``session`` (the cookie's, read on first use) and ``user`` (resolved on first use
    by `socket_user`, which must run on the database thread: the consumer's `connect_state`)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        cookies: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            if name == b"cookie":
                cookies = parse_cookie(value.decode("latin1"))
                break
        session = session_store_class()(cookies.get(settings.SESSION_COOKIE_NAME))
        scope = dict(scope, cookies=cookies, session=session)
        if "user" not in scope:
            scope["user"] = SimpleLazyObject(lambda: socket_user(session))
        return await self.inner(scope, receive, send)

"""ASGI entry point: Django HTTP (with static files) and the Channels websockets."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
# Build the Django app first so models are loaded before consumers are imported.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402

from sessions.routing import websocket_urlpatterns  # noqa: E402
from sessions.socket_auth import SocketSessionMiddleware  # noqa: E402


def close_request_connections(**kwargs) -> None:
    """Close the database connections of an HTTP request that has finished, on its own thread.

    Django runs each ASGI request's synchronous code on a thread of its own, so a connection kept
    for reuse (``CONN_MAX_AGE``, a minute on the embedded SQLite) is never reused: it stays open,
    with its page cache, until the collector finds the finished thread's objects. Django's advice
    for ASGI is to keep no connection across requests; the socket consumer's database thread is
    long-lived and keeps its one. (Loading pages without pause, the web process held 58 SQLite
    connections and about 35 MB more; with this, 4 and flat.)"""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


# Only for the server's own requests (the test client's handler sends the signal as another sender).
request_finished.connect(close_request_connections, sender=ASGIHandler, dispatch_uid="hermes-close-request-connections")

http_app = django_asgi_app
if settings.HERMES_SERVE_STATIC:
    http_app = ASGIStaticFilesHandler(django_asgi_app)

application = ProtocolTypeRouter(
    {
        "http": http_app,
        # The session and the user as Channels' AuthMiddlewareStack gives them, the user resolved in
        # the consumer's one database trip (sessions.socket_auth).
        "websocket": AllowedHostsOriginValidator(SocketSessionMiddleware(URLRouter(websocket_urlpatterns))),
    }
)

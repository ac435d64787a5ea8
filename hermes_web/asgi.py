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

from sessions.routing import websocket_urlpatterns  # noqa: E402
from sessions.socket_auth import SocketSessionMiddleware  # noqa: E402

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

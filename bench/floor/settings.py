"""Settings of the floor app: nothing but Channels and the product's Redis channel layer config."""
from __future__ import annotations

from hermes_web.config import channel_layers, redis_url

SECRET_KEY = "bench-floor-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["channels"]
USE_TZ = True
# Same backend, hosts and limits as hermes_web.settings.CHANNEL_LAYERS.
CHANNEL_LAYERS = channel_layers(redis_url())

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    """The fast tier needs no services: websockets and broadcasts use the in-memory layer."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

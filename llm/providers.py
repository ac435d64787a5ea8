"""`get_provider(name, ...)`: the one way the rest of the project obtains a model route.

Names: `anthropic` (official SDK, ANTHROPIC_API_KEY), `simulator` (the same provider pointed at
the offline simulator with a dummy key), `openrouter`, `nous` and `custom` (OpenAI-compatible).
Keys come from the argument, else the environment variable the world uses for that route.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from llm.anthropic_provider import AnthropicProvider
from llm.base import Provider
from llm.openai_provider import OpenAICompatibleProvider

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
NOUS_BASE_URL = "https://inference-api.nousresearch.com/v1"
DEFAULT_SIMULATOR_URL = "http://127.0.0.1:8765"
SIMULATOR_API_KEY = "sk-hermes-simulator"
PROVIDER_NAMES = ("anthropic", "simulator", "openrouter", "nous", "custom")


class UnknownProviderError(ValueError):
    pass


def get_provider(
    provider_name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    model: str = "",
    max_retries: int | None = None,
    timeout: float | None = None,
    default_headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Provider:
    env = os.environ if env is None else env
    common: dict[str, Any] = {
        "model": model, "max_retries": max_retries, "timeout": timeout, "default_headers": default_headers,
    }
    name = (provider_name or "").strip().lower()
    if name == "anthropic":
        return AnthropicProvider(
            api_key=api_key or env.get("ANTHROPIC_API_KEY") or None,
            base_url=base_url or env.get("ANTHROPIC_BASE_URL") or None,
            name="anthropic",
            **common,
        )
    if name == "simulator":
        return AnthropicProvider(
            api_key=api_key or SIMULATOR_API_KEY,
            base_url=base_url or env.get("HERMES_SIMULATOR_URL") or DEFAULT_SIMULATOR_URL,
            name="simulator",
            **common,
        )
    if name == "openrouter":
        return OpenAICompatibleProvider(
            api_key=api_key or env.get("OPENROUTER_API_KEY"),
            base_url=base_url or OPENROUTER_BASE_URL,
            name="openrouter",
            **common,
        )
    if name == "nous":
        return OpenAICompatibleProvider(
            api_key=api_key or env.get("NOUS_API_KEY"),
            base_url=base_url or NOUS_BASE_URL,
            name="nous",
            **common,
        )
    if name == "custom":
        if not base_url:
            raise ValueError("the custom provider needs a base_url (an OpenAI-compatible endpoint)")
        return OpenAICompatibleProvider(
            api_key=api_key or env.get("OPENAI_API_KEY"), base_url=base_url, name="custom", **common
        )
    raise UnknownProviderError(f"unknown provider {provider_name!r}; expected one of {', '.join(PROVIDER_NAMES)}")

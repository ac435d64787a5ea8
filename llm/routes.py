"""Which model routes this installation offers, and the one rule for a new conversation's route.

A route is a provider the product can reach right now with the models it offers there:

- `anthropic` when `ANTHROPIC_API_KEY` is set: the real Claude models of the catalogue (with
  `ANTHROPIC_BASE_URL` the same route may point at any Anthropic-compatible server);
- `simulator` when it is not: the offline simulator's models (the run command starts the
  simulator exactly then, see `simulator_needed`);
- `custom` when the admin configured an OpenAI-compatible endpoint (`model.base_url`): the model
  named there, with the window given there;
- `openrouter` / `nous` when their key is set and the admin's default model names that route.

`default_route` picks the admin's default when it is on an available route, else the first
route's default model. Pure: the environment and the settings come in as arguments.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from llm.models import DEFAULT_ANTHROPIC_MODEL, DEFAULT_SIMULATOR_MODEL, REAL_MODELS, SIMULATOR_MODELS, get_model

ROUTE_LABELS = {
    "anthropic": "Anthropic",
    "simulator": "offline simulator",
    "custom": "Custom endpoint",
    "openrouter": "OpenRouter",
    "nous": "Nous Portal",
}
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openrouter": "OPENROUTER_API_KEY", "nous": "NOUS_API_KEY"}


@dataclass(frozen=True)
class RouteModel:
    name: str
    label: str
    context_window: int | None  # None: unknown (a custom model without a configured window)

    @property
    def window_text(self) -> str:
        return f"{self.context_window:,} tokens" if self.context_window else "window unknown"


@dataclass(frozen=True)
class Route:
    provider: str
    label: str
    models: tuple[RouteModel, ...]

    def offers(self, model: str) -> bool:
        return any(m.name == model for m in self.models)


@dataclass(frozen=True)
class ModelChoice:
    provider: str
    model: str


@dataclass(frozen=True)
class EndpointSettings:
    """The admin's model defaults as far as routes are concerned."""

    provider: str = ""
    model: str = ""
    base_url: str = ""
    context_length: int | None = None


def route_label(provider: str, *, base_url: str = "", env: Mapping[str, str] | None = None) -> str:
    """How the page names a route: 'Anthropic', 'offline simulator', 'Custom endpoint (host)'."""
    env = os.environ if env is None else env
    label = ROUTE_LABELS.get(provider, provider or "unknown")
    if provider == "anthropic" and env.get("ANTHROPIC_BASE_URL"):
        return f"{label} API at {_host(env['ANTHROPIC_BASE_URL'])}"
    if provider == "custom" and base_url:
        return f"{label} ({_host(base_url)})"
    return label


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.netloc or url


def simulator_needed(env: Mapping[str, str] | None = None) -> bool:
    """The offline simulator serves the main route exactly when no Anthropic key is configured."""
    env = os.environ if env is None else env
    return not env.get("ANTHROPIC_API_KEY")


def _catalog_models(models) -> tuple[RouteModel, ...]:
    return tuple(RouteModel(m.name, m.display_name or m.name, m.context_window) for m in models)


def available_routes(settings: EndpointSettings, env: Mapping[str, str] | None = None) -> list[Route]:
    env = os.environ if env is None else env
    routes: list[Route] = []
    if env.get("ANTHROPIC_API_KEY"):
        routes.append(Route("anthropic", route_label("anthropic", env=env), _catalog_models(REAL_MODELS)))
    else:
        routes.append(Route("simulator", ROUTE_LABELS["simulator"], _catalog_models(SIMULATOR_MODELS)))
    if settings.base_url and settings.model:
        info = get_model(settings.model)
        window = settings.context_length or (info.context_window if info else None)
        routes.append(Route("custom", route_label("custom", base_url=settings.base_url),
                            (RouteModel(settings.model, settings.model, window),)))
    for provider in ("openrouter", "nous"):
        if settings.provider == provider and settings.model and env.get(KEY_VARIABLES[provider]):
            info = get_model(settings.model)
            window = settings.context_length or (info.context_window if info else None)
            routes.append(Route(provider, ROUTE_LABELS[provider], (RouteModel(settings.model, settings.model, window),)))
    return routes


def find_route(routes: list[Route], provider: str, model: str) -> Route | None:
    return next((r for r in routes if r.provider == provider and r.offers(model)), None)


def default_route(settings: EndpointSettings, env: Mapping[str, str] | None = None) -> ModelChoice:
    """The admin's default model when it is on an available route; else the first route's default."""
    routes = available_routes(settings, env)
    if find_route(routes, settings.provider, settings.model):
        return ModelChoice(settings.provider, settings.model)
    first = routes[0]
    preferred = {"anthropic": DEFAULT_ANTHROPIC_MODEL, "simulator": DEFAULT_SIMULATOR_MODEL}.get(first.provider)
    model = preferred if preferred and first.offers(preferred) else first.models[0].name
    return ModelChoice(first.provider, model)

"""Settings checked against what this installation has (SPEC §7.1, §9): what the pure validator in
`compression.core` cannot know, because the catalogue lives in `llm` and the plugins on disk.
The admin forms and the config.yaml import run the same checks (`settings_problems`).

- the main model must be in the catalogue, or come with its window (`model.context_length`);
- its window, from the catalogue or the override, must be at least the 64,000-token minimum;
- the `custom` route needs the endpoint's base URL;
- the auxiliary model must be one its route offers when that route has a catalogue (the simulator,
  Anthropic's API, `auto` / `main`), and a model the catalogue knows must have a window of at
  least the minimum; a route without a catalogue (`custom`, `openrouter`, `nous`, an Anthropic
  base URL) is checked by one real call instead (`auxiliary_connection_test`, the admin's *Test
  connection*);
- the context engine must be one this installation has: a built-in, a registered engine or a
  plugin that loads (`engine_choices` names the plugins that do not, with their error).

Each problem is (setting, message); the message names the setting, as the validator's do.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from compression.core import registry
from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH
from llm.models import DEFAULT_MODELS, REAL_MODELS, ModelCatalog, get_model
from llm.routes import EndpointSettings, default_route

# --- The main model -----------------------------------------------------------------------------


def main_model_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    model = str(values.get("model") or "").strip()
    provider = str(values.get("provider") or "").strip()
    window = values.get("context_length")
    problems: list[tuple[str, str]] = []
    if provider == "custom" and not values.get("base_url"):
        problems.append(("base_url", "model.base_url: the custom provider needs the endpoint's base URL "
                                     "(an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)."))
    if not model or window:
        return problems  # an empty name is the validator's to refuse; an override decides the window
    info = get_model(model)
    if info is None:
        problems.append(("model", f"model.model: {model!r} is not in the model catalogue. Check the spelling, or "
                                  "give the model's window in model.context_length."))
    elif info.context_window < MINIMUM_CONTEXT_LENGTH:
        problems.append(("model", f"model.context_length: {model} has a {info.context_window:,}-token window, below "
                                  f"the minimum of {MINIMUM_CONTEXT_LENGTH:,} that compression needs. Choose a "
                                  "larger model."))
    return problems


# --- The auxiliary model ------------------------------------------------------------------------

# The simulator serves every model of the catalogue; `auto` and `main` send the name to the
# conversation's own route (the simulator or Anthropic's API).
_CATALOGUE_ROUTES = {"simulator": ("the offline simulator", DEFAULT_MODELS),
                     "auto": ("the main route (auto)", DEFAULT_MODELS),
                     "main": ("the main route (main)", DEFAULT_MODELS),
                     "anthropic": ("Anthropic's API", REAL_MODELS)}


def auxiliary_catalogue(provider: str, base_url: str = "") -> tuple[str, ModelCatalog] | None:
    """(route label, the models it offers) for a route with a catalogue; None for one without
    (an OpenAI-compatible endpoint, or Anthropic's protocol at another base URL)."""
    if provider == "anthropic" and base_url:
        return None
    found = _CATALOGUE_ROUTES.get(provider)
    return (found[0], ModelCatalog(found[1])) if found else None


def auxiliary_model_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    model = str(values.get("model") or "").strip()
    if not model:
        return []  # empty: the main model summarises
    route = auxiliary_catalogue(str(values.get("provider") or "auto"), str(values.get("base_url") or ""))
    if route is not None and model not in route[1]:
        label, catalogue = route
        usable = [m.name for m in catalogue if m.context_window >= MINIMUM_CONTEXT_LENGTH]
        return [("model", f"auxiliary.compression.model: {model!r} is not a model {label} offers, so every "
                          f"compression would fall back to the main model. Choose one of: {', '.join(usable)}. "
                          "For another endpoint choose the custom provider with its base URL and use "
                          "Test connection.")]
    info = get_model(model)
    if info is not None and info.context_window < MINIMUM_CONTEXT_LENGTH:
        return [("model", f"auxiliary.compression.model: {model} has a {info.context_window:,}-token window, below "
                          f"the minimum of {MINIMUM_CONTEXT_LENGTH:,}: it could not read the middle it is asked to "
                          "summarise. Choose a larger model.")]
    return []


# --- The context engine -------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineChoices:
    names: tuple[str, ...]  # what context.engine accepts here: built-ins, loaded plugins, registered engines
    failed: tuple[tuple[str, str], ...]  # (plugin folder, why it did not load)


def engine_choices() -> EngineChoices:
    """The engines this installation has, read now (a plugin folder added later counts): each
    plugin folder is loaded, as selecting it would load it, and one that fails is named."""
    names, failed = list(registry.BUILTIN_ENGINES), []
    root = registry.get_plugin_dir()
    folders = sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()) if root.is_dir() else []
    for folder in folders:
        name = folder.name
        if name in names:  # a folder named like a built-in is never loaded
            continue
        try:
            # The registry's own loader: the same import a turn would make (cached once it loads).
            source = registry._engine_from_plugin(name, root)
        except Exception as exc:
            failed.append((name, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if source is None:
            failed.append((name, "it defines no ContextEngine subclass and registers none"))
        else:
            names.append(name)
    names += [n for n in registry.registered_engines() if n not in names]
    return EngineChoices(tuple(names), tuple(failed))


def engine_problems(values: Mapping[str, Any], choices: EngineChoices | None = None) -> list[tuple[str, str]]:
    name = str(values.get("engine") or "").strip()
    choices = choices or engine_choices()
    if not name or name in choices.names:
        return []
    why = dict(choices.failed).get(name)
    reason = (f"the plugin {name!r} failed to load ({why})" if why
              else f"{name!r} is not an engine this installation has")
    return [("engine", f"context.engine: {reason}; every turn would silently use the built-in compressor. "
                       f"Choose one of: {', '.join(choices.names)}.")]


def settings_problems(group: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every check above that applies to ``group``, on its full values (stored merged with new)."""
    check = {"model": main_model_problems, "auxiliary": auxiliary_model_problems, "context": engine_problems}.get(group)
    return check(values) if check else []


# --- Test connection ----------------------------------------------------------------------------

CONNECTION_TEST_TIMEOUT = 15.0  # seconds at most, whatever the summariser's own timeout
CONNECTION_TEST_PROMPT = "Connection test from Hermes Web: reply with the single word OK."


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    route: str  # the provider and endpoint called
    model: str
    text: str  # the model's answer, or the error
    seconds: float


def _env() -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": settings.ANTHROPIC_API_KEY or ""}


def _aux_call_route(aux: Mapping[str, Any], main: Any) -> tuple[str, str, str, str]:
    """(provider, base URL, key, model) the summariser would call, as ``sessions.services.runtime``
    resolves it, for a conversation on the admin's default route."""
    name, base_url, key = str(aux.get("provider") or "auto"), str(aux.get("base_url") or ""), aux.get("api_key") or ""
    model = str(aux.get("model") or "")
    if name in ("auto", "main"):
        choice = default_route(EndpointSettings(main.provider, main.model, main.base_url, main.context_length), _env())
        name, model, base_url, key = choice.provider, model or choice.model, "", ""
    if name == "simulator":
        return name, settings.HERMES_SIMULATOR_URL, "", model or main.model
    if name == "anthropic":
        return name, base_url, key or settings.ANTHROPIC_API_KEY or "", model or main.model
    if name == "custom" and not base_url:
        if not main.base_url:
            raise ValueError("the custom provider needs a base URL: give one here or under Model defaults")
        base_url, key = main.base_url, main.api_key
    return name, base_url, key, model or main.model


def auxiliary_connection_test(aux: Mapping[str, Any], *, main: Any,
                              timeout: float = CONNECTION_TEST_TIMEOUT) -> ConnectionResult:
    """One tiny call through the product's provider code with the auxiliary settings ``aux`` (the
    form's values, the key included) and the admin's model defaults ``main``. Never raises; the
    key never appears in the result."""
    from llm.providers import get_provider  # here: the SDKs take seconds to import

    started = time.monotonic()
    route, model, key = str(aux.get("provider") or "auto"), str(aux.get("model") or ""), ""
    limit = max(1.0, min(float(aux.get("timeout") or timeout), timeout))
    try:
        name, base_url, key, model = _aux_call_route(aux, main)
        route = f"{name} at {base_url}" if base_url else name
        provider = get_provider(name, api_key=key or None, base_url=base_url or None, max_retries=0, timeout=limit)
        final = provider.complete([{"role": "user", "content": CONNECTION_TEST_PROMPT}], model=model,
                                  max_tokens=16, timeout=limit)
        ok, text = True, (final.text or "").strip() or f"(an empty answer, stop reason {final.stop_reason})"
    except Exception as exc:
        ok, text = False, f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
    if key:
        text = text.replace(key, "•••")
    return ConnectionResult(ok, route, model, text[:500], round(time.monotonic() - started, 2))

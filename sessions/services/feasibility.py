"""SPEC §7.1 feasibility of the current settings, as warnings for the staff dashboard (for the
default model) and for a conversation's page (for that conversation's model).

Checks, without any network call: can an auxiliary (summariser) model be reached at all, is its
context window at least 64,000 tokens, and is it at least the main model's compression threshold
(otherwise compaction lowers each session's threshold to the aux window). Pure apart from reading
Django settings and the environment for API keys.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings

from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH, threshold_rule
from llm.models import UNKNOWN_MODEL_WINDOW, get_model
from sessions.services.runtime import model_window

_KEY_ENV = {"openrouter": "OPENROUTER_API_KEY", "nous": "NOUS_API_KEY"}


@dataclass(frozen=True)
class FeasibilityWarning:
    level: str  # error | warning | info
    text: str


@dataclass(frozen=True)
class Feasibility:
    aux_provider: str  # the route actually used (auto/main resolved to the main provider)
    aux_model: str
    aux_window: int | None
    main_window: int
    main_threshold: int
    warnings: tuple[FeasibilityWarning, ...]


def _default_window(cfg) -> int:
    if cfg.model.context_length:
        return cfg.model.context_length
    info = get_model(cfg.model.model)
    return info.context_window if info else UNKNOWN_MODEL_WINDOW


def _main_threshold(cfg, window: int, provider: str, model: str, max_tokens: int) -> int:
    """The threshold before the summariser's window caps it (the warning below is about that cap)."""
    c = cfg.compression
    return threshold_rule(window, c.threshold, max_tokens=max_tokens, provider=provider, model=model,
                          codex_autoraise=c.codex_gpt55_autoraise, codex_autoraise_notice=False).tokens


def _unreachable(provider: str, aux, *, env, main_base_url: str = "") -> str | None:
    """Why no summariser can be called on ``provider``, or None when it looks usable."""
    if provider == "custom" and not (aux.base_url or main_base_url):
        return ("auxiliary.compression.provider is custom but auxiliary.compression.base_url is empty: "
                "no auxiliary model can be reached")
    if provider == "anthropic" and not (aux.api_key or settings.ANTHROPIC_API_KEY):
        return ("the auxiliary route is anthropic but ANTHROPIC_API_KEY is not set "
                "(and no auxiliary API key is stored)")
    if provider in _KEY_ENV and not (aux.api_key or env.get(_KEY_ENV[provider])):
        return (f"the auxiliary route is {provider} but {_KEY_ENV[provider]} is not set "
                "(and no auxiliary API key is stored)")
    return None


def feasibility(cfg, *, conversation=None, env=None) -> Feasibility:
    """Evaluate ``cfg`` (a ``RuntimeConfig``) for the default model, or for ``conversation``'s
    model when one is given; ``env`` defaults to ``os.environ``."""
    env = os.environ if env is None else env
    aux = cfg.auxiliary
    if conversation is not None:
        main_provider, main_model, max_tokens = conversation.provider, conversation.model, conversation.max_tokens
        main_window = model_window(conversation, cfg)
    else:
        main_provider, main_model, max_tokens = cfg.model.provider, cfg.model.model, cfg.model.max_tokens
        main_window = _default_window(cfg)
    follows_main = aux.provider in ("auto", "main")
    provider = main_provider if follows_main else aux.provider
    model = aux.model or main_model
    threshold = _main_threshold(cfg, main_window, main_provider, main_model, max_tokens)
    warnings: list[FeasibilityWarning] = []

    if main_window < MINIMUM_CONTEXT_LENGTH:
        warnings.append(FeasibilityWarning(
            "error", f"The main model's window ({main_window:,} tokens) is below the minimum of "
                     f"{MINIMUM_CONTEXT_LENGTH:,}; its conversations will be refused. "
                     "Fix model.context_length or choose a larger model."))
    problem = _unreachable(provider, aux, env=env, main_base_url=cfg.model.base_url if follows_main else "")
    if problem:
        warnings.append(FeasibilityWarning(
            "error", f"No usable auxiliary model: {problem}. Every automatic compression will fail "
                     "and start a 600 s cooldown."))

    if follows_main and not aux.model:
        aux_window: int | None = main_window  # the summariser is the main model itself
    else:
        info = get_model(model)
        aux_window = info.context_window if info else None
    warnings += _aux_window_warnings(model, aux_window, threshold)
    return Feasibility(aux_provider=provider, aux_model=model, aux_window=aux_window, main_window=main_window,
                       main_threshold=threshold, warnings=tuple(warnings))


def _aux_window_warnings(model: str, aux_window: int | None, threshold: int) -> list[FeasibilityWarning]:
    """What the auxiliary model's window means: unknown, under the minimum, under the threshold."""
    if aux_window is None:
        return [FeasibilityWarning(
            "info", f"The auxiliary model {model!r} is not in the model catalog, so its window is unknown; "
                    f"make sure it is at least {MINIMUM_CONTEXT_LENGTH:,} tokens and at least the compression "
                    f"threshold ({threshold:,}).")]
    warnings = []
    if aux_window < MINIMUM_CONTEXT_LENGTH:
        warnings.append(FeasibilityWarning(
            "error", f"The auxiliary model {model!r} has a {aux_window:,}-token window, below the minimum "
                     f"of {MINIMUM_CONTEXT_LENGTH:,}: it cannot summarise a full middle section. "
                     "Choose a larger auxiliary model."))
    if aux_window < threshold:
        warnings.append(FeasibilityWarning(
            "warning", f"The auxiliary model's window ({aux_window:,} tokens) is smaller than the main "
                       f"model's compression threshold ({threshold:,} tokens): the session threshold will "
                       f"be lowered to the aux window ({aux_window:,} tokens)."))
    return warnings

"""A conversation's model route: the one place that decides which provider and model a
conversation uses, creates conversations on it, and switches an existing conversation's model.

The rule itself (which routes exist with this environment and these settings, which one a new
conversation gets) is `llm.routes`; this module applies it to the database. A switch is an
explicit user action (SPEC §8): it is recorded as a line in the transcript, resets what belonged
to the old model (a window lowered by its overflow error, its real prompt size) and the next
request uses the new model's window; the prompt cache starts cold. A switch to the model the
conversation already uses is refused with nothing changed (`ModelAlreadyInUse`). `models_larger`
names the models a conversation that no longer fits could move to.

Only models this installation can run are chosen: a model whose window (as a conversation on it
would get it) is under the minimum of `compression.core.thresholds` is listed in the picker with the
reason (`routes_offered`), refused when a request names it anyway (`ModelCannotRun`, nothing saved),
and never the default.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH, ContextWindowTooSmall, check_context_length
from llm.models import model_label
from llm.routes import EndpointSettings, ModelChoice, Route, available_routes, default_route, find_route
from sessions.models import Conversation, Message
from sessions.services.context import message_append, session_active, session_start
from sessions.services.runtime import model_window

MODEL_SWITCH = "model_switch"  # Message.name of the transcript line a switch leaves


class RouteUnavailable(ValueError):
    """The chosen provider/model is not offered by any configured route; the text says why."""


class ModelCannotRun(RouteUnavailable):
    """A route offers the model but this installation refuses to run it (its window is too small)."""


class ModelAlreadyInUse(RouteUnavailable):
    """A switch to the model the conversation already uses: refused, nothing changed."""


@dataclass(frozen=True)
class PickerModel:
    """One option of the model picker; `refusal` is empty when the model runs here, else why not."""

    name: str
    label: str
    window_text: str
    refusal: str = ""


@dataclass(frozen=True)
class PickerRoute:
    provider: str
    label: str
    models: tuple[PickerModel, ...]


def route_env() -> dict[str, str]:
    """The environment the routes are read from; the Anthropic key as Django's settings hold it."""
    return {**os.environ, "ANTHROPIC_API_KEY": settings.ANTHROPIC_API_KEY or ""}


def route_settings(cfg) -> EndpointSettings:
    m = cfg.model
    return EndpointSettings(provider=m.provider, model=m.model, base_url=m.base_url, context_length=m.context_length)


def routes_available(cfg) -> list[Route]:
    return available_routes(route_settings(cfg), route_env())


def choice_window(cfg, choice: ModelChoice) -> int:
    """The window a new conversation on `choice` would run with (the runtime's own rule)."""
    return model_window(Conversation(provider=choice.provider, model=choice.model,
                                     context_length=window_override(cfg, choice)), cfg)


def window_too_small(cfg, choice: ModelChoice) -> int | None:
    """The window a new conversation on `choice` would run with when the product refuses it as a
    main model's; None when it runs."""
    window = choice_window(cfg, choice)
    try:
        check_context_length(window)
    except ContextWindowTooSmall:
        return window
    return None


def choice_refusal(cfg, choice: ModelChoice) -> str:
    """Empty when a conversation on `choice` can run here; else why not, as the picker shows it."""
    window = window_too_small(cfg, choice)
    return "" if window is None else f"window {window:,} tokens, below the {MINIMUM_CONTEXT_LENGTH:,} minimum"


def routes_offered(cfg) -> list[PickerRoute]:
    """The picker's routes and models, each model with its refusal (empty when it runs here)."""
    return [PickerRoute(r.provider, r.label, tuple(
                PickerModel(m.name, m.label, m.window_text, choice_refusal(cfg, ModelChoice(r.provider, m.name)))
                for m in r.models))
            for r in routes_available(cfg)]


@dataclass(frozen=True)
class LargerModel:
    provider: str
    name: str
    label: str
    window: int

    @property
    def text(self) -> str:
        """As the *Switch model* picker names it: its label and window."""
        return f"{self.label} ({self.window:,} tokens)"


def models_larger(cfg, *, conversation: Conversation, than: int) -> list[LargerModel]:
    """The models this installation offers and runs whose window is larger than `than` tokens
    (the conversation's own model and models of unknown window left out), smallest window first:
    where a conversation that no longer fits can be switched to."""
    found = []
    for route in routes_available(cfg):
        for m in route.models:
            choice = ModelChoice(route.provider, m.name)
            if (m.context_window is None or (route.provider, m.name) == (conversation.provider, conversation.model)
                    or choice_refusal(cfg, choice)):
                continue
            window = choice_window(cfg, choice)
            if window > than:
                found.append(LargerModel(route.provider, m.name, m.label, window))
    return sorted(found, key=lambda m: (m.window, m.label))


def route_default(cfg) -> ModelChoice:
    """The admin's default when it is available and runs here; else the installation's own default;
    else the first model that runs (the admin's default when none does)."""
    choice = default_route(route_settings(cfg), route_env())
    candidates = (choice, default_route(EndpointSettings(), route_env()),
                  *(ModelChoice(r.provider, m.name) for r in routes_available(cfg) for m in r.models))
    return next((c for c in candidates if not choice_refusal(cfg, c)), choice)


def route_resolve(cfg, *, provider: str = "", model: str = "") -> ModelChoice:
    """The choice asked for when a route offers it and it runs here; the default when nothing was
    asked for."""
    if not provider and not model:
        return route_default(cfg)
    if find_route(routes_available(cfg), provider, model) is None:
        offered = "; ".join(f"{r.label}: {names}" for r in routes_offered(cfg)
                            if (names := ", ".join(m.name for m in r.models if not m.refusal)))
        raise RouteUnavailable(f"{model or '(no model)'} on {provider or '(no provider)'} is not available here "
                               f"(available: {offered}).")
    choice = ModelChoice(provider, model)
    if (window := window_too_small(cfg, choice)) is not None:
        name = model if model_label(model) == model else f"{model_label(model)} ({model})"
        raise ModelCannotRun(f"{name} cannot be used here: its context window of {window:,} tokens is below the "
                             f"minimum of {MINIMUM_CONTEXT_LENGTH:,} tokens that context compression needs. "
                             "Choose a model with a larger window.")
    return choice


def window_override(cfg, choice: ModelChoice) -> int | None:
    """A window stored on the conversation: only a custom endpoint's model has none in the catalogue."""
    if choice.provider == "custom" and cfg.model.context_length:
        return cfg.model.context_length
    return None


@transaction.atomic
def conversation_create(*, owner, cfg, provider: str = "", model: str = "") -> Conversation:
    choice = route_resolve(cfg, provider=provider, model=model)
    conversation = Conversation.objects.create(owner=owner, provider=choice.provider, model=choice.model,
                                               context_length=window_override(cfg, choice),
                                               max_tokens=cfg.model.max_tokens)
    session_start(conversation=conversation)
    return conversation


def model_switch_resolve(*, conversation: Conversation, cfg, provider: str, model: str) -> ModelChoice:
    """The choice a switch of `conversation` to `provider`/`model` would make; `RouteUnavailable`
    (or `ModelCannotRun`) when it is not offered or cannot run here, `ModelAlreadyInUse` when the
    conversation already uses it."""
    choice = route_resolve(cfg, provider=provider, model=model)
    if (conversation.provider, conversation.model) == (choice.provider, choice.model):
        raise ModelAlreadyInUse(f"This conversation already uses {model_label(choice.model)}; nothing was changed.")
    return choice


@transaction.atomic
def conversation_model_switch(*, conversation: Conversation, cfg, provider: str, model: str) -> Message:
    """Switch the conversation's model; `ModelAlreadyInUse` (nothing changed) when it is already
    on that model, `RouteUnavailable` when the model is not offered or cannot run here."""
    conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
    choice = model_switch_resolve(conversation=conversation, cfg=cfg, provider=provider, model=model)
    old = f"{conversation.model} ({conversation.provider})"
    conversation.provider, conversation.model = choice.provider, choice.model
    conversation.context_length = window_override(cfg, choice)
    conversation.last_activity_at = timezone.now()
    conversation.save(update_fields=["provider", "model", "context_length", "last_activity_at"])
    session = session_active(conversation)
    # What the session learnt about the old model does not hold for the new one.
    session.context_length = None
    session.last_prompt_tokens = 0
    session.save(update_fields=["context_length", "last_prompt_tokens"])
    text = f"Model switched from {old} to {choice.model} ({choice.provider}). The prompt cache starts cold."
    line = message_append(session=session, role="system", content=text, name=MODEL_SWITCH)
    # Archived: the line belongs to the transcript, never to what the model is sent.
    Message.objects.filter(pk=line.pk).update(archived=True)
    line.archived = True
    return line

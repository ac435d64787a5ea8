"""Turn the settings of the moment into working parts for one turn or job: the session's context
engine (restored from its stored state), the main model's provider and the summariser."""
from __future__ import annotations

import functools

from django.conf import settings

from compression import settings_store
from compression.core.engine import get_context_engine
from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH, ContextWindowTooSmall, check_context_length
from llm.base import Provider
from llm.models import UNKNOWN_MODEL_WINDOW, get_model
from llm.routes import simulator_needed
from sessions.models import Conversation, Session
from sessions.services.recall import recall_for

STATE_FIELDS = ("compression_count", "previous_summary", "cooldown_until", "ineffective_count", "last_prompt_tokens")


class ConfigurationProblem(Exception):
    """Settings that cannot work (e.g. a main model window under 64,000); shown to the user."""


def model_window(conversation: Conversation, cfg) -> int:
    """The conversation's own override; else the admin's window when the conversation is on the
    admin's model (so an edit applies at once); else the catalogue; else the assumed default."""
    if conversation.context_length:
        return conversation.context_length
    m = cfg.model
    if m.context_length and (conversation.provider, conversation.model) == (m.provider, m.model):
        return m.context_length
    info = get_model(conversation.model)
    return info.context_window if info else UNKNOWN_MODEL_WINDOW


def session_window(conversation: Conversation, session: Session, cfg) -> int:
    window = model_window(conversation, cfg)
    if session.context_length:
        window = min(window, session.context_length)  # lowered by a provider's overflow error
    return window


def engine_build(*, conversation: Conversation, session: Session, cfg, summariser=None, fallback_summariser=None):
    """The session's context engine for one turn or job: built from ``cfg`` (the settings of the
    moment, read per turn, so a saved change applies from the next one) and restored from the
    session's stored state. ``ConfigurationProblem`` when the window is under the minimum."""
    window = session_window(conversation, session, cfg)
    try:
        check_context_length(window)
    except ContextWindowTooSmall as exc:
        raise ConfigurationProblem(f"model.context_length: {exc}") from None
    c = cfg.compression
    engine = get_context_engine(
        cfg.context.engine,
        context_length=window,
        threshold=c.threshold,
        target_ratio=c.target_ratio,
        protect_first_n=c.protect_first_n,
        protect_last_n=c.protect_last_n,
        max_tokens=conversation.max_tokens,
        summariser=summariser,
        fallback_summariser=fallback_summariser,
        on_summary_failure=c.on_summary_failure,
        model=conversation.model,
        provider=conversation.provider,
        codex_autoraise=c.codex_gpt55_autoraise,
        codex_autoraise_notice=c.codex_gpt55_autoraise_notice,
        # Feasibility (SPEC §7.1): the summariser reads the middle in chunks that fit its window,
        # and a threshold above that window (or the session's stored one) is lowered to it.
        summariser_context_length=auxiliary_window(conversation, session, cfg),
        # The stored conversation, for the recall tools (lcm's always, the compressor's while
        # context.recall_tools is on); read only when used.
        recall=recall_for(conversation_id=conversation.id, session_id=session.id),
        recall_tools=cfg.context.recall_tools,
    )
    engine.load_state({**(session.engine_state or {}), **{name: getattr(session, name) for name in STATE_FIELDS}})
    return engine


class _NoConversation:
    """The recall of an engine built only to list its tools: there is no conversation to read."""

    def search(self, query: str, limit: int) -> list[dict]:
        raise ValueError("no conversation: this engine was built only to list its tools")

    def expand(self, ref, before: int, after: int) -> dict:
        raise ValueError("no conversation: this engine was built only to list its tools")

    def context_refs(self) -> list[tuple[str, str | None]]:
        return []


def engine_for_tools(cfg):
    """An engine of the configured kind that offers exactly the tools ``engine_build`` would give a
    conversation's engine under ``cfg`` (the recall tools included or not, as ``context.recall_tools``
    says), for counting tool schemas where there is no conversation. Never for compressing."""
    return get_context_engine(cfg.context.engine, context_length=MINIMUM_CONTEXT_LENGTH, recall=_NoConversation(),
                              recall_tools=cfg.context.recall_tools)


def auxiliary_window(conversation: Conversation, session: Session, cfg) -> int | None:
    """The summariser's context window: the session's own when the summariser is the main model,
    else the auxiliary model's from the catalogue (None when unknown)."""
    aux = cfg.auxiliary
    if aux.provider in ("auto", "main") and not aux.model:
        return session_window(conversation, session, cfg)
    info = get_model(aux.model or conversation.model)
    return info.context_window if info else None


def engine_state_save(*, session: Session, engine) -> None:
    """Persist the engine's state: the fields the pages query as columns, the rest as JSON."""
    state = dict(engine.export_state())
    for name in STATE_FIELDS:
        value = state.pop(name, getattr(session, name))
        if name == "previous_summary" and value is None:
            value = ""
        setattr(session, name, value)
    session.engine_state = state
    session.save(update_fields=[*STATE_FIELDS, "engine_state"])


def provider_for(name: str, *, base_url: str = "", api_key: str = "", cfg=None):
    """The provider of a route. `auto` (the auxiliary default) is the installation's main route;
    `custom` is the admin's OpenAI-compatible endpoint unless a base URL is given."""
    if name == "auto":
        name = "simulator" if simulator_needed({"ANTHROPIC_API_KEY": settings.ANTHROPIC_API_KEY or ""}) else "anthropic"
    if name == "simulator":
        return _provider("simulator", settings.HERMES_SIMULATOR_URL, "")
    if name == "anthropic":
        return _provider("anthropic", base_url, api_key or settings.ANTHROPIC_API_KEY)
    if name == "custom" and not base_url:
        m = (cfg or current_config()).model
        if not m.base_url:
            raise ConfigurationProblem("model.base_url: the custom route needs the endpoint's base URL; "
                                       "set it in the admin under Model defaults")
        return _provider("custom", m.base_url, m.api_key)
    return _provider(name, base_url, api_key)


@functools.lru_cache(maxsize=32)
def _provider(name: str, base_url: str, api_key: str):
    """One provider (and SDK client, with its connection pool) per route and key per process:
    building a client loads the TLS certificates, ~90 ms a turn otherwise."""
    # Imported here: the SDKs take seconds to import and the pages that only read figures
    # (the gauge on a socket connect) must not pay for them.
    from llm.providers import get_provider

    return get_provider(name, api_key=api_key or None, base_url=base_url or None)


def main_provider(conversation: Conversation, cfg=None):
    return provider_for(conversation.provider, cfg=cfg)


def aux_route(conversation: Conversation, cfg) -> tuple[Provider, str]:
    """(provider, model) of the auxiliary summariser; `auto`/`main` follow the main model."""
    aux = cfg.auxiliary
    if aux.provider in ("auto", "main"):
        return main_provider(conversation, cfg), aux.model or conversation.model
    return (provider_for(aux.provider, base_url=aux.base_url, api_key=aux.api_key, cfg=cfg),
            aux.model or conversation.model)


def current_config():
    return settings_store.current()

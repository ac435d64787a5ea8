"""Turn the settings of the moment into working parts for one turn or job: the session's context
engine (restored from its stored state), the main model's provider and the summariser."""
from __future__ import annotations

import functools

from django.conf import settings

from compression import settings_store
from compression.core.engine import get_context_engine
from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH
from llm.models import get_model
from sessions.models import Conversation, Session

STATE_FIELDS = ("compression_count", "previous_summary", "cooldown_until", "ineffective_count", "last_prompt_tokens")


class ConfigurationProblem(Exception):
    """Settings that cannot work (e.g. a main model window under 64,000); shown to the user."""


def model_window(conversation: Conversation, cfg) -> int:
    if conversation.context_length:
        return conversation.context_length
    if cfg.model.context_length:
        return cfg.model.context_length
    info = get_model(conversation.model)
    return info.context_window if info else 200_000


def session_window(conversation: Conversation, session: Session, cfg) -> int:
    window = model_window(conversation, cfg)
    if session.context_length:
        window = min(window, session.context_length)  # lowered by a provider's overflow error
    return window


def engine_build(*, conversation: Conversation, session: Session, cfg, summarizer=None):
    window = session_window(conversation, session, cfg)
    if window < MINIMUM_CONTEXT_LENGTH:
        raise ConfigurationProblem(
            f"model.context_length: {window:,} tokens is below the minimum of {MINIMUM_CONTEXT_LENGTH:,}; "
            "choose a model with a larger window")
    c = cfg.compression
    engine = get_context_engine(
        cfg.context.engine,
        context_length=window,
        threshold=c.threshold,
        target_ratio=c.target_ratio,
        protect_first_n=c.protect_first_n,
        protect_last_n=c.protect_last_n,
        max_tokens=conversation.max_tokens,
        summarizer=summarizer,
        on_summary_failure=c.on_summary_failure,
        model=conversation.model,
        provider=conversation.provider,
        codex_autoraise=c.codex_gpt55_autoraise,
        codex_autoraise_notice=c.codex_gpt55_autoraise_notice,
    )
    engine.load_state({**(session.engine_state or {}), **{name: getattr(session, name) for name in STATE_FIELDS}})
    # Feasibility (SPEC §7.1): the summariser must be able to read what it is asked to summarise,
    # so a threshold above the auxiliary model's window is lowered to that window.
    limit = min(filter(None, (session.threshold_tokens, auxiliary_window(conversation, cfg))), default=None)
    if limit and limit < engine.threshold_tokens:
        engine.threshold_tokens = limit
        engine.tail_token_budget = int(limit * engine.target_ratio)
        engine.lowered_to_aux_window = limit
    return engine


def auxiliary_window(conversation: Conversation, cfg) -> int | None:
    """The auxiliary (summariser) model's context window, when the catalog knows it."""
    aux = cfg.auxiliary
    model = aux.model or (conversation.model if aux.provider in ("auto", "main") else "")
    info = get_model(model) if model else None
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


def provider_for(name: str, *, base_url: str = "", api_key: str = ""):
    if name in ("simulator", "auto") and not settings.ANTHROPIC_API_KEY:
        return _provider("simulator", settings.HERMES_SIMULATOR_URL, "")
    if name in ("anthropic", "auto"):
        return _provider("anthropic", base_url, api_key or settings.ANTHROPIC_API_KEY)
    return _provider(name, base_url, api_key)


@functools.lru_cache(maxsize=32)
def _provider(name: str, base_url: str, api_key: str):
    """One provider (and SDK client, with its connection pool) per route and key per process:
    building a client loads the TLS certificates, ~90 ms a turn otherwise."""
    # Imported here: the SDKs take seconds to import and the pages that only read figures
    # (the gauge on a socket connect) must not pay for them.
    from llm.providers import get_provider

    return get_provider(name, api_key=api_key or None, base_url=base_url or None)


def main_provider(conversation: Conversation):
    return provider_for(conversation.provider)


def aux_route(conversation: Conversation, cfg) -> tuple[object, str]:
    """(provider, model) of the auxiliary summariser; `auto`/`main` follow the main model."""
    aux = cfg.auxiliary
    if aux.provider in ("auto", "main"):
        return main_provider(conversation), aux.model or conversation.model
    return provider_for(aux.provider, base_url=aux.base_url, api_key=aux.api_key), aux.model or conversation.model


def current_config():
    return settings_store.current()

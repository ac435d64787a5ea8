"""A conversation's compression threshold and the projected size of its next request (SPEC §3.4,
§4), asked of the core's `threshold_rule` and `project_next_request` in this one place: the agent
loop's preflight and post-response checks, gateway hygiene, the gauge, the sidebar and staff rows,
/metrics and the feasibility warnings all come here, so they agree to the token.

The counted size of a request is the stored per-message counts (tiktoken, counted once when the
message was stored) plus each message's overhead, plus the offered tool schemas. The model's
measured ratio of real to counted tokens is kept per model (`ModelTokenRatio`) and updated after
every response that reports usage.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F

from compression.core.projection import (
    RATIO_DECAY,
    Projection,
    project_next_request,
    ratio_of,
    tool_schema_tokens,
)
from compression.core.thresholds import Threshold, threshold_rule
from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, message_tokens
from sessions import selectors
from sessions.agent.tools.schemas import tool_schemas
from sessions.models import Conversation, ModelTokenRatio, Session
from sessions.services import runtime
from sessions.services.context import SYSTEM_PROMPT
from sessions.services.mcp import OfferedServer, servers_offered


def threshold_of(conversation: Conversation, session: Session, cfg) -> Threshold:
    """The threshold the conversation's engine uses (the same arguments `runtime.engine_build` gives it)."""
    c = cfg.compression
    return threshold_rule(
        runtime.session_window(conversation, session, cfg), c.threshold, max_tokens=conversation.max_tokens,
        provider=conversation.provider, model=conversation.model, codex_autoraise=c.codex_gpt55_autoraise,
        codex_autoraise_notice=False, summariser_window=runtime.auxiliary_window(conversation, session, cfg))


# --- The tools offered with every request ------------------------------------------------------


@dataclass(frozen=True)
class OfferedTools:
    workspace: list[dict]
    engine: list[dict]  # the context engine's own tools (none named like a workspace tool)
    mcp: tuple[OfferedServer, ...] = ()  # the MCP servers' tools (all named mcp_…)

    @property
    def all(self) -> list[dict]:
        return self.workspace + self.engine + [t for server in self.mcp for t in server.schemas]

    @property
    def by_source(self) -> dict[str, list[dict]]:
        """The tools by where they come from, as the context breakdown shows them."""
        return {"built-in": self.workspace, "context engine": self.engine,
                **{f"mcp:{server.name}": server.schemas for server in self.mcp}}

    @property
    def engine_names(self) -> set[str]:
        return {t["name"] for t in self.engine}


def engine_tool_schemas(engine) -> list[dict]:
    """The context engine's own tools in the agent's schema shape (name, description, parameters)."""
    schemas = []
    for schema in engine.get_tool_schemas() or []:
        if isinstance(schema, dict) and isinstance(schema.get("function"), dict):
            schema = schema["function"]
        if isinstance(schema, dict) and schema.get("name"):
            schemas.append({"name": schema["name"], "description": schema.get("description", ""),
                            "parameters": schema.get("parameters") or {"type": "object", "properties": {}}})
    return schemas


def offered_tools(cfg, engine=None, conversation: Conversation | None = None, *, servers=None) -> OfferedTools:
    """The workspace tools, the engine's (``engine``, else one of the configured kind) and the MCP
    servers' the conversation has on (every usable server's without a conversation); an engine
    tool named like a workspace tool is left out (the API refuses duplicate names)."""
    workspace = tool_schemas(terminal_enabled=cfg.agent.terminal_enabled)
    if engine is None:
        engine = runtime.engine_for_tools(cfg)
    taken = {t["name"] for t in workspace}
    return OfferedTools(workspace, [t for t in engine_tool_schemas(engine) if t["name"] not in taken],
                        tuple(servers_offered(conversation, servers=servers)))


# --- The model's measured ratio ----------------------------------------------------------------


def ratio_record(*, model: str, real: int, counted: int) -> None:
    """One more response: its real prompt against the counted request that was sent (atomic)."""
    if real <= 0 or counted <= 0 or not model:
        return
    change = {"real_sum": F("real_sum") * RATIO_DECAY + real, "counted_sum": F("counted_sum") * RATIO_DECAY + counted,
              "samples": F("samples") + 1}
    if ModelTokenRatio.objects.filter(model=model).update(**change):
        return
    try:
        with transaction.atomic():
            ModelTokenRatio.objects.create(model=model, real_sum=real, counted_sum=counted, samples=1)
    except IntegrityError:  # another worker created it first
        ModelTokenRatio.objects.filter(model=model).update(**change)


def ratios(models) -> dict[str, float]:
    """{model: measured ratio} for the models that have one (one query)."""
    rows = ModelTokenRatio.objects.filter(model__in=set(models)).values_list("model", "real_sum", "counted_sum")
    return {model: ratio_of(real, counted) for model, real, counted in rows}


# --- The projection ----------------------------------------------------------------------------


def message_size(msg: dict) -> int:
    return message_tokens(msg) + MESSAGE_OVERHEAD_TOKENS


def counted_request(messages: list[dict], tools: list[dict]) -> int:
    """The counted size of a request: its messages' stored counts and overheads, and its tool schemas."""
    return sum(message_size(m) for m in messages) + tool_schema_tokens(tools)


def project(session: Session, *, counted: int, ratio: float) -> Projection:
    return project_next_request(counted=counted, last_real=max(0, session.last_prompt_tokens),
                                counted_at_last_real=session.counted_prompt_tokens, ratio=ratio)


def projection_of(conversation: Conversation, session: Session, cfg, *, messages: list[dict],
                  tools: list[dict], ratio: float | None = None) -> Projection:
    """The next request of ``session`` (whose context is ``messages``, system prompt first); the
    model's ratio is read unless given."""
    if ratio is None:
        ratio = ratios([conversation.model]).get(conversation.model, ratio_of(0, 0))
    return project(session, counted=counted_request(messages, tools), ratio=ratio)


def shown_tokens(projection: Projection, message_count: int) -> int:
    """What a page shows: the projection, or 0 (empty) before the session has a message."""
    return projection.tokens if message_count or projection.last_real else 0


def rows_projection(conversations, sessions: dict, cfg) -> dict:
    """{conversation id: (Projection, live message count)} for list rows, in three queries however many rows: the active
    sessions' stored message counts, and the models' ratios (the sessions are given)."""
    offered = offered_tools(cfg)  # every usable MCP server's tools; a row's switched-off servers come off below
    tool_tokens: dict[frozenset, int] = {}  # counted once per distinct set of servers switched off
    sums = selectors.context_token_sums([s.id for s in sessions.values() if s.pk])
    found = ratios(c.model for c in conversations)
    system_tokens: dict[str, int] = {}  # each distinct system prompt tokenised once, not once a row
    out = {}
    for c in conversations:
        session = sessions.get(c.id) or Session(conversation=c)
        total, count = sums.get(session.id, (0, 0)) if session.pk else (0, 0)
        prompt = session.system_prompt or SYSTEM_PROMPT
        if prompt not in system_tokens:
            system_tokens[prompt] = message_size({"role": "system", "content": prompt})
        off = frozenset(c.mcp_off or ()) & {s.name for s in offered.mcp}
        if off not in tool_tokens:
            kept = OfferedTools(offered.workspace, offered.engine, tuple(s for s in offered.mcp if s.name not in off))
            tool_tokens[off] = tool_schema_tokens(kept.all)
        counted = total + count * MESSAGE_OVERHEAD_TOKENS + system_tokens[prompt] + tool_tokens[off]
        out[c.id] = (project(session, counted=counted, ratio=found.get(c.model, ratio_of(0, 0))), count)
    return out

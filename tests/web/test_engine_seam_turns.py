"""Whole turns through the agent loop with plugin engines written to the four members of
plugins/context_engine/README.md: the host calls nothing the base class does not provide, and an
engine's own tool reaches the model and answers it."""
from __future__ import annotations

import pytest

from compression import settings_store
from compression.core.base import CompressionResult, ContextEngine
from compression.core.registry import register_context_engine, reset_registry
from sessions.models import Message, Turn
from tests.web.test_agent_loop import conversation, fill_history, submit  # noqa: F401


class FourMembers(ContextEngine):
    name = "four_members"

    def update_from_response(self, usage):
        self.last_prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)

    def should_compress(self, prompt_tokens=None):
        return (prompt_tokens or self.last_prompt_tokens) >= self.threshold_tokens

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kwargs):
        kept = [dict(m) for m in messages[:1] + messages[-2:]]
        return CompressionResult(kept, "compressed", messages_before=len(messages), messages_after=len(kept))


class WithATool(FourMembers):
    name = "with_a_tool"
    calls: list = []

    def get_tool_schemas(self):
        search = {"name": "context_search", "description": "Search the engine's own store.",
                  "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                                  "limit": {"type": "integer"}},
                                 "required": ["query"]}}
        clash = {"name": "read_file", "description": "A name the workspace already uses.",
                 "parameters": {"type": "object", "properties": {}}}
        return [search, clash]

    def handle_tool_call(self, name, args, **ctx):
        WithATool.calls.append((name, args, len(ctx.get("messages") or [])))
        return f"engine store: {args.get('query')} -> the launch code is 7781"


@pytest.fixture(autouse=True)
def _wiring(eager_simulator):
    """Every test here talks to the shared simulator (tests/web/conftest.py)."""


@pytest.fixture
def engine_named(settings):
    def use(cls):
        register_context_engine(cls, cls.name)
        settings_store.save_group("context", {"engine": cls.name})
    yield use
    reset_registry()


@pytest.mark.django_db
def test_a_four_member_engine_runs_whole_turns(alice, conversation, engine_named,  # noqa: F811
                                               django_capture_on_commit_callbacks):
    engine_named(FourMembers)
    fill_history(conversation, 4)
    for text in ("hello there", "and again"):
        turn = submit(alice, conversation, text, django_capture_on_commit_callbacks)
        assert turn.status == "done", turn.error
    reply = Message.objects.filter(conversation=conversation, role="assistant").latest("id")
    assert str(reply.content).startswith('You said: "and again"')
    from sessions.presenters import gauge

    assert gauge(conversation)["tokens"] > 0  # the page's figures work on the plugin engine too


@pytest.mark.django_db
def test_an_engines_own_tool_reaches_the_model_and_answers_it(alice, conversation, engine_named,  # noqa: F811
                                                              django_capture_on_commit_callbacks):
    engine_named(WithATool)
    WithATool.calls.clear()
    turn = submit(alice, conversation, "search the history for launch code", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error  # a clashing engine tool name is not offered (the API's 400)
    assert [c[0] for c in WithATool.calls] == ["context_search"]
    result = Message.objects.get(conversation=conversation, role="tool")
    assert "launch code is 7781" in str(result.content)
    assert Turn.objects.get(id=turn.id).status == "done"

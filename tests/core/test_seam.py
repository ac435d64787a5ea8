"""The plugin seam holds: an engine written to the four documented members runs every host call."""

import logging
import threading

from compression.core.base import CompressionPreview
from compression.core.compressor import ContextCompressor
from compression.core.engine import (
    CompressionResult,
    ContextEngine,
    get_context_engine,
    register_context_engine,
)

from .conftest import assistant, system, user

# Every keyword the host's engine_build passes (sessions/services/runtime.py), new ones included, but
# recall and recall_tools, which the tests that use them pass themselves.
HOST_KWARGS = dict(
    context_length=200_000, threshold=0.5, target_ratio=0.2, protect_first_n=3, protect_last_n=20,
    max_tokens=4_096, summariser=None, on_summary_failure="abort", model="claude-x", provider="anthropic",
    codex_autoraise=True, codex_autoraise_notice=True, summariser_context_length=64_000,
    fallback_summariser=None,
)


class FourMembers(ContextEngine):
    """Exactly what plugins/context_engine/README.md asks for, and nothing else."""

    name = "four"

    def update_from_response(self, usage):
        self.last_prompt_tokens = int((usage or {}).get("input_tokens") or 0)

    def should_compress(self, prompt_tokens=None):
        return (prompt_tokens or self.last_prompt_tokens) >= self.threshold_tokens

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kwargs):
        kept = [dict(m) for m in messages[:1] + messages[-2:]]
        return CompressionResult(kept, "compressed", messages_before=len(messages), messages_after=len(kept))


def chat():
    return [system(), user("hello " * 50), assistant("hi " * 50), user("more " * 50), assistant("ok " * 50)]


def test_a_four_member_engine_answers_every_call_the_host_makes():
    register_context_engine(FourMembers)
    engine = get_context_engine("four", **HOST_KWARGS)
    assert isinstance(engine, FourMembers)
    msgs = chat()
    # Configuration through the constructor: the window, the threshold (SPEC §4, lowered to the
    # summariser's 64,000-token window), the tail budget and the cap the gauge shows.
    assert engine.context_length == 200_000
    assert engine.threshold_tokens == engine.lowered_to_aux_window == 64_000
    assert engine.tail_token_budget == 12_800
    # The turn loop (sessions/services/turns.py).
    rough = engine.estimate_history_tokens(msgs)
    assert rough == engine.count_messages_tokens(msgs) > 0
    assert engine.estimate_history_tokens([*msgs, user("again")]) > rough
    assert engine.should_defer_preflight_to_real_usage(rough) is False
    engine.update_from_response({"input_tokens": 70_000})
    assert engine.should_compress() is True
    # The compaction service and the pages.
    assert engine.compress(msgs).compressed
    preview = engine.preview(msgs, focus_topic="x")
    assert isinstance(preview, CompressionPreview) and not preview.has_content and "no preview" in preview.reason
    assert engine.blocked_reason() is None
    state = engine.export_state()
    engine.load_state(state)
    assert engine.get_status()["threshold_tokens"] == 64_000
    assert engine.get_tool_schemas() == [] and "Unknown context engine tool" in engine.handle_tool_call("x", {})


def test_the_builtin_takes_its_caps_through_the_constructor():
    engine = get_context_engine("compressor", **HOST_KWARGS)
    assert isinstance(engine, ContextCompressor)
    assert (engine.threshold_tokens, engine.tail_token_budget, engine.lowered_to_aux_window) == (64_000, 12_800, 64_000)
    assert engine.summariser_context_length == 64_000
    capped = get_context_engine("compressor", **{**HOST_KWARGS, "summariser_context_length": 70_000})
    assert (capped.threshold_tokens, capped.lowered_to_aux_window) == (70_000, 70_000)
    unknown = get_context_engine("compressor", **{**HOST_KWARGS, "summariser_context_length": None})
    assert unknown.summariser_context_length == 64_000  # unknown: the smallest window an aux model may have
    assert unknown.lowered_to_aux_window is None
    uncapped = get_context_engine("compressor", **{**HOST_KWARGS, "summariser_context_length": 1_000_000})
    assert uncapped.lowered_to_aux_window is None and uncapped.threshold_tokens == 97_952
    uncapped.update_model(context_length=150_000)
    assert uncapped.threshold_tokens == 72_952  # a model switch keeps the caps and recomputes


def test_an_engine_that_cannot_be_deep_copied_falls_back_to_the_builtin_with_a_warning(caplog):
    engine = FourMembers()
    engine.lock = threading.Lock()  # not deep-copyable
    register_context_engine(engine, name="locked")
    with caplog.at_level(logging.WARNING):
        built = get_context_engine("locked", **HOST_KWARGS)
    assert isinstance(built, ContextCompressor)
    assert "locked" in caplog.text and "falling back" in caplog.text


def test_a_factory_that_raises_falls_back_to_the_builtin(caplog):
    def broken(**_):
        raise RuntimeError("no database here")

    broken.name = "broken"
    register_context_engine(broken)
    with caplog.at_level(logging.WARNING):
        assert isinstance(get_context_engine("broken", **HOST_KWARGS), ContextCompressor)
    assert "broken" in caplog.text

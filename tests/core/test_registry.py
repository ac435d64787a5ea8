import logging
import textwrap

import pytest

from compression.core.compressor import ContextCompressor
from compression.core.engine import (
    CompressionResult,
    ContextEngine,
    get_context_engine,
    register_context_engine,
    registered_engines,
    set_plugin_dir,
)


class TinyEngine(ContextEngine):
    """Keeps the last two messages; proves the seam needs only four members."""

    name = "tiny"

    def __init__(self, context_length: int = 100_000, **_):
        self.context_length = context_length
        self.threshold_tokens = context_length // 2
        self.seen = []

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.get("input_tokens", 0)

    def should_compress(self, prompt_tokens=None):
        return (prompt_tokens or self.last_prompt_tokens) >= self.threshold_tokens

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kwargs):
        self.seen.append(len(messages))
        kept = [dict(m) for m in messages[-2:]]
        return CompressionResult(kept, "compressed", messages_before=len(messages), messages_after=len(kept))


def test_it_builds_the_builtin_compressor_by_default():
    engine = get_context_engine("compressor", context_length=200_000, threshold=0.6)
    assert isinstance(engine, ContextCompressor)
    assert engine.threshold_tokens == 120_000
    assert isinstance(get_context_engine(None, context_length=200_000), ContextCompressor)


def test_it_selects_a_registered_engine_by_name_with_its_own_kwargs():
    register_context_engine(TinyEngine)
    assert "tiny" in registered_engines()
    engine = get_context_engine("tiny", context_length=64_000, threshold=0.9)
    assert isinstance(engine, TinyEngine) and engine.context_length == 64_000
    res = engine.compress([{"role": "user", "content": str(i)} for i in range(5)])
    assert res.status == "compressed" and len(res.messages) == 2


def test_it_gives_each_session_its_own_instance_even_from_a_registered_instance():
    register_context_engine(TinyEngine(), name="tiny")
    a, b = get_context_engine("tiny"), get_context_engine("tiny")
    a.compress([{"role": "user", "content": "x"}])
    assert a is not b and b.seen == []


def test_it_falls_back_to_the_builtin_with_a_warning_naming_the_engine(caplog):
    with caplog.at_level(logging.WARNING):
        engine = get_context_engine("lcm-typo", context_length=200_000)
    assert isinstance(engine, ContextCompressor)
    assert "lcm-typo" in caplog.text and "falling back" in caplog.text


def test_it_never_treats_a_name_as_a_path(tmp_path, caplog):
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "__init__.py").write_text("raise SystemExit('loaded')")
    set_plugin_dir(tmp_path / "sub")
    with caplog.at_level(logging.WARNING):
        assert isinstance(get_context_engine("../evil", context_length=200_000), ContextCompressor)


def write_plugin(root, name, body):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(body))
    return folder


def test_it_loads_a_plugin_folder_via_register(tmp_path):
    folder = write_plugin(
        tmp_path,
        "folded",
        """
        from .engine_impl import Folded

        def register(ctx):
            ctx.register_command("ignored", lambda: None)
            ctx.register_context_engine(Folded)
        """,
    )
    (folder / "engine_impl.py").write_text(
        textwrap.dedent(
            """
            from compression.core.engine import ContextEngine, CompressionResult

            class Folded(ContextEngine):
                name = "folded"
                def __init__(self, context_length=0):
                    self.context_length = context_length
                def update_from_response(self, usage): pass
                def should_compress(self, prompt_tokens=None): return False
                def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kw):
                    return CompressionResult(messages, "noop")
            """
        )
    )
    engine = get_context_engine("folded", plugin_dir=tmp_path, context_length=300_000, threshold=0.5)
    assert type(engine).__name__ == "Folded" and engine.context_length == 300_000


def test_it_instantiates_the_first_engine_class_of_a_plugin_without_register(tmp_path):
    write_plugin(
        tmp_path,
        "plain",
        """
        from compression.core.engine import ContextEngine, CompressionResult

        class Plain(ContextEngine):
            name = "plain"
            def update_from_response(self, usage): pass
            def should_compress(self, prompt_tokens=None): return False
            def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kw):
                return CompressionResult(messages, "noop")
        """,
    )
    set_plugin_dir(tmp_path)
    assert type(get_context_engine("plain", context_length=1)).__name__ == "Plain"


def test_it_prefers_the_plugin_folder_over_a_registered_engine(tmp_path):
    write_plugin(
        tmp_path,
        "tiny",
        """
        from compression.core.engine import ContextEngine, CompressionResult

        class FolderTiny(ContextEngine):
            name = "tiny"
            def update_from_response(self, usage): pass
            def should_compress(self, prompt_tokens=None): return False
            def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kw):
                return CompressionResult(messages, "noop")
        """,
    )
    register_context_engine(TinyEngine)
    assert type(get_context_engine("tiny", plugin_dir=tmp_path)).__name__ == "FolderTiny"


def test_it_falls_back_when_a_plugin_is_broken(tmp_path, caplog):
    write_plugin(tmp_path, "broken", "raise ImportError('missing dependency')")
    with caplog.at_level(logging.WARNING):
        engine = get_context_engine("broken", plugin_dir=tmp_path, context_length=200_000)
    assert isinstance(engine, ContextCompressor)
    assert "broken" in caplog.text


def test_it_rejects_things_that_are_not_engines():
    with pytest.raises(TypeError):
        register_context_engine(42, name="answer")
    with pytest.raises(ValueError):
        register_context_engine(lambda: None)


def test_it_loads_the_bundled_example_plugin_from_the_default_folder():
    from .conftest import RecordingSummariser, assistant, user

    summariser = RecordingSummariser()
    engine = get_context_engine("recent_focus", context_length=200_000, target_ratio=0.1, summariser=summariser)
    assert type(engine).__name__ == "RecentFocusCompressor" and engine.name == "recent_focus"
    msgs = [{"role": "system", "content": "sys"}]
    for i in range(12):
        msgs += [user(f"please fix bug {i} " + "detail " * 3_000), assistant(f"fixed {i} " + "done " * 3_000)]
    res = engine.compress(msgs, force=True)
    assert res.status == "compressed"
    assert 'FOCUS TOPIC: "Recent user focus: please fix bug 9' in summariser.last_prompt

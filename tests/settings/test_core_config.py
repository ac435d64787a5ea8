"""The pure validator shared by the forms, the YAML import and the engine (no database)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compression.core import caching
from compression.core import config as cfg
from compression.core.config import (
    AuxiliaryConfig,
    CompressionConfig,
    ConfigValueError,
    RuntimeConfig,
    build_compression,
    build_group,
    build_runtime,
    check_main_window,
    decide_codex_app_server,
    validate_value,
)

PROJECT = Path(__file__).resolve().parents[2]

# (group, field, value, text the error must contain)
INVALID = [
    ("compression", "enabled", "maybe", "true or false"),
    ("compression", "threshold", 0, "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", 1.5, "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", -0.2, "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", "half", "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", float("nan"), "0.0–1.0 (exclusive of 0)"),
    ("compression", "target_ratio", 0.05, "0.10–0.80"),
    ("compression", "target_ratio", 0.81, "0.10–0.80"),
    ("compression", "protect_last_n", 0, "≥ 1"),
    ("compression", "protect_last_n", 2.5, "≥ 1"),
    ("compression", "protect_first_n", -1, "≥ 0"),
    ("compression", "hygiene_hard_message_limit", 3, "≥ 4"),
    ("compression", "max_compression_attempts", 0, "1–10"),
    ("compression", "max_compression_attempts", 11, "1–10"),
    ("compression", "max_compression_attempts", True, "1–10"),
    ("compression", "in_place", 2, "true or false"),
    ("compression", "on_summary_failure", "drop", "abort / fallback"),
    ("compression", "codex_gpt55_autoraise", "sometimes", "true or false"),
    ("compression", "codex_gpt55_autoraise_notice", None, "true or false"),
    ("compression", "codex_app_server_auto", "auto", "native / hermes / off"),
    ("auxiliary", "provider", "openai", "auto, main, anthropic, openrouter, nous, custom, simulator"),
    ("auxiliary", "model", "m" * 201, "at most 200 characters"),
    ("auxiliary", "base_url", "not a url", "empty or an http(s) URL"),
    ("auxiliary", "base_url", "ftp://example.com/v1", "empty or an http(s) URL"),
    ("auxiliary", "base_url", "https://", "empty or an http(s) URL"),
    ("auxiliary", "base_url", "http://host:99999/", "empty or an http(s) URL"),
    ("auxiliary", "timeout", 4, "5–900"),
    ("auxiliary", "timeout", 901, "5–900"),
    ("caching", "cache_ttl", "10m", "5m / 1h"),
    ("caching", "strategy", "every_message", "none, rolling_1h"),
    ("context", "engine", "two words", "a registered or plugin engine name"),
    ("context", "engine", "", "a registered or plugin engine name"),
    ("model", "provider", "openai", "simulator, anthropic, openrouter, nous, custom"),
    ("model", "model", "  ", "a model name"),
    ("model", "context_length", 32_000, "empty or ≥ 64,000"),
    ("model", "max_tokens", 0, "≥ 1"),
    ("agent", "max_iterations", 0, "1–200"),
    ("agent", "max_iterations", 201, "1–200"),
    ("agent", "terminal_enabled", "perhaps", "true or false"),
    ("agent", "terminal_timeout", 0, "1–600"),
    ("agent", "terminal_timeout", 601, "1–600"),
]

# (group, field, raw value, typed value)
VALID = [
    ("compression", "enabled", "no", False),
    ("compression", "threshold", 1.0, 1.0),
    ("compression", "threshold", "0.75", 0.75),
    ("compression", "threshold", 0.01, 0.01),
    ("compression", "target_ratio", 0.10, 0.10),
    ("compression", "target_ratio", 0.80, 0.80),
    ("compression", "protect_last_n", 1, 1),
    ("compression", "protect_first_n", 0, 0),
    ("compression", "hygiene_hard_message_limit", "4", 4),
    ("compression", "max_compression_attempts", 10, 10),
    ("compression", "in_place", "yes", True),
    ("compression", "on_summary_failure", "fallback", "fallback"),
    ("compression", "codex_app_server_auto", "off", "off"),
    ("auxiliary", "provider", "simulator", "simulator"),
    ("auxiliary", "model", "", ""),
    ("auxiliary", "base_url", "", ""),
    ("auxiliary", "base_url", "https://llm.example.com:8443/v1", "https://llm.example.com:8443/v1"),
    ("auxiliary", "timeout", 5, 5),
    ("auxiliary", "timeout", 900.0, 900),
    ("caching", "cache_ttl", "1h", "1h"),
    ("caching", "strategy", "none", "none"),
    ("context", "engine", "lossless_recall", "lossless_recall"),
    ("model", "context_length", None, None),
    ("model", "context_length", "", None),
    ("model", "context_length", 64_000, 64_000),
    ("model", "max_tokens", 1, 1),
    ("agent", "max_iterations", 200, 200),
    ("agent", "terminal_timeout", 600, 600),
]


@pytest.mark.parametrize("group, name, value, valid", INVALID, ids=[f"{g}.{n}={v!r}" for g, n, v, _ in INVALID])
def test_it_rejects_each_invalid_value_naming_the_valid_range(group, name, value, valid):
    with pytest.raises(ConfigValueError) as exc:
        build_group(group, {name: value})
    assert exc.value.field == name
    assert exc.value.group == group
    assert valid in exc.value.message
    assert str(exc.value).startswith(cfg.yaml_key(group, name) + ":")


@pytest.mark.parametrize("group, name, value, typed", VALID, ids=[f"{g}.{n}={v!r}" for g, n, v, _ in VALID])
def test_it_accepts_each_valid_value_with_its_type(group, name, value, typed):
    assert getattr(build_group(group, {name: value}), name) == typed


def test_it_has_the_spec_defaults():
    config = RuntimeConfig()
    assert config.compression == CompressionConfig(
        enabled=True, threshold=0.50, target_ratio=0.20, protect_last_n=20, protect_first_n=3,
        hygiene_hard_message_limit=5000, max_compression_attempts=3, in_place=False, on_summary_failure="abort",
        codex_gpt55_autoraise=True, codex_gpt55_autoraise_notice=True, codex_app_server_auto="native")
    assert (config.auxiliary.provider, config.auxiliary.model, config.auxiliary.base_url,
            config.auxiliary.timeout) == ("auto", "", "", 120)
    assert (config.caching.cache_ttl, config.caching.strategy) == ("5m", "rolling_1h")
    assert config.context.engine == "compressor"
    assert (config.model.provider, config.model.model, config.model.context_length, config.model.max_tokens) == (
        "simulator", "sim-claude-200k", None, 4096)
    assert (config.agent.max_iterations, config.agent.terminal_enabled, config.agent.terminal_timeout) == (
        30, False, 30)


def test_it_never_silently_changes_an_invalid_ttl():
    with pytest.raises(ConfigValueError):
        cfg.build_caching(cache_ttl="10m")
    with pytest.raises(ConfigValueError):
        validate_value("caching", "cache_ttl", "1H ")  # no case folding either


def test_it_reports_every_invalid_field_of_a_group_at_once():
    with pytest.raises(ConfigValueError) as exc:
        build_compression(threshold=0, target_ratio=0.05, protect_last_n=5)
    assert [e.field for e in exc.value.all] == ["threshold", "target_ratio"]


def test_it_reports_invalid_fields_across_groups():
    with pytest.raises(ConfigValueError) as exc:
        build_runtime({"compression": {"threshold": 2}, "caching": {"cache_ttl": "10m"},
                       "agent": {"max_iterations": 5}})
    assert [e.key for e in exc.value.all] == ["compression.threshold", "prompt_caching.cache_ttl"]


def test_it_refuses_unknown_fields_and_groups():
    with pytest.raises(ConfigValueError, match="unknown setting"):
        build_compression(threshold_pct=0.5)
    with pytest.raises(ConfigValueError, match="unknown settings group"):
        build_runtime({"memory": {}})


def test_it_builds_over_a_base_without_touching_other_fields():
    base = build_compression(threshold=0.7, in_place=True)
    updated = build_group("compression", {"target_ratio": 0.3}, base=base)
    assert (updated.threshold, updated.in_place, updated.target_ratio) == (0.7, True, 0.3)
    runtime = build_runtime({"agent": {"max_iterations": 7}}, base=RuntimeConfig(compression=base))
    assert runtime.compression is base and runtime.agent.max_iterations == 7


def test_it_keeps_the_api_key_out_of_repr_and_error_messages():
    aux = AuxiliaryConfig(api_key="sk-live-SECRET")
    assert "SECRET" not in repr(aux) and "SECRET" not in repr(RuntimeConfig(auxiliary=aux))
    assert aux.api_key == "sk-live-SECRET"  # kept, only hidden
    with pytest.raises(ConfigValueError) as exc:
        cfg.build_auxiliary(api_key="sk-live-SECRET" * 50)
    assert "SECRET" not in str(exc.value)


def test_it_accepts_strategies_registered_later(monkeypatch):
    monkeypatch.setattr(caching, "_STRATEGIES", dict(caching._STRATEGIES))  # the one registry, restored after
    with pytest.raises(ConfigValueError):
        cfg.build_caching(strategy="tools_and_summary")
    caching.register_cache_strategy("tools_and_summary", lambda messages, **kw: None)
    assert cfg.build_caching(strategy="tools_and_summary").strategy == "tools_and_summary"


def test_it_refuses_a_main_window_under_64000_naming_model_context_length():
    assert check_main_window(64_000) == 64_000
    with pytest.raises(ConfigValueError) as exc:
        check_main_window(32_000)
    assert str(exc.value).startswith("model.context_length:")
    assert "32,000" in str(exc.value) and "64,000" in str(exc.value)


def test_it_is_frozen():
    with pytest.raises(AttributeError):
        CompressionConfig().threshold = 0.9


@pytest.mark.parametrize(
    "mode, force, live, preflight, compact, native",
    [
        ("native", False, True, False, False, True),
        ("native", True, True, False, True, True),
        ("hermes", False, True, True, True, False),
        ("hermes", True, True, True, True, False),
        ("off", False, True, False, False, False),
        ("off", True, True, False, True, False),
        ("hermes", True, False, True, False, False),
        ("bogus", False, True, False, False, True),  # unknown → native, as built
    ],
)
def test_it_decides_codex_app_server_compaction(mode, force, live, preflight, compact, native):
    decision = decide_codex_app_server(mode, force=force, has_live_thread=live)
    assert (decision.run_preflight, decision.compact_thread, decision.record_native) == (preflight, compact, native)
    assert decision.mode == (mode if mode in cfg.CODEX_APP_SERVER_MODES else "native")
    if not compact:
        assert decision.reason.startswith(("skipped", "no live"))


def test_it_imports_the_core_config_without_django_or_yaml():
    code = ("import sys, compression.core.config as c; c.build_compression(threshold=0.6); "
            "print(sorted(m for m in ('django', 'yaml', 'celery', 'channels', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""Each injected fault reaches the caller as the right typed error, after the SDK's own retries."""

from __future__ import annotations

import time

import pytest

from llm.base import Final, TextDelta
from llm.errors import (
    AuthenticationError,
    ContextOverflowError,
    LongContextRateLimitError,
    PayloadTooLargeError,
    ProviderUnavailableError,
    RateLimitError,
)
from llm.providers import get_provider
from simulator import SimClock, start_simulator
from tests.simulator.conftest import MODEL

HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def provider(server):
    # SDK defaults (2 retries); the simulator's retry-after-ms keeps the waits to milliseconds.
    return get_provider("simulator", base_url=server.base_url, model=MODEL)


def fail_with(provider, fault: str):
    events = []
    with pytest.raises(Exception) as info:
        for event in provider.stream(HELLO, max_tokens=200, extra_headers={"x-sim-fault": fault}):
            events.append(event)
    return info.value, events


def attempts(control) -> int:
    return control("/_sim/stats")["requests"]


@pytest.mark.parametrize(
    ("fault", "error_class", "expected_attempts"),
    [
        ("429", RateLimitError, 3),
        ("long_context", LongContextRateLimitError, 3),
        ("500", ProviderUnavailableError, 3),
        ("529", ProviderUnavailableError, 3),
        ("413", PayloadTooLargeError, 1),
        ("overflow", ContextOverflowError, 1),
        ("401", AuthenticationError, 1),
        ("midstream", ProviderUnavailableError, 1),
    ],
)
def test_it_maps_each_fault_to_its_typed_error_after_the_sdk_retries(provider, control, fault, error_class, expected_attempts):
    error, _ = fail_with(provider, fault)
    assert type(error) is error_class
    assert error.message and error.provider == "simulator"
    assert attempts(control) == expected_attempts


def test_it_carries_the_overflow_limit_parsed_from_the_message(provider):
    error, _ = fail_with(provider, "overflow")
    assert error.limit == 200_000 and error.tokens > 200_000 and error.status_code == 400
    lowered, _ = fail_with(provider, "overflow=50000")
    assert lowered.limit == 50_000
    assert lowered.message.endswith("tokens > 50000 maximum")


def test_it_reports_the_retry_after_of_a_rate_limit(provider):
    error, _ = fail_with(provider, "429=7")
    assert error.retry_after == pytest.approx(0.007)
    assert "rate limit" in error.message


def test_it_delivers_text_before_a_midstream_error(provider):
    error, events = fail_with(provider, "midstream")
    assert isinstance(error, ProviderUnavailableError) and error.message == "Overloaded"
    assert events and all(isinstance(e, TextDelta) for e in events)


def test_it_recovers_when_server_faults_run_out_within_the_sdk_retries(provider, control):
    control("/_sim/faults", {"fault": "529", "count": 2})
    final = provider.complete(HELLO, max_tokens=100)
    assert final.stop_reason == "end_turn" and final.text
    stats = control("/_sim/stats")
    assert (stats["requests"], stats["errors"]) == (3, 2)
    assert control("/_sim/faults")["faults"] == []


def test_it_keeps_a_server_fault_until_cleared_when_no_count_is_given(provider, control):
    control("/_sim/faults", {"fault": "413"})
    for _ in range(2):
        with pytest.raises(PayloadTooLargeError):
            provider.complete(HELLO, max_tokens=10)
    control("/_sim/faults", {"clear": True})
    assert provider.complete(HELLO, max_tokens=10).text


def test_it_rejects_unknown_fault_names(provider, control):
    from llm.errors import InvalidRequestError

    error, _ = fail_with(provider, "explode")
    assert isinstance(error, InvalidRequestError) and "unknown fault 'explode'" in error.message


def test_it_streams_slowly_when_asked(provider):
    started = time.monotonic()
    events = list(provider.stream(HELLO, max_tokens=200, extra_headers={"x-sim-fault": "slow=0.02"}))
    elapsed = time.monotonic() - started
    assert isinstance(events[-1], Final)
    assert elapsed >= 0.02 * 6


def test_it_returns_an_empty_summary_only_for_compression_prompts(provider):
    from compression.core.summary import build_summary_prompt

    prompt = build_summary_prompt([{"role": "user", "content": "fix the bug in app.py"}], budget=2000)
    headers = {"x-sim-fault": "empty_summary"}
    assert provider.complete(prompt, max_tokens=2000, extra_headers=headers).text == ""
    assert provider.complete(HELLO, max_tokens=100, extra_headers=headers).text != ""
    assert "## Goal" in provider.complete(prompt, max_tokens=2000).text


def test_it_takes_a_server_fault_from_the_environment():
    with start_simulator(clock=SimClock(start=0.0), env={"HERMES_SIM_FAULT": "500:1"}) as server:
        provider = get_provider("simulator", base_url=server.base_url, model=MODEL, max_retries=0)
        with pytest.raises(ProviderUnavailableError):
            provider.complete(HELLO, max_tokens=10)
        assert provider.complete(HELLO, max_tokens=10).text

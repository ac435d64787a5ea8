"""Typed errors and their classification."""

from __future__ import annotations

from llm.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    LongContextRateLimitError,
    PayloadTooLargeError,
    ProviderUnavailableError,
    RateLimitError,
    classify,
    parse_context_limit,
)


def test_it_parses_the_limit_from_anthropic_and_openai_overflow_texts():
    assert parse_context_limit("prompt is too long: 219898 tokens > 200000 maximum") == 200_000
    assert parse_context_limit("This model's maximum context length is 128000 tokens. However, you requested 130000") == 128_000
    assert parse_context_limit("input length and `max_tokens` exceed context limit: 182530 + 31999 > 200000, decrease input") == 200_000
    assert parse_context_limit("prompt is too long") is None
    assert parse_context_limit("prompt is too long: 5 tokens > 3 maximum") is None  # implausible window


def test_it_classifies_an_overflow_with_its_limit_and_size():
    error = classify(400, "prompt is too long: 219898 tokens > 200000 maximum", provider="anthropic")
    assert isinstance(error, ContextOverflowError) and error.triggers_compression
    assert (error.limit, error.tokens, error.status_code) == (200_000, 219_898, 400)
    assert error.message == "prompt is too long: 219898 tokens > 200000 maximum"


def test_it_sees_an_overflow_reported_inside_a_5xx():
    assert isinstance(classify(503, "context length exceeded"), ContextOverflowError)


def test_it_does_not_treat_the_output_cap_error_as_an_overflow():
    text = "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for claude-opus-4-5"
    assert isinstance(classify(400, text), InvalidRequestError)


def test_it_maps_status_codes_to_classes():
    assert isinstance(classify(413, "Request exceeds the maximum allowed number of bytes."), PayloadTooLargeError)
    assert isinstance(classify(429, "rate limited", retry_after=0.5), RateLimitError)
    assert classify(429, "x", retry_after=0.5).retry_after == 0.5
    assert isinstance(classify(429, "Extra usage is required for long context requests."), LongContextRateLimitError)
    assert isinstance(classify(500, "Internal server error"), ProviderUnavailableError)
    assert isinstance(classify(529, "Overloaded"), ProviderUnavailableError)
    assert isinstance(classify(200, "Overloaded", error_type="overloaded_error"), ProviderUnavailableError)
    assert isinstance(classify(None, "connection refused"), ProviderUnavailableError)
    assert isinstance(classify(401, "invalid x-api-key"), AuthenticationError)
    assert isinstance(classify(404, "model: nope"), InvalidRequestError)


def test_it_marks_only_the_context_errors_as_compression_triggers():
    triggers = {cls.__name__ for cls in (ContextOverflowError, PayloadTooLargeError, LongContextRateLimitError) if cls.triggers_compression}
    others = [cls for cls in (RateLimitError, ProviderUnavailableError, AuthenticationError, InvalidRequestError) if cls.triggers_compression]
    assert len(triggers) == 3 and others == []

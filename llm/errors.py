"""Typed provider errors, independent of any SDK.

Callers decide on the class, never on message text: the agent loop compresses and retries on the
three classes with `triggers_compression = True` (SPEC §5.4), waits on `RateLimitError`, and
reports the rest. Every error keeps the provider's own message (`.message`) for the UI and logs.

`classify(status, message, ...)` is the one place where status codes and message patterns turn
into classes; the providers call it with what their SDK exception carried.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

# Phrases that mean "the prompt does not fit" across providers (Hermes' error classifier list,
# minus the bare "max_tokens", which also matches output-cap errors that compression cannot fix).
OVERFLOW_PATTERNS = (
    "prompt is too long",
    "context length",
    "context size",
    "maximum context",
    "token limit",
    "too many tokens",
    "reduce the length",
    "exceeds the limit",
    "context window",
    "prompt exceeds max length",
    "maximum number of tokens",
    "max_model_len",
    "prompt length",
    "input is too long",
    "maximum model length",
    "context length exceeded",
    "context_length_exceeded",
    "truncating input",
    "slot context",
    "n_ctx_slot",
    "max input token",
    "exceeds the maximum number of input tokens",
    "exceed context limit",
)
PAYLOAD_PATTERNS = ("request entity too large", "payload too large", "request exceeds the maximum", "error code: 413")
# The output-cap error names max_tokens but is not an overflow: a smaller max_tokens fixes it.
OUTPUT_CAP_PATTERN = "maximum allowed number of output tokens"

_LIMIT_PATTERNS = (
    re.compile(r"(\d[\d,]*)\s*tokens?\s*>\s*(\d[\d,]*)\s*maximum", re.I),
    re.compile(r"\+\s*\d[\d,]*\s*>\s*(\d[\d,]*)", re.I),
    re.compile(r"maximum context length (?:is|of)\s*(\d[\d,]*)", re.I),
    re.compile(r"max_model_len\D{0,20}(\d[\d,]*)", re.I),
    re.compile(r"context (?:window|length|limit|size) (?:of|is)\s*(\d[\d,]*)", re.I),
    re.compile(r"limit of\s*(\d[\d,]*)\s*tokens", re.I),
)
_TOKENS_PATTERNS = (
    re.compile(r"(\d[\d,]*)\s*tokens?\s*>\s*\d[\d,]*\s*maximum", re.I),
    re.compile(r"resulted in\s*(\d[\d,]*)\s*tokens", re.I),
    re.compile(r"(\d[\d,]*)\s*\+\s*\d[\d,]*\s*>", re.I),
)
MIN_PLAUSIBLE_LIMIT = 1_024
MAX_PLAUSIBLE_LIMIT = 10_000_000


class ErrorContext(TypedDict):
    """Where a failure came from: the fields every `ProviderError` takes besides its message."""

    status_code: int | None
    provider: str
    request_id: str | None
    error_type: str | None


class ProviderError(Exception):
    """Base class. `message` is the provider's text; `status_code` is None for transport errors."""

    triggers_compression = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        provider: str = "",
        request_id: str | None = None,
        error_type: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.provider = provider
        self.request_id = request_id
        self.error_type = error_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status_code={self.status_code})"


class ContextOverflowError(ProviderError):
    """The prompt does not fit the model's window. `limit` is the window parsed from the message
    (only within 1,024..10M, else None); `tokens` the prompt size the provider reported, if any."""

    triggers_compression = True

    def __init__(self, message: str, *, limit: int | None = None, tokens: int | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.limit = limit
        self.tokens = tokens


class PayloadTooLargeError(ProviderError):
    """HTTP 413: the request body is over the provider's byte limit."""

    triggers_compression = True


class LongContextRateLimitError(ProviderError):
    """Anthropic's long-context 429 ("Extra usage is required for long context requests."):
    not a transient limit, waiting does not help; a smaller prompt does."""

    triggers_compression = True


class RateLimitError(ProviderError):
    """HTTP 429 after the SDK's own retries. `retry_after` in seconds when the provider said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ProviderUnavailableError(ProviderError):
    """5xx / 529 overloaded / a connection failure / an error event in the middle of a stream."""


class AuthenticationError(ProviderError):
    """401/403: the key is missing, wrong or not allowed."""


class InvalidRequestError(ProviderError):
    """Any other 4xx (a malformed request, unknown model, max_tokens over the cap…)."""


def _to_int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_context_limit(message: str) -> int | None:
    """The context window a provider's error names, e.g. 200000 in
    "prompt is too long: 219898 tokens > 200000 maximum"; None when absent or implausible."""
    for pattern in _LIMIT_PATTERNS:
        match = pattern.search(message or "")
        if match:
            value = _to_int(match.groups()[-1])
            if MIN_PLAUSIBLE_LIMIT <= value <= MAX_PLAUSIBLE_LIMIT:
                return value
    return None


def parse_prompt_tokens(message: str) -> int | None:
    for pattern in _TOKENS_PATTERNS:
        match = pattern.search(message or "")
        if match:
            return _to_int(match.group(1))
    return None


def is_overflow_message(message: str) -> bool:
    low = (message or "").lower()
    if OUTPUT_CAP_PATTERN in low:
        return False
    return any(p in low for p in OVERFLOW_PATTERNS)


def is_long_context_rate_limit(message: str) -> bool:
    low = (message or "").lower()
    return "extra usage" in low and "long context" in low


def classify(
    status_code: int | None,
    message: str,
    *,
    provider: str = "",
    request_id: str | None = None,
    error_type: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """Map a provider failure to a typed error.

    Overflow wording wins even inside a 5xx body (some gateways report overflow as 500/503), and
    an `error_type` of `overloaded_error`/`api_error` marks a mid-stream error (HTTP 200) as
    unavailability.
    """
    kw: ErrorContext = {"status_code": status_code, "provider": provider, "request_id": request_id, "error_type": error_type}
    low = (message or "").lower()
    if status_code == 413 or error_type == "request_too_large" or any(p in low for p in PAYLOAD_PATTERNS):
        return PayloadTooLargeError(message, **kw)
    if status_code == 429 or error_type == "rate_limit_error":
        if is_long_context_rate_limit(message):
            return LongContextRateLimitError(message, **kw)
        return RateLimitError(message, retry_after=retry_after, **kw)
    if is_overflow_message(message) and (status_code is None or status_code in (400, 200) or status_code >= 500):
        return ContextOverflowError(message, limit=parse_context_limit(message), tokens=parse_prompt_tokens(message), **kw)
    if status_code in (401, 403) or error_type in ("authentication_error", "permission_error"):
        return AuthenticationError(message, **kw)
    if status_code is None or status_code >= 500 or status_code == 200 or status_code in (408, 409):
        return ProviderUnavailableError(message, **kw)
    return InvalidRequestError(message, **kw)

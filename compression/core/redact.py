"""Secret redaction for text that leaves the process (the summariser prompt) or is kept as a summary.

Guarantees: API keys (OpenAI/Anthropic/OpenRouter style, GitHub, Slack, AWS, Google), bearer tokens,
JWTs, private key blocks, passwords/tokens/secrets in ``key=value`` or ``"key": "value"`` form and
the password of a connection string (``scheme://user:pass@host``) are replaced with ``[REDACTED]``.
The rest of the text is left intact so paths, commands and values survive. Pure, idempotent.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S), REDACTED),
    # Connection strings: keep scheme, user and host, drop the password.
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@"), r"\1:" + REDACTED + "@"),
    # Well-known key shapes, one alternation so long texts are scanned once.
    (
        re.compile(
            r"\b(?:sk-(?:ant-|or-|proj-)?[A-Za-z0-9_-]{16,}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}"
            r"|github_pat_[A-Za-z0-9_]{20,}"
            r"|xox[abprs]-[A-Za-z0-9-]{10,}"
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}\b"
            r"|AIza[0-9A-Za-z_-]{30,}"
            r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
        ),
        REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{12,}"), r"\1 " + REDACTED),
)

# key = value / key: value / "key": "value" when the key ENDS in a credential word
# ("max_tokens: 2000" and "tokens_before=100" are counts, not secrets; all-digit values are kept).
_KEY_VALUE = r"""
    ((?:password|passwd|pwd|secret|secret[_-]?key|token|api[_-]?key|apikey|access[_-]?key|
        private[_-]?key|credentials?)["']?\s*[:=]\s*)
    (?!\[redacted\])(?!\d+\b)
    ("[^"\n]{3,}"|'[^'\n]{3,}'|[^\s,;"'}\]]{3,})
"""
# Matched case-sensitively on a lower-cased copy: a case-insensitive alternation is ~10x slower.
_KEY_VALUE_LOWER = re.compile(_KEY_VALUE, re.X)
_KEY_VALUE_ANYCASE = re.compile(_KEY_VALUE, re.X | re.I)


# Each pattern above needs one of these substrings to match (checked first: a plain `in` scan is
# far cheaper than a regex pass, and most text holds no credential at all). Written out rather than
# looped over: `redact` runs once per piece of every summarised message, so its fixed cost counts.
_KEY_WORDS = ("pass", "pwd", "secret", "token", "key", "credential")


def _may_hold_key_shape(text: str) -> bool:
    return ("sk-" in text or "github_pat_" in text
            or "gh" in text and ("ghp_" in text or "gho_" in text or "ghu_" in text or "ghs_" in text or "ghr_" in text)
            or "xox" in text or "AKIA" in text or "ASIA" in text or "AIza" in text or "eyJ" in text)


def _redact_key_values(text: str, lowered: str | None = None) -> str:
    if "=" not in text and ":" not in text:
        return text
    lowered = text.lower() if lowered is None else lowered
    if not any(word in lowered for word in _KEY_WORDS):
        return text
    if len(lowered) != len(text):  # a few Unicode letters change length when lower-cased
        return _KEY_VALUE_ANYCASE.sub(lambda m: m.group(1) + REDACTED, text)
    out = []
    pos = 0
    for match in _KEY_VALUE_LOWER.finditer(lowered):
        out.append(text[pos : match.end(1)])
        out.append(REDACTED)
        pos = match.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> str:
    """``text`` with credentials replaced by ``[REDACTED]``."""
    if not text:
        return text
    original = text
    lowered = text.lower()
    private_key, connection, key_shape, bearer = _PATTERNS
    if "PRIVATE KEY-----" in text:
        text = private_key[0].sub(private_key[1], text)
    if "://" in text and "@" in text:
        text = connection[0].sub(connection[1], text)
    if _may_hold_key_shape(text):
        text = key_shape[0].sub(key_shape[1], text)
    if "bearer" in lowered:
        text = bearer[0].sub(bearer[1], text)
    return _redact_key_values(text, lowered if text is original else None)

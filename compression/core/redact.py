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
    (re.compile(r"\bsk-(?:ant-|or-|proj-)?[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{12,}"), r"\1 " + REDACTED),
    # key = value / key: value / "key": "value" when the key ENDS in a credential word
    # ("max_tokens: 2000" and "tokens_before=100" are counts, not secrets; all-digit values are kept).
    (
        re.compile(
            r"""(?ix)
            (\b[\w.-]*(?:password|passwd|pwd|secret|secret[_-]?key|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|
                 credentials?)["']?\s*[:=]\s*)
            (?!\[REDACTED\])(?!\d+\b)
            ("[^"\n]{3,}"|'[^'\n]{3,}'|[^\s,;"'}\]]{3,})
            """
        ),
        r"\1" + REDACTED,
    ),
)


def redact(text: str) -> str:
    """``text`` with credentials replaced by ``[REDACTED]``."""
    if not text:
        return text
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text

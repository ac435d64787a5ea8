"""Settle, against the real Anthropic API and for a few cents, the prompt-caching points the
documentation leaves open, and say which simulator reading (``HERMES_SIM_CACHE``) they support.

Two sequences run side by side on two fresh prefixes (a random nonce opens each, so no earlier run
can be read), with the same waits (``--first-wait``, default 60 s, then ``--second-wait``, 600 s):

1. Re-pin. Write prefix P with a 5m breakpoint; a minute later send P again with its breakpoint
   marked ``ttl: "1h"`` (the documentation bills this as a read of P); ten minutes later send it
   again. A read then means the re-pin promoted the entry to 1h (``optimistic``); a new write of P
   means the entry kept its 5m lifetime and expired (``documented``, the simulator's default).
2. One block at 1h. Write prefix Q at 5m; a minute later send Q plus a short reply marked 1h and a
   5m tail (the documentation bills the reply as the only 1h write: B - A); ten minutes later send
   Q, the reply and the tail again. A read of Q and the reply means a 1h entry written for one
   block covers the whole prefix, which ``rolling_1h`` relies on under both readings.

Each call prints what it billed (read, 5m write, 1h write, uncached input) and its cost at the
catalogue price. Without ``ANTHROPIC_API_KEY`` the script says so and exits 0. ``--base-url``
points it elsewhere (an Anthropic-compatible endpoint, e.g. the simulator).

Run: .venv/bin/python bench/cache_probe.py [--model claude-haiku-4-5] [--first-wait 60] [--second-wait 600]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_MODEL = "claude-haiku-4-5"  # the cheapest catalogue model ($1 / M input)
FIRST_WAIT = 60.0
SECOND_WAIT = 600.0
M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}
# Paragraphs repeated into a prefix comfortably past every model's minimum cacheable length.
_FILLER = ("Hermes keeps a conversation's context inside the model window by compacting old turns into a "
           "handoff summary, and keeps the stable prefix in the provider's prompt cache between turns. ")


@dataclass(frozen=True)
class Billed:
    label: str
    read: int
    write_5m: int
    write_1h: int
    input: int
    cost: float

    def line(self) -> str:
        return (f"{self.label:<44} read {self.read:>6}  5m write {self.write_5m:>6}  1h write {self.write_1h:>6}  "
                f"input {self.input:>5}  ${self.cost:.5f}")


def _prefix(min_tokens: int) -> str:
    nonce = secrets.token_hex(8)
    # ~27 tokens a paragraph; 2x the minimum leaves room for any tokenizer difference.
    return f"Probe {nonce}. " + _FILLER * max(1, (2 * min_tokens) // 27 + 1)


def _billed(label: str, usage: Any, price) -> Billed:
    from llm.usage import compute_cost, normalize_anthropic_usage

    u = normalize_anthropic_usage(usage)
    cost = compute_cost(u, price).cost
    return Billed(label, u.cache_read, u.cache_write_5m, u.cache_write_1h, u.input, cost)


def run_probe(client, model: str, *, sleep: Callable[[float], None], first_wait: float = FIRST_WAIT,
              second_wait: float = SECOND_WAIT, out: Callable[[str], None] = print) -> dict[str, list[Billed]]:
    """The two sequences of the module docstring; returns each call's billing, in order."""
    from llm.models import get_model

    info = get_model(model)
    if info is None:
        raise SystemExit(f"{model}: not in the model catalogue (llm/models.py)")
    p_text, q_text = _prefix(info.min_cache_tokens), _prefix(info.min_cache_tokens)

    def ask(label: str, system: str, system_marker, messages) -> Billed:
        response = client.messages.create(
            model=model, max_tokens=1, messages=messages,
            system=[{"type": "text", "text": system, "cache_control": system_marker}],
        )
        billed = _billed(label, response.usage, info.price)
        out(billed.line())
        return billed

    def text(body: str, marker=None) -> dict:
        return {"type": "text", "text": body, **({"cache_control": marker} if marker else {})}

    hello = [{"role": "user", "content": "Say ok."}]
    chain = [{"role": "user", "content": [text("Say ok.")]},
             {"role": "assistant", "content": [text("ok", H1)]},
             {"role": "user", "content": [text("Say ok again.", M5)]}]
    repin, one_block = [], []
    out(f"model {model} (minimum cacheable {info.min_cache_tokens} tokens); waits {first_wait:.0f} s, {second_wait:.0f} s")
    repin.append(ask("1. P, 5m breakpoint", p_text, M5, hello))
    one_block.append(ask("2. Q, 5m breakpoint", q_text, M5, hello))
    sleep(first_wait)
    repin.append(ask(f"1. P re-marked 1h, {first_wait:.0f} s later", p_text, H1, hello))
    one_block.append(ask(f"2. Q + reply at 1h + tail at 5m, {first_wait:.0f} s later", q_text, H1, chain))
    sleep(second_wait)
    repin.append(ask(f"1. P again, {second_wait:.0f} s later", p_text, H1, hello))
    one_block.append(ask(f"2. Q + reply + tail again, {second_wait:.0f} s later", q_text, H1, chain))
    return {"repin": repin, "one_block": one_block}


def conclusions(results: dict[str, list[Billed]]) -> list[str]:
    """What the billing says about each unstated point."""
    first, second, third = results["repin"]
    lines = []
    if second.write_5m or second.write_1h:
        lines.append("re-pin: the 1h re-mark of a cached prefix WROTE tokens; the documentation bills it as a "
                     "read (neither simulator reading models this)")
    if third.read >= first.write_5m and first.write_5m:
        lines.append("re-pin: the prefix was still cached after the 5m TTL -> supports HERMES_SIM_CACHE=optimistic "
                     "(a re-pin promotes the entry to 1h)")
    elif third.write_5m + third.write_1h >= first.write_5m and first.write_5m:
        lines.append("re-pin: the prefix was written again after the 5m TTL -> supports HERMES_SIM_CACHE=documented "
                     "(the entry keeps its 5m lifetime)")
    else:
        lines.append("re-pin: inconclusive (the first call wrote nothing, or a partial read)")
    q_first, q_second, q_third = results["one_block"]
    wanted = q_first.write_5m + q_second.write_1h
    if q_first.write_5m and q_second.write_1h and q_third.read >= wanted:
        lines.append("one block at 1h: the whole prefix up to the 1h reply was still read -> a 1h entry covers its "
                     "whole prefix when only its last block was billed at 1h (rolling_1h's premise holds)")
    else:
        lines.append(f"one block at 1h: read {q_third.read} of {wanted} tokens -> rolling_1h's premise does NOT hold")
    total = sum(b.cost for seq in results.values() for b in seq)
    lines.append(f"probe cost: ${total:.4f}")
    return lines


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--first-wait", type=float, default=FIRST_WAIT)
    parser.add_argument("--second-wait", type=float, default=SECOND_WAIT)
    parser.add_argument("--base-url", default=None, help="another Anthropic-compatible endpoint")
    args = parser.parse_args(argv)
    env = dict(os.environ) if env is None else env
    key = env.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        print("cache probe: ANTHROPIC_API_KEY is not set, so nothing was sent. Set it to run the probe "
              f"(a few cents on {args.model}, about {(args.first_wait + args.second_wait) / 60:.0f} minutes).")
        return 0
    import anthropic

    client = anthropic.Anthropic(api_key=key, base_url=args.base_url) if args.base_url else anthropic.Anthropic(api_key=key)
    results = run_probe(client, args.model, sleep=time.sleep, first_wait=args.first_wait,
                        second_wait=args.second_wait)
    for line in conclusions(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

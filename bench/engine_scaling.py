"""How the context engine's cost grows with history length.

For histories of 200, 2,000 and 20,000 messages (about 50 tokens a message on average, so up to
~1M tokens) it prints:

- tokenise: tiktoken over the whole transcript once (what a naive per-turn estimate would cost);
- per-turn estimate: the engine's token total after one new message is appended, with counts
  cached (the new message is tokenised, the history is not);
- reload estimate: the same total over freshly loaded message dicts that carry their stored
  ``_tokens`` (what the web layer does after reading rows): O(n) additions, no tokenisation;
- compress: ``ContextCompressor.compress()`` with stored counts, the summariser's own time
  subtracted (it returns at once anyway), and "cold" without any stored counts (first
  tokenisation included). Compress renders, redacts and tokenises the whole middle once, because
  the summariser reads every summarised message;
each with its ratio to "tokenise". Targets: the per-turn estimate is O(new messages) and at least
100× cheaper than re-tokenising at 20,000 messages; compress stays linear (see µs/message).

A last line reads a middle of about 1M tokens through a summariser with a 200,000-token window
(and one with 64,000): the number of summariser calls (chunks, oldest first, each updating the
running summary) and the engine's time for the whole run, the summariser returning at once, so the
model's time is excluded. Every summarised message is read exactly once (checked).

Run: .venv/bin/python bench/engine_scaling.py
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compression.core.compressor import ContextCompressor
from compression.core.tokens import count_tokens, get_encoding, message_text, with_token_count

SIZES = (200, 2_000, 20_000)
WORDS = (
    "the of and to in is that for it with as on be this are by def return self import from class if else "
    "file path error test config value request response token cache summary context message tool result "
    "python django compression session user assistant model window budget threshold tail head 42 0 1 200"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_history(n: int, seed: int = 7) -> list[dict]:
    """n messages, ~50 tokens each on average: user asks, tool calls with results of mixed size, answers."""
    rng = random.Random(seed)
    msgs: list[dict] = [{"role": "system", "content": "You are Hermes. " + sentence(rng, 200)}]
    call = 0
    while len(msgs) < n:
        msgs.append({"role": "user", "content": sentence(rng, rng.randint(5, 40))})
        for _ in range(rng.randint(0, 2)):
            call += 1
            cid = f"toolu_{call}"
            tool = rng.choice(["read_file", "search_files", "terminal", "list_files"])
            args = json.dumps({"path": f"src/{rng.choice(WORDS)}.py", "pattern": rng.choice(WORDS)})
            fn = {"name": tool, "arguments": args}
            msgs.append({"role": "assistant", "content": sentence(rng, 8),
                         "tool_calls": [{"id": cid, "type": "function", "function": fn}]})
            size = rng.choice([10, 30, 60, 150, 300])
            msgs.append({"role": "tool", "tool_call_id": cid, "name": tool, "content": sentence(rng, size)})
        msgs.append({"role": "assistant", "content": sentence(rng, rng.randint(10, 60))})
    msgs = msgs[:n]
    # Never end inside a tool group: drop a trailing call without its result.
    while msgs[-1].get("tool_calls"):
        msgs.pop()
    return msgs


def timed(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in seconds."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def bench(n: int) -> dict:
    history = build_history(n)
    stored = [with_token_count(m) for m in history]
    total_tokens = sum(m["_tokens"] for m in stored)
    repeat = 5 if n <= 2_000 else 3

    encoding = get_encoding()
    texts = [message_text(m) for m in history]
    tokenise = timed(lambda: sum(len(encoding.encode_ordinary(t)) for t in texts), repeat)

    window = max(64_000, total_tokens)
    summary_time = [0.0]

    def summariser(prompt: str, budget: int) -> str:
        start = time.perf_counter()
        body = "## Goal\nKeep going.\n## Progress\n### Done\n- everything so far"
        summary_time[0] += time.perf_counter() - start
        return body

    def engine() -> ContextCompressor:
        return ContextCompressor(window, target_ratio=0.10, summariser=summariser)

    # Per-turn estimate: one new message on top of a history whose counts are already known.
    eng = engine()
    live = list(stored)
    eng.estimate_history_tokens(live)
    per_turn = []
    for i in range(20):
        live.append({"role": "user", "content": f"new message {i}: " + " ".join(WORDS[:30])})
        start = time.perf_counter()
        eng.estimate_history_tokens(live)
        per_turn.append(time.perf_counter() - start)
    per_turn_s = statistics.median(per_turn)

    # Reload: fresh dicts from the "database", each with its stored count.
    reload_s = timed(lambda: engine().count_messages_tokens([dict(m) for m in stored]), repeat)

    def run_compress(messages: list[dict]) -> float:
        summary_time[0] = 0.0
        eng = engine()
        start = time.perf_counter()
        result = eng.compress(messages, force=True)
        elapsed = time.perf_counter() - start - summary_time[0]
        assert result.status == "compressed", result.reason
        return elapsed

    compress_s = statistics.median(run_compress(stored) for _ in range(repeat))
    cold_s = statistics.median(run_compress([dict(m) for m in history]) for _ in range(max(1, repeat - 2)))
    result = engine().compress(stored, force=True)
    return {
        "n": n,
        "tokens": total_tokens,
        "tokenise": tokenise,
        "per_turn": per_turn_s,
        "reload": reload_s,
        "compress": compress_s,
        "cold": cold_s,
        "after": (result.messages_after, result.tokens_after),
    }


CHUNKED_MESSAGES = 27_500
AUX_WINDOWS = (200_000, 64_000)


def bench_chunked(aux_window: int) -> dict:
    """Compress a ~1M-token middle through a summariser of ``aux_window`` tokens (instant answers)."""
    stored = [with_token_count(m) for m in build_history(CHUNKED_MESSAGES, seed=11)]
    total_tokens = sum(m["_tokens"] for m in stored)
    summary_time = [0.0]
    prompts: list[int] = []

    def summariser(prompt: str, budget: int) -> str:
        start = time.perf_counter()
        prompts.append(len(prompt))
        body = "## Goal\nKeep going.\n## Progress\n### Done\n- everything so far"
        summary_time[0] += time.perf_counter() - start
        return body

    engine = ContextCompressor(max(64_000, total_tokens), target_ratio=0.10, summariser=summariser,
                               summariser_context_length=aux_window)
    middle = engine.preview(stored).tokens_to_summarize
    start = time.perf_counter()
    result = engine.compress(stored, force=True)
    elapsed = time.perf_counter() - start - summary_time[0]
    assert result.status == "compressed", result.reason
    assert result.messages_read == result.summarized_count, (result.messages_read, result.summarized_count)
    return {"aux": aux_window, "middle": middle, "messages": result.summarized_count, "calls": result.summariser_calls,
            "read": result.tokens_read, "time": elapsed}


def main() -> None:
    count_tokens("warm up the encoder")
    rows = [bench(n) for n in SIZES]
    print(f"{'messages':>8} {'tokens':>10} | {'tokenise':>9} | {'per-turn est.':>13} {'ratio':>9} | "
          f"{'reload est.':>11} {'ratio':>7} | {'compress':>9} {'ratio':>6} {'µs/msg':>7} | "
          f"{'cold':>8} {'ratio':>6} | after")
    for r in rows:
        t = r["tokenise"]
        print(
            f"{r['n']:>8,} {r['tokens']:>10,} | {fmt(t):>9} | {fmt(r['per_turn']):>13} {t / r['per_turn']:>8,.0f}× | "
            f"{fmt(r['reload']):>11} {t / r['reload']:>6,.0f}× | {fmt(r['compress']):>9} {r['compress'] / t:>5.2f}x "
            f"{r['compress'] / r['n'] * 1e6:>7.1f} | {fmt(r['cold']):>8} {r['cold'] / t:>5.2f}x | "
            f"{r['after'][0]} msgs / {r['after'][1]:,} tok"
        )
    print("ratio for estimates = how many times cheaper than tokenising the transcript once; "
          "ratio for compress = its time as a multiple of tokenising once (summariser excluded).")
    print()
    for c in (bench_chunked(w) for w in AUX_WINDOWS):
        print(f"chunked: {c['middle']:,}-token middle ({c['messages']:,} messages) through a {c['aux']:,}-token "
              f"summariser: {c['calls']} calls, {c['read']:,} tokens read, every message once; "
              f"engine time {fmt(c['time'])} (summariser excluded)")


if __name__ == "__main__":
    main()

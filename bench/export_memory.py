"""How much memory streaming a long conversation's exports takes, through the real views.

A conversation of ``--messages`` visible messages (20,000) is written to a throwaway SQLite
database (``bench.fidelity_latency.ensure_django``), shaped as the product leaves one: exchanges of
a user message, tool calls with results of mixed size (some over the Markdown export's cut), and
Markdown answers (code blocks, lists, now and then a ``<`` the export must neutralise); a few
replies replaced by a regenerate; two rotations (ended sessions, the copies carried into the next
context, a summary each) and one in-place compaction (archived rows), each with its compaction
event and a summary of about 2,500 characters.

Each export (``export.json``, ``export.md`` and the ``export`` page) is fetched through both
handlers: WSGI (Django's test ``Client``) and ASGI (its ``AsyncClient``: the path Daphne serves,
where the views stream from an asynchronous iterator), and the response is consumed piece by
piece, never joined. Each fetch runs twice:

- untimed by tracing: seconds, and the growth of the process's resident memory (RSS) over the
  fetch: its high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs`` where allowed;
  RSS sampled every 5 ms by a thread as well, with psutil when installed) less the RSS before,
  taken after a garbage collection and ``malloc_trim`` so freed memory from earlier work is not
  reused unseen;
- under ``tracemalloc``: the peak of Python allocations above the level before the fetch.

One tiny conversation is exported through every path first, so one-time costs (imports, the
template, Pygments' lexers) are not counted. A control joins the JSON export in memory on the
client side, as an unstreamed response would hold it: the method must see that one grow by about
the document's size. Target: the peak growth of every fetch stays under
``TARGET_MB`` (+100 MB) at 20,000 messages. It exits 0 regardless.

Run: .venv/bin/python bench/export_memory.py [--messages 20000] [--exports json,md,document]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MESSAGES = 20_000
TARGET_MB = 100.0
EXPORTS = {"json": "conversation-export-json", "md": "conversation-export-markdown",
           "document": "conversation-export-document"}
HANDLERS = ("wsgi", "asgi")
SHARES = (0.30, 0.25, 0.25, 0.20)  # session 1 (rotated), 2 (rotated), 3 archived in place, 3 live
REPLACED_EVERY = 40  # exchanges: one reply in so many was regenerated
WRITE_BATCH = 2_000
SAMPLE_SECONDS = 0.005
MB = 1024 * 1024
WORDS = ("the of and to in is that for it with as on be this are by return self import from class if else file "
         "path error test config value request response token cache summary context message tool result python "
         "django compression session user assistant model window budget threshold tail head queue worker index "
         "migration template stream export import owner archive chunk iterator cursor memory").split()


@dataclass
class Row:
    handler: str
    export: str
    messages: int
    bytes: int
    seconds: float
    traced_mb: float
    rss_mb: float

    @property
    def peak_mb(self) -> float:
        return max(self.traced_mb, self.rss_mb)


# Memory ---------------------------------------------------------------------------------------------

def _rss_bytes() -> int:
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


def _hwm_bytes() -> int | None:
    try:
        with open("/proc/self/status") as f:
            line = next((s for s in f if s.startswith("VmHWM:")), "")
        return int(line.split()[1]) * 1024 if line else None
    except OSError:
        return None


def _settle() -> None:
    """Collect garbage and hand freed heap back to the system, so the next RSS is what is live."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class RssPeak:
    """The highest RSS while it runs, less the RSS at its start."""

    def __init__(self) -> None:
        self.start = _rss_bytes()
        self.peak = self.start
        self.hwm_reset = False
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.hwm_reset = True
        except OSError:
            pass
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, _rss_bytes())

    def growth_mb(self) -> float:
        self._stop.set()
        self._thread.join()
        peak = max(self.peak, _rss_bytes())
        hwm = _hwm_bytes() if self.hwm_reset else None
        return (max(peak, hwm or 0) - self.start) / MB


# The conversation -----------------------------------------------------------------------------------

def _prose(rng: random.Random, chars: int) -> str:
    return " ".join(rng.choices(WORDS, k=max(1, chars // 6)))


def _answer(rng: random.Random) -> str:
    parts = [_prose(rng, rng.randint(200, 900))]
    if rng.random() < 0.35:
        code = "\n".join(f"    {_prose(rng, rng.randint(20, 70))}" for _ in range(rng.randint(3, 25)))
        parts.append(f"```python\ndef handler(request):\n{code}\n```")
    if rng.random() < 0.3:
        parts.append("\n".join(f"- {_prose(rng, rng.randint(30, 120))}" for _ in range(rng.randint(2, 6))))
    if rng.random() < 0.08:
        parts.append("Wrap it in a <details> element, or use `List<int>` and `a < b` in the loop.")
    parts.append(_prose(rng, rng.randint(100, 800)))
    return "\n\n".join(parts)


def _exchange(rng: random.Random, call: list[int], replaced: bool) -> list[dict]:
    """One exchange as message fields: a question, maybe tool calls and their results, an answer
    (with a replaced one before it when ``replaced``)."""
    rows = [{"role": "user", "content": _prose(rng, rng.randint(60, 600))}]
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        call[0] += 1
        name = rng.choice(("read_file", "search_files", "list_files", "write_file"))
        arguments = json.dumps({"path": f"src/{_prose(rng, 12).replace(' ', '_')}.py",
                                "pattern": _prose(rng, rng.randint(10, 200))})
        rows.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{call[0]}", "type": "function", "function": {"name": name, "arguments": arguments}}]})
        size = rng.choice((300, 1_200, 2_500, 6_000, 12_000))
        result = "\n".join(_prose(rng, 70) for _ in range(max(1, size // 70)))
        rows.append({"role": "tool", "content": result, "tool_call_id": f"call_{call[0]}", "name": name})
    if replaced:
        rows.append({"role": "assistant", "content": _answer(rng), "archived": True, "replaced": True})
    rows.append({"role": "assistant", "content": _answer(rng)})
    return rows


def _summary(rng: random.Random, n: int) -> str:
    sections = ("## Goal", "## Progress", "## Decisions", "## Files", "## Next steps")
    return "\n\n".join(f"{head} (compaction {n})\n{_prose(rng, 480)}" for head in sections)


class _Writer:
    """Messages written in batches, each session numbering its own ``seq``."""

    def __init__(self, conversation, start) -> None:
        self.conversation = conversation
        self.moment = start
        self.pending: list = []
        self.seqs: dict[int, int] = {}
        self.visible = 0

    def add(self, session, *, role: str, content, archived=False, visible=True, replaced=False, is_summary=False,
            tool_calls=None, tool_call_id="", name="") -> object:
        from sessions.models import Message

        seq = self.seqs.get(session.id, 0)
        self.seqs[session.id] = seq + 1
        self.moment += timedelta(seconds=7)
        text = content if isinstance(content, str) else ""
        row = Message(conversation=self.conversation, session=session, seq=seq, role=role, content=content,
                      tool_calls=tool_calls, tool_call_id=tool_call_id, name=name, token_count=len(text) // 4 + 4,
                      archived=archived, visible=visible, replaced=replaced, is_summary=is_summary,
                      created_at=self.moment)
        self.visible += visible and not is_summary
        self.pending.append(row)
        if len(self.pending) >= WRITE_BATCH or is_summary:
            self.flush()
        return row

    def flush(self) -> None:
        from sessions.models import Message

        Message.objects.bulk_create(self.pending)
        self.pending = []


def build_conversation(user, messages: int, seed: int = 11):
    """The conversation described in the module docstring; (conversation, rows written)."""
    from django.db import transaction
    from django.utils import timezone

    from sessions.models import CompressionEvent, Conversation, Message, Session

    rng = random.Random(seed)
    start = timezone.now() - timedelta(days=30)
    targets = [int(messages * share) for share in SHARES]
    targets[-1] = messages - sum(targets[:-1])
    call = [0]
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, title=f"Export benchmark: {messages:,} messages",
                                                   provider="simulator", model="sim-claude-200k", created_at=start)
        write = _Writer(conversation, start)
        session = Session.objects.create(conversation=conversation, started_at=start)
        exchanges = 0

        def fill(target: int) -> None:
            nonlocal exchanges
            goal = write.visible + target
            while write.visible < goal:
                exchanges += 1
                for fields in _exchange(rng, call, replaced=exchanges % REPLACED_EVERY == 0)[: goal - write.visible]:
                    write.add(session, **fields)

        def compaction(n: int, *, in_place: bool):
            nonlocal session
            write.flush()
            old = session
            if in_place:
                Message.objects.filter(session=old, archived=False).update(archived=True)
                target = old
            else:
                old.ended_at, old.end_reason = write.moment, "compression"
                old.save(update_fields=["ended_at", "end_reason"])
                target = Session.objects.create(conversation=conversation, parent=old, started_at=write.moment)
            for kept in (Message.objects.filter(session=old, visible=True, is_summary=False).order_by("-seq")[:4]):
                write.add(target, role=kept.role, content=kept.content, tool_calls=kept.tool_calls,
                          tool_call_id=kept.tool_call_id, name=kept.name, visible=False)
            body = _summary(rng, n)
            summary = write.add(target, role="user", content=f"[CONTEXT COMPACTION] summary\n\n{body}",
                                is_summary=True)
            CompressionEvent.objects.create(
                conversation=conversation, session=old, new_session=None if in_place else target,
                summary_message=summary, trigger=("post_response", "preflight", "manual")[n % 3], status="compressed",
                in_place=in_place, messages_before=400 + n, messages_after=9, tokens_before=180_000 + n,
                tokens_after=6_000 + n, summarized_count=380, summary=body, started_at=write.moment,
                finished_at=write.moment)
            session = target

        fill(targets[0])
        compaction(1, in_place=False)
        fill(targets[1])
        compaction(2, in_place=False)
        fill(targets[2])
        compaction(3, in_place=True)
        fill(targets[3])
        write.flush()
    return conversation, Message.objects.filter(conversation=conversation).count()


# Fetching ------------------------------------------------------------------------------------------

def _fetch_wsgi(client, url: str) -> int:
    response = client.get(url)
    assert response.status_code == 200 and response.streaming, (url, response.status_code)
    total = 0
    for piece in response.streaming_content:  # the client closes the response after the last piece
        total += len(piece)
    return total


def _fetch_asgi(cookies, url: str) -> int:
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    async def fetch() -> int:
        client = AsyncClient()
        client.cookies = cookies
        response = await client.get(url)
        assert response.status_code == 200 and response.is_async, (url, response.status_code)
        total = 0
        async for piece in response.streaming_content:
            total += len(piece)
        return total

    # From this thread, so the view's database work runs on this thread's connection.
    return async_to_sync(fetch)()


def measure(fetch) -> tuple[int, float, float, float]:
    """(bytes, seconds, RSS growth MB) of one untraced fetch, and the tracemalloc peak MB of another."""
    _settle()
    rss = RssPeak()
    began = time.perf_counter()
    size = fetch()
    seconds = time.perf_counter() - began
    rss_mb = rss.growth_mb()
    _settle()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fetch()
    traced_mb = (tracemalloc.get_traced_memory()[1] - base) / MB
    tracemalloc.stop()
    return size, seconds, rss_mb, traced_mb


def run(messages: int, exports: list[str]) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    settings.DEBUG = False  # no query log growing with the export
    user = get_user_model().objects.create_user(f"export-bench-{time.monotonic_ns()}")
    client = Client()
    client.force_login(user)
    fetchers = {"wsgi": lambda url: _fetch_wsgi(client, url), "asgi": lambda url: _fetch_asgi(client.cookies, url)}
    warm, _ = build_conversation(user, 12, seed=3)
    for handler in HANDLERS:
        for export in exports:
            fetchers[handler](reverse(EXPORTS[export], args=[warm.id]))
    began = time.perf_counter()
    conversation, rows_written = build_conversation(user, messages)
    build_seconds = time.perf_counter() - began
    rows = []
    for handler in HANDLERS:
        for export in exports:
            url = reverse(EXPORTS[export], args=[conversation.id])
            size, seconds, rss_mb, traced_mb = measure(lambda: fetchers[handler](url))  # noqa: B023
            rows.append(Row(handler, export, messages, size, seconds, traced_mb, rss_mb))
    # The control: the same JSON export joined in memory by the client, as a response that is not
    # streamed would hold it. The method must see it grow by about its size.
    url = reverse(EXPORTS["json"], args=[conversation.id])
    size, seconds, rss_mb, traced_mb = measure(lambda: len(b"".join(client.get(url).streaming_content)))
    control = Row("control", "json", messages, size, seconds, traced_mb, rss_mb)
    return {"messages": messages, "rows_written": rows_written, "build_seconds": build_seconds, "rows": rows,
            "control": control, "conversation_id": conversation.id, "user": user,
            "target_met": all(r.peak_mb < TARGET_MB for r in rows)}


def report(result: dict) -> None:
    print(f"Export memory: one conversation of {result['messages']:,} visible messages "
          f"({result['rows_written']:,} rows with the copies and summaries of 3 compactions; "
          f"built in {result['build_seconds']:.1f} s), streamed through the real views")
    print(f"{'handler':<8} {'export':<9} {'messages':>9} {'bytes exported':>15} {'seconds':>8} "
          f"{'traced peak MB':>15} {'RSS growth MB':>14}")
    for r in result["rows"]:
        print(f"{r.handler:<8} {r.export:<9} {r.messages:>9,} {r.bytes:>15,} {r.seconds:>8.2f} "
              f"{r.traced_mb:>15.1f} {r.rss_mb:>14.1f}")
    c = result["control"]
    print(f"Control, the JSON joined in memory by the client (not streamed): {c.bytes:,} bytes, traced peak "
          f"+{c.traced_mb:.1f} MB, RSS growth +{c.rss_mb:.1f} MB")
    worst = max(result["rows"], key=lambda r: r.peak_mb)
    verdict = "PASS" if result["target_met"] else "FAIL"
    print(f"{verdict}  peak growth < +{TARGET_MB:.0f} MB for every export: worst +{worst.peak_mb:.1f} MB "
          f"({worst.handler} {worst.export})")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=MESSAGES, help="visible messages in the conversation")
    parser.add_argument("--exports", default=",".join(EXPORTS), help="which of json, md, document (comma-separated)")
    args = parser.parse_args(argv)
    exports = [e.strip() for e in args.exports.split(",") if e.strip()]
    if args.messages < 10 or not exports or any(e not in EXPORTS for e in exports):
        parser.error(f"--messages must be at least 10 and --exports some of {', '.join(EXPORTS)}")
    from django.apps import apps

    if not apps.ready:
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("HERMES_DATA_DIR", None)
        from bench.fidelity_latency import ensure_django

        ensure_django(prefix="hermes-export-bench-")
    result = run(args.messages, exports)
    report(result)
    return result


if __name__ == "__main__":
    main()

"""The export memory benchmark (bench/export_memory.py) runs end to end in a quick mode: the
conversation it builds has the shape it claims (rotations, an in-place compaction, replaced
replies, tool results over the Markdown cut), every export is fetched through both handlers and
measured, and the table and the verdict are printed. Whether the target is met is the
benchmark's report, not a test."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from bench import export_memory as bench
from sessions.models import CompressionEvent, Message, Session

pytestmark = pytest.mark.django_db

MESSAGES = 400
MB = 1024 * 1024


def test_the_quick_run_measures_every_export_through_both_handlers(capsys, settings, tmp_path):
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"
    result = bench.main(["--messages", str(MESSAGES)])
    out = capsys.readouterr().out

    conversation_id = result["conversation_id"]
    visible = Message.objects.filter(conversation_id=conversation_id, visible=True)
    assert visible.filter(is_summary=False).count() == MESSAGES
    assert visible.filter(is_summary=True).count() == 3
    events = CompressionEvent.objects.filter(conversation_id=conversation_id, status="compressed")
    assert sorted(events.values_list("in_place", flat=True)) == [False, False, True]
    assert Session.objects.filter(conversation_id=conversation_id, ended_at__isnull=False).count() == 2
    assert visible.filter(archived=True, replaced=False, is_summary=False).exists()
    assert visible.filter(replaced=True).exists()
    assert Message.objects.filter(conversation_id=conversation_id, visible=False).exists()  # the copies

    rows = {(r.handler, r.export): r for r in result["rows"]}
    assert set(rows) == {(h, e) for h in bench.HANDLERS for e in bench.EXPORTS}
    for row in rows.values():
        assert row.messages == MESSAGES and row.bytes > 0 and row.seconds > 0
        assert row.traced_mb > 0 and row.rss_mb >= 0
    for export in bench.EXPORTS:  # both handlers send the same document, within its moment of export
        assert abs(rows["wsgi", export].bytes - rows["asgi", export].bytes) < 64
    assert isinstance(result["target_met"], bool)
    # The method sees memory that is held: the control joined the JSON in memory.
    control = result["control"]
    assert abs(control.bytes - rows["wsgi", "json"].bytes) < 64
    assert control.traced_mb * MB >= control.bytes

    # What was measured is the export: the JSON is whole, the Markdown has every message's heading.
    client = Client()
    client.force_login(result["user"])
    document = json.loads(b"".join(client.get(reverse("conversation-export-json",
                                                      args=[conversation_id])).streaming_content))
    assert document["totals"]["messages"] == Message.objects.filter(conversation_id=conversation_id).count()
    markdown = b"".join(client.get(reverse("conversation-export-markdown", args=[conversation_id]))
                        .streaming_content).decode()
    assert len(re.findall(r"^### ", markdown, re.MULTILINE)) == MESSAGES
    assert "characters in all)*" in markdown

    assert "handler  export" in out and "traced peak MB" in out and "RSS growth MB" in out
    for handler in bench.HANDLERS:
        for export in bench.EXPORTS:
            assert re.search(rf"^{handler}\s+{export}\s+{MESSAGES}\s+[\d,]+\s+\d+\.\d\d\s+\d+\.\d\s+-?\d+\.\d\s*$",
                             out, re.MULTILINE), out
    assert "Control, the JSON joined in memory by the client (not streamed): " in out
    assert re.search(r"^(PASS|FAIL)  peak growth < \+100 MB for every export: worst \+\d+\.\d MB", out, re.MULTILINE)


def test_it_refuses_an_unknown_export():
    with pytest.raises(SystemExit):
        bench.main(["--exports", "pdf"])

import pytest

from compression.core.fallback import FALLBACK_MAX_CHARS, FALLBACK_NOTICE, build_fallback_summary
from compression.core.markers import END_MARKER, SUMMARY_PREFIX, strip_summary_wrapping, wrap_summary
from compression.core.redact import redact
from compression.core.summary import (
    SUMMARY_TEMPLATE,
    TEMPLATE_HEADINGS,
    SummaryFailed,
    build_summary_prompt,
    clean_summary,
    serialize_for_summary,
    serialize_message,
    summary_budget,
)

from .conftest import assistant, call, result, tool_group, user

HEADINGS = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Relevant Files",
    "## Next Steps",
    "## Critical Context",
]


def test_it_serialises_each_role_in_the_spec_format():
    turns = [user("fix it"), *tool_group("c1", "read_file", "print(1)", "Reading", path="a.py"), assistant("done")]
    text = serialize_for_summary(turns)
    assert text.split("\n\n") == [
        "[USER]: fix it",
        '[ASSISTANT]: Reading\n[Tool calls:\n  read_file({"path": "a.py"})\n]',
        "[TOOL RESULT c1]: print(1)",
        "[ASSISTANT]: done",
    ]


def test_it_cuts_long_messages_to_head_and_tail():
    text = serialize_message(user("h" * 4_000 + "m" * 3_000 + "t" * 1_500))
    body = text.removeprefix("[USER]: ")
    assert body == "h" * 4_000 + "\n...[truncated]...\n" + "t" * 1_500
    assert serialize_message(user("x" * 6_000)) == "[USER]: " + "x" * 6_000


def test_it_never_serialises_image_payloads():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "Q" * 10_000}}
    text = serialize_message(user([{"type": "text", "text": "see"}, image]))
    assert "QQQQ" not in text and "[image]" in text


@pytest.mark.parametrize(
    "secret",
    [
        "sk-ant-api03-abcdefghijklmnopqrstuvwx",
        "sk-or-v1-0123456789abcdef0123",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "gho_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG0123456789_abcdefXYZijklmnopqrstuvwxyz",
        "AKIAABCDEFGHIJKLMNOP",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
        "xoxb-1234567890-abcdefghij",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk",
    ],
)
def test_it_redacts_keys_and_tokens_before_sending(secret):
    text = serialize_message(user(f"use {secret} please"))
    assert secret not in text and "[REDACTED]" in text


def test_it_redacts_passwords_and_connection_strings_but_keeps_counts():
    assert redact("DB_PASSWORD=hunter22") == "DB_PASSWORD=[REDACTED]"
    assert redact('{"api_key": "abc123xyz"}') == '{"api_key": [REDACTED]}'
    assert redact("postgres://app:s3cr3t@db:5432/x") == "postgres://app:[REDACTED]@db:5432/x"
    assert redact("max_tokens: 2000, tokens_before=10") == "max_tokens: 2000, tokens_before=10"
    assert redact("İstanbul Password = Hunter22 ok") == "İstanbul Password = [REDACTED] ok"
    assert redact("Authorization: Bearer abcdefghijklmnop") == "Authorization: Bearer [REDACTED]"


def test_it_redacts_tool_call_arguments():
    msg = assistant(None, [call("c", "terminal", command="export API_KEY=supersecretvalue")])
    assert "supersecretvalue" not in serialize_message(msg)


def test_it_serialises_every_turn_of_a_huge_middle():
    turns = [user(f"turn-{i} " + "w" * 3_000) for i in range(200)]
    text = serialize_for_summary(turns)
    assert all(f"turn-{i} " in text for i in range(200))
    assert "omitted" not in text


def test_it_asks_for_exactly_the_spec_template():
    prompt = build_summary_prompt([user("hi")], budget=2_000)
    assert SUMMARY_TEMPLATE in prompt
    template_headings = [line for line in SUMMARY_TEMPLATE.splitlines() if line.startswith("#")]
    assert template_headings == HEADINGS
    assert "same language the user writes" in prompt
    assert "Never include API keys" in prompt
    assert "about 2,000 tokens" in prompt
    assert "TURNS TO SUMMARIZE:\n[USER]: hi" in prompt
    assert "PREVIOUS SUMMARY" not in prompt


def test_it_carries_the_previous_summary_into_an_iterative_prompt():
    previous = wrap_summary("## Goal\nold goal\n### In Progress\n- migrate db")
    prompt = build_summary_prompt([user("db migrated")], budget=2_000, previous_summary=previous)
    assert "PREVIOUS SUMMARY:\n## Goal\nold goal" in prompt
    assert "NEW TURNS TO INCORPORATE:\n[USER]: db migrated" in prompt
    assert "from In Progress to Done" in prompt
    assert "clearly obsolete" in prompt
    assert SUMMARY_PREFIX not in prompt  # the wrapper is stripped, never fed back


def test_it_adds_the_focus_topic_and_extra_context():
    prompt = build_summary_prompt([user("x")], budget=3_000, focus_topic="  the auth   bug ", extra_context="User prefers tabs.")
    assert 'FOCUS TOPIC: "the auth bug"' in prompt
    assert "60–70 %" in prompt
    assert "User prefers tabs." in prompt
    assert "FOCUS TOPIC" not in build_summary_prompt([user("x")], budget=3_000)


def test_it_clamps_the_summary_budget():
    assert summary_budget(1_000, 10_000) == 2_000
    assert summary_budget(30_000, 10_000) == 6_000
    assert summary_budget(500_000, 10_000) == 10_000


def test_it_cleans_the_summary_and_never_stacks_prefixes():
    raw = "<think>pondering</think>\n" + wrap_summary("## Goal\nship it")
    assert clean_summary(raw) == "## Goal\nship it"
    wrapped = wrap_summary(wrap_summary("body"))
    assert wrapped.count(SUMMARY_PREFIX) == 1 and wrapped.count(END_MARKER) == 1
    assert strip_summary_wrapping(wrapped) == "body"


@pytest.mark.parametrize("empty", ["", "   \n", None])
def test_it_treats_an_empty_answer_as_a_failure(empty):
    with pytest.raises(SummaryFailed):
        clean_summary(empty)


def test_it_builds_a_marked_deterministic_fallback():
    turns = [
        user("please add login to app/views.py"),
        *tool_group("c1", "read_file", "def view(): ...", path="app/views.py"),
        *tool_group("c2", "terminal", "Traceback: ImportError failed", command="pytest -q"),
        user("also use token ghp_abcdefghijklmnopqrstuvwxyz0123"),
    ]
    text = build_fallback_summary(turns, "timeout")
    assert text.startswith(FALLBACK_NOTICE)
    for heading in ("## Goal", "### Done", "### Blocked", "## Relevant Files", "## Critical Context"):
        assert heading in text
    assert "read_file app/views.py" in text and "terminal `pytest -q`" in text
    assert "ImportError" in text
    assert "app/views.py" in text
    assert "ghp_abc" not in text
    assert text.count("also use token") == 1  # the latest ask is recorded once
    assert "timeout" in text


def test_it_bounds_the_fallback_summary():
    turns = [user("x" * 5_000 + f" file{i}.py") for i in range(50)]
    turns += [result(f"e{i}", f"error {i} " * 500) for i in range(50)]
    assert len(build_fallback_summary(turns, "boom", previous_summary="p" * 50_000)) <= FALLBACK_MAX_CHARS


def test_the_fallback_keeps_the_command_that_ran_and_where():
    turns = [*tool_group("c1", "terminal", "ok", command="python /repo/scripts/fix.py", workdir="/repo")]
    text = build_fallback_summary(turns, "timeout")
    assert "Called terminal `python /repo/scripts/fix.py` in /repo" in text
    assert "Called terminal /repo" not in text


def test_the_fallback_keeps_windows_paths_whole():
    turns = [user(r"please fix C:\Users\ana\project\app\views.py and D:/data/report.csv")]
    text = build_fallback_summary(turns, "timeout")
    relevant = text.split("## Relevant Files", 1)[1].split("##", 1)[0]
    assert r"- C:\Users\ana\project\app\views.py" in relevant
    assert "- D:/data/report.csv" in relevant
    assert "- views.py" not in relevant


def test_the_fallback_uses_the_template_headings_in_order():
    text = build_fallback_summary([user("hi")], "down")
    assert [line for line in text.splitlines() if line.startswith("#")] == list(TEMPLATE_HEADINGS)


def test_the_template_headings_are_defined_once_in_the_core():
    from compression.core import template

    assert TEMPLATE_HEADINGS is template.TEMPLATE_HEADINGS and SUMMARY_TEMPLATE is template.SUMMARY_TEMPLATE
    assert list(TEMPLATE_HEADINGS) == HEADINGS


def test_it_leaves_assistant_reasoning_out_of_what_the_summariser_reads():
    think = assistant("<think>secret plan: try rm -rf</think>I will edit app.py.\n<reasoning>more</reasoning>Done.")
    parts = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "private chain of thought", "signature": "sig"},
        {"type": "text", "text": "Visible answer."},
    ]}
    text = serialize_for_summary([think, parts])
    assert "secret plan" not in text and "more" not in text and "private chain" not in text
    assert "I will edit app.py." in text and "Done." in text and "Visible answer." in text
    # A user quoting a tag is the user's words: kept.
    assert "<think>" in serialize_message(user("what does <think>x</think> mean?"))


def test_it_gives_today_as_a_date_for_completed_actions_when_the_host_passes_it():
    import datetime

    prompt = build_summary_prompt([user("hi")], budget=2_000, today=datetime.date(2026, 7, 14))
    assert "Today's date is 2026-07-14" in prompt and "dated, past-tense facts" in prompt
    assert "Today's date" not in build_summary_prompt([user("hi")], budget=2_000)


def test_it_passes_the_date_to_every_summariser_call(make_compressor, summariser):
    import datetime

    msgs = [{"role": "system", "content": "s"}] + [
        (user if i % 2 == 0 else assistant)(f"m{i} " + "word " * 600) for i in range(170)]
    make_compressor(200_000, summariser_context_length=64_000).compress(msgs, force=True, today=datetime.date(2026, 1, 2))
    assert len(summariser.calls) > 1
    assert all("Today's date is 2026-01-02" in prompt for prompt, _ in summariser.calls)


def test_each_piece_of_a_serialized_turn_is_redacted_and_the_labels_are_kept():
    from compression.core.summary import serialize_message

    msg = {"role": "assistant", "content": "Using api_key=sk-ant-abcdefghijklmnopqrstuvwx and the token: s3cr3t now",
           "tool_calls": [{"id": "toolu_1", "type": "function",
                           "function": {"name": "http_get", "arguments": '{"url": "https://bob:hunter22@example.com", '
                                                                         '"headers": {"Authorization": "Bearer abcdefghijklmnop"}}'}}]}
    text = serialize_message(msg)
    for secret in ("sk-ant-abcdefghijklmnopqrstuvwx", "s3cr3t", "hunter22", "abcdefghijklmnop"):
        assert secret not in text
    assert text.startswith("[ASSISTANT]: Using api_key=[REDACTED]") and "token: [REDACTED]" in text
    assert "\n[Tool calls:\n  http_get(" in text and "https://bob:[REDACTED]@example.com" in text
    tool = serialize_message({"role": "tool", "tool_call_id": "toolu_1", "content": "password: swordfish\nok"})
    assert tool == "[TOOL RESULT toolu_1]: password: [REDACTED]\nok"
    # Words that only look like credential keys in prose are left alone.
    plain = serialize_message({"role": "user", "content": "the token count and the key idea: keep it short"})
    assert plain == "[USER]: the token count and the key idea: keep it short"

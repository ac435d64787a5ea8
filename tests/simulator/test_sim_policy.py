"""The simulator's deterministic model policy and summariser (no HTTP)."""

from __future__ import annotations

from compression.core.summary import TEMPLATE_HEADINGS, build_summary_prompt
from compression.core.tokens import count_tokens
from simulator.policy import PROJECT_TOOLS, find_actions, respond
from simulator.summary import build_summary, parse_summary

ALL = set(PROJECT_TOOLS)
TOOL_DEFS = [{"name": n, "input_schema": {"type": "object"}} for n in PROJECT_TOOLS]


def reply(messages, tools=TOOL_DEFS, max_tokens=4000, **kw):
    return respond({"messages": messages, "tools": tools, "max_tokens": max_tokens}, count_tokens=count_tokens, **kw)


def test_it_finds_each_workspace_tool_request():
    assert find_actions("please read notes.txt", ALL) == [("read_file", {"path": "notes.txt"})]
    assert find_actions("read src/app.py from line 40, first 20 lines", ALL) == [
        ("read_file", {"path": "src/app.py", "offset": 40, "limit": 20})]
    assert find_actions("list files", ALL) == [("list_files", {"path": "."})]
    assert find_actions("list files in docs.", ALL) == [("list_files", {"path": "docs"})]
    assert find_actions("search for TODO in src", ALL) == [("search_files", {"pattern": "TODO", "path": "src"})]
    assert find_actions('write "hello world" to out.txt', ALL) == [("write_file", {"path": "out.txt", "content": "hello world"})]
    assert find_actions("write hello to out.txt", ALL) == [("write_file", {"path": "out.txt", "content": "hello"})]
    assert find_actions("run `ls -la`", ALL) == [("terminal", {"command": "ls -la"})]


def test_it_keeps_the_order_asked_and_ignores_tools_not_offered():
    text = "run `pytest` then read notes.txt"
    assert [n for n, _ in find_actions(text, ALL)] == ["terminal", "read_file"]
    assert find_actions(text, {"read_file"}) == [("read_file", {"path": "notes.txt"})]
    assert find_actions("I already read the news", ALL) == []


def test_it_calls_tools_with_stable_ids():
    messages = [{"role": "user", "content": "read notes.txt"}]
    first, again = reply(messages), reply(messages)
    assert first == again and first.stop_reason == "tool_use" and first.kind == "tool_use"
    assert first.blocks[1]["id"].startswith("toolu_")


def test_it_answers_in_text_when_no_tools_are_offered():
    result = reply([{"role": "user", "content": "read notes.txt"}], tools=[])
    assert result.kind == "text" and result.blocks[0]["type"] == "text"


def test_it_reports_errors_from_tool_results():
    messages = [
        {"role": "user", "content": "read missing.txt"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "missing.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Error: No such file: missing.txt", "is_error": True}]},
    ]
    text = reply(messages).blocks[0]["text"]
    assert "read_file missing.txt: failed with error: Error: No such file: missing.txt" in text


def test_it_grows_its_answer_with_the_question():
    short = reply([{"role": "user", "content": "hi"}], tools=[]).blocks[0]["text"]
    long = reply([{"role": "user", "content": "explain " * 300}], tools=[]).blocks[0]["text"]
    assert len(long.split()) > len(short.split())


def test_it_recalls_an_earlier_fact_when_asked():
    messages = [
        {"role": "user", "content": "Note this. The deploy key rotates every 90 days. Thanks."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "How often does the deploy key rotate?"},
    ]
    result = reply(messages, tools=[])
    assert result.kind == "recall" and "every 90 days" in result.blocks[0]["text"]


def test_it_returns_nothing_for_max_tokens_zero():
    result = reply([{"role": "user", "content": "hi"}], max_tokens=0)
    assert (result.blocks, result.stop_reason) == ([], "max_tokens")


TURNS = [
    {"role": "user", "content": "Set up CI for the api project. Always use Python 3.11."},
    {"role": "assistant", "content": "Looking.", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "list_files", "arguments": '{"path": "api"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "setup.cfg\nmain.py"},
    {"role": "assistant", "content": "I decided to use GitHub Actions instead of Jenkins.", "tool_calls": [
        {"id": "b", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "pytest -q"}'}}]},
    {"role": "tool", "tool_call_id": "b", "content": "FAILED test_main.py::test_port - AssertionError: 8080 != 8000"},
    {"role": "user", "content": "The port must be 8000 in production."},
]


def test_it_fills_every_template_heading_from_the_turns():
    summary = build_summary(build_summary_prompt(TURNS, budget=2000))
    assert [line for line in summary.splitlines() if line.startswith("#")] == list(TEMPLATE_HEADINGS)
    sections = parse_summary(summary)
    assert sections["## Goal"] == ["Set up CI for the api project. Always use Python 3.11."]
    assert {"listed api", "ran `pytest -q`"} <= set(sections["### Done"])
    assert any("8080 != 8000" in item for item in sections["### Blocked"])
    assert "Always use Python 3.11." in sections["## Constraints & Preferences"]
    assert "I decided to use GitHub Actions instead of Jenkins." in sections["## Key Decisions"]
    assert {"setup.cfg", "main.py", "test_main.py"} <= set(sections["## Relevant Files"])
    assert "The port must be 8000 in production." in sections["## Critical Context"]
    assert sections["### In Progress"] == ["The port must be 8000 in production."]


def test_it_carries_a_previous_summary_forward():
    first = build_summary(build_summary_prompt(TURNS, budget=2000))
    later_turns = [{"role": "user", "content": "Now read deploy.yaml"},
                   {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "deploy.yaml"}'}}]},
                   {"role": "tool", "tool_call_id": "c", "content": "replicas: 3"}]
    second = parse_summary(build_summary(build_summary_prompt(later_turns, budget=2000, previous_summary=first)))
    assert second["## Goal"] == ["Set up CI for the api project. Always use Python 3.11."]
    assert {"listed api", "ran `pytest -q`", "read deploy.yaml"} <= set(second["### Done"])
    assert "The port must be 8000 in production." in second["### Done"]  # moved from In Progress
    assert "The port must be 8000 in production." in second["## Critical Context"]
    assert "deploy.yaml" in second["## Relevant Files"] and "setup.cfg" in second["## Relevant Files"]
    assert second["### In Progress"] == ["Now read deploy.yaml"]


def test_it_answers_a_compression_prompt_with_a_summary_reply():
    prompt = build_summary_prompt(TURNS, budget=2000)
    result = reply([{"role": "user", "content": prompt}])
    assert result.kind == "summary" and result.blocks[0]["text"].startswith("## Goal")
    empty = reply([{"role": "user", "content": prompt}], empty_summary=True)
    assert empty.blocks == [{"type": "text", "text": ""}]

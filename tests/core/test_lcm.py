"""The lcm engine: compresses like the built-in, ends every summary with a mechanical anchor index
(references from the host, carried forward), says in the prefix that its two tools exist, and
answers them through the injected recall; the summariser never sees the note or the index."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compression.core.anchors import ANCHOR_HEADING, extract_anchors, parse_index
from compression.core.compressor import ContextCompressor
from compression.core.engine import get_context_engine, set_plugin_dir
from compression.core.lcm import EXPAND_TOOL, RECALL_NOTE, SEARCH_TOOL, LcmEngine
from compression.core.markers import END_MARKER, SUMMARY_KEY, SUMMARY_PREFIX, is_summary_message, summary_body_of
from compression.core.summary import SummariserUnavailable
from compression.core.tool_pairs import tool_pair_problems

from .conftest import RecordingSummariser, assistant, call, result, sized, system, user
from .test_seam import HOST_KWARGS

REPO = Path(__file__).resolve().parents[2]


class FakeRecall:
    """The host's side: references for the live context, canned search and expand answers."""

    def __init__(self, messages=None, refs=None):
        self.refs = refs
        self.messages = messages
        self.searches, self.expands = [], []

    def context_refs(self):
        if self.refs is not None:
            return self.refs
        return [(m["role"], f"m{100 + i}") for i, m in enumerate(self.messages[1:])]

    def search(self, query, limit):
        self.searches.append((query, limit))
        return [{"ref": "m7", "role": "user", "snippet": "the staging port is 8443"}][:limit]

    def expand(self, ref, before, after):
        self.expands.append((ref, before, after))
        if ref == "m0":
            raise ValueError("no message m0 in this conversation")
        return {"ref": ref, "messages": [{"ref": ref, "role": "user", "text": "verbatim"}]}


def chat(turns=30, tokens=2_000):
    msgs = [sized(system(), 50)]
    for i in range(turns):
        msgs.append(sized(user(f"request {i}: the build takes {i + 10} minutes, see https://ci.example.org/run/{i}"),
                          tokens))
        msgs.append(sized(assistant(f"reading {i}", [call(f"c{i}", "read_file", path=f"src/mod_{i}/core.py")]), 50))
        msgs.append(sized(result(f"c{i}", f"line 1\nKeyError: 'tenant_{i}' in resolve_tenant", "read_file"), tokens))
        msgs.append(sized(assistant(f"finished {i}"), tokens))
    return msgs


@pytest.fixture
def make_lcm(clock, summariser):
    def make(context_length=200_000, **kwargs):
        kwargs.setdefault("summariser", summariser)
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("wall_clock", lambda: clock.now + 1_700_000_000)
        return LcmEngine(context_length, **kwargs)

    return make


def summary_of(res):
    [msg] = [m for m in res.messages if m.get(SUMMARY_KEY)]
    return msg


def test_it_is_a_builtin_name_that_takes_the_hosts_keywords_and_ignores_unknown_ones(tmp_path):
    engine = get_context_engine("lcm", **HOST_KWARGS, recall=None, some_future_keyword=1)
    assert isinstance(engine, LcmEngine) and engine.name == "lcm"
    assert (engine.threshold_tokens, engine.tail_token_budget) == (64_000, 12_800)  # the compressor's rules
    # The built-in compressor ignores the recall handle the host passes to every engine.
    assert type(get_context_engine("compressor", **HOST_KWARGS, recall=FakeRecall(refs=[]))) is ContextCompressor
    # No plugin folder shadows a built-in name.
    (tmp_path / "lcm").mkdir()
    (tmp_path / "lcm" / "__init__.py").write_text("raise SystemExit('loaded')")
    set_plugin_dir(tmp_path)
    assert isinstance(get_context_engine("lcm", context_length=200_000), LcmEngine)


def test_the_summary_says_the_tools_exist_and_ends_with_an_anchor_index_with_references(make_lcm, summariser):
    msgs = chat()
    snapshot = json.dumps(msgs, sort_keys=True)
    engine = make_lcm(recall=FakeRecall(msgs))
    res = engine.compress(msgs)
    assert res.compressed and json.dumps(msgs, sort_keys=True) == snapshot  # input untouched
    text = summary_of(res)["content"]
    assert text.startswith(f"{SUMMARY_PREFIX} {RECALL_NOTE}") and text.endswith(END_MARKER)
    assert is_summary_message(summary_of(res)) and res.summary == text
    assert "context_search(query, limit)" in RECALL_NOTE and "context_expand(ref, before, after)" in RECALL_NOTE
    anchors = {(a.kind, a.value): a.ref for a in parse_index(summary_body_of(summary_of(res)))}
    # Message i of the context has reference m(99 + i): request 5 is message 1 + 4 * 5 = 21.
    assert anchors[("number", "15 minutes")] == "m120"
    assert anchors[("url", "https://ci.example.org/run/5")] == "m120"
    assert anchors[("file", "src/mod_5/core.py")] == "m121"
    assert anchors[("error", "KeyError: 'tenant_5' in resolve_tenant")] == "m122"
    assert res.tokens_after <= res.tokens_before and tool_pair_problems(res.messages) == []
    # Only the compacted span is indexed: the tail is still in view.
    assert ("number", f"{29 + 10} minutes") not in anchors


def test_the_summariser_sees_only_prose_and_the_index_is_carried_forward(make_lcm, summariser):
    msgs = chat()
    engine = make_lcm(recall=FakeRecall(msgs))
    first = engine.compress(msgs)
    carried = parse_index(summary_body_of(summary_of(first)))
    more = list(first.messages)
    for i in range(30, 60):
        more += [sized(user(f"request {i}: deploy tag v{i}.0.1 to eu-west"), 2_000), sized(assistant(f"done {i}"), 2_000)]
    second = make_lcm(recall=FakeRecall(more))
    second.load_state(engine.export_state())
    res = second.compress(more)
    assert res.compressed
    prompt = summariser.last_prompt
    assert "Ship the feature." in prompt  # the previous prose is updated…
    assert ANCHOR_HEADING not in prompt and RECALL_NOTE not in prompt  # …never the note or the index
    index = parse_index(summary_body_of(summary_of(res)))
    values = {a.value for a in index}
    assert {a.value for a in carried} <= values and "v31.0.1" in values
    assert summary_body_of(summary_of(res)).count(ANCHOR_HEADING) == 1


def test_without_references_anchors_still_come_and_a_mismatched_context_gives_none(make_lcm):
    msgs = chat()
    plain = make_lcm().compress(msgs)
    assert all(a.ref is None for a in parse_index(summary_body_of(summary_of(plain))))
    wrong = make_lcm(recall=FakeRecall(refs=[("user", "m1")])).compress(msgs)
    assert all(a.ref is None for a in parse_index(summary_body_of(summary_of(wrong))))


def test_the_index_fits_its_budget_and_never_makes_the_result_bigger_than_the_input(make_lcm):
    msgs = chat()
    small = make_lcm(recall=FakeRecall(msgs), anchor_index_tokens=120).compress(msgs)
    body = summary_body_of(summary_of(small))
    assert 0 < len(parse_index(body)) < 10
    # A span whose stored counts are small but whose index would be large: the index gives way
    # (all of it if it must) so the result is never bigger than the input.
    tight = [sized(system(), 50)]
    for i in range(12):
        tight += [sized(user(f"port {8000 + i} on host{i}.example.org/path/x{i}.py, build INV-{i}0"), 40),
                  sized(assistant("ok"), 40)]
    engine = make_lcm(recall=FakeRecall(tight), summariser=RecordingSummariser("## Goal\n" + "word " * 300),
                      protect_first_n=1, protect_last_n=2)
    res = engine.compress(tight, force=True)
    assert res.compressed and res.tokens_after <= res.tokens_before
    assert len(parse_index(summary_body_of(summary_of(res)))) < len(extract_anchors(tight))


def test_a_fallback_summary_gets_the_index_too(make_lcm):
    msgs = chat()
    engine = make_lcm(recall=FakeRecall(msgs), summariser=RecordingSummariser(error=SummariserUnavailable("down")),
                      on_summary_failure="fallback")
    res = engine.compress(msgs)
    assert res.compressed and res.fallback_used
    assert parse_index(summary_body_of(summary_of(res)))


def test_a_summary_merged_into_a_tail_message_gets_the_note_and_the_index(make_lcm):
    # Head = the system prompt, first tail message a user message: the summary is merged into it.
    msgs = [sized(system(), 50)]
    for i in range(20):
        msgs += [sized(user(f"request {i} about build 4{i}7 taking {i} minutes"), 2_000), sized(assistant(f"ok {i}"), 2_000)]
    msgs.append(sized(user("final question"), 10))
    engine = make_lcm(recall=FakeRecall(msgs), protect_first_n=0, protect_last_n=1)
    res = engine.compress(msgs, force=True)
    merged = summary_of(res)
    assert merged.get("_summary_merged")
    assert merged["content"].startswith(f"{SUMMARY_PREFIX} {RECALL_NOTE}")
    assert merged["content"].split(END_MARKER)[1].strip().startswith("request ")  # its own text follows
    assert parse_index(summary_body_of(merged))


def test_it_offers_two_tools_and_answers_them_through_the_recall(make_lcm):
    recall = FakeRecall(refs=[])
    engine = make_lcm(recall=recall)
    assert [t["name"] for t in engine.get_tool_schemas()] == [SEARCH_TOOL, EXPAND_TOOL]
    found = json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "staging port", "limit": 3}, messages=[]))
    assert found["results"][0] == {"ref": "m7", "role": "user", "snippet": "the staging port is 8443"}
    assert recall.searches == [("staging port", 3)]
    json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "x", "limit": 500}))
    assert recall.searches[-1] == ("x", 20)  # clamped
    opened = json.loads(engine.handle_tool_call(EXPAND_TOOL, {"ref": "m7"}))
    assert opened["messages"][0]["text"] == "verbatim" and recall.expands == [("m7", 2, 2)]


@pytest.mark.parametrize("name, args, error", [
    (SEARCH_TOOL, {}, "needs a query"),
    (SEARCH_TOOL, {"query": "a", "limit": "many"}, "limit must be an integer"),
    (SEARCH_TOOL, {"query": "a", "limit": True}, "limit must be an integer"),
    (EXPAND_TOOL, {}, "needs a ref"),
    (EXPAND_TOOL, {"ref": "m0"}, "no message m0"),
    (EXPAND_TOOL, {"ref": "m1", "before": [1]}, "before must be an integer"),
    ("context_grep", {}, "Unknown context engine tool"),
])
def test_bad_tool_arguments_come_back_as_a_json_error(make_lcm, name, args, error):
    answer = json.loads(make_lcm(recall=FakeRecall(refs=[])).handle_tool_call(name, args))
    assert error in answer["error"]


def test_without_a_recall_the_tools_say_they_are_unavailable(make_lcm):
    answer = json.loads(make_lcm().handle_tool_call(SEARCH_TOOL, {"query": "x"}))
    assert "unavailable" in answer["error"]


def test_the_engine_stays_pure():
    code = textwrap.dedent("""
        import sys
        import compression.core.lcm, compression.core.anchors
        print(sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'sessions', 'psycopg', 'sqlite3'}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

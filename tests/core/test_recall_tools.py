"""The recall tools for every engine: the built-in compressor offers context_search / context_expand
when the host gives it a recall and the setting is on (lcm whatever the setting), says so in its
summary's prefix, keeps that note away from the summariser, reads summaries written before the note
existed, and answers the tools in JSON: results, suggestions when a search comes back short, and
clear errors for bad arguments."""
import json

import pytest

from compression.core.compressor import ContextCompressor
from compression.core.engine import get_context_engine
from compression.core.lcm import LcmEngine, split_lcm_body
from compression.core.markers import (
    END_MARKER,
    LCM_RECALL_NOTE,
    RECALL_TOOLS_NOTE,
    SUMMARY_KEY,
    SUMMARY_PREFIX,
    is_summary_message,
    strip_summary_wrapping,
    summary_body_of,
    wrap_summary,
)
from compression.core.recall_tools import (
    EXPAND_TOOL,
    NOTHING_FOUND,
    SEARCH_MAX_LIMIT,
    SEARCH_TOOL,
    SUGGEST_LIMIT,
    answer_tool_call,
    tool_schemas,
)
from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, compute_message_tokens
from compression.core.tool_pairs import tool_pair_problems

from .conftest import RecordingSummariser, assistant, sized, system, user
from .test_seam import HOST_KWARGS

FACT = {"ref": "m7", "role": "user", "snippet": "the staging port is 8443"}


class FakeRecall:
    """The host's side without suggestions: one canned hit, canned expansions, calls recorded."""

    def __init__(self, hits=(FACT,)):
        self.hits = list(hits)
        self.searches, self.expands = [], []

    def search(self, query, limit):
        self.searches.append((query, limit))
        return self.hits[:limit]

    def expand(self, ref, before, after):
        self.expands.append((ref, before, after))
        if ref == "m0":
            raise ValueError("no message m0 in this conversation")
        return {"ref": ref, "messages": [{"ref": ref, "role": "user", "text": "verbatim"}]}


class SuggestingRecall(FakeRecall):
    def __init__(self, words, hits=(FACT,)):
        super().__init__(hits)
        self.words = words
        self.suggested = []

    def suggest(self, query, limit=8):
        self.suggested.append((query, limit))
        return self.words


class BrokenSuggestions(FakeRecall):
    def suggest(self, query, limit=8):
        raise RuntimeError("the vocabulary table is missing")


def chat(turns=30, tokens=2_000):
    msgs = [sized(system(), 50)]
    for i in range(turns):
        msgs += [sized(user(f"request {i}: the build takes {i + 10} minutes"), tokens),
                 sized(assistant(f"finished {i}"), tokens)]
    return msgs


def summary_of(res):
    [msg] = [m for m in res.messages if m.get(SUMMARY_KEY)]
    return msg


def names(engine):
    return [t["name"] for t in engine.get_tool_schemas()]


# --- Who offers the tools -----------------------------------------------------------------------


def test_the_compressor_offers_the_tools_with_a_recall_and_the_setting_on():
    engine = get_context_engine("compressor", **HOST_KWARGS, recall=FakeRecall(), recall_tools=True)
    assert type(engine) is ContextCompressor and engine.offers_recall_tools
    assert names(engine) == [SEARCH_TOOL, EXPAND_TOOL]
    assert json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "staging port"}))["results"] == [FACT]
    # On by default, as the setting is.
    assert names(ContextCompressor(200_000, recall=FakeRecall())) == [SEARCH_TOOL, EXPAND_TOOL]


@pytest.mark.parametrize("kwargs", [{"recall": None, "recall_tools": True}, {"recall_tools": True},
                                    {"recall": FakeRecall(), "recall_tools": False}])
def test_the_compressor_offers_nothing_without_a_recall_or_with_the_setting_off(kwargs):
    engine = get_context_engine("compressor", **HOST_KWARGS, **kwargs)
    assert not engine.offers_recall_tools and engine.get_tool_schemas() == []
    answer = json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "staging port"}))
    assert "Unknown context engine tool: context_search" in answer["error"]
    assert engine.recall_note() == ""


def test_lcm_offers_them_whatever_the_setting_says():
    recall = FakeRecall()
    recall.context_refs = lambda: []
    engine = get_context_engine("lcm", **HOST_KWARGS, recall=recall, recall_tools=False)
    assert isinstance(engine, LcmEngine) and names(engine) == [SEARCH_TOOL, EXPAND_TOOL]
    assert json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "port"}))["results"] == [FACT]
    # Without a recall it still offers them, and they say why they cannot answer.
    bare = get_context_engine("lcm", **HOST_KWARGS)
    assert "unavailable" in json.loads(bare.handle_tool_call(EXPAND_TOOL, {"ref": "m1"}))["error"]


def test_the_schemas_name_their_arguments_and_ranges_and_are_fresh_copies():
    search, expand = tool_schemas()
    assert search["name"] == SEARCH_TOOL and search["parameters"]["required"] == ["query"]
    assert search["parameters"]["properties"]["limit"]["maximum"] == SEARCH_MAX_LIMIT
    assert expand["name"] == EXPAND_TOOL and expand["parameters"]["required"] == ["ref"]
    assert set(expand["parameters"]["properties"]) == {"ref", "before", "after"}
    assert all(s["description"] for s in (search, expand))
    search["parameters"]["properties"].clear()
    assert tool_schemas()[0]["parameters"]["properties"]["query"]["type"] == "string"


# --- The summary says so ------------------------------------------------------------------------


def test_the_summary_says_the_tools_exist_only_when_they_are_offered(make_compressor):
    msgs = chat()
    snapshot = json.dumps(msgs, sort_keys=True)
    res = make_compressor(recall=FakeRecall()).compress(msgs)
    assert res.compressed and json.dumps(msgs, sort_keys=True) == snapshot
    text = summary_of(res)["content"]
    assert text.startswith(f"{SUMMARY_PREFIX} {RECALL_TOOLS_NOTE}\n\n## Goal") and text.endswith(END_MARKER)
    assert res.summary == text and "anchor index" not in text
    assert is_summary_message(summary_of(res)) and summary_body_of(summary_of(res)).startswith("## Goal")
    assert summary_of(res)["_tokens"] == compute_message_tokens({k: v for k, v in summary_of(res).items()
                                                                 if k != "_tokens"})
    assert res.tokens_after == sum(m["_tokens"] + MESSAGE_OVERHEAD_TOKENS for m in res.messages)
    assert res.tokens_after <= res.tokens_before and tool_pair_problems(res.messages) == []

    for off in (make_compressor(), make_compressor(recall=FakeRecall(), recall_tools=False)):
        plain = summary_of(off.compress(msgs))["content"]
        assert plain.startswith(f"{SUMMARY_PREFIX}\n\n## Goal") and "context_search" not in plain


def test_a_merged_summary_carries_the_note_ahead_of_the_messages_own_text(make_compressor):
    msgs = [sized(system(), 50)]
    for i in range(20):
        msgs += [sized(user(f"request {i}"), 2_000), sized(assistant(f"ok {i}"), 2_000)]
    msgs.append(sized(user("final question"), 10))
    res = make_compressor(recall=FakeRecall(), protect_first_n=0, protect_last_n=1).compress(msgs, force=True)
    merged = summary_of(res)
    assert merged.get("_summary_merged")
    assert merged["content"].startswith(f"{SUMMARY_PREFIX} {RECALL_TOOLS_NOTE}")
    assert merged["content"].split(END_MARKER)[1].strip().startswith("request ")  # its own text follows
    assert summary_body_of(merged).startswith("## Goal")


def test_the_summariser_sees_only_the_previous_prose_and_the_note_never_stacks(make_compressor, summariser):
    msgs = chat()
    first = make_compressor(recall=FakeRecall())
    more = list(first.compress(msgs).messages)
    for i in range(30, 60):
        more += [sized(user(f"request {i}: deploy tag v{i}"), 2_000), sized(assistant(f"done {i}"), 2_000)]
    second = make_compressor(recall=FakeRecall())
    second.load_state(first.export_state())
    res = second.compress(more)
    assert res.compressed
    prompt = summariser.last_prompt
    assert "PREVIOUS SUMMARY:\n## Goal\nShip the feature." in prompt
    assert "context_search" not in prompt and SUMMARY_PREFIX not in prompt
    text = summary_of(res)["content"]
    assert text.count(RECALL_TOOLS_NOTE) == 1 and text.count(SUMMARY_PREFIX) == 1
    assert second.previous_summary == summariser.answer


@pytest.mark.parametrize("note", ["", RECALL_TOOLS_NOTE, LCM_RECALL_NOTE])
def test_stored_summaries_with_or_without_a_note_still_parse(make_compressor, summariser, note):
    head = f"{SUMMARY_PREFIX} {note}" if note else SUMMARY_PREFIX
    stored = {"role": "user", "content": f"{head}\n\n## Goal\nold goal\n\n{END_MARKER}"}  # no metadata key
    assert is_summary_message(stored) and summary_body_of(stored) == "## Goal\nold goal"
    assert strip_summary_wrapping(wrap_summary(stored["content"], RECALL_TOOLS_NOTE)) == "## Goal\nold goal"
    assert split_lcm_body(f"{note}\n\n## Goal\nold goal") == ("## Goal\nold goal", "")
    msgs = [sized(system(), 50), sized(stored, 200), *chat()[1:]]
    res = make_compressor(recall=FakeRecall()).compress(msgs)
    assert res.compressed and "PREVIOUS SUMMARY:\n## Goal\nold goal" in summariser.last_prompt
    assert "context_search" not in summariser.last_prompt
    assert sum(is_summary_message(m) for m in res.messages) == 1


def test_the_note_gives_way_when_it_alone_would_make_the_result_bigger(clock):
    tight = [sized(system(), 50)]
    for i in range(12):
        tight += [sized(user(f"question {i}"), 40), sized(assistant("ok"), 40)]

    def compress(words, **kwargs):
        engine = ContextCompressor(200_000, summariser=RecordingSummariser("## Goal\n" + "word " * words),
                                   protect_first_n=1, protect_last_n=2, clock=clock, **kwargs)
        return engine.compress(tight, force=True)

    # The longest summary that still fits without the note: too close to the input for the note.
    words = next(w for w in range(0, 2_000, 5) if not compress(w + 5).compressed)
    plain = compress(words)
    assert plain.compressed and plain.tokens_before - plain.tokens_after < 40  # the note is longer than that
    res = compress(words, recall=FakeRecall())
    assert res.compressed and res.tokens_after <= res.tokens_before
    assert summary_of(res)["content"] == summary_of(plain)["content"] and res.summary == plain.summary


# --- The answers --------------------------------------------------------------------------------


def test_a_search_answers_through_the_recall_with_its_limit_clamped():
    recall = FakeRecall()
    found = json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "  staging port ", "limit": 1}))
    assert found == {"query": "staging port", "results": [FACT]}  # full: no suggestions asked for
    json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "x", "limit": 500}))
    json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "x", "limit": "0"}))
    assert recall.searches == [("staging port", 1), ("x", SEARCH_MAX_LIMIT), ("x", 1)]
    opened = json.loads(answer_tool_call(recall, EXPAND_TOOL, {"ref": "m7", "before": 99}))
    assert opened["messages"][0]["text"] == "verbatim" and recall.expands == [("m7", 10, 2)]


def test_a_short_search_suggests_words_when_the_recall_can():
    recall = SuggestingRecall(["Lisbon", "offsite", "budget", "lisbon", 42, "  ", "x" * 200,
                               *(f"w{i}" for i in range(20))])
    answer = json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "Budget for Lisboa", "limit": 5}))
    assert answer["results"] == [FACT] and recall.suggested == [("Budget for Lisboa", SUGGEST_LIMIT)]
    # The query's own words, repeats, non-words and blanks are left out; at most SUGGEST_LIMIT, each cut.
    assert answer["suggestions"] == ["Lisbon", "offsite", "x" * 60, "w0", "w1", "w2", "w3", "w4"]
    assert "note" not in answer

    nothing = json.loads(answer_tool_call(SuggestingRecall(["Lisbon"], hits=()), SEARCH_TOOL, {"query": "Lisboa"}))
    assert nothing["results"] == [] and nothing["suggestions"] == ["Lisbon"]
    assert nothing["note"].startswith(NOTHING_FOUND) and "suggestions" in nothing["note"]


def test_a_full_search_asks_for_no_suggestions():
    recall = SuggestingRecall(["Lisbon"])
    answer = json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "port", "limit": 1}))
    assert answer == {"query": "port", "results": [FACT]} and recall.suggested == []


@pytest.mark.parametrize("recall", [FakeRecall(hits=()), BrokenSuggestions(hits=()), SuggestingRecall([], hits=())],
                         ids=["no suggest method", "suggest raises", "nothing suggested"])
def test_without_suggestions_the_answer_has_none(recall):
    answer = json.loads(answer_tool_call(recall, SEARCH_TOOL, {"query": "Lisboa"}))
    assert answer == {"query": "Lisboa", "results": [], "note": NOTHING_FOUND}


def test_the_engine_answers_with_suggestions_too(make_compressor):
    engine = make_compressor(recall=SuggestingRecall(["Lisbon"], hits=()))
    answer = json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": "Lisboa"}, messages=[]))
    assert answer["suggestions"] == ["Lisbon"]


@pytest.mark.parametrize("name, args, error", [
    (SEARCH_TOOL, {}, "context_search: needs a query: the words to look for"),
    (SEARCH_TOOL, {"query": "   "}, "context_search: needs a query"),
    (SEARCH_TOOL, {"query": ["port"]}, "context_search: query must be text (got list)"),
    (SEARCH_TOOL, {"query": "a", "limit": "many"}, "context_search: limit must be an integer (got 'many')"),
    (SEARCH_TOOL, {"query": "a", "limit": True}, "context_search: limit must be an integer"),
    (SEARCH_TOOL, {"query": "a", "limit": float("inf")}, "context_search: limit must be an integer"),
    (EXPAND_TOOL, {}, "context_expand: needs a ref such as m123"),
    (EXPAND_TOOL, {"ref": "m0"}, "context_expand: no message m0 in this conversation"),
    (EXPAND_TOOL, {"ref": "m1", "before": [1]}, "context_expand: before must be an integer"),
    (EXPAND_TOOL, {"ref": {"id": 1}}, "context_expand: ref must be text (got dict)"),
])
def test_bad_arguments_come_back_as_a_clear_json_error(make_compressor, name, args, error):
    engine = make_compressor(recall=FakeRecall())
    answer = json.loads(engine.handle_tool_call(name, args))
    assert set(answer) == {"error"} and answer["error"].startswith(error)


def test_arguments_that_are_not_an_object_and_unknown_tools_are_refused_in_json():
    assert json.loads(answer_tool_call(FakeRecall(), SEARCH_TOOL, ["port"])) == {
        "error": "context_search: the arguments must be a JSON object"}
    assert "unknown recall tool 'context_grep'" in json.loads(answer_tool_call(FakeRecall(), "context_grep", {}))["error"]

"""The anchor index is extracted mechanically: exact strings of each kind, with their message's
reference, secrets never, summaries never, preferences and decisions from the user only; it
round-trips through its text and shrinks to a budget in a stated order."""
import pytest

from compression.core.anchors import (
    ANCHOR_HEADING,
    Anchor,
    anchors_of,
    extract_anchors,
    fit_anchors,
    merge_anchors,
    parse_index,
    render_index,
    split_index,
)
from compression.core.markers import SUMMARY_KEY, wrap_summary
from compression.core.tokens import count_tokens

from .conftest import assistant, call, result, user


def kinds(msg, ref="m1"):
    out = {}
    for a in anchors_of(msg, ref):
        out.setdefault(a.kind, []).append(a.value)
    return out


@pytest.mark.parametrize("text, kind, value", [
    ("see https://docs.example.com/guide?id=4#top.", "url", "https://docs.example.com/guide?id=4#top"),
    ("edit src/auth/session.py and ./scripts/run.sh", "file", "src/auth/session.py"),
    ("edit src/auth/session.py and ./scripts/run.sh", "file", "./scripts/run.sh"),
    ("the config lives in deploy/k8s/overlays/", "file", "deploy/k8s/overlays/"),
    ("merged as 3f9c21ab into main", "commit", "3f9c21ab"),
    ("call refresh_token_cache first", "id", "refresh_token_cache"),
    ("the getUserProfile handler", "id", "getUserProfile"),
    ("raise TenantNotFound here", "id", "TenantNotFound"),
    ("set hermes.compression.threshold", "id", "hermes.compression.threshold"),
    ("ticket INV-2041 is open", "id", "INV-2041"),
    ("pin it to 4.2.11 please", "id", "4.2.11"),
    ("the budget is 42,500 EUR", "number", "42,500 EUR"),
    ("it costs $1,200 a month", "number", "$1,200"),
    ("p50 went to 38.5 ms", "number", "38.5 ms"),
    ("coverage is 87.5%", "number", "87.5%"),
    ("the dump is 3.2 GB", "number", "3.2 GB"),
    ("meet on 2026-03-14 at 09:30", "number", "2026-03-14"),
    ("meet on 2026-03-14 at 09:30", "number", "09:30"),
    ("the staging port 8443 is open", "number", "port 8443"),
])
def test_each_kind_is_taken_exactly(text, kind, value):
    assert value in kinds(user(text)).get(kind, [])


def test_error_lines_come_whole_from_tool_results():
    out = kinds(result("c1", "collecting...\nE   ModuleNotFoundError: No module named 'tenants'\n3 passed", "terminal"))
    assert out["error"] == ["E   ModuleNotFoundError: No module named 'tenants'"]


def test_preferences_and_decisions_come_from_the_user_only():
    said = "I prefer tabs over spaces. We decided to go with PostgreSQL instead of MySQL. What about Redis?"
    out = kinds(user(said))
    assert out["preference"] == ["I prefer tabs over spaces."]
    assert out["decision"] == ["We decided to go with PostgreSQL instead of MySQL."]
    assert "preference" not in kinds(assistant(said)) and "decision" not in kinds(assistant(said))


def test_tool_call_arguments_are_read():
    msg = assistant("reading", [call("c1", "read_file", path="lib/billing/invoice.rb")])
    assert kinds(msg)["file"] == ["lib/billing/invoice.rb"]


def test_a_credential_never_becomes_an_anchor():
    out = kinds(user("use sk-ant-api03-abcdefghijklmnopqrstuv and api_key=hunter2secret for the call"))
    values = [v for vs in out.values() for v in vs]
    assert not any("abcdefghijkl" in v or "hunter2secret" in v for v in values)


def test_a_summary_contributes_nothing():
    assert anchors_of({"role": "user", "content": wrap_summary("edit src/app.py"), SUMMARY_KEY: True}, "m1") == []


def test_a_message_contributes_a_bounded_number_per_kind():
    many = " ".join(f"src/f{i}.py" for i in range(50))
    assert len(kinds(user(many))["file"]) == 8


def test_references_follow_their_messages_and_the_first_occurrence_wins():
    msgs = [user("edit src/app.py"), user("edit src/app.py again, and docs/a.md")]
    found = extract_anchors(msgs, ["m1", "m2"])
    assert [(a.value, a.ref) for a in found if a.kind == "file"] == [("src/app.py", "m1"), ("docs/a.md", "m2")]


def test_the_index_round_trips_through_its_text():
    anchors = [Anchor("file", "src/app.py", "m3"), Anchor("number", "42,500 EUR", None),
               Anchor("error", "KeyError: 'a (b)' [x]", "m9")]
    body = "## Goal\nship it\n\n" + render_index(anchors)
    assert parse_index(body) == anchors
    prose, index = split_index(body)
    assert prose == "## Goal\nship it" and index.startswith(ANCHOR_HEADING)
    assert render_index([]) == "" and parse_index("no index here") == []


def test_merge_keeps_the_older_reference():
    old, new = [Anchor("file", "a.py", "m1")], [Anchor("file", "a.py", "m9"), Anchor("file", "b.py", "m9")]
    assert [(a.value, a.ref) for a in merge_anchors(old, new)] == [("a.py", "m1"), ("b.py", "m9")]


def _dropped_in_order(anchors, counter):
    """The anchors in the order a shrinking budget evicts them; each fit checked against its budget."""
    order: list = []
    for budget in range(counter(render_index(anchors)), -1, -1):
        fitted = fit_anchors(anchors, budget, counter=counter)
        assert counter(render_index(fitted)) <= budget or not fitted
        assert [a for a in anchors if a in fitted] == fitted  # order kept
        order += [a for a in anchors if a not in fitted and a not in order]
    return order


def test_fitting_drops_what_the_assistant_said_first_then_the_oldest_of_the_lowest_rank():
    words = lambda text: len(text.split())  # noqa: E731  (a counter that is easy to reason about)
    anchors = [Anchor("preference", "I prefer short answers.", "m1", "user"),
               Anchor("number", "10 ms", "m2", "user"),
               Anchor("number", "20 ms", "m3", "user"),
               Anchor("number", "30 ms", "m4", "assistant")]
    full = words(render_index(anchors))
    assert fit_anchors(anchors, full, counter=words) == anchors
    assert fit_anchors(anchors, full - 1, counter=words) == anchors[:3]  # the assistant's goes first
    assert _dropped_in_order(anchors, words) == [anchors[3], anchors[1], anchors[2], anchors[0]]
    assert fit_anchors(anchors, 0, counter=words) == []


def test_one_message_s_values_share_a_line_that_names_who_gave_them():
    anchors = [Anchor("name", "Kenji Mori", "m7", "user"), Anchor("date", "March 14", "m7", "user"),
               Anchor("number", "8443", "m9", "tool"), Anchor("file", "a.py", "m3"),
               Anchor("id", "x · y", "m9", "tool")]
    lines = render_index(anchors).splitlines()[2:]
    assert lines == ["- [m7] user: name Kenji Mori · date March 14", "- [m9] tool: number 8443",
                     "- [m3] file: a.py", "- [m9] id: x · y"]
    assert parse_index(render_index(anchors)) == [*anchors[:4], Anchor("id", "x · y", "m9")]


def test_a_shared_line_is_cheaper_than_a_line_each():
    values = [Anchor("name", "Marek Novak", "m1234", "user"), Anchor("date", "Tuesday the 12th", "m1234", "user"),
              Anchor("number", "5433", "m1234", "user")]
    one_each = [Anchor(a.kind, a.value, a.ref) for a in values]  # unknown role: a line each
    assert count_tokens(render_index(values)) < count_tokens(render_index(one_each)) - 8


def test_the_index_round_trips_the_typed_kinds():
    anchors = [Anchor("name", "Quinta da Serra", "m2"), Anchor("date", "the 14th of March", "m3"),
               Anchor("columns", "id, created_at, amount_eur", "m4"), Anchor("id", "#sre-oncall", None)]
    assert parse_index("## Goal\nship it\n\n" + render_index(anchors)) == anchors


def test_the_typed_kinds_come_from_one_message_with_its_reference():
    said = "Kenji Mori booked Quinta da Serra for March 14-16, about €1.2k, see OPS-4790 and data/."
    found = extract_anchors([user(said)], ["m7"])
    assert [(a.kind, a.value) for a in found] == [
        ("file", "data/"), ("id", "OPS-4790"), ("number", "€1.2k"), ("name", "Kenji Mori"),
        ("name", "Quinta da Serra"), ("date", "March 14-16")]
    assert {a.ref for a in found} == {"m7"}


def test_fitting_treats_tool_output_as_incidental_and_keeps_what_the_user_gave():
    words = lambda text: len(text.split())  # noqa: E731
    anchors = [Anchor("number", "10 ms", "m1", "user"), Anchor("error", "KeyError: a", "m2", "tool"),
               Anchor("file", "src/a.py", "m3", "tool")]
    # The tool's anchors go first (its path before its error line), then the user's number, although
    # errors and paths outrank numbers within one role.
    assert _dropped_in_order(anchors, words) == [anchors[2], anchors[1], anchors[0]]

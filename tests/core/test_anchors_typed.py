"""Typed anchors: names, dates, money and quantities, identifiers, directories and column lists are
taken from ordinary text (chat, e-mail, logs, JSON, CSV, markdown) with their message's reference,
and the near misses of each kind are not; under a budget the user's values outlive incidental ones."""
import json

import pytest

from compression.core.anchors import (
    PER_MESSAGE,
    Anchor,
    anchors_of,
    extract_anchors,
    fit_anchors,
    parse_index,
    render_index,
)

from .conftest import assistant, result, user


def kinds(msg, ref="m1"):
    out = {}
    for a in anchors_of(msg, ref):
        out.setdefault(a.kind, []).append(a.value)
    return out


def values(text, kind, role=user):
    return kinds(role(text)).get(kind, [])


def every_value(text):
    return [v for vs in kinds(user(text)).values() for v in vs]


# --- names -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [
    ("Kenji Mori will join the call.", "Kenji Mori"),
    ("We stayed at Quinta da Serra for three nights.", "Quinta da Serra"),
    ("The invoice from Acme Logistics GmbH is overdue.", "Acme Logistics GmbH"),
    ("Honestly Grafana Cloud is cheaper than self-hosting.", "Grafana Cloud"),
    ("Booked Quinta da Serra in the end.", "Quinta da Serra"),
    ("Their branch is at Bank of the West downtown.", "Bank of the West"),
    ("The paper by Ludwig Mies van der Rohe", "Ludwig Mies van der Rohe"),
    ("Dinner at Café Central in São Paulo.", "São Paulo"),
    ("lunch with Priya tomorrow", "Priya"),
    ("we land in Lisbon at noon", "Lisbon"),
    ("the vendor Fastly raised prices", "Fastly"),
    ("Kenji said the migration is done", "Kenji"),
    ("The landlord, Mr. Okafor, called.", "Okafor"),
    ("my sister Ines is coming too", "Ines"),
])
def test_names_are_taken_from_ordinary_sentences(text, name):
    assert name in values(text, "name")


def test_a_capitalised_first_word_does_not_join_the_name_after_it():
    assert values("Booked Quinta da Serra.", "name") == ["Quinta da Serra"]
    assert values("Anyway Kenji Mori agreed.", "name") == ["Kenji Mori"]


def test_names_chained_by_and_after_a_marked_one_are_names_too():
    assert values("Let's ask Kenji and Priya about it.", "name") == ["Kenji", "Priya"]


@pytest.mark.parametrize("text", [
    "The plan is fine. Anyway, Monday works for me.",
    "I think so. Thanks! Sure, that works.",
    "Python is fine for this and Docker too.",  # a product alone is no name without context
    "We meet on Monday or on Tuesday in March.",  # weekdays and months are never names
    "## Next Steps\n- Review The Terraform Plan",  # a heading and a title-case bullet
    "Action Items: none. Open Questions: none.",
    "Product asked whether the toggle can ship. Everyone agreed.",
    "ERROR Worker Crashed; INFO Retrying Soon",  # log levels are not names
    "Handover moves to Wednesdays from now on.",
])
def test_ordinary_capitalised_words_are_not_names(text):
    assert values(text, "name") == []


def test_a_slack_style_message_yields_its_names_channel_ticket_and_amount():
    said = ("hey @here, Kenji Mori from Acme Logistics GmbH pinged me in #sre-oncall about OPS-4790 - "
            "they want the fix before Friday, budget is $25k. can you sync with Priya?")
    out = kinds(user(said))
    assert out["name"] == ["Kenji Mori", "Acme Logistics GmbH", "Priya"]
    assert out["id"] == ["#sre-oncall", "OPS-4790"]
    assert out["number"] == ["$25k"]
    assert "date" not in out  # "Friday" alone is not a date


def test_an_email_yields_the_greeting_and_signature_names_and_the_amounts():
    mail = ("Hi Daniel,\n\nThanks for the draft. The payment terms should be net 30 and the total "
            "€18,500 excluding VAT. Can we sign by March 20?\n\nBest regards,\nSofia")
    out = kinds(user(mail))
    assert out["name"] == ["Daniel", "Sofia"]
    assert out["number"] == ["€18,500"]
    assert out["date"] == ["March 20"]


def test_column_aligned_tool_headers_are_not_names():
    df = "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p1   50G   47G  3.1G  94% /"
    assert "name" not in kinds(result("c1", df, "terminal"))


# --- dates -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, date", [
    ("due 14/03/2026 at the latest", "14/03/2026"),
    ("the invoice is dated 03/14/26", "03/14/26"),
    ("paid on 14.03.2026", "14.03.2026"),
    ("the boiler is replaced on 03/14", "03/14"),
    ("see you March 14 then", "March 14"),
    ("it ships March 14, 2026", "March 14, 2026"),
    ("born 14 March 2026", "14 March 2026"),
    ("booked from Sept 22 to Sept 26", "Sept 22"),
    ("we arrive Mar 14th", "Mar 14th"),
    ("the party is on the 14th of March", "the 14th of March"),
    ("rooms for Sept 27-28 please", "Sept 27-28"),
    ("the review is Tuesday, March 14", "Tuesday, March 14"),
    ("the review is Tue 14 Mar", "Tue 14 Mar"),
    ("call me Tuesday the 14th", "Tuesday the 14th"),
    ("let's meet next Tuesday", "next Tuesday"),
    ("the target is Q3 2026", "Q3 2026"),
    ("revenue for FY26 is flat", "FY26"),
    ("launch in March 2026", "March 2026"),
    ("it must be done by June", "by June"),
    ("planned for mid-2026.", "mid-2026"),
    ("we go in late September", "late September"),
    ("the cron has failed since January", "since January"),
])
def test_dates_are_taken_in_every_common_form(text, date):
    assert date in values(text, "date")


@pytest.mark.parametrize("text", [
    "See you on Monday or maybe Tuesday.",
    "May I ask what we march towards?",
    "3/4 of the team and 1/12 of the budget",
    "11/12 tests passed, it runs 24/7 and the split is 50/50",
    "Q1: what did we learn? H1 is the page title.",
    "tomorrow, next week or later this month",
    "upgrade Python to 3.11.14 and the lib to 1.2.26",
    "March is a busy month.",
])
def test_near_misses_are_not_dates(text):
    assert values(text, "date") == []


def test_an_iso_date_stays_a_number_as_before():
    assert values("meet on 2026-03-14", "number") == ["2026-03-14"]
    assert values("meet on 2026-03-14", "date") == []


# --- money and quantities ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, amount", [
    ("they quoted $25k for the year", "$25k"),
    ("the round was €1.2M", "€1.2M"),
    ("rent is £3,400 a month", "£3,400"),
    ("about 25 thousand dollars", "25 thousand dollars"),
    ("roughly twelve hundred euros each", "twelve hundred euros"),
    ("a budget of 1.5 million USD", "1.5 million USD"),
    ("invoice total USD 1,200", "USD 1,200"),
    ("the room is €120/night", "€120/night"),
    ("it costs $30 per user", "$30 per user"),
    ("around 3,500 euros for two", "3,500 euros"),
])
def test_money_is_taken_with_its_symbol_or_written_amount(text, amount):
    assert amount in values(text, "number")


@pytest.mark.parametrize("text, quantity", [
    ("it takes 3-5 days to ship", "3-5 days"),
    ("scale to 12 replicas", "12 replicas"),
    ("a box with 8 vCPUs", "8 vCPUs"),
    ("a room for 3 adults", "3 adults"),
    ("copy speed was 5 GB/s", "5 GB/s"),
    ("the table has 12 million rows", "12 million rows"),
    ("trained on 1.4T tokens", "1.4T tokens"),
    ("we stay three nights", "three nights"),
    ("buy 2 kg of potatoes", "2 kg"),
    ("the alarm fired at 2am", "2am"),
    ("the call is at 10:30am CET", "10:30am CET"),
    ("lessons are 5:30-6:15 on Tuesdays", "5:30-6:15"),
])
def test_quantities_are_taken_with_a_unit_like_noun(text, quantity):
    assert quantity in values(text, "number")


@pytest.mark.parametrize("text", [
    "I have 2 things to say about 3 of them.",
    "a dollar, one night, a week away",
    "11/12 tests",  # a ratio, not twelve tests
    "it happened in 2 places at 5 or so",
])
def test_near_misses_are_not_amounts(text):
    assert values(text, "number") == []


# --- identifiers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, ident", [
    ("see OPS-4790 for details", "OPS-4790"),
    ("ticket is SEC-218.", "SEC-218"),
    ("ask in #sre-oncall", "#sre-oncall"),
    ("logs are in bucket acme-logs-prod", "acme-logs-prod"),
    ("primary is db-replica-07.eu-west.internal now", "db-replica-07.eu-west.internal"),
    ("curl api.example.com first", "api.example.com"),
    ("enable_new_checkout is on", "enable_new_checkout"),
    ("set FF_NEW_UI=1", "FF_NEW_UI"),
    ("flip flag checkout-v2 off", "checkout-v2"),
    ("behind a flag called `ui-dark-mode`", "ui-dark-mode"),
    ("move to r6i.4xlarge", "r6i.4xlarge"),
    ("one A100-80GB is enough", "A100-80GB"),
    ("trained on one A100", "A100"),
    ("m7g.large is cheaper", "m7g.large"),
    ("answer with claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("or gpt-4o-mini for drafts", "gpt-4o-mini"),
    ("deploy v2.3.1 today", "v2.3.1"),
    ("the v2 API", "v2"),
    ("we run Python 3.12 there", "Python 3.12"),
    ("connect to 10.0.3.17:5432", "10.0.3.17:5432"),
    ("region eu-west-1 only", "eu-west-1"),
    ("the migration 0042_add_tenant_index fails", "0042_add_tenant_index"),
    ("upstream issue #9631", "#9631"),
    ("mail kenji@acme.com", "kenji@acme.com"),
])
def test_identifiers_are_taken_exactly(text, ident):
    assert ident in values(text, "id")


@pytest.mark.parametrize("text", [
    "e.g. this, i.e. that, etc. and so on",
    "a state-of-the-art, up-to-date, end-to-end design",
    "covid-19 hit us, top-10 lists",
    "see fig.3 and approx.5 of them",
    "the colour #fff and #a1b2c3, then #include <stdio.h>",
    "run `pytest` then `make`",
    "it was the end.Next we went home.",
    "I said OK and it was fine.",
])
def test_near_misses_are_not_identifiers(text):
    assert values(text, "id") == []


def test_an_ip_address_is_one_identifier_not_a_version():
    assert values("the host 10.0.0.12 answers", "id") == ["10.0.0.12"]
    assert values("the host 999.1.1.1 answers", "id") == []


def test_storage_uris_are_links():
    out = values("copy s3://acme-logs/raw/2026/ to gs://backup-bkt/raw", "url")
    assert out == ["s3://acme-logs/raw/2026/", "gs://backup-bkt/raw"]


def test_a_log_line_yields_its_timestamp_host_and_ids():
    line = ("2026-03-14T09:12:44Z ERROR worker-3 export_job: ConnectionError: pool exhausted "
            "host=db-replica-07.eu-west.internal retry_in=30s")
    out = kinds(result("c1", line, "terminal"))
    assert out["number"] == ["2026-03-14T09:12:44Z", "30s"]
    assert {"worker-3", "export_job", "db-replica-07.eu-west.internal", "retry_in"} <= set(out["id"])
    assert out["error"] == [line]


def test_a_json_blob_yields_its_labelled_values():
    blob = json.dumps({"bucket": "acme-logs-prod", "service": "orders-api", "env": "prod",
                       "owner": "Kenji Mori", "region": "eu-west-1", "created": "2026-03-13T22:01:09Z"})
    out = kinds(result("c1", blob, "storage"))
    assert {"acme-logs-prod", "orders-api", "eu-west-1"} <= set(out["id"])
    assert "prod" not in out["id"]  # a plain word after a label is not an identifier
    assert out["name"] == ["Kenji Mori"]
    assert out["number"] == ["2026-03-13T22:01:09Z"]


# --- directories -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, path", [
    ("put it under data/ please", "data/"),
    ("rotate /var/log/nginx/ weekly", "/var/log/nginx/"),
    ("clean /var/log/journal first", "/var/log/journal"),
    ("notes live in ~/notes", "~/notes"),
    ("write to ./build", "./build"),
    ("scratch space is /tmp", "/tmp"),
    ("I renamed the old folder to archive/.", "archive/"),
])
def test_directories_are_taken_even_at_one_level(text, path):
    assert path in values(text, "file")


@pytest.mark.parametrize("text", [
    "coffee w/ milk and/or sugar",
    "type /help for commands at 50 km/h, 24/7",
    "due 14/03/2026",  # a date, not a path
    "after the Next.js upgrade",  # a product, not a file
])
def test_near_misses_are_not_directories(text):
    assert values(text, "file") == []


# --- column lists ------------------------------------------------------------------------------------

def test_a_stated_column_list_is_one_anchor():
    assert values("the export has columns: id, created_at, amount_eur", "columns") == ["id, created_at, amount_eur"]
    assert values("its fields are `id`, `email` and `plan_id`", "columns") == ["id, email, plan_id"]


def test_a_csv_header_in_a_tool_result_is_one_anchor_and_its_names_are_not_ids():
    csv = "id,created_at,amount_eur,customer_id\n1,2026-03-01,120.50,C-1001\n2,2026-03-02,99.00,C-1002"
    out = kinds(result("c1", csv, "read_file"))
    assert out["columns"] == ["id, created_at, amount_eur, customer_id"]
    assert "created_at" not in out.get("id", [])


def test_a_markdown_table_header_row_is_one_anchor():
    table = "| Name | Role | Start date |\n|---|:---:|---|\n| Kenji Mori | SRE | 2024-05-01 |"
    out = kinds(assistant(table))
    assert out["columns"] == ["Name, Role, Start date"]
    assert out["name"] == ["Kenji Mori"]


def test_json_column_arrays_and_aligned_headers_are_column_lists():
    assert values('{"columns": ["id", "email", "plan"], "rows": 3}', "columns") == ["id, email, plan"]
    ps = "NAME                READY   STATUS    RESTARTS   AGE\nexport-worker-7d9f   0/1     Error     14         2h"
    assert kinds(result("c1", ps, "terminal"))["columns"] == ["NAME, READY, STATUS, RESTARTS, AGE"]


@pytest.mark.parametrize("text", [
    "the columns are sorted, and then grouped",
    "Yes, sure\nOk, thanks",
    "1,2,3\n4,5,6",
    "| a | b |\n| c | d |",  # no rule under the first row
])
def test_near_misses_are_not_column_lists(text):
    assert values(text, "columns") == []


# --- per message, per kind, references, budget ------------------------------------------------------

def test_each_new_kind_is_capped_per_message():
    people = ", ".join(f"with {n}" for n in ("Ana", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal"))
    days = ", ".join(f"March {d}" for d in range(1, 12))
    tables = "\n\n".join(f"a{i},b,c\n1,2,3" for i in range(5))
    assert len(values(people, "name")) == PER_MESSAGE["name"] == 6
    assert len(values(days, "date")) == PER_MESSAGE["date"] == 6
    assert len(kinds(result("c1", tables))["columns"]) == PER_MESSAGE["columns"] == 3


def test_a_character_belongs_to_one_anchor():
    out = kinds(user("due 14/03/2026 on one A100-80GB"))
    assert out == {"date": ["14/03/2026"], "id": ["A100-80GB"]}


def test_typed_anchors_keep_their_references_and_round_trip():
    msgs = [user("lunch with Priya on March 14"), result("c1", "id,email\n1,a@b.io"), user("lunch with Priya again")]
    found = extract_anchors(msgs, ["m4", "m5", "m6"])
    assert [(a.kind, a.value, a.ref) for a in found if a.kind in ("name", "date", "columns")] == [
        ("name", "Priya", "m4"), ("date", "March 14", "m4"), ("columns", "id, email", "m5")]
    assert parse_index(render_index(found)) == found  # roles included: the eviction order outlives a compaction


def test_under_a_budget_the_users_values_outlive_the_tools_and_the_assistants():
    words = lambda text: len(text.split())  # noqa: E731  (a counter that is easy to reason about)
    anchors = [Anchor("decision", "We decided to fly.", "m1", "user"),
               Anchor("name", "Kenji Mori", "m2", "user"),
               Anchor("file", "src/app.py", "m3", "tool"),
               Anchor("date", "March 14", "m4", ""),  # carried from an earlier index: role unknown
               Anchor("number", "20 ms", "m5", "assistant"),
               Anchor("error", "KeyError: x", "m6", "tool")]
    full = words(render_index(anchors))
    kept = [fit_anchors(anchors, budget, counter=words) for budget in range(full, 0, -1)]
    assert all(words(render_index(fitted)) <= budget for fitted, budget in zip(kept, range(full, 0, -1)))
    dropped_in_order = []
    for fitted in kept:
        for a in anchors:
            if a not in fitted and a not in dropped_in_order:
                dropped_in_order.append(a)
    # incidental first (numbers before paths before errors), then unknown, then the user's, statements last
    assert [a.value for a in dropped_in_order] == ["20 ms", "src/app.py", "KeyError: x", "March 14", "Kenji Mori",
                                                   "We decided to fly."]

"""The typed rules that widen the anchor index: products with their models, codes of capitals and
digits, UUIDs, ARNs, IBANs, units written on numbers, counts of plural nouns, names marked by a
comparison, a place noun, a field label or an address line, data-frame headers, ordinal-word dates
and the grammar of choices. Each rule comes with the near misses it must leave alone."""
import pytest

from compression.core.anchors import anchors_of

from .conftest import assistant, result, user


def tool(text):
    return result("c1", text, "terminal")


def kinds(msg):
    out = {}
    for a in anchors_of(msg, "m1"):
        out.setdefault(a.kind, []).append(a.value)
    return out


def values(text, kind, role=user):
    return kinds(role(text)).get(kind, [])


# --- products and models -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, model", [
    ("I run with a Garmin Forerunner 265 on my wrist", "Garmin Forerunner 265"),
    ("the rack holds an HP ProLiant DL380 and a switch", "HP ProLiant DL380"),
    ("plugged into a Netgear GS308E in the closet", "Netgear GS308E"),
    ("the office switch is a Zyxel XGS-Lite", "Zyxel XGS-Lite"),
    ("she is typing on a Lenovo ThinkPad Carbon today", "Lenovo ThinkPad Carbon"),
    ("my old Galaxy S24 Plus cracked again", "Galaxy S24 Plus"),
    ("a Lenovo Yoga 7i would do for travel", "Lenovo Yoga 7i"),
    ("the backups go to a QNAP TS464+ box", "QNAP TS464+"),
    ("Hardware Overview:\n  Model Identifier: Book7,2\n", "Book7,2"),
])
def test_a_product_is_taken_with_its_model(text, model):
    assert model in values(text, "id", tool if "\n" in text else user)


@pytest.mark.parametrize("text, version", [
    ("we moved Node 18.2 to 20.1 last sprint", "Node 18.2 to 20.1"),
    ("the google provider is pinned at ~> 5.2 for now", "~> 5.2"),
    ("install lib>=2.1,<3 before the tests", "lib>=2.1,<3"),
    ("and the caret range ^1.4.2 in package.json", "^1.4.2"),
])
def test_version_ranges_and_constraints_are_identifiers(text, version):
    assert version in values(text, "id")


@pytest.mark.parametrize("text, forbidden", [
    ("Step 3 is to restart the worker.", "Step 3"),
    ("Booked 2 rooms by the river.", "Booked 2"),
    ("our Kafka 3 brokers are fine", "Kafka 3"),
    ("the parade is in Room 12 this year", "Room 12"),
    ("We moved here in Lisbon 2019 or so", "Lisbon 2019"),
    ("the total is USD 1,200 all in", "USD 1"),
    ("if x <= 2.5 then stop", "<= 2.5"),
    ("The status is Pending. The default is Enabled.", "Pending"),
])
def test_near_misses_are_not_products_or_versions(text, forbidden):
    assert forbidden not in values(text, "id") + values(text, "name")  # "Step 3" stays a labelled number


# --- codes and identifiers ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, ident", [
    ("the confirmation code is K7PX2Q, keep it handy", "K7PX2Q"),
    ("the courier gave me 9W44ZX0087123 as the parcel id", "9W44ZX0087123"),
    ("case ref CS0091457 is still open", "CS0091457"),
    ("the job id is 3f2b8c1e-55aa-4e0b-9c7d-0a1b2c3d4e5f", "3f2b8c1e-55aa-4e0b-9c7d-0a1b2c3d4e5f"),
    ("assume arn:aws:iam::210987654321:role/deploy-bot first", "arn:aws:iam::210987654321:role/deploy-bot"),
    ("wire it to NL91 ABNA 0417 1643 00 please", "NL91 ABNA 0417 1643 00"),
    ("my receipt number is 305-7730215-4418862", "305-7730215-4418862"),
    ("I am on flight KL 1775 tomorrow", "KL 1775"),
    ("reverted in #517 after the outage", "#517"),
    ("ring me on +44 7700 900123 after six", "+44 7700 900123"),
    ("the office is at EC1V 9HX, third floor", "EC1V 9HX"),
])
def test_codes_in_capitals_and_digits_are_identifiers(text, ident):
    assert ident in values(text, "id")


def test_a_size_in_capitals_stays_a_number_and_a_flight_number_keeps_its_label():
    assert kinds(user("give it 2048MB and set fan to 10000RPM")) == {"number": ["2048MB", "10000RPM"]}
    assert kinds(user("flight 1234 boards late")) == {"number": ["flight 1234"]}


def test_the_name_on_a_timestamped_listing_line_is_an_identifier():
    listing = "2026-02-03 09:41:07 orchard-backups\n2026-02-03 09:41:09 orchard-ml"
    assert values(listing, "id", tool) == ["orchard-backups", "orchard-ml"]


@pytest.mark.parametrize("text", [
    "we SHIPPED it and WAITED",
    "the colour #808080 and color: #333 look dull",
    "meet on 2026-03-14 at the office",
    "2026-02-03 09:41:07 INFO started",
    "12-10-5 was the final score",
    "the Q3 4PM review",
    "+1 then +2 more",
])
def test_near_misses_are_not_codes(text):
    assert values(text, "id", tool) == []


def test_a_windows_path_is_a_path():
    assert values(r"the build lands in D:\builds\nightly\out.zip", "file") == [r"D:\builds\nightly\out.zip"]
    assert values("the ratio is 3:1 on the C: side", "file") == []


# --- numbers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, quantity", [
    ("the disk spins at 7200rpm", "7200rpm"),
    ("take 250mg twice a day", "250mg"),
    ("a 55-inch screen in the lounge", "55-inch"),
    ("the truck carries 40 crates, all sealed", "40 crates"),
    ("we moved 2.5 loads of gravel", "2.5 loads"),
    ("Size Used\n512G 301G", "512G"),
    ("the lift is rated for 3.2 tonnes", "3.2 tonnes"),
    ("the flat is 74 m2 plus a balcony", "74 m2"),
])
def test_quantities_with_units_and_counts(text, quantity):
    assert quantity in values(text, "number", tool)


@pytest.mark.parametrize("text, amount", [
    ('{"total_due": 99.90, "currency": "EUR"}', "99.90"),
    ("the deposit is CHF 7'450 in cash", "CHF 7'450"),
    ("date,item,price\n2026-02-01,hosting,19.90 EUR\n2026-02-02,domain,12.00 EUR", "19.90 EUR"),
    ("the ferry ticket was 1,140.00 SEK each way", "1,140.00 SEK"),
    ("the tailor asked Rs. 2,800 for both", "Rs. 2,800"),
])
def test_money_under_a_key_with_a_swiss_separator_or_in_a_csv_cell(text, amount):
    assert amount in values(text, "number", tool)


@pytest.mark.parametrize("text, forbidden", [
    ("I have 3 things to fix and 12 ways to do it", {"3 things", "12 ways"}),
    ("the 21st time", {"21st"}),
    ("Batch size 64 works best", {"64 works"}),
    ("In 2026 results were better", {"2026 results"}),
    ("the test on line 42 fails", {"42 fails"}),
])
def test_near_misses_are_not_counts(text, forbidden):
    assert not forbidden & set(values(text, "number"))


# --- dates -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, date", [
    ("the lease ends on the third of May", "the third of May"),
    ("she flies home the twenty-second of October, 2026", "the twenty-second of October, 2026"),
    ("rent is due the thirty-first of January", "the thirty-first of January"),
])
def test_days_written_as_ordinal_words_are_dates(text, date):
    assert date in values(text, "date")


@pytest.mark.parametrize("text", [
    "the second of may be the better one",
    "on the thirty-second of May",
    "the first of many",
])
def test_near_misses_are_not_ordinal_dates(text):
    assert values(text, "date") == []


# --- names -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [
    ("we're weighing Jenkins vs Buildkite this quarter", "Jenkins"),
    ("we're weighing Jenkins vs Buildkite this quarter", "Buildkite"),
    ("torn between Podman and Colima for local dev", "Colima"),
    ("is Hetzner cheaper than Scaleway for this?", "Scaleway"),
    ("we use Obsidian for notes", "Obsidian"),
    ("the Ghent team runs the payroll job", "Ghent"),
    ("deliver to: 9 Via Roma, 40121 Bologna", "Bologna"),
    ("the kickoff is at the Leiden office again", "Leiden"),
    ('{"city": "Groningen", "temp": 4}', "Groningen"),
    ("ship it to\nKade 12\n2511 Leiden\nthanks", "Leiden"),
    ("the book is from MIT Press, second edition", "MIT Press"),
    ("the quote came from Nordby Shipping AS yesterday", "Nordby Shipping AS"),
    ("please cc jo o'neill on the thread", "jo o'neill"),
    ("the closest is Cork (eu-west-1) for you", "Cork"),
])
def test_names_marked_by_their_context(text, name):
    assert name in values(text, "name", tool if text.startswith("{") else user)


@pytest.mark.parametrize("text", [
    "cc me please. cc the team. bcc everyone.",
    "LGTM Priya, ship it",
    "The mode is Strict. My answer is Maybe.",
    "Docker is fine for this and Python too.",
])
def test_near_misses_are_not_context_names(text):
    assert not {"me", "the team", "everyone", "LGTM Priya", "LGTM", "Strict", "Maybe", "Docker", "Python"} & set(
        values(text, "name"))


# --- column lists ------------------------------------------------------------------------------------

def test_a_data_frame_header_and_a_sheet_with_its_names_are_column_lists():
    frame = "   city_id  temp  rain_mm   wind\n0      C-1  11.2      0.4    3.1\n1      C-2   9.8      1.2    4.0"
    assert values(frame, "columns", tool) == ["city_id, temp, rain_mm, wind"]
    assert values("the sheet has Owner, Due Date, Cost and Notes.", "columns") == ["Owner, Due Date, Cost, Notes"]


@pytest.mark.parametrize("text", [
    "the report has details, graphs, and tables",
    "the table has Kenji Mori and Ana at the top",
    "one  two  three\nfour  five  six",
])
def test_near_misses_are_not_column_lists(text):
    assert values(text, "columns") == []


# --- the grammar of choices --------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "I'd rather have the late train than the early one.",
    "I'd go for the blue jacket over the grey one.",
    "I favour short stand-ups.",
    "My preferred pronouns are they/them.",
    "Aisle seats please, my knees hate the window.",
    "Write all amounts in euros for me.",
    "I'm not a fan of video calls.",
    "I can't stand open-plan offices.",
    "Soup is my go-to for lunch.",
    "I usually go for the vegetarian menu.",
    "I always book the early ferry.",
    "Don't use exclamation marks.",
    "Keep it under one page.",
    "No more than 5 slides please.",
    "Trains over planes if possible.",
])
def test_preferences_in_many_phrasings(text):
    assert values(text, "preference") == [text]


@pytest.mark.parametrize("text", [
    "Plan C it is, with the weekly check-in.",
    "Postgres wins.",
    "pick the smaller box, the big one is overkill",
    "Let's lock in the early slot and skip the late one.",
    "approved: the second quote with the longer warranty",
    "From now on we're standardising on ruff for linting.",
    "Final decision: the coastal route.",
    "OK, the train then.",
    "Yes, the two-bed one.",
    "I'll take the window table.",
    "Settled on the matte finish.",
    "Let's make it the 9th.",
    "We're switching to quarterly reviews.",
    "The winner is the shorter title.",
    "Book the 7am bus.",
])
def test_decisions_in_many_phrasings(text):
    assert values(text, "decision") == [text]


@pytest.mark.parametrize("text", [
    "Honestly it is what it is.",
    "Everyone wins.",
    "cc me please.",
    "Can you please check the logs?",
    "As it is, the job fails.",
    "Pick a number between 1 and 10.",
    "I'll take a look.",
    "See you then.",
    "Okay, thanks then.",
    "Yes, the logs are attached.",
    "It went over budget.",
    "Don't worry about it.",
    "I always forget the password.",
])
def test_near_misses_are_not_statements(text):
    found = kinds(user(text))
    assert "decision" not in found and "preference" not in found


def test_statements_still_come_from_the_user_only():
    assert "decision" not in kinds(assistant("Plan C it is, with the weekly check-in."))

"""Identifiers, numbers and commit hashes found in one text as spans for the ``id``, ``number`` and
``commit`` kinds of the anchor index: the patterns of each and the checks that drop near misses.

Guarantees: what each kind takes is stated in the docstring of ``anchors``; an id is never prose
(``mid-2026``, ``state-of-the-art``, ``e.g.``), a colour or a C directive; an amount in words needs
more than ``a`` or ``one``; a commit hash holds a digit and a letter; spans come in order with
trailing punctuation let go. Pure; no I/O.
"""

from __future__ import annotations

import re

from .anchor_scan import _DIGIT, _DOT_LETTER, _LETTER, Span, Words, _ordered, _run, _Scan, _scan, _spans, _trimmed

# --- identifiers -----------------------------------------------------------------------------------
_SNAKE = _scan(r"(?<![\w.-])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+(?![\w-])", gate="_")  # also 0042_add_index
_CAMEL = _scan(r"(?<![\w.-])[a-z]+(?:[A-Z][a-z0-9]+)+[A-Za-z0-9]*(?![\w-])", gate=re.compile(r"[a-z][A-Z]"))
_PASCAL = _scan(r"[A-Z](?<![\w.-].)[a-z0-9]+(?:[A-Z][a-z0-9]+)+[A-Za-z0-9]*(?![\w-])")  # two humps or more
_DOTTED = _scan(r"(?<![\w.-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}(?![\w-])", gate=_DOT_LETTER)
_DIGIT_DOT = re.compile(r"\d\.\d")
_TICKET = _scan(r"[A-Z](?<![\w-].)[A-Z0-9]{1,9}-\d{1,7}(?![\w-])", gate="-")  # INV-2041
_VERSION = _scan(r"[v\d](?<![\w.].)\d*\.\d+\.\d+(?:[-+][\w.]+)?(?![\w]|\.\w)", gate=_DIGIT_DOT)  # 4.2.11
_ALNUM_CODE = _scan(r"[A-Z](?<![\w.-].)[A-Z]{0,3}\d{2,5}[A-Za-z]{0,3}\+?(?![\w+-])")  # A100, BM25, RTX4090, DS220+
# Codes in capitals and digits: booking references, serial and tracking numbers (checked: a letter and a digit).
_CAPS_CODE = _scan(r"[A-Z0-9](?<![\w.-].)[A-Z0-9]{5,39}(?![\w-])")
_UUID = _scan(r"[0-9a-fA-F](?<![\w-].)[0-9a-fA-F]{7}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![\w-])", gate="-")
_RESOURCE_NAME = _scan(r"(?:arn|urn):[\w.-]+(?::[\w./+=@*,-]*){2,}", gate=":", word=True)  # arn:aws:iam::1:role/x
_IBAN = _scan(r"[A-Z](?<![\w].)[A-Z]\d\d(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w])")
_DIGIT_GROUPS = _scan(r"\d(?<![\w.-]\d)\d*(?:-\d+){2,}(?![\w-])", gate="-")  # order 305-7730215-4418862
_MODEL_ID = _scan(r"[A-Z](?<![\w.-].)[A-Za-z]+\d+,\d+(?![\w,])", gate=",")  # a model identifier: Book7,2
# A listing's line (aws s3 ls, a backup list): a timestamp, maybe sizes, then one name with a separator in it.
_LISTED = _scan(r"\d(?<![^\n]\d)\d{3}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?(?:[ \t]+\d[\d.,]*[KMGTB]?)*[ \t]+"
                r"(?P<v>[a-z0-9]+(?:[-_.][a-z0-9]+)+)[ \t]*(?=\n|$)")
_PHONE = _scan(r"\+(?<![\w+]\+)\d{1,3}(?:[ -]\(?\d{1,7}\)?){1,5}(?![\w-]|[ -]\d)", gate="+")  # +31 6 1234 5678
_UK_POSTCODE = _scan(r"[A-Z](?<![\w-].)[A-Z]?\d[A-Z\d]? \d[ABD-HJLNP-UW-Z]{2}(?![\w-])")  # EC1V 9HX, not Q3 4PM
_FLIGHT = _scan(r"(?:[Ff]light|[Tt]rain)\s+(?:no\.?\s*|number\s*|#\s*)?(?P<v>(?:[A-Z]{2}|[A-Z]\d|\d[A-Z])\s?\d{1,4}[A-Z]?)(?![\w-])",
                word=True)
_ISSUE_REF = _scan(r"#(?<![\w&#/]#)\d{3,7}(?![\w-])", gate="#")  # #9631
_COLOUR_CONTEXT = re.compile(r"(?:colou?r|background|fill|stroke|border)\b[^\n]{0,12}$|[:=]\s*$", re.I)
_VERSION_TAG = _scan(r"v(?<![\w.-]v)\d+(?:\.\d+){0,3}(?![\w-]|\.\d)")  # v2, v1.4
# Letters and digits joined by - or .: r6i.4xlarge, A100-80GB, gpt-4o-mini, db-replica-07.eu-west.internal.
_COMPOUND = _scan(r"(?<![\w.@/#:$-])(?=[\w.-]*\d)[A-Za-z][A-Za-z0-9]*(?:[-.][A-Za-z0-9]+)+(?![\w-]|\.\w)",
                  gate=re.compile(r"[-.][A-Za-z0-9]"))
_KEBAB = _scan(r"(?<![\w.@/#:$-])[a-z][a-z0-9]*(?:-[a-z0-9]+){2,}(?![\w-]|\.\w)",
               gate=re.compile(r"-[a-z0-9]+-"))  # acme-logs-prod
_IP = _scan(r"\d(?<![\w.]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?::\d{1,5}|/\d{1,2})?(?!\w|\.\d)", gate=_DIGIT_DOT)
_TLD = re.compile(
    r"\.(?:com|org|net|io|dev|app|ai|co|cloud|internal|local|lan|corp|svc|eu|uk|de|fr|pt|es|nl|ch|jp|info|"
    r"biz|xyz|tech|gg)(?![\w-]|\.\w)"
)
_HOST_NAME = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]+")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_EMAIL = _scan(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])", gate="@")
_CHANNEL = _scan(r"#(?<![\w&#/]#)[a-z][a-z0-9_-]*[a-z0-9](?![\w-])", gate="#")
_BACKTICKED = _scan(r"`(?<!``)(?P<v>[^`\s]{2,80})`(?!`)", gate="`")
_ID_LABELS = ("bucket", "container", "queue", "topic", "stream", "cluster", "namespace", "database", "db", "schema",
              "table", "index", "repo", "repository", "branch", "tag", "host", "hostname", "server", "node",
              "instance", "service", "deployment", "pod", "job", "flag", "toggle", "channel", "project",
              "workspace", "env", "environment", "region", "zone", "vpc", "subnet", "image", "model", "dataset",
              "sheet", "folder", "label", "endpoint", "domain", "release", "version", "machine", "gpu", "vm", "sku")
_LABELLED_ID = _scan(  # bucket acme-logs-prod, flag checkout-v2, image python:3.12-slim
    rf"(?:instance type|feature flag|{'|'.join(_ID_LABELS)})(?:\s+|[\"']?\s*[:=]\s*)[`'\"]?"
    r"(?P<v>(?=\w*[\d_]|\w*[.:/+-][a-z0-9])[a-z0-9][\w.:/+-]*[a-z0-9])", lower=True, word=True, words=_ID_LABELS)
_PRODUCT_VERSION = _scan(
    r"(?:Python|Node|Node\.js|Django|Java|Golang|Ruby|Rails|PHP|Postgres|PostgreSQL|MySQL|Redis|Ubuntu|Debian|"
    r"Kubernetes|Terraform|React|Vue|Angular|Rust|Kotlin|Swift|Spark|Kafka|Elasticsearch|CUDA|Android|"
    r"Windows|Chrome|Firefox|Safari)\s\d+\.\d+(?:\.\d+)?(?![\w.]|\.\d)", gate=_DIGIT_DOT, word=True)
_COMPOUND_PREFIXES = frozenset((
    "mid", "pre", "post", "top", "non", "covid", "under", "over", "sub", "anti", "semi", "multi", "co", "re", "ex",
    "self", "late", "early", "first", "last", "next", "past", "about", "around", "circa", "approx", "no", "nr",
    "fig", "vol", "ch", "sec", "pp", "p", "eq", "figure", "step", "page", "section", "chapter", "table", "part",
    "day", "week", "month", "year", "q", "h", "type",
))
_KEBAB_STOP = frozenset(("to", "of", "the", "a", "an", "on", "in", "and", "or", "by", "for", "at", "up", "out",
                         "off", "as", "you", "can", "be", "is", "it", "me", "my", "so", "all", "go", "one", "not",
                         "with", "from", "what", "how", "who", "over", "down", "back"))
_NOT_IDS = frozenset(("e.g", "i.e", "a.k.a", "etc", "n/a", "w/o", "and/or", "24/7", "p.s"))
_C_DIRECTIVES = frozenset(("include", "define", "ifdef", "ifndef", "endif", "pragma", "import", "region",
                           "endregion", "undef", "elif", "else", "error", "warning", "line"))
_UNIT_WORD = re.compile(r"[kKMGT]?(?:Wh|W|Hz|B|iB|b|bps)|mAh")  # kWh, MiB, Gbps
_HEX_COLOUR = re.compile(r"#(?:[0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})")

# --- numbers ---------------------------------------------------------------------------------------
_CURRENCY_CODES = r"USD|EUR|GBP|CHF|JPY|CAD|AUD|NZD|SEK|NOK|DKK|PLN|CZK|BRL|INR|CNY|MXN|SGD|HKD|ZAR"
_CURRENCY_WORDS = (rf"dollars?|euros?|pounds?|bucks|cents?|pence|yen|yuan|francs?|reais|rupees?|pesos?|"
                   rf"kronor|kroner|krona|zloty|{_CURRENCY_CODES}|€|\$|£")
_SCALE = r"k|K|M|B|T|bn|million|billion|trillion|thousand|hundred|grand"
_PER = (r"night|day|hour|hr|h|week|month|mo|year|yr|person|head|user|seat|GB|TB|request|req|call|token|"
        r"unit|item|kg|km|mile|s|sec|min|m|ticket|room|guest|adult|core|node")
_UNITS = (
    r"%|‰|ms|µs|us|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|yrs?|"
    r"[kKMGTP]i?B|bytes?|bits?|[kKMG]?bps|[kKMG]?Hz|px|pt|em|rem|dpi|fps|°[CF]|[kKmcµn]?m|m²|km/h|mph|"
    rf"[kKm]?g|lbs?|oz|[kKmM]?W|kWh|[kKmM]?V|mAh|[mµ]?[lL]|{_CURRENCY_CODES}|€|\$|£|k?m2|sq ?ft|sqm|"
    r"tokens?|req/s|rps|qps|ops/s|users?|requests?|rows?|records?|items?|lines?|files?|calls?|"
    r"k|K|M|B|bn|million|billion|thousand|x|×|people|guests|seats|nights?|points?|cores?|threads?|GPUs?|"
    r"am|pm|AM|PM|vCPUs?|CPUs?|nodes?|replicas?|pods?|shards?|instances?|servers?|hosts?|machines?|VMs?|"
    r"containers?|partitions?|brokers?|workers?|retries|attempts?|errors?|warnings?|alerts?|incidents?|"
    r"tickets?|customers?|clients?|tenants?|accounts?|sessions?|connections?|queries|transactions?|orders?|"
    r"events?|messages?|jobs?|tasks?|tests?|epochs?|batches|samples?|documents?|docs|pages?|words?|"
    r"characters?|chars|parameters?|params|layers?|rooms?|beds?|bedrooms?|adults?|kids?|child|children|"
    r"passengers?|bags?|miles?|kilos?|grams?|litres?|liters?|meters?|metres?|feet|ft|inch(?:es)?|tonnes?|tons?|rpm|RPM|G|acres?|hectares?|"
    r"calories|kcal|floors?|stars?|stops?|flights?|commits?|PRs?|issues?|bugs?|regions?|zones?|clusters?|"
    r"databases?|tables?|columns?|dollars?|euros?|pounds?|bucks|cents?|pence|yen|per ?cent|percent|"
    r"employees?|engineers?|members?|seats?|licen[cs]es?|subscribers?|visitors?|downloads?|installs?"
)
_NUMBER_TAIL = r"(?>\d{0,2}(?:[,\u202f'’]\d{3})+|\d*)(?:\.\d+)?+"  # after the first digit: 42,500 / 7'450 / 38.5
_NUMBER = r"\d" + _NUMBER_TAIL
_PER_SUFFIX = rf"(?:\s?/\s?(?:{_PER})|\s+per\s+(?:{_PER}))?"
_AMOUNT = _scan(
    rf"\d(?<![\w./]\d)(?<!\d[,'’]\d){_NUMBER_TAIL}(?:\s?[-–]\s?{_NUMBER})?[\s-]?"
    rf"(?:(?:{_SCALE})(?:\s?(?:{_CURRENCY_WORDS})|\s(?:{_UNITS}))?|{_UNITS}){_PER_SUFFIX}(?![\w/])")
_SYMBOL_FIRST = _scan(rf"(?:[$€£¥₹]|Rs\.?)(?<![\w.,][$€£¥₹R])\s?{_NUMBER}(?:\s?(?:{_SCALE}))?{_PER_SUFFIX}(?!\w)")
_CODE_FIRST = _scan(rf"(?:{_CURRENCY_CODES})[ \u00a0]?{_NUMBER}(?:\s?(?:{_SCALE}))?(?!\w)", not_after=".,", word=True)
_DATE_TIME = _scan(  # ISO dates and timestamps, clock times
    r"\d(?<![\w-]\d)(?:\d{3}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d?:\d{2}(?::\d{2})?(?:\s?[-–]\s?\d\d?:\d{2})?(?:\s?(?:[ap]m|[AP]M))?(?:\s(?:UTC|GMT|CET|CEST|BST|EST|EDT|PST|PDT|JST|WET|WEST))?)"
    r"(?![\w-])")
_NUMBER_WORD = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
                r"hundred|thousand|million|billion|half|a)")
_WRITTEN_AMOUNT = _scan(
    rf"\b{_NUMBER_WORD}(?:(?:[\s-]+|\s+and\s+){_NUMBER_WORD})*\s+"
    r"(?:dollars?|euros?|pounds?|bucks|francs?|yen|rupees?|pesos?|usd|eur|gbp|chf|"
    r"minutes|hours|days|weeks|months|years|nights|people|guests|adults|kids|children|rooms|beds|seats|"
    r"tickets|km|kilometres|kilometers|miles|kilos|litres|liters|metres|meters|percent|servers|nodes|"
    r"replicas|instances|engineers|users|customers)\b", lower=True,
    words=("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
           "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty",
           "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "million", "billion"))
_YEAR = re.compile(r"(?:19|20)\d\d")
_COUNT_LABELS = frozenset(("line", "lines", "row", "port", "step", "page", "section", "chapter", "version", "issue",
                           "ticket", "build", "release", "room", "gate", "order", "invoice", "no", "number", "id"))
_TRIVIAL_NUMBER_WORDS = frozenset(("a", "one", "half", "and"))
# Matched on lower-cased text (case-insensitive alternations are slow in ``re``).
_LABELLED_NUMBER = _scan(
    r"\b(?:port|pid|pr|po|issue|ticket|build|release|line|row|room|gate|flight|order|invoice|step|code|pin|"
    r"id|no\.|number|account|extension|error code|exit code|status|http)\s?#?\d+\b", lower=True,
    words=("port", "pid", "pr", "po", "issue", "ticket", "build", "release", "line", "row", "room", "gate", "flight",
           "order", "invoice", "step", "code", "pin", "id", "no", "number", "account", "extension", "status", "http"))

# A number with its unit written on (7200rpm, 250mg, 3d): a short lower-case run, not an ordinal's.
_ATTACHED_UNIT = _scan(r"\d(?<![\w./]\d)(?<!\d[,'’]\d)(?>\d*)(?:\.\d+)?+(?P<u>[a-z]{1,4})(?![\w/])")
_ORDINALS = frozenset(("st", "nd", "rd", "th", "x", "e"))
# A count of something, 10 or more or with a decimal part, before a plural noun: 18 crates, 2.5 loads.
# The noun ends its clause or a conjunction, preposition or verb follows it ("64 works best" is a verb).
_PLURAL_COUNT = _scan(r"\d(?<![\w./]\d)(?<!\d[,'’]\d)(?P<n>(?>\d*)(?:[,'’]\d{3})*(?:\.\d+)?+) (?P<w>[a-z]{2,}s)"
                      r"(?=[,.;:!?)]|\s*$|\s*\n|\s(?:and|or|in|of|for|at|on|from|with|per|each|total|left|remaining|"
                      r"are|were|have|had|will|would|can|could|need|to)\b)")
_NOT_PLURAL = re.compile(r".*(?:ss|us|is|ous|ics)|things|times|ways|ones|others|years|tens|dozens|hundreds|thousands")
_JSON_MONEY = _scan(  # "total_due": 99.90 (on lower-cased text)
    r"(?:amount|price|cost|total|subtotal|balance|fee|fees|due|paid|charge|salary|budget)(?:_\w+)?[\"']?\s*[:=]\s*"
    r"(?P<v>\d+(?:,\d{3})*\.\d\d)(?![\w.])", lower=True,
    words=("amount", "price", "cost", "total", "subtotal", "balance", "fee", "fees", "due", "paid", "charge", "salary",
           "budget"))

# --- commit hashes ---------------------------------------------------------------------------------
_COMMIT = _scan(r"[0-9a-f](?<![\w-].)[0-9a-f]{6,39}(?![\w-])")


def _id_spans(text: str, low: str | None, digits: bool, words: Words = None) -> list[Span]:
    scans: tuple[_Scan, ...] = (_SNAKE, _CAMEL, _PASCAL, _DOTTED, _EMAIL, _CHANNEL, _BACKTICKED, _LABELLED_ID,
                                _KEBAB)
    if digits:
        scans += (_TICKET, _VERSION, _COMPOUND, _VERSION_TAG, _IP, _PRODUCT_VERSION, _ALNUM_CODE, _ISSUE_REF,
                  _CAPS_CODE, _UUID, _RESOURCE_NAME, _IBAN, _DIGIT_GROUPS, _MODEL_ID, _FLIGHT, _LISTED, _PHONE, _UK_POSTCODE)
    spans = _spans(scans, text, low, words) + _hosts(text, low)
    out = []
    for start, end, value in _trimmed(_ordered(spans)):
        if len(value) >= 2 and _plausible_id(value, text, start):
            out.append((start, end, value))
    return out


def _hosts(text: str, low: str | None) -> list[Span]:
    """Host names ending in a known top-level domain: api.example.com, db-07.eu-west.internal."""
    out: list[Span] = []
    if low is None or "." not in text:
        return out
    for match in _TLD.finditer(low):
        end = match.end()
        start = match.start()
        while start > 0 and low[start - 1] in _HOST_CHARS:
            start -= 1
        before = low[start - 1] if start else ""
        if before and (before.isalnum() or before in "_@/"):
            continue
        if _HOST_NAME.fullmatch(low, start, end):
            out.append((start, end, text[start:end]))
    return out


def _plausible_id(value: str, text: str, start: int) -> bool:
    """False for the near misses the id patterns let through: prose compounds (mid-2026,
    state-of-the-art), abbreviations (e.g.), colours and C directives, plain words in back-ticks,
    IP-like numbers out of range."""
    low = value.lower()
    if low in _NOT_IDS:
        return False
    head = value[0]
    if head == "#":
        if low[1:].isdigit() and len(low) != 7 and len(low) != 9:  # #882 is an issue, unless: color: #333
            return not _COLOUR_CONTEXT.search(text, max(0, start - 24), start)
        return not _HEX_COLOUR.fullmatch(low) and low[1:] not in _C_DIRECTIVES
    if _CAPS_CODE.pattern.fullmatch(value) and not value.isdigit():  # K7PX2Q; not SHIPPED, nor 2048MB
        return bool(_DIGIT.search(value) and _LETTER.search(value)) and not _AMOUNT.pattern.fullmatch(value)
    if head == "+":
        return 8 <= sum(c.isdigit() for c in value) <= 15  # +31 6 1234 5678 (E.164: 15 digits at most)
    if _DIGIT_GROUPS.pattern.fullmatch(value):
        return sum(c.isdigit() for c in value) >= 9  # 2026-03-14 is a date
    if _UNIT_WORD.fullmatch(value):
        return False  # kWh, MiB: a unit
    if text[start - 1:start] == "`":
        return any(not c.isalpha() for c in value) or value[1:] != value[1:].lower()
    if head == "v" and value[1:2] == ".":
        return False
    if head.isdigit() and value.count(".") == 3 and not _LETTER.search(value):
        return all(int(octet) <= 255 for octet in re.split(r"[.:/]", value)[:4])
    if "-" in value and "." not in value and "_" not in value:
        parts = low.split("-")
        ticket = value.split("-")[0].isupper() and parts[0] != "covid"
        if not ticket and parts[0] in _COMPOUND_PREFIXES and all(p.isdigit() for p in parts[1:]):
            return False  # mid-2026, covid-19, top-10 (SEC-218 is a ticket)
        if not any(c.isdigit() for c in low) and any(p in _KEBAB_STOP for p in parts):
            return False  # state-of-the-art, up-to-date
    if "." in value and "-" not in value and not head.isdigit():
        parts = low.split(".")
        if len(parts) == 2 and parts[1].isdigit() and not any(c.isdigit() for c in parts[0]):
            return parts[0] == "v"  # v1.2 yes; fig.3, no.5, approx.5 no
    return bool(_LETTER.search(value)) or "." in value


# --- numbers ---------------------------------------------------------------------------------------

def _number_spans(text: str, low: str | None, digits: bool, words: Words = None) -> list[Span]:
    spans: list[Span] = []
    if digits:
        spans = _spans((_SYMBOL_FIRST, _CODE_FIRST, _AMOUNT, _DATE_TIME, _LABELLED_NUMBER, _JSON_MONEY), text, low,
                       words) + _loose_quantities(text)
    for start, end, value in _spans((_WRITTEN_AMOUNT,), text, low, words):
        if not set(re.split(r"[\s-]+", value.lower())[:-1]) <= _TRIVIAL_NUMBER_WORDS:
            spans.append((start, end, value))  # "a week", "one day" are not amounts
    return _trimmed(_ordered(spans))


def _loose_quantities(text: str) -> list[Span]:
    """7200rpm (a unit written on the number), 40 crates (a sizeable count of a plural noun); never an
    ordinal (21st), a year (2026 prices) or a number after a capitalised word or a label (Step 12 shows)."""
    out: list[Span] = []
    for match in _run(_ATTACHED_UNIT, text):
        if match.group("u").lower() not in _ORDINALS:
            out.append((match.start(), match.end(), match.group(0)))
    for match in _run(_PLURAL_COUNT, text):
        number, noun = match.group(0).split(" ")
        plain = number.replace(",", "").replace("'", "").replace("’", "")
        if _NOT_PLURAL.fullmatch(noun) or "." not in plain and (int(plain) < 10 or _YEAR.fullmatch(plain)):
            continue
        before = text[max(0, match.start() - 24):match.start()].rstrip(" ").rsplit(" ", 1)[-1]
        if before[:1].isupper() or before.lower() in _COUNT_LABELS:
            continue
        out.append((match.start(), match.end(), match.group(0)))
    return out


def _commit_spans(text: str) -> list[Span]:
    out = []
    for match in _run(_COMMIT, text):
        value = match.group(0)
        if _DIGIT.search(value) and _LETTER.search(value):
            out.append((match.start(), match.end(), value))
    return out

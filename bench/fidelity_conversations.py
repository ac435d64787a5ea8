"""The fidelity benchmark's conversations: three seeded, long, tool-heavy shapes, each with at
least 40 planted facts at varied depths and one question per fact.

- ``coding``: services, files, logs and test output (paths, errors, commits, flags, versions,
  ports, latencies);
- ``research``: countries and sources (percentages, amounts with units, URLs, dates, datasets);
- ``planning``: an event being organised (decisions, preferences, budgets, dates, times).

A fact is planted in a user message (a note among ordinary sentences) or in a workspace file the
agent reads with a tool (among lines of the same kind). Its answer is an exact string of its
carrier; its question is built from the carrier's other words, never from the answer. Some
answers are strings no anchor extractor would take (a name, a bare number): the offline scores
count what is really there.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

SEED = 20261201
FACTS_PER_CONVERSATION = 44
HEAD_TURNS = 3


@dataclass(frozen=True)
class Fact:
    answer: str
    question: str
    carrier: str
    place: str  # "note" or the workspace path of the file holding it


@dataclass
class Conversation:
    shape: str
    files: dict[str, str]
    turns: list[str]
    facts: list[Fact]
    fact_turn: dict[int, int] = field(default_factory=dict)  # fact index -> index of the turn planting it

    def depth(self, fact: int) -> float:
        """0 = the first turn, 1 = the last."""
        return self.fact_turn[fact] / max(1, len(self.turns) - 1)


def _hex(rng: random.Random, n: int) -> str:
    while True:
        value = "".join(rng.choice("0123456789abcdef") for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


NAMES = ("Ana Ribeiro", "Tomasz Wójcik", "Priya Natarajan", "Kwame Mensah", "Sofia Lindqvist", "Hiro Tanaka",
         "Lucía Fernández", "Omar Haddad", "Mei Chen", "Jonas Becker", "Amara Okafor", "Diego Morales")

# --- coding --------------------------------------------------------------------------------------

SERVICES = ("billing", "ledger", "auth", "search", "notifier", "importer", "scheduler", "gateway")
EXCEPTIONS = ("DeadlockDetected", "IntegrityError", "TimeoutError", "ConnectionResetError", "KeyError",
              "UnicodeDecodeError", "PermissionError", "RecursionError")
PACKAGES = ("celery", "redis", "psycopg", "httpx", "pydantic", "sqlalchemy", "boto3", "uvicorn")
CODING_WORDS = ("handler queue retry worker cache schema migration index payload request response token session "
                "tenant webhook batch cursor commit branch rollout deploy config timeout backoff replica pod "
                "metrics trace span log fixture test module import endpoint route middleware").split()


def _coding_fact(rng: random.Random, kind: str, svc: str) -> Fact:
    word = rng.choice(CODING_WORDS)
    if kind == "port":
        port = rng.randint(3000, 9999)
        return Fact(str(port), f"Which port does the {svc} service listen on in staging?",
                    f"The {svc} service listens on port {port} in staging.", "note")
    if kind == "latency":
        ms = rng.randint(120, 980)
        return Fact(f"{ms} ms", f"What was the p95 latency of the {svc} API in the load test?",
                    f"| {svc} API | p95 latency {ms} ms | p99 latency {ms + rng.randint(50, 400)} ms |", "perf")
    if kind == "path":
        path = f"src/{svc}/{word}_{rng.choice(CODING_WORDS)}.py"
        return Fact(path, f"Where does the retry logic for {svc} live?", f"The retry logic for {svc} lives in {path}.",
                    "note")
    if kind == "error":
        exc = rng.choice(EXCEPTIONS)
        line = (f"2026-03-{rng.randint(10, 28)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:07Z ERROR {svc}-worker "
                f"{exc}: {word} {rng.choice(CODING_WORDS)} failed after {rng.randint(2, 9)} attempts")
        return Fact(exc, f"Which exception did the {svc} worker raise in the error log?", line, "log")
    if kind == "commit":
        sha = _hex(rng, 7)
        return Fact(sha, f"Which commit started the {svc} regression?",
                    f"The {svc} regression started with commit {sha}.", "note")
    if kind == "flag":
        flag = f"{svc.upper()}_{word.upper()}_V{rng.randint(2, 4)}"
        return Fact(flag, f"Which feature flag gates the {svc} rollout?",
                    f"The {svc} rollout is behind the feature flag {flag}.", "note")
    if kind == "pin":
        pkg, ver = rng.choice(PACKAGES), f"{rng.randint(1, 5)}.{rng.randint(0, 12)}.{rng.randint(0, 20)}"
        return Fact(ver, f"Which version of {pkg} is pinned for the {svc} service?",
                    f"{pkg}=={ver}  # pinned for the {svc} service", "requirements")
    if kind == "memory":
        mi = rng.choice((256, 384, 512, 768, 1024, 1536, 2048))
        return Fact(f"{mi}Mi", f"What is the memory limit of the {svc} pods?",
                    f"    memory: {mi}Mi  # {svc} pods limit", "k8s")
    if kind == "test":
        name = f"test_{word}_{rng.choice(CODING_WORDS)}"
        return Fact(name, f"Which {svc} test failed in the last CI run?",
                    f"FAILED tests/{svc}/test_{word}.py::{name} - AssertionError: expected 200", "ci")
    if kind == "env":
        var = f"{svc.upper()}_{rng.choice(('DATABASE_URL', 'REDIS_URL', 'API_TOKEN_FILE', 'QUEUE_NAME'))}"
        return Fact(var, f"Which environment variable does the {svc} service read its settings from?",
                    f"The {svc} service reads its settings from {var}.", "note")
    if kind == "owner":
        name = rng.choice(NAMES)
        return Fact(name, f"Who is the {svc} on-call owner this week?", f"The {svc} on-call owner this week is {name}.",
                    "note")
    seconds = rng.randint(3, 90)
    return Fact(f"{seconds} seconds", f"What client timeout did we set for {svc}?",
                f"We set the {svc} client timeout to {seconds} seconds.", "note")


CODING_KINDS = ("port", "latency", "path", "error", "commit", "flag", "pin", "memory", "test", "env", "owner", "timeout")
CODING_FILES = {"perf": "reports/load_test.md", "log": "logs/workers.log", "requirements": "requirements/services.txt",
                "k8s": "deploy/k8s/limits.yaml", "ci": "ci/last_run.txt"}


def _coding_padding(rng: random.Random, kind: str) -> str:
    w = lambda: rng.choice(CODING_WORDS)  # noqa: E731
    svc = rng.choice(SERVICES + ("profile", "export", "audit"))
    if kind == "log":
        return (f"2026-03-{rng.randint(10, 28)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}Z "
                f"INFO {svc}-worker processed {w()} {w()} in {rng.randint(1, 900)} ms")
    if kind == "perf":
        return f"| {svc} {w()} | throughput {rng.randint(50, 3000)} req/s | errors {rng.randint(0, 40)} |"
    if kind == "requirements":
        return f"{w()}-{w()}=={rng.randint(0, 9)}.{rng.randint(0, 30)}"
    if kind == "k8s":
        return rng.choice((f"  - name: {svc}-{w()}", f"    cpu: {rng.randint(1, 8) * 250}m", f"    replicas: {rng.randint(1, 9)}"))
    if kind == "ci":
        return f"PASSED tests/{svc}/test_{w()}.py::test_{w()}_{w()}"
    return " ".join(w() for _ in range(rng.randint(6, 14))) + "."


# --- research ------------------------------------------------------------------------------------

COUNTRIES = ("Chile", "Kenya", "Norway", "Vietnam", "Portugal", "Morocco", "Uruguay", "Finland")
RESEARCH_WORDS = ("capacity grid storage tariff survey household demand supply emissions inflation wage rural "
                  "urban census methodology sample estimate revision dataset appendix baseline scenario forecast "
                  "policy subsidy auction transmission interconnector").split()


def _research_fact(rng: random.Random, kind: str, c: str) -> Fact:
    low = c.lower()
    if kind == "growth":
        pct = f"{rng.randint(5, 80)}.{rng.randint(1, 9)}%"
        return Fact(pct, f"By how much did solar capacity in {c} grow in 2024?",
                    f"Solar capacity in {c} grew {pct} in 2024.", "note")
    if kind == "source":
        url = f"https://energy-stats.example.org/{low}/{rng.choice(RESEARCH_WORDS)}-{rng.randint(2019, 2025)}"
        return Fact(url, f"Which source did we use for the {c} wind auction results?",
                    f"For the {c} wind auction results we use {url} as the source.", "note")
    if kind == "population":
        n = f"{rng.randint(2, 90)}.{rng.randint(1, 9)} million"
        return Fact(n, f"What did the urban population of {c} reach in 2023?",
                    f"The urban population of {c} reached {n} in 2023.", f"notes/{low}.md")
    if kind == "emissions":
        g = rng.randint(20, 750)
        return Fact(f"{g} g", f"What is the grid emission factor for {c}?",
                    f"The grid emission factor for {c} is {g} g CO2 per kWh.", f"notes/{low}.md")
    if kind == "respondents":
        n = f"{rng.randint(1, 9)},{rng.randint(100, 999)}"
        return Fact(n, f"How many respondents did the {c} household survey have?",
                    f"The {c} household survey had {n} respondents.", f"notes/{low}.md")
    if kind == "dataset":
        path = f"data/raw/{low}_{rng.choice(RESEARCH_WORDS)}_{rng.randint(2019, 2025)}.csv"
        return Fact(path, f"Which file holds the raw {c} data?", f"The raw {c} data is in {path}.", "note")
    if kind == "tariff":
        usd = f"{rng.randint(0, 0)}.{rng.randint(5, 39):02d} USD"
        return Fact(usd, f"What is the average residential electricity tariff in {c}?",
                    f"The average residential electricity tariff in {c} is {usd} per kWh.", "sources")
    if kind == "paper":
        url = f"https://doi.org/10.{rng.randint(1000, 9999)}/{rng.choice(RESEARCH_WORDS)}.{rng.randint(100, 999)}"
        return Fact(url, f"What is the link to the key storage paper for {c}?",
                    f"Key storage paper for {c}: {url}", "sources")
    if kind == "updated":
        date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return Fact(date, f"When was the {c} census dataset last updated?",
                    f"The {c} census dataset was last updated on {date}.", "sources")
    name = rng.choice(NAMES)
    return Fact(name, f"Who is the lead author of the {c} grid report?", f"The {c} grid report's lead author is {name}.",
                "note")


RESEARCH_KINDS = ("growth", "source", "population", "emissions", "respondents", "dataset", "tariff", "paper",
                  "updated", "author")


def _research_padding(rng: random.Random, kind: str) -> str:
    w = lambda: rng.choice(RESEARCH_WORDS)  # noqa: E731
    c = rng.choice(COUNTRIES + ("Ghana", "Peru", "Latvia"))
    if kind == "sources":
        return f"- {c} {w()} {w()}: https://data.example.net/{w()}/{rng.randint(100, 999)} (accessed 2025)"
    return f"{c} {w()} {w()} {rng.choice(('rose', 'fell', 'held'))} in the {w()} {w()}; see the {w()} appendix."


# --- planning ------------------------------------------------------------------------------------

EVENTS = ("kickoff", "offsite", "board retreat", "hackathon", "customer summit", "partner day", "design sprint",
          "year-end party")
CITIES = ("Porto", "Lisbon", "Seville", "Ghent", "Krakow", "Bologna", "Tallinn", "Lyon", "Bergen", "Ljubljana")
VENDORS = ("Cater&Co", "Green Table", "Atlas Coaches", "Brightstage AV", "Lumen Print", "Nordic Rooms")
PREFERENCES = (("aisle seats", "flights over three hours"), ("vegetarian menus", "team dinners"),
               ("morning sessions", "workshops"), ("trains", "trips under four hours"),
               ("printed agendas", "board meetings"), ("quiet rooms", "focus blocks"))
PLANNING_WORDS = ("agenda venue catering transport badge speaker session room booking invoice quote deposit "
                  "schedule shuttle hotel breakfast signage wifi stage rehearsal checklist").split()


def _planning_fact(rng: random.Random, kind: str, event: str) -> Fact:
    if kind == "venue":
        city, other = rng.sample(CITIES, 2)
        return Fact(city, f"Where did we decide to hold the {event}?",
                    f"We decided to hold the {event} in {city} instead of {other}.", "note")
    if kind == "preference":
        pref, context = rng.choice(PREFERENCES)
        return Fact(pref, f"What do I prefer for {context} around the {event}?",
                    f"For {context} around the {event} I prefer {pref}.", "note")
    if kind == "budget":
        item = rng.choice(("catering", "transport", "AV", "venue", "printing"))
        n = f"{rng.randint(1, 48)},{rng.randint(0, 9)}00 EUR"
        return Fact(n, f"What is the {item} budget for the {event}?", f"The {item} budget for the {event} is {n}.",
                    rng.choice(("note", "quotes")))
    if kind == "date":
        date = f"2026-{rng.randint(3, 12):02d}-{rng.randint(1, 28):02d}"
        return Fact(date, f"Which date is the {event} booked for?", f"The {event} is booked for {date}.", "note")
    if kind == "time":
        t = f"{rng.randint(17, 21)}:{rng.choice(('00', '15', '30', '45'))}"
        return Fact(t, f"When does the {event} dinner start?", f"The {event} dinner starts at {t}.", "itinerary")
    if kind == "guests":
        n = f"{rng.randint(12, 240)} guests"
        return Fact(n, f"How many people do we expect at the {event}?", f"We expect {n} at the {event}.", "note")
    if kind == "vendor":
        vendor = rng.choice(VENDORS)
        item = rng.choice(("catering", "shuttles", "sound system", "badges"))
        return Fact(vendor, f"Which vendor did we pick for the {event} {item}?",
                    f"Let's go with {vendor} for the {event} {item}.", "note")
    if kind == "deadline":
        date = f"2026-{rng.randint(2, 11):02d}-{rng.randint(1, 28):02d}"
        return Fact(date, f"When do registrations for the {event} close?",
                    f"Registrations for the {event} close on {date}.", "itinerary")
    if kind == "avoid":
        thing = rng.choice(("early flights", "buffet lunches", "open-plan rooms", "late finishes", "paper cups"))
        return Fact(thing, f"What should we avoid at the {event}?", f"Please avoid {thing} at the {event}.", "note")
    name = rng.choice(NAMES)
    return Fact(name, f"Who is the venue contact for the {event}?", f"The venue contact for the {event} is {name}.",
                "quotes")


PLANNING_KINDS = ("venue", "preference", "budget", "date", "time", "guests", "vendor", "deadline", "avoid", "contact")
PLANNING_FILES = {"quotes": "planning/vendor_quotes.md", "itinerary": "planning/itinerary.md"}


def _planning_padding(rng: random.Random, kind: str) -> str:
    w = lambda: rng.choice(PLANNING_WORDS)  # noqa: E731
    if kind == "quotes":
        return f"- {rng.choice(VENDORS)}: {w()} {w()}, {rng.randint(80, 9000)} EUR, valid {rng.randint(7, 60)} days"
    if kind == "itinerary":
        return f"- {rng.randint(8, 18)}:{rng.choice(('00', '30'))} {w()} {w()} in the {w()} room"
    return " ".join(w() for _ in range(rng.randint(6, 14))) + "."


# --- assembly ------------------------------------------------------------------------------------

SHAPES = {
    "coding": (SERVICES, CODING_KINDS, _coding_fact, _coding_padding,
               lambda place: CODING_FILES[place], "the services", ("src", "logs", "deploy", "ci")),
    "research": (COUNTRIES, RESEARCH_KINDS, _research_fact, _research_padding,
                 lambda place: "notes/sources.md" if place == "sources" else place, "the energy study",
                 ("notes", "data")),
    "planning": (EVENTS, PLANNING_KINDS, _planning_fact, _planning_padding,
                 lambda place: PLANNING_FILES[place], "the events", ("planning",)),
}
TARGET_TOKENS = 230_000  # about four times the 64k model's threshold: three compactions or more
FILE_LINES = (130, 200)
NOTE_SENTENCES = (3, 7)
REPLY_WORDS = (400, 550, 700)


def _facts(rng: random.Random, shape: str, count: int) -> list[Fact]:
    subjects, kinds, make, *_ = SHAPES[shape]
    pairs = [(s, k) for s in subjects for k in kinds]
    rng.shuffle(pairs)
    out, questions = [], set()
    for subject, kind in pairs:
        fact = make(rng, kind, subject)
        if fact.question not in questions and fact.answer in fact.carrier:
            questions.add(fact.question)
            out.append(fact)
        if len(out) == count:
            break
    return out


def _file_text(rng: random.Random, shape: str, place: str, carriers: list[str]) -> str:
    padding = SHAPES[shape][3]
    lines = [padding(rng, place) for _ in range(rng.randint(*FILE_LINES))]
    for carrier in carriers:
        lines.insert(rng.randrange(len(lines) + 1), carrier)
    return "\n".join(lines) + "\n"


def _note(rng: random.Random, shape: str, carrier: str) -> str:
    padding = SHAPES[shape][3]
    before = [padding(rng, "note") for _ in range(rng.randint(*NOTE_SENTENCES))]
    after = [padding(rng, "note") for _ in range(rng.randint(*NOTE_SENTENCES))]
    return " ".join([*before, carrier, *after])


def _numbered(base: str, n: int) -> str:
    stem, dot, ext = base.rpartition(".")
    return f"{stem}_{n}.{ext}" if dot else f"{base}_{n}"


def build_conversation(shape: str, *, facts: int = FACTS_PER_CONVERSATION, target_tokens: int = TARGET_TOKENS,
                       seed: int = SEED) -> Conversation:
    """The seeded conversation of one shape: its workspace files, the user's turns and its facts.
    Planting turns are spread evenly through the conversation; between them come the agent's long
    answers and the reading of files that plant nothing, until about ``target_tokens``."""
    rng = random.Random(f"{seed}:{shape}")
    _, _, _, padding, file_of, topic, folders = SHAPES[shape]
    planted = _facts(rng, shape, facts)
    files: dict[str, str] = {}
    plantings: list[tuple[str, list[int]]] = []  # (turn text, the facts it plants)
    by_file: dict[str, list[int]] = {}
    for i, fact in enumerate(planted):
        if fact.place == "note":
            plantings.append((_note(rng, shape, fact.carrier), [i]))
        else:
            by_file.setdefault(fact.place, []).append(i)
    places = sorted({f.place for f in planted if f.place != "note"})
    for place, ids in by_file.items():
        start, part = 0, 0
        while start < len(ids):
            part += 1
            chunk = ids[start:start + rng.randint(1, 3)]
            start += len(chunk)
            path = _numbered(file_of(place), part)
            files[path] = _file_text(rng, shape, place, [planted[i].carrier for i in chunk])
            plantings.append((f"read {path}", chunk))
    rng.shuffle(plantings)

    def tokens(text: str) -> int:
        if text.startswith("read "):
            return len(files[text[5:]]) // 4 + 150
        if text.startswith("Reply with "):
            return int(int(text.split()[2]) * 1.35) + 40
        return len(text) // 3 + 150

    fillers: list[str] = []
    size = sum(tokens(t) for t, _ in plantings)
    spare = 0
    while size < target_tokens:
        if rng.random() < 0.35 and places:
            spare += 1
            path = _numbered(file_of(rng.choice(places)).replace(".", "_archive.", 1), spare)
            files[path] = _file_text(rng, shape, next(p for p in places if file_of(p).split(".")[0] in path), [])
            text = f"read {path}"
        elif rng.random() < 0.9:
            text = f"Reply with {rng.choice(REPLY_WORDS)} words on where we stand."
        else:
            text = f"List files in {rng.choice(folders)}"
        fillers.append(text)
        size += tokens(text)
    # Plantings at evenly spaced slots among the fillers, so facts sit at every depth.
    turns = [f"Hello, today we continue with {topic}.", "Please keep answers short and concrete.",
             f"List files in {folders[0]}"]
    fact_turn: dict[int, int] = {}
    total = len(plantings) + len(fillers)
    slots = {round((k + 0.5) * total / len(plantings)) for k in range(len(plantings))}
    queue_p, queue_f = list(plantings), list(fillers)
    for slot in range(total):
        if (slot in slots or not queue_f) and queue_p:
            text, ids = queue_p.pop(0)
            for i in ids:
                fact_turn[i] = len(turns)
            turns.append(text)
        elif queue_f:
            turns.append(queue_f.pop(0))
    for text, ids in queue_p:
        for i in ids:
            fact_turn[i] = len(turns)
        turns.append(text)
    return Conversation(shape, files, turns, planted, fact_turn)

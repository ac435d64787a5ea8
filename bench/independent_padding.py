"""The seeded padding of the independent exam's scripts: work chat (some asking for a long reply)
and reads of generated workspace files, full of look-alike values of the exam's kinds (other hosts,
ports, cities, amounts, names, dates), played between the exam's items until the conversation is
about ``Padding.target_tokens`` long.

Guarantees: no padding text holds an answer of any exam conversation (checked case-insensitive;
a drawing that holds one is drawn again, and ``build_script`` refuses a script that leaks one); a
seed changes the padding only, never the items or their order; the same seed gives the same
script. Pure: no Django, no database.
"""
from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bench.independent_exam import Exam, all_answers


def _pick(*values: str) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(values)


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_ORDINALS = ("2nd", "3rd", "4th", "5th", "8th", "10th", "11th", "12th", "15th", "16th", "17th", "18th", "22nd",
             "24th", "25th", "26th", "29th", "30th")
_NUMBER_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine")


def _date_words(rng: random.Random) -> str:
    return f"{rng.choice(_WEEKDAYS)} the {rng.choice(_ORDINALS)}"


def _date_digits(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return f"{rng.randint(1, 28)}/{rng.randint(1, 12):02d}"


def _money(symbols: str) -> Callable[[random.Random], str]:
    return lambda rng: f"{rng.choice(symbols)}{rng.randint(2, 60)},{rng.randint(0, 99) * 10:03d}"


def _money_words(rng: random.Random) -> str:
    return f"{rng.choice(_NUMBER_WORDS)} thousand {rng.choice(_NUMBER_WORDS)} hundred euros"


COMMON: dict[str, Callable[[random.Random], str]] = {
    "date_words": _date_words, "date_digits": _date_digits, "money_words": _money_words,
    "port": lambda rng: str(rng.randint(3000, 9999)),
    "dd": lambda rng: f"{rng.randint(1, 28):02d}", "hh": lambda rng: f"{rng.randint(0, 23):02d}",
    "mm": lambda rng: f"{rng.randint(0, 59):02d}", "ss": lambda rng: f"{rng.randint(0, 59):02d}",
}

VOCABULARY: dict[str, dict[str, Callable[[random.Random], str]]] = {
    "ops": {
        "name": _pick("Marek Novak", "Ines Carvalho", "Tobi Adeyemi", "Hannah Roth", "Yusuf Demir", "Lena Brandt",
                      "Rafael Souza", "Aiko Sato", "Grace Owusu", "Pieter de Vries", "Nadia Rahman", "Felix Wagner"),
        "place": _pick("Dublin", "Paris", "Stockholm", "Milan", "Warsaw", "Madrid", "Zurich", "Oslo"),
        "org": _pick("Cancom", "SoftwareOne", "Computacenter", "Insight", "Datadog", "PagerDuty"),
        "product": _pick("Grafana Cloud", "Sentry Business", "Locust", "Gatling Enterprise", "Honeycomb"),
        "subject": _pick("payments-api", "orders-worker", "search-indexer", "notif-gateway", "ledger-sync",
                         "auth-proxy", "media-resizer", "report-builder"),
        "decision": _pick("Argo CD", "GitLab CI", "Cluster Autoscaler", "Flux", "Jenkins", "Spacelift"),
        "hardware": _pick("PowerEdge R650", "ProLiant DL380 Gen11", "ThinkSystem SR650 V3", "PowerEdge R7625"),
        "channel": _pick("#deploy-watch", "#infra-chat", "#db-ops", "#release-train", "#cost-review", "#sre-handover"),
        "bucket": lambda rng: (f"s3://halyard-{rng.choice(('logs', 'artifacts', 'tf-state', 'metrics'))}-"
                               f"{rng.choice(('euc1', 'use2', 'eun1'))}/{rng.choice(('daily', 'weekly', 'raw'))}/"),
        "directory": lambda rng: f"/{rng.choice(('var/lib', 'opt', 'srv'))}/halyard/"
                                 f"{rng.choice(('cache', 'spool', 'tmp', 'reports', 'imports'))}/",
        "host": lambda rng: (f"{rng.choice(('db', 'cache', 'queue', 'web', 'batch'))}-"
                             f"{rng.choice(('primary', 'replica', 'node'))}-{rng.randint(10, 40):02d}."
                             f"{rng.choice(('eu-central', 'us-east', 'eu-north'))}.internal"),
        "flag": lambda rng: (f"{rng.choice(('checkout', 'search', 'ledger', 'billing', 'invoice'))}_"
                             f"{rng.choice(('async_writes', 'rerank', 'v3_rollout', 'shadow_reads', 'batching'))}"),
        "version": lambda rng: f"v{rng.randint(0, 3)}.{rng.randint(12, 30)}.{rng.randint(0, 9)}",
        "ticket": lambda rng: rng.choice((f"OPS-{rng.randint(4700, 4999)}", f"INC-{rng.randint(100, 999)}")),
        "quantity": lambda rng: rng.choice((f"{rng.randint(1, 9)}.{rng.randint(1, 9)}GiB", f"{rng.randint(11, 80)}.2 TB",
                                            f"{rng.randint(120, 990)} ms", f"{rng.randint(3, 40)} pods")),
        "money": _money("$€"),
        "columns": lambda rng: ", ".join(rng.sample(("tenant_id", "region", "created_at", "plan", "owner_email",
                                                     "last_seen_at", "quota_gb"), 3)),
    },
    "research": {
        "name": _pick("Jana Horáková", "Pieter Jansen", "Ulla Berg", "Matthias Köhler", "Sophie Laurent",
                      "Bram de Wit", "Karin Holm", "Eszter Nagy", "Lukas Brenner", "Freya Dahl"),
        "place": _pick("Bremen", "Utrecht", "Odense", "Hannover", "Brno", "Manchester", "Rotterdam", "Aalborg"),
        "org": _pick("Ipsos", "YouGov", "GfK", "Verian", "Norstat"),
        "product": _pick("Daikin Altherma 3", "Mitsubishi Ecodan", "NIBE S2125", "Viessmann Vitocal 250-A",
                         "Bosch Compress 6800i"),
        "subject": _pick("DE panel", "NL survey", "DK pilot", "UK installer interviews", "CZ desk research",
                         "meter trial", "conjoint design", "price model"),
        "decision": _pick("Slovakia", "Hungary", "households per installer", "median price", "weighted share"),
        "hardware": _pick("Shelly Pro EM", "Shelly Plus 1PM", "Eastron SDM630", "Fronius Smart Meter"),
        "channel": _pick("#hp-modelling", "#vattenwerk-client", "#hp-data", "#fieldwork-qa"),
        "bucket": lambda rng: (f"gs://hp-market-{rng.choice(('clean', 'archive', 'exports'))}/"
                               f"2025q{rng.randint(1, 3)}/"),
        "directory": lambda rng: f"/mnt/research/hp-survey/{rng.choice(('raw', 'weights', 'tmp', 'figures'))}/",
        "host": lambda rng: (f"{rng.choice(('jupyter', 'etl', 'rstudio'))}-0{rng.choice((1, 2, 4, 5, 6))}"
                             f".lab.nordlicht-research.net"),
        "flag": lambda rng: f"enable_{rng.choice(('trimming', 'imputation', 'raking', 'dedup'))}_v{rng.randint(1, 4)}",
        "version": _pick("pandas 2.2.1", "statsmodels 0.13.5", "whisper-medium", "R 4.3.2", "numpy 1.26.4"),
        "ticket": lambda rng: f"RSCH-{rng.randint(100, 399)}",
        "quantity": lambda rng: rng.choice((f"{rng.randint(300, 2400):,} respondents", f"{rng.randint(40, 75)} dB",
                                            f"{rng.randint(10, 70)}.{rng.randint(0, 9)}%",
                                            f"0.{rng.randint(1000, 9999)}")),
        "money": _money("€£"),
        "columns": lambda rng: ", ".join(rng.sample(("respondent_id", "region", "income_band", "heating_type",
                                                     "wave", "weight", "age_group"), 3)),
    },
    "trip": {
        "name": _pick("Rui Tavares", "Carla Mendes", "Sofia Almeida", "Tiago Ferreira", "Hanna Schulz", "Mateo Ruiz",
                      "Leonor Costa", "Daan Visser", "Priya Shah", "Jonas Berg"),
        "place": _pick("Braga", "Amarante", "Viana do Castelo", "Aveiro", "Ponte de Lima", "Peso da Régua",
                       "Matosinhos"),
        "org": _pick("Sabores do Norte", "Douro Coaches", "Luz & Som AV", "Mesa Farta", "Viagens Atlântico"),
        "product": _pick("Jabra Speak2 75", "Logitech Rally Bar", "Poly Studio X30", "Shure MV7"),
        "subject": _pick("gala dinner", "arrival day", "coach transfers", "vineyard visit", "team workshop",
                         "flights from New York", "room plan", "dietary list"),
        "decision": _pick("port cellar tour", "river cruise", "cooking class", "CP Intercidades", "walking tour"),
        "hardware": _pick("Epson EB-L530U", "BenQ LU935", "Optoma ZU720T"),
        "channel": _pick("#offsite-2026-travel", "#offsite-2026-food", "#people-ops"),
        "bucket": lambda rng: (f"s3://lumen-offsite-{rng.choice(('docs', 'receipts'))}/"
                               f"{rng.choice(('braga', 'douro', 'lisbon'))}-2026/"),
        "directory": lambda rng: f"/shared/offsite/{rng.choice(('quotes', 'receipts', 'travel', 'badges'))}/",
        "host": lambda rng: f"{rng.choice(('guest-wifi', 'portal', 'booking'))}."
                            f"{rng.choice(('casadesezim', 'quintadapacheca', 'hotelbraga'))}.pt",
        "flag": _pick("rsvp_reminders_on", "late_checkout_ok", "dietary_form_v2"),
        "version": _pick("agenda v5", "budget v3", "room plan v2"),
        "ticket": lambda rng: rng.choice((f"FAC-{rng.randint(1100, 1400)}",
                                          f"HX{rng.randint(2, 9)}-{rng.randint(10000, 99999)}-KL")),
        "quantity": lambda rng: rng.choice((f"{rng.randint(8, 30)} double rooms", f"{rng.randint(20, 60)} guests",
                                            f"{rng.randint(7, 32)} kg", f"{rng.randint(2, 9)} coaches")),
        "money": _money("€$"),
        "columns": lambda rng: ", ".join(rng.sample(("email", "room_pref", "bus_seat", "allergies", "team_lead",
                                                     "departure_flight"), 3)),
    },
}

CHAT_SENTENCES = (
    "{name} confirmed the {subject} figures this morning: {money} so far, roughly {quantity}.",
    "Side note on {subject}: {org} offered {product}, but we parked it for now.",
    "For {subject} the working date is {date_words}, with a soft cutoff on {date_digits}.",
    "{name} will handle {subject} from {place}; questions go to {channel}.",
    "Logged {ticket} about {subject} so it does not get lost.",
    "Old exports for {subject} sit in {directory} and the backup copy in {bucket}.",
    "We considered {decision} for {subject} but nothing is settled.",
    "Someone brought up {hardware} again for {subject}; specs only, no order.",
    "The {subject} sheet only needs {columns} for now.",
    "Budget chatter on {subject}: {money_words} was floated, not approved.",
    "{host} answered on port {port} during the {subject} check.",
    "The {subject} setup still has {flag} on and uses {version}.",
    "{name} and {name} disagree about {subject}; I will sort it out on {date_words}.",
)
CHAT_FILLERS = ("Nothing urgent otherwise.", "Just keeping notes here so the thread stays complete.",
                "I will come back to this later today.", "No action needed yet.", "Mostly housekeeping today.")
REPLY_ASKS = ("Reply with {n} words on where we stand.", "Reply with {n} words on the next steps.")
REPLY_WORDS = (250, 350, 500)
FILE_FORMATS = {
    "log": ("", "2026-03-{dd}T{hh}:{mm}:{ss}Z INFO {subject} {host}:{port} took {quantity} ({ticket})"),
    "csv": ("date,owner,subject,amount,place,channel", '{date_digits},{name},{subject},"{money}",{place},{channel}'),
    "md": ("| when | who | what | amount | where |\n|---|---|---|---|---|",
           "| {date_words} | {name} | {subject}: {decision} | {money} | {place} |"),
    "txt": ("", "- {subject}: {org} / {product} / {hardware} / {version} / {directory} / {flag}"),
}
READ_ASKS = ("read {path}", "Please read {path} and keep it in mind.", "Can you read {path} for me.")
CHAT_SENTENCE_COUNT = (3, 7)


@dataclass(frozen=True)
class Padding:
    """A script's size and the mix of its padding turns."""
    target_tokens: int
    read_share: float  # the share of padding turns reading a generated file (the others are work chat)
    file_lines: tuple[int, int]


PADDING = Padding(200_000, 0.45, (50, 120))  # about four thresholds of the 64k model (54,400 tokens)
QUICK_PADDING = Padding(60_000, 0.8, (120, 170))  # one compaction, in few turns


_SLOT = re.compile(r"\{(\w+)\}")
_VOCABULARY = {shape: {**COMMON, **vocab} for shape, vocab in VOCABULARY.items()}


def _fill(rng: random.Random, template: str, shape: str) -> str:
    vocab = _VOCABULARY[shape]
    return _SLOT.sub(lambda slot: vocab[slot.group(1)](rng), template)


@functools.lru_cache(maxsize=8)
def _answer_pattern(answers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(a.lower()) for a in sorted(answers, key=len, reverse=True)))


def holds_answer(text: str, answers: Iterable[str]) -> str | None:
    """An answer found in ``text`` (case-insensitive, lower-cased), else None."""
    found = _answer_pattern(tuple(answers)).search(text.lower())
    return found.group(0) if found else None


def _clean(rng: random.Random, make: Callable[[random.Random], str], answers: Sequence[str]) -> str:
    """A drawing of ``make`` holding no answer (drawn again until it holds none)."""
    for _ in range(200):
        text = make(rng)
        if holds_answer(text, answers) is None:
            return text
    raise RuntimeError("padding keeps drawing an exam answer: its vocabulary needs other values")


@dataclass(frozen=True)
class Step:
    """One user turn: ``file`` (workspace path, text) is written first; ``item`` is the exam item
    it plays ("" for padding)."""
    text: str
    item: str = ""
    file: tuple[str, str] | None = None


@dataclass(frozen=True)
class Script:
    shape: str
    seed: int
    steps: tuple[Step, ...]

    def padding(self) -> list[str]:
        """Every padding text: the messages and the files they read."""
        return [t for s in self.steps if not s.item for t in (s.text, *(s.file or ()))]


def _chat(rng: random.Random, shape: str, answers: Sequence[str]) -> str:
    def make(rng: random.Random) -> str:
        sentences = [_fill(rng, rng.choice(CHAT_SENTENCES), shape) for _ in range(rng.randint(*CHAT_SENTENCE_COUNT))]
        sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(CHAT_FILLERS))
        if rng.random() < 0.6:
            sentences.append(rng.choice(REPLY_ASKS).format(n=rng.choice(REPLY_WORDS)))
        return " ".join(sentences)
    return _clean(rng, make, answers)


def _padding_file(rng: random.Random, shape: str, answers: Sequence[str], number: int,
                  lines: tuple[int, int]) -> tuple[str, str]:
    ext = rng.choice(sorted(FILE_FORMATS))
    header, line = FILE_FORMATS[ext]
    rows = [_clean(rng, lambda r: _fill(r, line, shape), answers) for _ in range(rng.randint(*lines))]
    text = "\n".join([header, *rows] if header else rows) + "\n"
    if holds_answer(text, answers) is not None:  # rows joined by a newline cannot form an answer
        raise RuntimeError("a padding file holds an exam answer")
    return f"scratch/{shape}-{rng.choice(('notes', 'export', 'dump', 'log'))}-{number:03d}.{ext}", text


def _reply_words(text: str) -> int:
    asked = re.search(r"Reply with (\d+) words", text)
    return int(asked.group(1)) if asked else min(400, 30 + len(text.split()) // 2)


def estimated_tokens(step: Step) -> int:
    """What one turn adds to the conversation, roughly (a token is about three characters of these
    texts, full of numbers and names): the message and the reply, or the request, the tool call,
    the numbered file and the report."""
    if step.file is not None:
        return (len(step.text) + len(step.file[1])) // 3 + 4 * step.file[1].count("\n") + 160
    return len(step.text) // 3 + int(_reply_words(step.text) * 1.35) + 40


def read_request(path: str, rng: random.Random | None = None) -> str:
    return (rng.choice(READ_ASKS) if rng else READ_ASKS[1]).format(path=path)


def build_script(exam: Exam, seed: int, padding: Padding = PADDING, *, answers: Sequence[str] | None = None) -> Script:
    """The exam's items in order, each followed by seeded padding, to about ``padding.target_tokens``."""
    answers = tuple(answers if answers is not None else all_answers())
    rng = random.Random(f"{seed}:{exam.shape}")
    played = [Step(read_request(i.path), i.id, (i.path, i.text)) if i.kind == "file" else Step(i.text, i.id)
              for i in exam.items]
    budget = max(0, padding.target_tokens - sum(estimated_tokens(s) for s in played))
    share = budget / len(played)
    steps: list[Step] = []
    files = 0
    owed = 0.0  # tokens of padding still due; a large file overshoots into the next gaps
    for step in played:
        steps.append(step)
        owed += share * rng.uniform(0.7, 1.3)
        while owed > 0:
            if rng.random() < padding.read_share:
                files += 1
                path, text = _padding_file(rng, exam.shape, answers, files, padding.file_lines)
                pad = Step(read_request(path, rng), file=(path, text))
            else:
                pad = Step(_chat(rng, exam.shape, answers))
            steps.append(pad)
            owed -= estimated_tokens(pad)
    script = Script(exam.shape, seed, tuple(steps))
    leaked = next((found for text in script.padding() if (found := holds_answer(text, answers))), None)
    if leaked is not None:
        raise RuntimeError(f"the padding holds the exam answer {leaked!r}")
    return script


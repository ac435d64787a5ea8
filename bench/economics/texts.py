"""English-like user messages for the cache-economics workloads that are not all tool calls: long
questions with context, pasted material (an email, meeting notes, a log, code, a table, a draft)
with a request about it, follow-ups, and recall questions about facts stated earlier.

Every text is drawn from a seeded ``random.Random`` and avoids every simulator trigger
(docs/simulator.md): no "read/open/cat <file>", "write ... to ...", "list files", "search ...",
"run `...`", "call tool", "repeat exactly:", "in markdown", nor the summary template's headings. A
recall question ("what was the budget for the Lisbon offsite?") asks about a fact an earlier
message stated, so the simulator answers it from the history (or a summary of it).

``ChatWriter`` keeps the facts stated so far; ``TOOL_TAILS`` are the clauses a tool request may end
with ("read src/module_03.py and tell me what it does")."""
from __future__ import annotations

import random

from bench.economics.workspace import TOPICS

NAMES = ("Priya", "Tomas", "Amara", "Jonas", "Keiko", "Luis", "Fatima", "Noah", "Ingrid", "Omar", "Mei", "Daniel",
         "Sofia", "Kwame", "Elena", "Arjun")
SUBJECTS = ("the Lisbon offsite", "the billing migration", "the onboarding flow", "the Q3 roadmap",
            "the vendor contract", "the mobile release", "the support backlog", "the hiring plan",
            "the data warehouse", "the pricing page", "the partner API", "the annual report", "the customer survey",
            "the security review", "the kitchen renovation", "my thesis chapter", "the newsletter",
            "the warehouse move", "the grant application", "the conference talk")
FACTS = {  # topic -> how a value of it reads
    "budget": lambda r: f"{r.randint(8, 240) * 500:,} {r.choice(('EUR', 'USD', 'GBP'))}",
    "deadline": lambda r: f"{r.choice(MONTHS)} {r.randint(1, 28)}",
    "owner": lambda r: r.choice(NAMES),
    "headcount": lambda r: f"{r.randint(3, 60)} people",
    "target": lambda r: f"{r.randint(5, 95)} percent",
    "error rate": lambda r: f"{r.randint(1, 90) / 10:.1f} percent",
    "response time": lambda r: f"{r.randint(80, 2400)} ms",
    "price": lambda r: f"{r.randint(9, 499)} EUR a month",
    "capacity": lambda r: f"{r.randint(20, 900)} seats",
    "launch date": lambda r: f"{r.choice(MONTHS)} {r.randint(1, 28)}",
}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
NOUNS = ("plan", "estimate", "timeline", "proposal", "dashboard", "checklist", "process", "schedule", "contract",
         "survey", "report", "budget", "backlog", "release", "rollout", "invoice", "forecast", "policy", "template",
         "workflow", "migration", "interview loop", "pricing model", "support queue", "test suite", "handbook")
VERBS = ("simplify", "restructure", "estimate", "explain", "compare", "prioritise", "shorten", "review", "justify",
         "split up", "plan", "improve", "phase", "rework", "present", "defend", "tighten", "document")
ADJECTIVES = ("rough", "realistic", "cautious", "ambitious", "cheaper", "simpler", "clearer", "safer", "faster",
              "more robust", "less risky", "fairer", "more readable")
TEAMS = ("finance", "platform", "design", "support", "sales", "data", "legal", "operations", "marketing", "research")

CONTEXT = (
    "Our {team} team owns {subject}, and since {month} the {noun} has slipped by about {m} weeks.",
    "{name} put together a {adj} {noun} last week, but nobody outside {team} has looked at it yet.",
    "We currently handle roughly {n} requests a day, and about a third of them end up with {team}.",
    "The main constraint is time: {name} is away for {m} weeks and the {noun} has to be ready before then.",
    "Last quarter we tried a similar {noun} for {subject} and it mostly worked, except for the handover.",
    "I am not an expert in this area, so please say so if my assumptions are off.",
    "There is some pressure from {team} to move faster, but I would rather get the {noun} right first.",
    "The previous {noun} was written years ago and half of it no longer matches how we work.",
    "Budget-wise we are tight: anything above {money} needs a second approval from {name}.",
    "People keep asking the same questions in the channel, which tells me the {noun} is not clear enough.",
    "We measured it twice, once in {month} and once last week, and the numbers moved by {m} percent.",
    "{name} thinks we should {verb} the {noun} before anything else, and {name2} disagrees.",
    "To give some background, {subject} started as a side project and grew without much planning.",
    "Most of the feedback so far has been positive, apart from two long comments from {team}.",
    "I have about {m} hours this week to spend on it, so I need to pick my battles.",
    "The {noun} touches {n} different teams, which is why every change takes so long to agree on.",
    "Right now the only person who understands the whole {noun} is {name}, and that worries me.",
    "We promised {team} an answer by {month} {day}, and I would like to keep that promise.",
)
QUESTIONS = (
    "How would you {verb} the {noun} so that {team} can follow it without a meeting?",
    "Is it better to {verb} the {noun} first, or to {verb2} {subject} and come back to it later?",
    "What are the two or three risks I am most likely to underestimate here?",
    "Could you suggest a {adj} {noun}, with rough numbers where you can?",
    "How do other teams usually deal with this, and what tends to go wrong?",
    "What would you cut if we had to ship half of it by {month}?",
    "Can you explain the trade-off in plain terms, as if to someone from {team}?",
    "Which questions should I ask {name} before I commit to anything?",
    "Does this sound reasonable, or am I overcomplicating it?",
    "If you had to {verb} it in one afternoon, where would you start?",
    "How should I phrase this for {name}, who has been skeptical from the start?",
    "What is a sensible way to measure whether the new {noun} actually works?",
)
PASTE_INTROS = {
    "email": ("Here is the email {name} sent this morning about {subject}:",
              "I got this from {name} and I am not sure how to answer it:"),
    "notes": ("These are my notes from the {team} meeting about {subject}:",
              "Pasting the minutes from yesterday's call so you have the details:"),
    "log": ("Below is the log from last night's batch job, trimmed a little:",
            "This is what the worker printed before it gave up:"),
    "code": ("This is the function I am stuck on:", "Here is the helper {name} wrote; I think it has a bug:"),
    "table": ("Here are the numbers {team} sent over:", "This is the summary table from the quarterly export:"),
    "draft": ("Here is my draft of the announcement for {subject}:", "My first attempt at the intro section:"),
}
PASTE_ASKS = (
    "Can you summarise the main points and tell me what I should push back on?",
    "What stands out to you, and what would you ask about first?",
    "Please point out anything that looks wrong or inconsistent.",
    "How would you improve this without making it longer?",
    "What is the most likely cause, in your view, and how would you confirm it?",
    "Could you turn this into three or four clear action items?",
    "Is there anything here that contradicts what I told you earlier?",
)
FOLLOW_OPENERS = ("Thanks, that helps a lot.", "Good points, mostly.", "That makes sense.", "Hmm, I am not convinced.",
                  "Okay, one more thing.", "Great, this is close to what I need.", "Thanks.",
                  "That is useful, but it misses something.", "Right, I had not thought of that.")
FOLLOW_REASONS = (
    "The second suggestion will not work for us because {team} has already committed to the {noun}.",
    "{name} read your answer over my shoulder and asked how it changes if the budget drops to {money}.",
    "We do not really have the people for the first option; it would fall on {name} alone.",
    "I like the structure, but the tone is too formal for {team}.",
    "The numbers you used are a bit off: we are closer to {n} a day, not fewer.",
    "Could you say more about the risk you mentioned for {subject}?",
    "Can you make it {adj} and drop the part about tooling?",
    "What would change if the deadline moved to {month} {day}?",
    "Please go through it again step by step, I lost track in the middle.",
)
TOOL_TAILS = {  # tool kind -> the clauses a request of that kind may end with
    "read": ("", "", " and tell me what it does", " and summarise it for me", ", I think the problem is in there",
             " and check how the {topic} is handled", " and explain the {topic} part"),
    "search": ("", "", " and tell me which files use it", " and show me where it is set",
               ", I need every place that mentions it"),
}
LENGTH_ASKS = ("Please answer in {n} words.", "Keep it short: reply with about {n} words.")


class ChatWriter:
    """Seeded user messages; remembers the facts its messages stated, for recall questions."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.facts: list[tuple[str, str]] = []  # (topic, subject) stated so far

    def _fill(self, template: str) -> str:
        r = self.rng
        name, name2 = r.sample(NAMES, 2)
        return template.format(
            team=r.choice(TEAMS), subject=r.choice(SUBJECTS), month=r.choice(MONTHS), noun=r.choice(NOUNS),
            n=r.randint(2, 400), m=r.randint(2, 12), name=name, name2=name2, adj=r.choice(ADJECTIVES),
            verb=r.choice(VERBS), verb2=r.choice(VERBS), money=FACTS["budget"](r), day=r.randint(1, 28),
            topic=r.choice(tuple(FACTS)))

    def _fact(self) -> str:
        r = self.rng
        topic, subject = r.choice(tuple(FACTS)), r.choice(SUBJECTS)
        self.facts.append((topic, subject))
        return r.choice(("The {t} for {s} is {v}.", "For {s}, the {t} is {v}.", "We agreed that the {t} for {s} is {v}.")
                        ).format(t=topic, s=subject, v=FACTS[topic](r))

    def paragraph(self, lo: int = 2, hi: int = 5, fact: float = 0.3) -> str:
        sentences = [self._fill(t) for t in self.rng.sample(CONTEXT, self.rng.randint(lo, hi))]
        if self.rng.random() < fact:
            sentences.insert(self.rng.randrange(len(sentences) + 1), self._fact())
        return " ".join(sentences)

    def _questions(self) -> str:
        picked = self.rng.sample(QUESTIONS, self.rng.choice((1, 1, 2, 3)))
        return " ".join(self._fill(q) for q in picked)

    def _length_ask(self, p: float) -> str:
        if self.rng.random() >= p:
            return ""
        return " " + self.rng.choice(LENGTH_ASKS).format(n=self.rng.choice((80, 120, 150, 200, 300)))

    def ask(self) -> str:
        """A new question with its context: one to four paragraphs, the question last."""
        paras = [self.paragraph() for _ in range(self.rng.choice((1, 2, 2, 3, 3, 4)))]
        paras.append(self._questions() + self._length_ask(0.15))
        return "\n\n".join(paras)

    def follow_up(self) -> str:
        """A reaction to the last answer and a refinement: one sentence to two short paragraphs."""
        r = self.rng
        text = f"{r.choice(FOLLOW_OPENERS)} {self._fill(r.choice(FOLLOW_REASONS))}"
        if r.random() < 0.55:
            text += "\n\n" + self.paragraph(1, 4, fact=0.2)
        if r.random() < 0.5:
            text += " " + self._fill(r.choice(QUESTIONS))
        return text + self._length_ask(0.1)

    def question(self) -> str:
        """A recall question about a fact stated earlier (any fact when none was stated yet)."""
        r = self.rng
        topic, subject = r.choice(self.facts) if self.facts else (r.choice(tuple(FACTS)), r.choice(SUBJECTS))
        return r.choice(("what was the {t} for {s} again?", "what did we say the {t} for {s} was?",
                         "which {t} did we settle on for {s}?", "remind me, what is the {t} for {s}?")
                        ).format(t=topic, s=subject)

    def ack(self) -> str:
        """A short thanks with a small request, as between two tool turns."""
        r = self.rng
        return f"{r.choice(FOLLOW_OPENERS)} {self._fill(r.choice(QUESTIONS))}{self._length_ask(0.3)}"

    def paste(self) -> str:
        """Pasted material (an email, notes, a log, code, a table or a draft) between an intro line
        and a request about it."""
        r = self.rng
        kind = r.choice(tuple(PASTE_INTROS))
        body = getattr(self, f"_paste_{kind}")()
        return f"{self._fill(r.choice(PASTE_INTROS[kind]))}\n\n{body}\n\n{r.choice(PASTE_ASKS)}{self._length_ask(0.15)}"

    def _paste_email(self) -> str:
        r = self.rng
        paras = [self.paragraph(2, 5, fact=0.5) for _ in range(r.randint(2, 5))]
        return (f"Subject: {r.choice(SUBJECTS).capitalize()}\n\nHi all,\n\n" + "\n\n".join(paras)
                + f"\n\nBest,\n{r.choice(NAMES)}")

    def _paste_notes(self) -> str:
        r = self.rng
        lines = [f"Attendees: {', '.join(r.sample(NAMES, r.randint(3, 7)))}", ""]
        for _ in range(r.randint(5, 16)):
            lines.append("- " + (self._fact() if r.random() < 0.35 else self._fill(r.choice(CONTEXT))))
        lines += ["", "Action items:"]
        for _ in range(r.randint(2, 6)):
            lines.append(f"- {r.choice(NAMES)} to {r.choice(VERBS)} the {r.choice(NOUNS)} by {r.choice(MONTHS)} "
                         f"{r.randint(1, 28)}")
        return "\n".join(lines)

    def _paste_log(self) -> str:
        r = self.rng
        messages = ("retry {a}/5 for job {b} after timeout ({c} s)", "queue depth {b}, oldest item {c} s",
                    "worker {a} finished batch {b} in {c} s", "connection reset by peer, reconnecting in {a} s",
                    "slow query took {c} ms on table orders_{a}", "heartbeat missed from node-{a}",
                    "skipped {b} rows with a bad date", "memory at {c} MB, limit 2048 MB")
        lines = []
        clock = r.randint(0, 20_000)
        for _ in range(r.randint(12, 60)):
            clock += r.randint(1, 90)
            h, rest = divmod(clock, 3600)
            level = r.choice(("INFO", "INFO", "INFO", "WARN", "WARN", "ERROR"))
            text = r.choice(messages).format(a=r.randint(1, 9), b=r.randint(100, 99_999), c=r.randint(1, 4000))
            lines.append(f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {h % 24:02d}:{rest // 60:02d}:"
                         f"{rest % 60:02d} {level} worker-{r.randint(1, 8)} {text}")
        return "\n".join(lines)

    def _paste_code(self) -> str:
        r = self.rng
        attr = r.choice(("amount", "duration", "score", "weight", "count"))
        out = []
        for _ in range(r.randint(1, 3)):
            name = f"{r.choice(('total', 'merge', 'pick', 'group', 'clean', 'rank'))}_{r.choice(('orders', 'rows', 'events', 'users'))}"
            body = [f"def {name}(items, limit={r.randint(5, 500)}):", f'    """{self._fill(r.choice(CONTEXT))}"""',
                    "    result = []", "    seen = set()", "    for item in items:"]
            for _ in range(r.randint(2, 8)):
                body.append(r.choice((
                    f"        if item.{attr} > limit:", "            continue", "        if item.key in seen:",
                    f"        item.{attr} = round(item.{attr} * {r.randint(2, 99) / 100}, 2)",
                    "        seen.add(item.key)", f"        result.append(item)  # keep {r.choice(TEAMS)} rows")))
            body += [f"    result.sort(key=lambda item: item.{attr})", "    return result[:limit]", ""]
            out += body
        return "\n".join(out)

    def _paste_table(self) -> str:
        r = self.rng
        lines = ["| region | month | orders | revenue | returns |", "|---|---|---:|---:|---:|"]
        for _ in range(r.randint(6, 30)):
            lines.append(f"| {r.choice(('North', 'South', 'East', 'West', 'Central'))} | {r.choice(MONTHS)[:3]} | "
                         f"{r.randint(50, 9000)} | {r.randint(1000, 900_000):,} | {r.randint(0, 400)} |")
        return "\n".join(lines)

    def _paste_draft(self) -> str:
        return "\n\n".join(self.paragraph(3, 6, fact=0.4) for _ in range(self.rng.randint(2, 6)))

    def tool_tail(self, kind: str) -> str:
        """A clause that may follow a tool request of ``kind`` ("read" or "search")."""
        return self.rng.choice(TOOL_TAILS[kind]).format(topic=self.rng.choice(TOPICS))

"""Names — people, places, organisations and products — found in one text as spans for the
``name`` kind of the anchor index, with the word lists that tell a name from a capitalised word.

Guarantees: the rules (runs of capitalised words cut at common words, one word only when context
marks it, nothing from headings, log lines or aligned headers) are stated in the docstring of
``anchors``; spans come in order of appearance. Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .anchor_scan import Span, _ordered, _run, _scan

_UP = "A-ZÀ-ÖØ-Þ"
_LO = "a-zß-öø-ÿ"
_CAP_WORD = rf"[{_UP}](?:'[{_UP}])?[{_LO}]+(?:[{_UP}][{_LO}]*)*(?:-[{_UP}][{_LO}]+)?"
_NAME_RUN = _scan(
    rf"[{_UP}](?<![\w.@/#$&-].)(?:{_CAP_WORD[len(_UP) + 2:]}|[A-Z]{{1,4}}(?= {_CAP_WORD}))"
    rf"(?:[ ](?:(?:of the|van der|van den|von der|de la|de los|de las|da|de|do|dos|das|del|della|di|du|des|van|von|der|den|ten|la|le|los|las|el|al|bin|of|&)"
    rf"[ ])?(?:{_CAP_WORD}|[A-Z]{{2,5}}(?![\w'’])))*(?![\w@-]|\.\w)")

_CONNECTORS = frozenset(("da", "de", "do", "dos", "das", "del", "della", "di", "du", "des", "van", "von", "der",
                         "den", "ten", "la", "le", "los", "las", "el", "al", "bin", "of", "the", "&"))
_LEGAL_FORMS = frozenset(("LLC", "AG", "SA", "BV", "NV", "SE", "PLC", "LTD", "INC", "SAS", "SARL", "SPA", "AB", "AS",
                          "OY", "KG", "LLP", "GMBH"))
_LOG_LEVEL = re.compile(r"\b(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|CRITICAL)\b")
_PREV_WORD = re.compile(r"([A-Za-z]+)([^\w]{0,4})$")
_NAME_FOLLOWER = re.compile(r"(?:'s|’s|\s+(?:said|says|wrote|writes|asked|asks|replied|mentioned|suggested|"
                            r"confirmed|agreed|thinks|thought|recommended|recommends|proposed|approved|vs|versus|"
                            # a place's or an organisation's own noun: "the Leiden office"
                            r"campus|office|offices|branch|headquarters|hq|site|plant|factory|warehouse|depot|"
                            r"airport|station|harbour|harbor|university|hospital|clinic|stadium|venue|team))\b")
_COPULAS = frozenset(("is", "are", "was", "were", "be", "become", "becomes"))
# Field labels before one capitalised value: "city": "Leiden", owner: Marta
_FIELD_LABELS = frozenset(("location", "city", "town", "country", "place", "destination", "origin", "venue", "name",
                           "author", "assignee", "owner", "reporter", "vendor", "company", "organisation",
                           "organization", "employer", "manufacturer", "sender", "recipient", "contact"))
_POSTCODE_LINE = re.compile(r"(?:^|\n|, )[ \t]*(?:[A-Z]{1,2}-)?\d{4,5} $")  # 2511 Leiden: an address's town
_COPIED = re.compile(r"\b(?:b?cc)\b:?\s+(?P<v>[a-z][a-z'’-]+(?: [a-z][a-z'’-]+)?)")  # cc jo o'neill
_SENTENCE_END = frozenset(".!?:;\n\"'(*-•>|")
# Words before one capitalised word that make it a name.
_NAME_MARKERS = frozenset((
    "with", "at", "from", "to", "for", "by", "via", "near", "in", "into", "on", "visiting", "visit", "called",
    "named", "including", "cc", "bcc", "hi", "hello", "hey", "dear", "thanks", "thank", "thx", "ask", "asked",
    "tell", "told", "ping", "pinged", "call", "email", "emailed", "message", "messaged", "meet", "met", "invite",
    "invited", "contact", "contacted", "remind", "reminded", "introduce", "introduced", "vendor", "supplier",
    "client", "customer", "partner", "contractor", "provider", "agency", "company", "firm", "startup", "manager",
    "colleague", "coworker", "teammate", "boss", "lead", "director", "ceo", "cto", "cfo", "founder", "landlord",
    "guide", "driver", "doctor", "dr", "mr", "mrs", "ms", "prof", "professor", "hotel", "hostel", "restaurant",
    "cafe", "airline", "airport", "station", "city", "town", "village", "country", "island", "neighbourhood",
    "neighborhood", "district", "brand", "platform", "tool", "library", "framework", "product", "app", "sister",
    "brother", "mother", "father", "mom", "mum", "dad", "wife", "husband", "partner", "son", "daughter", "friend",
    "cousin", "aunt", "uncle", "niece", "nephew", "grandma", "grandpa", "neighbour", "neighbor", "roommate", "vs",
    "versus", "between", "than",
    # verbs whose object is a product or a service: "we use Basecamp", "evaluating Nomad"
    "use", "using", "uses", "used", "adopt", "adopted", "adopting", "evaluate", "evaluating", "evaluated", "install",
    "installed", "installing", "recommend", "recommended", "prefer", "preferred", "choose", "chose", "pick", "picked",
))
_GREETINGS = frozenset(("hi", "hello", "hey", "dear", "thanks", "thank", "thx", "cc", "bcc"))
_SIGN_OFFS = frozenset(("best", "regards", "cheers", "thanks", "sincerely", "br", "kr", "yours", "love", "warmly"))
_TITLES = frozenset(("dr", "mr", "mrs", "ms", "prof"))
# Capitalised words that are not names: sentence starters, function words, calendar and heading words.
_NOT_NAME = frozenset("""
i me my mine we our ours us you your yours he him his she her hers it its they them their theirs this that these
those the a an some any all each every no none both either neither another other others such what which who whom
whose where when why how here there everyone everybody someone somebody anyone anybody nobody everything
something anything nothing and or but so yet nor for if then than because since while although though unless
until after before once as at by from in into of on onto to with without within about above below over under
between through during per via like unlike near across around against along among behind beyond despite
except inside outside toward towards upon also anyway anyways actually basically honestly really just still
even only maybe perhaps probably definitely certainly hopefully unfortunately fortunately luckily apparently
obviously clearly finally first firstly second secondly third next last lastly now later soon today tomorrow
yesterday tonight currently recently usually generally originally eventually instead otherwise however
therefore meanwhile overall again already always never sometimes often quick quickly nice good cool
awesome perfect sounds looks seems yes yeah yep no nope ok okay sure fine right well oh ah hmm hey hi hello dear
thanks thank cheers please sorry welcome congrats btw fyi note nb ps re fw fwd update edit todo done fixed
added removed changed updated merged deployed checked booked called emailed asked told sent moved met spoke
visited confirmed cancelled canceled reserved paid ordered found tried started finished let lets can could
would should will shall may might must do does did is are was were be been have has had get got go going make
made take use using see check look ask tell ping call email send book meet invite add remove fix run try keep
set open close create delete show find give need want remember read write morning afternoon evening night
noon midnight week weekend month year day days hour hours minute spring summer autumn fall winter monday
tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays
sundays mon tue tues wed thu thur thurs fri sat sun january february
march april may june july august september october november december feb mar apr jun jul aug sep sept oct nov
dec summary overview notes action actions items item steps step details results result conclusion
introduction background status plan goals goal questions question answer key findings total name role date
amount description type value error errors warning info debug trace true false none null option options
example examples section chapter figure table page part appendix problem solution issue context task tasks
output input response request query user assistant system tool agent model data file files config settings
test tests server service internal bad gateway timeout unavailable forbidden unauthorized conflict created
accepted not found traceback exception warn critical fatal total worst more most less
least many much few several very too quite rather bit lot one two three four five six seven eight nine ten
hope thing things stuff way ways time times people person team everyone's let's it's that's what's here's
there's today's tomorrow's yesterday's dm pm dr mr mrs ms prof st mt product design engineering marketing
sales finance legal support security ops infra management leadership customer customers client clients manager
boss mom dad mum everybody folks guys lgtm asap eod eta tldr imo imho afaik iirc ptal wip tbd nvm omg lol
""".split())


def _name_spans(text: str) -> list[Span]:
    """People, places, organisations and products (the rules are in the docstring of ``anchors``)."""
    out: list[Span] = []
    last_end = -10
    for match in _run(_NAME_RUN, text):
        for start, end, proper, marked in _name_parts(match):
            if _not_prose(text, start):
                continue
            if proper == 1 and not (marked or _marked(text, start, end, last_end)):
                continue
            out.append((start, end, text[start:end]))
            last_end = end
    return _ordered(out + _copied(text))


def _copied(text: str) -> list[Span]:
    """The people a message is copied to, written in lower case: "cc jo o'neill"."""
    out: list[Span] = []
    if "cc" not in text:
        return out
    for match in _COPIED.finditer(text):
        words = match.group("v").split(" ")
        while words and words[-1] in _NOT_NAME:
            words.pop()
        if words and not any(w in _NOT_NAME for w in words):
            start = match.start("v")
            out.append((start, start + len(" ".join(words)), " ".join(words)))
    return out


def _name_parts(match: re.Match[str]) -> Iterator[tuple[int, int, int, bool]]:
    """The candidates in one run of capitalised words: the run cut at common words ("Anyway",
    "The", "Monday") and all-caps words, each as (start, end, proper words, marked), marked when
    the word cut before it marks a name ("With Priya", "Dear Kenji")."""
    pos, start, marked = match.start(), match.start(), False
    words: list[str] = []
    run = [*match.group(0).split(" "), "."]
    for at, word in enumerate(run):
        lower, following = word.lower(), run[at + 1] if at + 1 < len(run) else ""
        if word in _LEGAL_FORMS and words:
            words.append(word)
        elif word == "." or word[0].isupper() and lower in _NOT_NAME or word.isupper() and not _leads(word, following):
            while words and words[0] in _CONNECTORS:
                start += len(words.pop(0)) + 1
            while words and words[-1] in _CONNECTORS:
                words.pop()
            if words:
                yield start, start + len(" ".join(words)), sum(w not in _CONNECTORS for w in words), marked
            words, marked, start = [], lower in _NAME_MARKERS or lower in _GREETINGS, pos + len(word) + 1
        else:
            words.append(word)
        pos += len(word) + 1


def _leads(word: str, following: str) -> bool:
    """Whether an all-caps word opens a name with the capitalised word after it ("ETH Zurich")."""
    return (word.lower() not in _NOT_NAME and following[:1].isupper() and not following.isupper()
            and following.lower() not in _NOT_NAME)


def _line_at(text: str, at: int, reach: int = 300) -> str:
    """The line around ``at``, at most ``reach`` characters either side."""
    line_start = text.rfind("\n", max(0, at - reach), at) + 1 or max(0, at - reach)
    line_end = text.find("\n", at, at + reach)
    return text[line_start:line_end if line_end >= 0 else at + reach]


def _not_prose(text: str, at: int) -> bool:
    """Whether ``at`` is on a line whose capitalised words are not names: a markdown heading, a
    column-aligned header (``Size  Used Avail``), a log line (``INFO Starting Server``)."""
    line = _line_at(text, at)
    stripped = line.strip()
    if stripped[:1] == "#" or _LOG_LEVEL.search(line):
        return True
    return "  " in stripped and sum(1 for w in line.split() if w[:1].isupper()) >= 3


def _sentence_initial(text: str, at: int) -> bool:
    before = text[max(0, at - 3):at].rstrip(" ")
    return not before or before[-1] in _SENTENCE_END


def _marked(text: str, start: int, end: int, last_end: int) -> bool:
    """Whether the context around one capitalised word marks it as a name."""
    gap = text[last_end:start]
    if last_end >= 0 and gap in (" and ", ", ", ", and ", " or ", " & "):
        return True  # "with Kenji and Priya"
    if _NAME_FOLLOWER.match(text, end) and not (_sentence_initial(text, start) and text[end:end + 1] in "'’"):
        return True  # "Priya said", "Priya's" (not "Today's" at a sentence start)
    if _POSTCODE_LINE.search(text, max(0, start - 12), start):
        return True  # "2511 Leiden" on an address's line
    previous = _PREV_WORD.search(text, max(0, start - 24), start)
    if previous is None:
        return False
    word, sep = previous.group(1).lower(), previous.group(2)
    if word in _FIELD_LABELS and sep.replace('"', "").replace("'", "").strip() in (":", "="):
        return True  # "city": "Leiden", owner: Marta
    if word in _COPULAS and sep == " ":
        return text[end:end + 2] == " ("  # "the nearest is Leiden (eu-west-2)", not "the status is Pending"
    if word not in _NAME_MARKERS and word not in _SIGN_OFFS:
        return False
    if sep.strip(" ") == "":
        return word in _NAME_MARKERS
    if "\n" in sep:
        return word in _SIGN_OFFS and sep.strip(" \n") in ("", ",", "!")
    if sep.strip(" ") == ",":
        return word in _GREETINGS or word in _SIGN_OFFS
    return sep.strip(" ") == "." and word in _TITLES

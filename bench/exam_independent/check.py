#!/usr/bin/env python3
"""Mechanical checks for the independent recall exam (stdlib only).

Usage: python3 bench/exam_independent/check.py
Exits non-zero if any rule is violated.
"""
import json
import os
import re
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ["ops", "research", "trip"]

REQUIRED_KINDS = [
    "person", "place", "organisation", "product",
    "date_words", "date_digits",
    "money_symbol", "money_words",
    "quantity",
    "ticket", "channel", "bucket", "hostname", "feature_flag",
    "hardware_model", "software_version",
    "directory", "column_list", "decision", "tool_value",
]
MIN_FACTS = 24
MIN_PER_KIND = 2

STOPWORDS = set("""
a an the and or but nor for with without into onto from that this these those
what which when where while who whom whose why how than then there their them
they have has had been being were was will would should could shall might must
does doing done just also only some any all not none very more most much many
such each every both either neither about above after again against before
below between during over under until upon your yours ours mine here just like
it's its our are can did get got let let's use used using via per out off
""".split())


def tokens(s):
    return re.findall(r"[a-z0-9]+", s.lower())


def stem(w):
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 4:
            return w[: -len(suf)]
    return w


def content_words(s):
    return {stem(w) for w in tokens(s) if len(w) > 3 and w not in STOPWORDS}


def planting_context(item, answer):
    """Lines containing the answer, plus (for notes) the sentence containing it."""
    text = item["text"]
    ctx = [ln for ln in text.split("\n") if answer in ln]
    if item["kind"] == "note":
        start = 0
        while True:
            i = text.find(answer, start)
            if i < 0:
                break
            # sentence boundaries: [.!?] followed by whitespace, or a newline
            left = 0
            for m in re.finditer(r"[.!?](?=\s)|\n", text[:i]):
                left = m.end()
            m = re.search(r"[.!?](?=\s|$)|\n", text[i + len(answer):])
            right = i + len(answer) + (m.end() if m else len(text))
            ctx.append(text[left:right])
            start = i + 1
    return ctx


def main():
    errors = []
    warnings = []
    all_item_ids, all_fact_ids = Counter(), Counter()
    kind_counts = defaultdict(Counter)
    total_kinds = Counter()

    for shape in SHAPES:
        path = os.path.join(HERE, shape + ".json")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except Exception as e:
            errors.append(f"{shape}: cannot load {path}: {e}")
            continue
        if data.get("shape") != shape:
            errors.append(f"{shape}: shape field is {data.get('shape')!r}")
        items = data.get("items", [])
        facts = data.get("facts", [])
        by_id = {}
        for it in items:
            all_item_ids[it["id"]] += 1
            by_id[it["id"]] = it
            if it.get("kind") not in ("note", "file"):
                errors.append(f"{it['id']}: bad item kind {it.get('kind')!r}")
            if it.get("kind") == "file" and not it.get("path"):
                errors.append(f"{it['id']}: file item without path")
            if it.get("kind") == "note":
                n = len(it["text"].split())
                if not 40 <= n <= 200:
                    errors.append(f"{it['id']}: note has {n} words (want 40-200)")
            if it.get("kind") == "file":
                n = len(it["text"].rstrip("\n").split("\n"))
                if not 20 <= n <= 120:
                    errors.append(f"{it['id']}: file has {n} lines (want 20-120)")

        if len(facts) < MIN_FACTS:
            errors.append(f"{shape}: only {len(facts)} facts (want >= {MIN_FACTS})")

        planting = set()
        note_facts = 0
        for fa in facts:
            fid = fa.get("id", "?")
            all_fact_ids[fid] += 1
            for key in ("id", "item", "answer", "kind", "what", "q_subject", "q_other"):
                if not fa.get(key):
                    errors.append(f"{fid}: missing {key}")
            if fa.get("item") not in by_id:
                errors.append(f"{fid}: unknown item {fa.get('item')}")
                continue
            item = by_id[fa["item"]]
            planting.add(item["id"])
            if item["kind"] == "note":
                note_facts += 1
            ans = fa["answer"]
            kind_counts[shape][fa["kind"]] += 1
            total_kinds[fa["kind"]] += 1
            if fa["kind"] not in REQUIRED_KINDS:
                errors.append(f"{fid}: unknown fact kind {fa['kind']!r}")
            if ans not in item["text"]:
                errors.append(f"{fid}: answer {ans!r} not in item {item['id']}")
            # answer must appear nowhere else in the conversation (case-insensitive)
            for other in items:
                if other["id"] != item["id"] and ans.lower() in other["text"].lower():
                    errors.append(f"{fid}: answer {ans!r} also in {other['id']}")
            # questions
            ans_l = ans.lower()
            ans_toks = {stem(t) for t in tokens(ans)
                        if (len(t) >= 3 and t not in STOPWORDS) or t.isdigit()}
            for qk in ("q_subject", "q_other"):
                q = fa[qk]
                qt = tokens(q)
                if "?" in q:
                    errors.append(f"{fid}: {qk} has a question mark")
                if not 3 <= len(q.split()) <= 7:
                    errors.append(f"{fid}: {qk} has {len(q.split())} words (want 3-7)")
                if ans_l in q.lower():
                    errors.append(f"{fid}: {qk} contains the answer")
                for t in qt:
                    if stem(t) in ans_toks:
                        errors.append(f"{fid}: {qk} shares token {t!r} with answer {ans!r}")
                    elif len(t) >= 4 and t in ans_l:
                        errors.append(f"{fid}: {qk} token {t!r} is part of answer {ans!r}")
            ctx = planting_context(item, ans)
            ctx_words = set()
            for c in ctx:
                ctx_words |= content_words(c)
            shared = content_words(fa["q_other"]) & ctx_words
            if shared:
                errors.append(f"{fid}: q_other shares {sorted(shared)} with planting text")
            if not (content_words(fa["q_subject"]) & ctx_words):
                errors.append(f"{fid}: q_subject shares no content word with planting text")

        distractors = [it for it in items if it["id"] not in planting]
        if len(distractors) < len(planting):
            errors.append(f"{shape}: {len(distractors)} distractor-only items < "
                          f"{len(planting)} planting items")
        share = note_facts / max(1, len(facts))
        if not 0.35 <= share <= 0.65:
            errors.append(f"{shape}: {note_facts}/{len(facts)} facts in notes (want about half)")
        print(f"{shape}: {len(items)} items ({len(planting)} planting, "
              f"{len(distractors)} distractor-only, "
              f"{sum(1 for i in items if i['kind']=='note')} notes / "
              f"{sum(1 for i in items if i['kind']=='file')} files); "
              f"{len(facts)} facts ({note_facts} in notes, {len(facts)-note_facts} in files)")

    for k, v in all_item_ids.items():
        if v > 1:
            errors.append(f"duplicate item id {k}")
    for k, v in all_fact_ids.items():
        if v > 1:
            errors.append(f"duplicate fact id {k}")
    for k in REQUIRED_KINDS:
        if total_kinds[k] < MIN_PER_KIND:
            errors.append(f"kind {k!r} has {total_kinds[k]} facts (want >= {MIN_PER_KIND})")

    print()
    w = max(len(k) for k in REQUIRED_KINDS)
    print(f"{'kind':<{w}}  " + "  ".join(f"{s:>8}" for s in SHAPES) + "     total")
    for k in REQUIRED_KINDS:
        print(f"{k:<{w}}  " + "  ".join(f"{kind_counts[s][k]:>8}" for s in SHAPES)
              + f"  {total_kinds[k]:>8}")
    print(f"{'TOTAL':<{w}}  " + "  ".join(f"{sum(kind_counts[s].values()):>8}" for s in SHAPES)
          + f"  {sum(total_kinds.values()):>8}")
    print()
    for wmsg in warnings:
        print("WARNING:", wmsg)
    if errors:
        for e in errors:
            print("ERROR:", e)
        print(f"\nFAILED: {len(errors)} violation(s)")
        sys.exit(1)
    print("OK: all mechanical checks passed")


if __name__ == "__main__":
    main()

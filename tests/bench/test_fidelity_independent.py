"""The independent exam's benchmark (bench/fidelity_independent.py): its quick run plays one exam
conversation through the real agent loop with each engine and scores every fact; a hit needs the
planting message itself (the answer elsewhere, or in the summary's prose, never counts); the
padding holds no answer of the exam, changes with the seed and leaves the exam's items and order
alone. Whether the targets are met is the benchmark's report, not a test."""
from __future__ import annotations

import pytest

from bench import fidelity
from bench import fidelity_independent as exam_bench
from compression.core.anchors import Anchor
from compression.core.lcm import lcm_summary_text, split_lcm_body
from compression.core.markers import strip_summary_wrapping
from simulator.policy import PROJECT_TOOLS, find_actions


@pytest.mark.django_db(transaction=True)  # the turns are enqueued on commit, as in production
def test_the_quick_run_scores_every_fact_with_each_engine(capsys):
    result = fidelity.main(["--exam", "independent", "--quick", "--jobs", "1"])
    out = capsys.readouterr().out

    exam = exam_bench.load_exam("trip")
    runs = {r.engine: r for r in result["runs"]}
    assert set(runs) == set(exam_bench.ENGINES)
    for run in runs.values():
        assert (run.shape, run.seed, run.failed_turns, run.unplanted) == ("trip", 1, 0, [])
        assert run.compactions >= 1 and 0 < run.context_tokens < run.uncompacted_tokens
        assert run.facts == [f.id for f in exam.facts]
        assert len(run.closed) == len(run.open_subject) == len(run.open_other) == len(run.live) == len(exam.facts)
        assert not all(run.live)  # compaction reached planted messages
        # Open-book adds the search to closed-book.
        assert all(o or not c for c, o in zip(run.closed, run.open_subject))
        assert all(o or not c for c, o in zip(run.closed, run.open_other))
    lcm = runs["lcm"]
    assert lcm.searched and lcm.indexed and 0 < lcm.fact_bearing <= lcm.anchors and lcm.exam_value <= lcm.anchors
    assert all(bool(cause) != hit for cause, hit in zip(lcm.causes, lcm.closed))

    for row in result["rows"]:
        for values in (row.closed, row.open_subject, row.open_other, row.share, row.fact_bearing, row.exam_value):
            assert values and all(v is None or 0.0 <= v <= 1.0 for v in values), row
    for line in ("Independent exam after compaction", "trip         compressor", "trip         lcm",
                 "Target lcm closed-book ≥ 70%", "Target lcm open-book (subject words) ≥ 95%",
                 "Target lcm context share of the uncompacted tokens ≤ 25%", "closed-book misses per kind"):
        assert line in out


def test_a_hit_is_refused_when_the_answer_is_only_in_another_message():
    answer, planting = "FAC-1093", "m10"
    elsewhere = exam_bench.Context(live={"m11": "You said: the auditor wants FAC-1093 on the deposit"},
                                   anchors=(Anchor("id", "FAC-1093", "m11"), Anchor("id", "FAC-1200", planting)))
    echo = [{"ref": "m11", "snippet": "…auditor wants FAC-1093…"}]

    assert not exam_bench.closed_book(answer, planting, elsewhere)
    assert not exam_bench.open_book(answer, planting, "the auditor wants FAC-1093", elsewhere, echo)
    assert not exam_bench.open_book(answer, planting, "the auditor wants fac-1093", elsewhere, [])

    # The same answer where it points to the planting message is a hit (case-insensitive).
    assert exam_bench.closed_book(answer, planting, exam_bench.Context(live={planting: "ticket fac-1093 opened"}))
    assert exam_bench.closed_book(answer, planting, exam_bench.Context({}, (Anchor("id", "FAC-1093", planting),)))
    assert exam_bench.open_book(answer, planting, "ticket FAC-1093", elsewhere,
                                [*echo, {"ref": planting, "snippet": "facilities request ticket"}])


def test_the_summary_prose_never_counts():
    index = "## Anchor index\nExact strings:\n- [m10] id: FAC-1200\n- [m12] number: €4,250"
    body = strip_summary_wrapping(lcm_summary_text("The auditor tracks the payments as FAC-1093 (m10).", index))
    assert "FAC-1093" in split_lcm_body(body)[0]

    anchors = exam_bench.summary_anchors(body)
    assert [(a.ref, a.value) for a in anchors] == [("m10", "FAC-1200"), ("m12", "€4,250")]
    assert not exam_bench.closed_book("FAC-1093", "m10", exam_bench.Context({}, tuple(anchors)))
    assert exam_bench.closed_book("€4,250", "m12", exam_bench.Context({}, tuple(anchors)))


def test_anchor_precision_counts_overlap_with_answers_and_exam_values():
    anchors = [Anchor("number", "19 double rooms", "m1"), Anchor("decision", "We went with the azulejo class", "m2"),
               Anchor("number", "€4,250", "m3"), Anchor("file", "scratch/trip-log-001.md", "m4")]
    answers = ["19 double rooms", "azulejo workshop", "Thursday the 19th"]
    items = ["Deposit €4,250 by bank transfer", "19 double rooms in the main house"]

    assert exam_bench.overlaps("Thursday the 12th", "Thursday the 19th")  # a shared word of 4+ characters
    assert not exam_bench.overlaps("the 12th", "Thursday the 19th")
    assert exam_bench.anchor_precision(anchors, answers, items) == (2, 2)


def test_padding_holds_no_answer_and_changes_only_with_the_seed():
    """Look-alike values only, whatever the case; the exam's items are played as they are, in order."""
    answers = [a.lower() for a in exam_bench.all_answers()]
    for shape in exam_bench.CONVERSATIONS:
        exam = exam_bench.load_exam(shape)
        scripts = [exam_bench.build_script(exam, seed) for seed in exam_bench.SEEDS]
        scripts.append(exam_bench.build_script(exam, 1, exam_bench.QUICK_PADDING))
        for script in scripts:
            padding = script.padding()
            assert padding
            for text in padding:
                assert not [a for a in answers if a in text.lower()], text[:200]
            for step in script.steps:  # chat asks for no tool; a read asks for its file alone
                if step.file is not None or not step.item:
                    expected = [("read_file", {"path": step.file[0]})] if step.file else []
                    assert find_actions(step.text, set(PROJECT_TOOLS)) == expected, step.text
            played = [s for s in script.steps if s.item]
            assert [s.item for s in played] == [i.id for i in exam.items]
            for step, item in zip(played, exam.items):
                assert (step.file == (item.path, item.text)) if item.kind == "file" else step.text == item.text
        assert len({tuple(s.padding()) for s in scripts[:3]}) == 3
        assert sum(map(exam_bench.estimated_tokens, scripts[0].steps)) > 3 * 54_400  # the 64k model's threshold

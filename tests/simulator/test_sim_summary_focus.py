from compression.core.summary import build_summary_prompt
from simulator.summary import build_summary

TURNS = [
    {"role": "user", "content": "We need to fix the auth flow: tokens expire after 5 minutes."},
    {"role": "assistant", "content": "I will look at the login page styling first."},
    {"role": "user", "content": "The auth flow also drops the refresh token on logout."},
]


def test_it_keeps_sentences_about_the_focus_topic_in_full():
    prompt = build_summary_prompt(TURNS, budget=2000, focus_topic="auth flow")
    summary = build_summary(prompt)
    critical = summary.split("## Critical Context", 1)[1]
    assert "Focus topic: auth flow" in critical
    assert "drops the refresh token on logout" in critical
    assert "styling" not in critical


def test_it_has_no_focus_section_without_a_topic():
    summary = build_summary(build_summary_prompt(TURNS, budget=2000))
    assert "Focus topic" not in summary

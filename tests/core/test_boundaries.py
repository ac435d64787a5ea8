from compression.core.boundaries import (
    align_boundary_backward,
    align_boundary_forward,
    find_boundaries,
    find_tail_cut,
    head_size,
)

from .conftest import assistant, call, result, sized, system, user


def size(msg):
    return msg["_tokens"]


def chat(n, tokens=100, sys_prompt=True):
    """Alternating user/assistant messages, each with a stored size."""
    msgs = [sized(system(), 10)] if sys_prompt else []
    for i in range(n):
        msgs.append(sized(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}"), tokens))
    return msgs


def bounds(msgs, *, budget=1_000, first=True, protect_first_n=3, protect_last_n=20):
    return find_boundaries(
        msgs,
        protect_first_n=protect_first_n,
        protect_last_n=protect_last_n,
        tail_token_budget=budget,
        first_compression=first,
        token_counter=size,
    )


def test_it_protects_system_plus_first_three_on_the_first_compression_only():
    msgs = chat(30)
    assert head_size(msgs, 3, first_compression=True) == 4
    assert head_size(msgs, 3, first_compression=False) == 1
    assert head_size(chat(30, sys_prompt=False), 3, first_compression=False) == 0
    assert bounds(msgs, first=True).start == 4
    assert bounds(msgs, first=False).start == 1


def test_it_moves_the_head_past_tool_results():
    msgs = [sized(system(), 1), sized(user("go"), 1), sized(assistant(None, [call("a", "t"), call("b", "t")]), 1)]
    msgs += [sized(result("a", "1"), 1), sized(result("b", "2"), 1)]
    msgs += chat(20, sys_prompt=False)
    assert align_boundary_forward(msgs, 4) == 5
    assert bounds(msgs, protect_first_n=3).start == 5


def test_it_moves_a_tail_cut_inside_a_tool_group_back_to_its_call():
    msgs = [user("go"), assistant(None, [call("a", "t"), call("b", "t")]), result("a", "1"), result("b", "2"), user("next")]
    assert align_boundary_backward(msgs, 3) == 1
    assert align_boundary_backward(msgs, 2) == 1
    assert align_boundary_backward(msgs, 4) == 4  # after the whole group: nothing to fix


def test_it_walks_the_tail_within_the_budget_plus_the_one_message_that_crosses_it():
    msgs = chat(40, tokens=400)
    n = len(msgs)
    # Five 400-token messages fill the 2,000 budget; the sixth crosses it (2,400 <= 3,000) and ends
    # the walk. The 1.5x allowance is not a second budget: a seventh (2,800) is not kept.
    assert find_tail_cut(msgs, 4, 2_000, protect_last_n=3, token_counter=size) == n - 6


def test_it_lets_one_oversized_message_overshoot_the_budget():
    small = [sized(user("s1"), 100), sized(assistant("s2"), 100), sized(user("s3"), 100), sized(assistant("s4"), 100)]
    msgs = chat(20) + [sized(user("huge"), 2_500)] + small
    # 400 + 2,500 = 2,900 fits under 1.5 × 2,000, so the huge message stays, and the walk ends there.
    assert find_tail_cut(msgs, 4, 2_000, protect_last_n=3, token_counter=size) == len(msgs) - 5
    msgs = chat(20) + [sized(user("too huge"), 3_100)] + small
    assert find_tail_cut(msgs, 4, 2_000, protect_last_n=3, token_counter=size) == len(msgs) - 4


def test_it_never_stretches_the_whole_tail_to_one_and_a_half_budgets():
    # Messages of 700-1,300 tokens behind a 20,000-token budget: the old walk kept ~29,000 tokens.
    msgs = [sized(system(), 10)]
    for i in range(120):
        msgs.append(sized(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}"), 700 + (i * 137) % 600))
    cut = find_tail_cut(msgs, 1, 20_000, protect_last_n=20, token_counter=size)
    kept = [m["_tokens"] for m in msgs[cut:]]
    assert sum(kept[1:]) <= 20_000 < sum(kept) <= 20_000 + max(kept)  # only the crossing message overshoots
    assert sum(kept) < 22_000


def test_it_keeps_a_floor_of_min_protect_last_n_and_8_but_at_least_3():
    msgs = chat(40, tokens=1_000)
    n = len(msgs)
    assert find_tail_cut(msgs, 4, 10, protect_last_n=20, token_counter=size) == n - 8
    assert find_tail_cut(msgs, 4, 10, protect_last_n=5, token_counter=size) == n - 5
    assert find_tail_cut(msgs, 4, 10, protect_last_n=1, token_counter=size) == n - 3


def test_it_leaves_two_messages_to_summarise_on_a_short_transcript():
    msgs = chat(8, tokens=10)  # system + 8: head of 4, then 5 messages
    b = bounds(msgs, budget=10_000)
    assert (b.start, b.end) == (4, 6)


def test_it_rewalks_with_the_raw_budget_when_everything_fits_the_soft_ceiling():
    msgs = chat(12, tokens=100)  # 1,200 tokens after the head
    b = bounds(msgs, budget=1_000, protect_last_n=3)
    assert b.has_content
    assert sum(m["_tokens"] for m in msgs[b.end:]) <= 1_000


def test_it_aligns_the_tail_so_a_tool_group_is_never_split():
    msgs = chat(10)
    msgs += [sized(user("run"), 100), sized(assistant(None, [call("x", "t"), call("y", "t")]), 100)]
    msgs += [sized(result("x", "1"), 100), sized(result("y", "2"), 100), sized(assistant("done"), 100)]
    # A budget that would cut between the two results.
    b = bounds(msgs, budget=200, protect_last_n=3)
    assert msgs[b.end]["role"] != "tool"
    assert msgs[b.end - 1]["role"] != "assistant" or not msgs[b.end - 1].get("tool_calls")


def test_it_keeps_the_last_user_message_in_the_tail():
    msgs = chat(10)
    msgs.append(sized(user("the real question"), 100))
    for i in range(6):
        msgs += [sized(assistant("step", [call(f"c{i}", "t")]), 500), sized(result(f"c{i}", "r"), 500)]
    b = bounds(msgs, budget=500, protect_last_n=3)
    assert b.has_content
    assert any(m.get("content") == "the real question" for m in msgs[b.end:])


def test_it_keeps_the_last_assistant_text_in_the_tail():
    msgs = chat(10)
    msgs += [sized(user("q"), 10), sized(assistant("the answer"), 10)]
    for i in range(6):
        msgs += [sized(assistant(None, [call(f"c{i}", "t")]), 500), sized(result(f"c{i}", "r"), 500)]
    b = bounds(msgs, budget=500, protect_last_n=3)
    assert any(m.get("content") == "the answer" for m in msgs[b.end:])


def test_it_pins_a_last_user_message_that_opens_the_middle_instead_of_giving_up():
    msgs = [sized(system(), 10), sized(user("the only request"), 10)]
    for i in range(12):
        msgs += [sized(assistant(f"step {i}", [call(f"c{i}", "t")]), 500), sized(result(f"c{i}", "r"), 500)]
    b = bounds(msgs, budget=500, first=False, protect_last_n=3)
    assert b.has_content
    assert b.start == 2  # the user message stays verbatim, ahead of the summary
    assert msgs[b.start]["role"] == "assistant"


def test_it_reports_nothing_to_compress_when_head_and_tail_meet():
    msgs = chat(5)
    b = bounds(msgs, budget=100_000)
    assert not b.has_content

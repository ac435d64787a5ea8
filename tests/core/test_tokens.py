import json
import math

import tiktoken

from compression.core import tokens as t
from compression.core.tokens import (
    IMAGE_TOKENS,
    MessageTokenCache,
    RunningTotal,
    compute_message_tokens,
    count_tokens,
    estimate_messages_tokens_rough,
    estimate_request_tokens_rough,
    estimate_tokens_rough,
    message_tokens,
    with_token_count,
)

B64_IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 400_000}}
URL_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "B" * 400_000}}


def test_it_counts_with_cl100k_offline():
    assert count_tokens("hello world") == 2
    assert t.get_encoding().encode_ordinary("hello world") == [15339, 1917]


def test_it_never_raises_on_special_token_text():
    assert count_tokens("before <|endoftext|> after") > 3


def test_it_loads_the_encoding_once_per_process():
    assert t.get_encoding() is t.get_encoding()


def test_it_matches_a_stock_tiktoken_encoding_built_from_the_same_ranks():
    stock = tiktoken.Encoding(
        name="check", pat_str=t._CL100K_PAT_STR, mergeable_ranks=t._load_cl100k_ranks(), special_tokens={}
    )
    text = "def f(x):\n    return x ** 2  # ünïcödé 🚀"
    assert count_tokens(text) == len(stock.encode_ordinary(text))


def test_it_estimates_rough_tokens_as_ceil_chars_over_four():
    assert estimate_tokens_rough("") == 0
    assert estimate_tokens_rough("abc") == 1
    assert estimate_tokens_rough("abcde") == 2
    assert estimate_tokens_rough("x" * 400) == 100


def test_it_counts_content_tool_call_envelopes_ids_and_names_in_the_rough_message_estimate():
    envelope = '{"id":"1","type":"function","function":{"name":"abcd","arguments":"yyyyyy"}}'
    msgs = [
        {"role": "user", "content": "x" * 10},
        {"role": "assistant", "content": None, "tool_calls": [json.loads(envelope)]},
        {"role": "tool", "tool_call_id": "1", "name": "abcd", "content": "z" * 4},
    ]
    # content 10 + the call's whole envelope + the result's content 4, tool_call_id 1 and name 4
    assert estimate_messages_tokens_rough(msgs) == math.ceil((10 + len(envelope) + 4 + 1 + 4) / 4)


def test_it_counts_each_image_part_flat_and_never_its_base64():
    msg = {"role": "user", "content": [{"type": "text", "text": "look"}, B64_IMAGE, URL_IMAGE]}
    assert estimate_messages_tokens_rough([msg]) == 1 + 2 * IMAGE_TOKENS
    assert compute_message_tokens(msg) == count_tokens("look") + 2 * IMAGE_TOKENS


def test_it_adds_system_prompt_and_tool_schemas_to_the_request_estimate():
    msgs = [{"role": "user", "content": "x" * 40}]
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}}]
    base = estimate_messages_tokens_rough(msgs)
    assert estimate_request_tokens_rough(msgs, system_prompt="s" * 400) == base + 100
    schema_chars = len("read_file") + len("Read a file") + len('{"type": "object"}')
    assert estimate_request_tokens_rough(msgs, tools=tools) == base + math.ceil(schema_chars / 4)


def test_it_honours_a_stored_token_count():
    msg = {"role": "user", "content": "hello world", "_tokens": 999}
    assert message_tokens(msg) == 999
    assert message_tokens({"role": "user", "content": "hello world"}) == 2


def test_it_stores_a_fresh_count_with_with_token_count():
    stale = {"role": "user", "content": "hello world", "_tokens": 999}
    assert with_token_count(stale)["_tokens"] == 2
    assert stale["_tokens"] == 999


def test_it_tokenises_each_message_object_once():
    calls = []

    def counter(msg):
        calls.append(msg)
        return 7

    cache = MessageTokenCache(counter)
    msg = {"role": "user", "content": "hi"}
    assert cache(msg) == cache(msg) == 7
    assert len(calls) == 1
    assert cache({"role": "user", "content": "x", "_tokens": 3}) == 3
    assert len(calls) == 1


def test_it_counts_only_new_messages_in_the_running_total():
    calls = []

    def counter(msg):
        calls.append(msg)
        return 10

    running = RunningTotal(MessageTokenCache(counter), overhead=1)
    history = [{"role": "user", "content": str(i)} for i in range(100)]
    assert running(history) == 1100
    calls.clear()
    history = history + [{"role": "assistant", "content": "new"}]
    assert running(history) == 1111
    assert len(calls) == 1


def test_it_recounts_a_rewritten_history_in_the_running_total():
    running = RunningTotal(MessageTokenCache(lambda m: 5), overhead=0)
    first = [{"role": "user", "content": str(i)} for i in range(10)]
    assert running(first) == 50
    assert running(first[5:]) == 25


def test_it_counts_the_envelopes_of_parallel_tool_calls_as_billed():
    calls = [
        {"id": f"toolu_01A{i}bcDEfgHIjkLMnoPQ", "type": "function",
         "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/mod{i}.py"})}}
        for i in range(4)
    ]
    msg = {"role": "assistant", "content": None, "tool_calls": calls}
    envelopes = json.dumps(calls)
    # Names and arguments alone scored 32 tokens; the envelopes (ids, types, structure) are what the
    # API is sent, about chars/4 of their JSON.
    assert compute_message_tokens(msg) >= len(envelopes) / 4 * 0.9
    assert estimate_messages_tokens_rough([msg]) >= len(envelopes) / 4 * 0.9
    for call_ in calls:
        assert call_["id"] in t.message_text(msg)


def test_it_counts_a_tool_results_call_id():
    bare = {"role": "tool", "content": "ok"}
    with_id = {**bare, "tool_call_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUV"}
    assert compute_message_tokens(with_id) > compute_message_tokens(bare)
    assert estimate_messages_tokens_rough([with_id]) > estimate_messages_tokens_rough([bare])


def test_it_keeps_the_rough_character_count_equal_to_the_counted_text():
    msgs = [
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "bc"}],
         "tool_calls": [{"id": "1", "type": "function", "function": {"name": "n", "arguments": "{}"}}, None]},
        {"role": "tool", "tool_call_id": "1", "name": "n", "content": "ünï"},
    ]
    for msg in msgs:
        assert t.message_chars(msg) == len(t.message_text(msg))


# count_labelled / serialized_tokens: a plain turn's rendered count from its stored one ------------

LABELS = ("[USER]:", "[ASSISTANT]:", "[SYSTEM]:")
PIECES = ["word", "Word", " ", "  ", "\n", "\r\n", "\t", "7", "42", "1234", ".", ":", "'s", "'ll", "é", "中文",
          "😀", "-", "_", "$", "(", "[", "]", "\u00a0", "\u3000", " \n", "==", "https://x.io/a", "#!", "\u200b"]


def test_a_labelled_count_is_the_tokenised_count_whenever_it_is_given():
    import random

    from compression.core.token_pieces import count_labelled

    rng = random.Random(5)
    given = 0
    for _ in range(6_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))
        label = rng.choice(LABELS)
        n = count_labelled(label, text, count_tokens(text))
        if n is not None:
            given += 1
            assert n == count_tokens(f"{label} {text}"), (label, text)
    assert given > 5_000  # the shortcut applies to nearly every text, not only to easy ones


def test_a_label_that_would_join_the_text_gives_no_labelled_count():
    from compression.core.token_pieces import count_labelled

    for label in ("[USER] ", "USER", "[TOOL RESULT x]:_", ""):
        assert count_labelled(label, "hello world", count_tokens("hello world")) is None


def test_a_plain_turn_is_measured_from_its_stored_count_and_a_count_that_cannot_be_its_own_is_not_trusted():
    from compression.core.summary import serialize_message, serialized_tokens
    from compression.core.tokens import with_token_count

    plain = with_token_count({"role": "user", "content": "Deploy r412 to eu-west-1 after the canary passes."})
    block = serialize_message(plain)
    assert serialized_tokens(plain, block) == count_tokens(block)
    assert serialized_tokens({**plain, "_tokens": 5_000}, block) is None  # a synthetic size, not this text's
    secret = with_token_count({"role": "user", "content": "the key is sk-ant-api03-" + "x" * 40})
    assert serialized_tokens(secret, serialize_message(secret)) is None  # redacted: the text changed
    called = with_token_count({"role": "assistant", "content": "reading",
                               "tool_calls": [{"id": "c1", "type": "function",
                                               "function": {"name": "read_file", "arguments": "{}"}}]})
    assert serialized_tokens(called, serialize_message(called)) is None
    assert serialized_tokens({"role": "user", "content": "no stored count"}, "[USER]: no stored count") is None

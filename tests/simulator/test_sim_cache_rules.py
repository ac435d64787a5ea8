"""One test per documented prompt-caching rule, driven through the official SDK over HTTP, with the
expected usage computed by hand (docs/simulator.md quotes each rule).

Token arithmetic: a system block of `the` repeated n times is exactly n tokens; a message's first
block adds MESSAGE_OVERHEAD_TOKENS (4); an image counts 1,500. The clock is manual.
"""

from __future__ import annotations

import anthropic
import pytest

from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from llm.models import get_model
from simulator import SimClock, start_simulator
from tests.simulator.conftest import MODEL, SIM_KEY

M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}


def words(n: int) -> str:
    text = "the" + " the" * (n - 1)
    assert count_tokens(text) == n
    return text


def text(body: str, marker=None) -> dict:
    block = {"type": "text", "text": body}
    if marker:
        block["cache_control"] = marker
    return block


def user(*blocks) -> dict:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def msg(body: str) -> int:
    """Tokens of a one-block message."""
    return count_tokens(body) + MESSAGE_OVERHEAD_TOKENS


def send(client, messages, *, system_tokens=2000, system_marker=M5, model=MODEL, **extra):
    system = text(words(system_tokens), system_marker)
    return client.messages.create(model=model, max_tokens=16, system=[system], messages=messages, **extra).usage


def billed(u) -> tuple[int, int, int, int]:
    """(read, 5m write, 1h write, uncached input)."""
    return (u.cache_read_input_tokens, u.cache_creation.ephemeral_5m_input_tokens,
            u.cache_creation.ephemeral_1h_input_tokens, u.input_tokens)


def test_the_cache_mode_comes_from_hermes_sim_cache_and_defaults_to_documented():
    from simulator import Simulator

    assert Simulator.from_env({}).cache.mode == "documented"
    assert Simulator.from_env({"HERMES_SIM_CACHE": "optimistic"}).cache.mode == "optimistic"
    with pytest.raises(ValueError, match="HERMES_SIM_CACHE: cache mode must be one of documented, optimistic"):
        Simulator.from_env({"HERMES_SIM_CACHE": "generous"})


@pytest.fixture
def optimistic():
    server = start_simulator(clock=SimClock(start=1_000_000.0), env={}, cache_mode="optimistic")
    yield server, anthropic.Anthropic(api_key=SIM_KEY, base_url=server.base_url)
    server.stop()


def advance(server, seconds: float) -> None:
    server.sim.clock.advance(seconds)


# ------------------------------------------------------------------------- reads, writes, input

def test_a_first_call_writes_up_to_the_last_breakpoint_and_bills_the_rest_as_input(client):
    u = send(client, [user(text("hello", M5)), assistant(text("hi")), user(text("tail"))])
    assert billed(u) == (0, 2000 + msg("hello"), 0, msg("hi") + msg("tail"))


def test_a_second_call_reads_the_prefix_and_writes_only_what_it_adds(client):
    send(client, [user(text("hello", M5))])
    u = send(client, [user(text("hello")), assistant(text("hi")), user(text("more", M5))])
    assert billed(u) == (2000 + msg("hello"), msg("hi") + msg("more"), 0, 0)


def test_mixed_ttls_bill_a_as_read_b_minus_a_at_1h_and_c_minus_b_at_5m(client):
    # "A: the highest cache hit; B: the highest 1-hour cache_control block after A; C: the last".
    send(client, [user(text("hello"))], system_marker=H1)  # caches the system prompt alone, at 1h
    u = send(client, [user(text("hello", H1)), assistant(text("hi")), user(text("more", M5))], system_marker=H1)
    assert billed(u) == (2000, msg("hi") + msg("more"), msg("hello"), 0)


def test_a_5m_entry_expires_after_five_minutes_and_a_1h_entry_after_an_hour(client, server):
    send(client, [user(text("hello", M5))], system_marker=H1)
    advance(server, 301)
    u = send(client, [user(text("hello", M5))], system_marker=H1)
    assert billed(u) == (2000, msg("hello"), 0, 0)  # the message's 5m entry is gone, the system's 1h one is not
    advance(server, 3601)
    u = send(client, [user(text("hello", M5))], system_marker=H1)
    assert billed(u) == (0, msg("hello"), 2000, 0)


def test_a_hit_refreshes_the_entry_at_its_own_ttl(client, server):
    send(client, [user(text("hello", M5))])
    for _ in range(3):
        advance(server, 290)
        assert billed(send(client, [user(text("hello", M5))])) == (2000 + msg("hello"), 0, 0, 0)


# --------------------------------------------------------------------------- the unstated points

def test_a_1h_re_pin_of_a_5m_prefix_bills_a_read_and_the_entry_keeps_its_5m_lifetime(client, server):
    send(client, [user(text("hello", M5))])
    advance(server, 60)
    repin = send(client, [user(text("hello", H1))], system_marker=H1)
    assert billed(repin) == (2000 + msg("hello"), 0, 0, 0)  # documented: a read, nothing written
    advance(server, 600)
    later = send(client, [user(text("hello", H1))], system_marker=H1)
    assert billed(later) == (0, 0, 2000 + msg("hello"), 0)  # documented mode: it was still a 5m entry


def test_the_optimistic_mode_promotes_the_re_pinned_entry_to_1h_for_free(optimistic):
    server, client = optimistic
    send(client, [user(text("hello", M5))])
    advance(server, 60)
    assert billed(send(client, [user(text("hello", H1))], system_marker=H1)) == (2000 + msg("hello"), 0, 0, 0)
    advance(server, 600)
    assert billed(send(client, [user(text("hello", H1))], system_marker=H1)) == (2000 + msg("hello"), 0, 0, 0)


def test_a_1h_breakpoint_one_block_past_the_read_keeps_the_whole_prefix_for_an_hour(client, server):
    # The documented billing: only B - A (the new reply) is a 1h write, yet the entry at B is the
    # hash of the whole prefix, with B's TTL. `rolling_1h` rests on this.
    send(client, [user(text("hello", M5))])
    advance(server, 2)
    u = send(client, [user(text("hello")), assistant(text("hi", H1)), user(text("more", M5))], system_marker=H1)
    assert billed(u) == (2000 + msg("hello"), msg("more"), msg("hi"), 0)
    advance(server, 1800)
    later = send(client, [user(text("hello")), assistant(text("hi")), user(text("more")), assistant(text("ok", H1)),
                          user(text("back", M5))], system_marker=H1)
    assert billed(later) == (2000 + msg("hello") + msg("hi"), msg("back"), msg("more") + msg("ok"), 0)


# ------------------------------------------------------------------------------------- lookback

def _history(n_blocks: int, marker_at_end=None) -> list[dict]:
    """A user message of `n_blocks` text blocks (block k reads "b{k}"), the last one marked."""
    blocks = [text(f"b{k}") for k in range(n_blocks)]
    if marker_at_end:
        blocks[-1] = text(f"b{n_blocks - 1}", marker_at_end)
    return [user(*blocks)]


@pytest.mark.parametrize("added, found", [(19, True), (20, False)])
def test_the_lookback_checks_20_positions_counting_the_breakpoint(client, added, found):
    # An entry at block E; the next breakpoint `added` blocks later: with 19 the entry is the 20th
    # position checked (the breakpoint is the first), with 20 it is the 21st and missed.
    send(client, _history(5, M5))
    u = send(client, _history(5 + added, M5))
    prefix = 2000 + MESSAGE_OVERHEAD_TOKENS + sum(count_tokens(f"b{k}") for k in range(5))
    assert u.cache_read_input_tokens == (prefix if found else 2000)


def test_a_run_of_tool_results_counts_as_one_lookback_position(client):
    uses = [{"type": "tool_use", "id": f"toolu_{k:02d}", "name": "read_file", "input": {"path": f"f{k}"}}
            for k in range(25)]
    results = [{"type": "tool_result", "tool_use_id": f"toolu_{k:02d}", "content": f"r{k}"} for k in range(25)]
    results[-1]["cache_control"] = M5
    first = [user(text("go", M5))]
    send(client, first)
    u = send(client, [user(text("go")), assistant(text("reading"), *uses), user(*results)])
    # 27 blocks after the entry, but only 3 positions: the text, the tool_use run, the tool_result run.
    assert u.cache_read_input_tokens == 2000 + msg("go")


# ---------------------------------------------------------------------------- automatic caching

def test_automatic_caching_puts_the_breakpoint_on_the_last_block(client):
    messages = [user(text("hello")), assistant(text("hi")), user(text("more"))]
    u = send(client, messages, system_marker=None, cache_control=M5)
    assert billed(u) == (0, 2000 + msg("hello") + msg("hi") + msg("more"), 0, 0)
    u = send(client, messages + [assistant(text("ok")), user(text("again"))], system_marker=None, cache_control=M5)
    assert billed(u) == (2000 + msg("hello") + msg("hi") + msg("more"), msg("ok") + msg("again"), 0, 0)


def test_automatic_caching_takes_one_of_the_four_slots(client):
    four = [user(text("a", M5)), assistant(text("b", M5)), user(text("c", M5))]  # + the system: 4
    with pytest.raises(anthropic.BadRequestError) as info:
        send(client, four + [assistant(text("d")), user(text("e"))], cache_control=M5)
    assert info.value.api_message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_automatic_caching_on_an_explicitly_marked_last_block(client):
    same = send(client, [user(text("hello", M5))], cache_control=M5)  # the same TTL: a no-op
    assert billed(same) == (0, 2000 + msg("hello"), 0, 0)
    with pytest.raises(anthropic.BadRequestError) as info:
        send(client, [user(text("hello", M5))], system_marker=None, cache_control=H1)
    assert info.value.api_message.startswith("cache_control.ttl: ")
    assert "messages.0.content.0" in info.value.api_message


# ------------------------------------------------------------------------- a real catalogue model

REAL = "claude-sonnet-4-6"


def test_a_real_model_id_follows_its_catalogue_entry(client, control):
    info = get_model(REAL)
    listed = client.models.retrieve(REAL)
    assert (listed.max_input_tokens, listed.max_tokens) == (info.context_window, info.max_output)

    floor = info.min_cache_tokens
    below = send(client, [user(text("hi"))], system_tokens=floor - 1, model=REAL)
    assert billed(below) == (0, 0, 0, floor - 1 + msg("hi"))  # under the minimum: no write, no error
    at = send(client, [user(text("hi"))], system_tokens=floor, model=REAL)
    assert billed(at) == (0, floor, 0, msg("hi"))

    # Priced at the catalogue's USD per million tokens: 5m write of `floor`, input, output.
    entry = control("/_sim/stats")["log"][-1]
    p = info.price
    assert entry["cost_usd"] == pytest.approx(
        (floor * p.cache_write_5m + msg("hi") * p.input + entry["output"] * p.output) / 1_000_000)


def test_a_real_model_id_refuses_max_tokens_over_its_cap_with_the_api_text(client):
    cap = get_model(REAL).max_output
    with pytest.raises(anthropic.BadRequestError) as info:
        with client.messages.stream(model=REAL, max_tokens=cap + 1, messages=[user(text("hi"))]) as stream:
            stream.get_final_message()
    assert info.value.api_message == (
        f"max_tokens: {cap + 1} > {cap}, which is the maximum allowed number of output tokens for {REAL}"
    )


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def test_a_real_model_id_refuses_a_prompt_over_its_window_with_the_api_text(client):
    """Images of the largest size the API keeps unscaled (1,640 tokens each, up to the 600 a 1M
    window allows) and text to one token past the window."""
    import base64
    import io

    from PIL import Image

    from compression.core.media import image_tokens

    window = get_model(REAL).context_window
    buffer = io.BytesIO()
    Image.new("RGB", (784, 1568), (200, 30, 30)).save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    each = image_tokens(784, 1568)
    images = 600
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    filler = words(window - images * each + 1)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=REAL, max_tokens=16, messages=[user(*[image] * images, text(filler))])
    tokens = images * each + count_tokens(filler) + MESSAGE_OVERHEAD_TOKENS
    assert info.value.api_message == f"prompt is too long: {tokens} tokens > {window} maximum"

"""The simulator's provider tokenizer can count differently from the product's (HERMES_SIM_TOKEN_SCALE,
/_sim/tokens): the usage it reports is then scale × the product's count, rounded up per block,
and /_sim/reset brings the configured scale back."""
from __future__ import annotations

import math

import pytest

from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from simulator.engine import Simulator
from tests.simulator.conftest import MODEL, call_control

TEXT = "The quarterly review went well and everyone agreed on the plan for next year. " * 20


def test_reported_prompt_tokens_follow_the_scale(client, server):
    plain = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": TEXT}]).input_tokens
    assert plain == count_tokens(TEXT) + MESSAGE_OVERHEAD_TOKENS
    assert call_control(server, "/_sim/tokens", {"scale": 1.25}) == {"scale": 1.25}
    reply = client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": TEXT}])
    assert reply.usage.input_tokens == math.ceil(count_tokens(TEXT) * 1.25) + MESSAGE_OVERHEAD_TOKENS
    call_control(server, "/_sim/reset", {})
    assert call_control(server, "/_sim/tokens") == {"scale": 1.0}


def test_a_bad_scale_is_refused_and_nothing_changes(server):
    import urllib.error

    for bad in ("many", 0, 9):
        with pytest.raises(urllib.error.HTTPError) as exc:
            call_control(server, "/_sim/tokens", {"scale": bad})
        assert exc.value.code == 400
    assert call_control(server, "/_sim/tokens") == {"scale": 1.0}


def test_the_environment_sets_the_default_scale():
    assert Simulator.from_env({"HERMES_SIM_TOKEN_SCALE": "1.5"}).count_tokens.scale == 1.5
    with pytest.raises(ValueError, match="outside 0.25–4"):
        Simulator.from_env({"HERMES_SIM_TOKEN_SCALE": "12"})

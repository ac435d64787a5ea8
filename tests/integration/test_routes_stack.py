"""Real routes on the real stack: a web process and a worker started with `ANTHROPIC_API_KEY` set
and `ANTHROPIC_BASE_URL` at the simulator serve conversations on provider `anthropic` with real
Claude model ids (the simulator then behaves as that model's catalogue entry), and a custom
OpenAI-compatible endpoint serves a model the catalogue does not know, with the window the admin
gave. Driven in headless Chromium: the picker, a chat, a tool call, a compression, the switch."""
from __future__ import annotations

import json
import re
import sys
from decimal import Decimal

import pytest

from compression import settings_store
from llm.models import get_model
from sessions.models import ApiCall, CompressionEvent, Conversation, Message, Turn
from sessions.services.context import message_append, session_active
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import wait_for, wait_turn
from tests.stack import Stack, free_port, wait_for_port

pytestmark = [pytest.mark.integration, pytest.mark.browser]

FAKE_KEY = "sk-ant-route-test-not-a-real-key"
CUSTOM_MODEL = "local-llama-128k"  # served by the simulator's OpenAI-compatible endpoint only
CUSTOM_WINDOW = 131_072
PADDING = " ".join(f"fact{i}" for i in range(1600))  # > 1,024 tokens: a cacheable prefix on Sonnet 4.6


@pytest.fixture(scope="module")
def routed(stack, tmp_path_factory):
    """A second web + worker (with their own Redis) configured as a user with a real key is."""
    log_dir = tmp_path_factory.mktemp("routed-logs")
    env = {k: v for k, v in stack.env.items() if k != "HERMES_SIMULATOR_URL"}
    env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    s = Stack(env=env, log_dir=log_dir)
    s.start_redis()
    sim_env = {"HERMES_SIM_MODELS": json.dumps([{"name": CUSTOM_MODEL, "context_window": CUSTOM_WINDOW,
                                                  "max_output": 8192}])}
    sim_port = free_port()
    s._spawn("simulator", [sys.executable, "-m", "simulator", "--host", "127.0.0.1",
                           "--port", str(sim_port)], sim_env)
    wait_for_port(sim_port, s.procs["simulator"], what="simulator")
    s.sim_url = f"http://127.0.0.1:{sim_port}"
    s.env["ANTHROPIC_API_KEY"] = FAKE_KEY
    s.env["ANTHROPIC_BASE_URL"] = s.sim_url
    try:
        s.start_worker(name="routed-worker")
        s.web_port = s.start_web(name="routed-web")
        yield s
    finally:
        s.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        for log in log_dir.glob("*.log"):
            (ARTIFACTS / f"routed-{log.name}").write_bytes(log.read_bytes())


def login(page, base: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def open_socket(page) -> None:
    page.wait_for_function("() => { const ws = document.querySelector('[ws-connect]'); "
                           "return ws && ws['htmx-internal-data'] && ws['htmx-internal-data'].webSocket "
                           "&& ws['htmx-internal-data'].webSocket.socket.readyState === 1; }", timeout=30_000)


def send(page, text: str) -> None:
    page.fill("#composer-text", text)
    page.press("#composer-text", "Enter")


def new_conversation(page, base: str, choice: str | None = None) -> Conversation:
    page.goto(base + "/")
    if choice:
        page.select_option("#new-model", choice)
    page.click("#new-conversation")
    page.wait_for_url(re.compile(r".*/conversations/[0-9a-f-]+/$"))
    conversation = Conversation.objects.get(id=page.url.rstrip("/").rsplit("/", 1)[-1])
    open_socket(page)
    return conversation


def chat_tool_and_compress(page, conversation: Conversation) -> None:
    send(page, "reply with 8 words. " + PADDING)
    page.wait_for_selector("[data-role=assistant] >> text=You said", timeout=30_000)
    wait_turn(Turn.objects.filter(conversation=conversation).latest("id"))
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text("the deploy key rotates every 30 days\n")
    send(page, "read notes.txt")
    page.wait_for_selector("details.tool-call >> text=read_file", timeout=30_000)
    page.wait_for_selector("[data-role=tool] >> text=read_file", timeout=30_000)
    assert wait_turn(Turn.objects.filter(conversation=conversation).latest("id")).status == "done"
    session = session_active(conversation)
    for i in range(6):
        message_append(session=session, role="user", content=f"About module {i}: " + "requirement " * 200)
        message_append(session=session, role="assistant", content=f"Module {i} plan: " + "decision " * 200)
    page.click("#compress-button")
    page.wait_for_selector("#event-feed li[data-status=compressed]", timeout=60_000)


def expected_cost(call: ApiCall, model: str) -> Decimal:
    p = get_model(model).price
    usd = (call.input_tokens * p.input + call.output_tokens * p.output + call.cache_read_tokens * p.cache_read
           + call.cache_write_5m_tokens * p.cache_write_5m + call.cache_write_1h_tokens * p.cache_write_1h) / 1e6
    return Decimal(str(round(usd, 6)))


def test_a_key_serves_a_real_claude_model_with_caching_at_its_prices(live, routed, alice):
    base = f"http://127.0.0.1:{routed.web_port}"
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        login(page, base)
        assert page.input_value("#new-model") == "anthropic:claude-sonnet-4-6"
        assert "sim-claude" not in page.inner_html("#new-model")
        conversation = new_conversation(page, base)
        assert (conversation.provider, conversation.model) == ("anthropic", "claude-sonnet-4-6")
        assert page.inner_text("#route").startswith("Claude Sonnet 4.6 · Anthropic")
        assert FAKE_KEY not in page.content()

        chat_tool_and_compress(page, conversation)
        page.screenshot(path=str(ARTIFACTS / "route-anthropic.png"), full_page=True)
        assert "Prompt caching: ENABLED (Claude via native Anthropic" in page.inner_text("#cache-panel")
        assert errors == []

    calls = list(ApiCall.objects.filter(conversation=conversation, purpose="agent", error=""))
    assert len(calls) >= 3
    assert {(c.provider, c.model) for c in calls} == {("anthropic", "claude-sonnet-4-6")}
    assert sum(c.cache_read_tokens for c in calls) > 0  # the padded prefix was written, then read
    for call in calls:
        assert call.cost == expected_cost(call, "claude-sonnet-4-6")
    event = CompressionEvent.objects.get(conversation=conversation, status="compressed")
    assert event.aux_model == "claude-sonnet-4-6"


def test_the_simulator_enforces_the_real_models_output_cap(live, routed):
    import anthropic

    client = anthropic.Anthropic(api_key=FAKE_KEY, base_url=routed.sim_url, max_retries=0, timeout=30)
    cap = get_model("claude-haiku-4-5").max_output
    with pytest.raises(anthropic.BadRequestError) as exc:
        client.messages.create(model="claude-haiku-4-5", max_tokens=cap + 1,
                               messages=[{"role": "user", "content": "hello"}])
    assert str(cap) in str(exc.value)


def test_a_custom_openai_compatible_model_chats_calls_tools_and_reports_usage(live, routed, alice):
    settings_store.save_group("model", {"provider": "custom", "model": CUSTOM_MODEL, "context_length": CUSTOM_WINDOW,
                                        "base_url": routed.sim_url + "/v1", "api_key": "sk-local-endpoint"})
    base = f"http://127.0.0.1:{routed.web_port}"
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        login(page, base)
        assert page.input_value("#new-model") == f"custom:{CUSTOM_MODEL}"  # the admin's default route
        conversation = new_conversation(page, base, f"custom:{CUSTOM_MODEL}")
        assert page.inner_text("#route") == f"{CUSTOM_MODEL} · Custom endpoint (127.0.0.1:{routed.sim_url.rsplit(':', 1)[1]})"
        assert int(page.get_attribute("#gauge", "data-window")) == CUSTOM_WINDOW
        chat_tool_and_compress(page, conversation)
        page.screenshot(path=str(ARTIFACTS / "route-custom.png"), full_page=True)
        assert "sk-local-endpoint" not in page.content()

    calls = list(ApiCall.objects.filter(conversation=conversation, purpose="agent", error=""))
    assert {(c.provider, c.model) for c in calls} == {("custom", CUSTOM_MODEL)}
    assert all(c.input_tokens > 0 and c.output_tokens > 0 for c in calls)
    assert any(c.stop_reason == "tool_use" for c in calls)
    assert Message.objects.filter(conversation=conversation, role="tool", name="read_file").exists()


def test_the_picker_and_the_explicit_switch_with_its_cold_cache_warning(live, routed, alice):
    base = f"http://127.0.0.1:{routed.web_port}"
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        login(page, base)
        conversation = new_conversation(page, base, "anthropic:claude-haiku-4-5")
        assert "Claude Haiku 4.5" in page.inner_text("#route")
        send(page, "hello before the switch")
        page.wait_for_selector("[data-role=assistant] >> text=You said", timeout=30_000)
        wait_turn(Turn.objects.filter(conversation=conversation).latest("id"))

        page.click("#model-switch summary")
        page.select_option("#switch-model", "anthropic:claude-opus-4-8")
        page.click("#model-switch-button")
        warning = page.wait_for_selector("#model-switch-confirm", timeout=10_000)
        text = warning.inner_text()
        assert "prompt cache starts cold" in text
        assert page.inner_text("[data-role=new-window]") == "1,000,000"
        assert page.inner_text("[data-role=new-threshold]") == f"{(1_000_000 - conversation.max_tokens) // 2:,}"
        page.screenshot(path=str(ARTIFACTS / "route-switch-warning.png"))
        conversation.refresh_from_db()
        assert conversation.model == "claude-haiku-4-5"

        page.click("#model-switch-confirm-button")
        page.wait_for_function("() => document.querySelector('#route').textContent.includes('Claude Opus 4.8')",
                               timeout=15_000)
        open_socket(page)
        assert "Model switched from claude-haiku-4-5" in page.inner_text("[data-role=model-switch]")
        assert int(page.get_attribute("#gauge", "data-window")) == 1_000_000
        send(page, "hello after the switch")
        wait_for(lambda: ApiCall.objects.filter(conversation=conversation, model="claude-opus-4-8").exists(),
                 timeout=30, what="a call on the new model")
    after = ApiCall.objects.filter(conversation=conversation, model="claude-opus-4-8").first()
    assert after.cache_read_tokens == 0  # a new model starts with a cold cache
    assert after.cost == expected_cost(after, "claude-opus-4-8")

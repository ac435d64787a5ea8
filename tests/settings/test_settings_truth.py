"""Settings that used to be accepted and then quietly do something else: each is refused with a
clear error and nothing saved (admin form and config.yaml import alike), the auxiliary page's
*Test connection* calls the endpoint with the values as typed, the context engine is a choice of
the engines this installation has, and a failing auxiliary model is said out loud at run time."""
from __future__ import annotations

import sys
import textwrap

import pytest
from django.test import Client
from django.urls import reverse

from compression import settings_store
from compression.core import registry
from compression.models import SettingsChange
from compression.yaml_io import ConfigImportError, import_config

from .conftest import change_url, form_data, snapshot

pytestmark = pytest.mark.django_db

TEST_URL = reverse("admin:compression_auxiliarysettings_test", args=[1])
STORED_KEY = "sk-stored-TRUTH-4242"


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture(scope="module")
def sim():
    """A real simulator over HTTP that takes the stored key and the simulator route's, no other
    (no simulator runs in the fast tier)."""
    from llm.providers import SIMULATOR_API_KEY
    from simulator import start_simulator

    server = start_simulator(api_keys=[STORED_KEY, SIMULATOR_API_KEY], env={})
    yield server
    server.stop()


def refused(response, field: str) -> str:
    assert response.status_code == 200, "the form should come back with its errors"
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    return errors[field][0]


# --- The auxiliary model ------------------------------------------------------------------------

AUX_REFUSED = [
    ({"provider": "simulator", "model": "no-such-model-9000"}, "'no-such-model-9000' is not a model the offline "
                                                               "simulator offers"),
    ({"provider": "auto", "model": "no-such-model-9000"}, "'no-such-model-9000' is not a model the main route"),
    ({"provider": "anthropic", "model": "sim-claude-200k"}, "'sim-claude-200k' is not a model Anthropic's API offers"),
]


@pytest.mark.parametrize("posted, text", AUX_REFUSED, ids=[p["provider"] for p, _ in AUX_REFUSED])
def test_it_refuses_an_auxiliary_model_its_route_does_not_offer(staff_client, posted, text):
    before = snapshot()
    message = refused(staff_client.post(change_url("auxiliary"), form_data("auxiliary", **posted)), "model")
    assert message.startswith("auxiliary.compression.model: ") and text in message
    assert "fall back to the main model" in message and "sim-claude-200k" in message  # what would work
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_it_accepts_a_catalogue_model_and_any_model_on_a_route_without_a_catalogue(staff_client):
    posted = {"provider": "simulator", "model": "sim-claude-200k"}
    assert staff_client.post(change_url("auxiliary"), form_data("auxiliary", **posted)).status_code == 302
    posted = {"provider": "custom", "model": "my-own-summariser", "base_url": "http://127.0.0.1:9000/v1"}
    assert staff_client.post(change_url("auxiliary"), form_data("auxiliary", **posted)).status_code == 302
    assert settings_store.current().auxiliary.model == "my-own-summariser"


# --- Test connection ----------------------------------------------------------------------------


def test_the_auxiliary_page_offers_test_connection(staff_client):
    page = staff_client.get(change_url("auxiliary")).content.decode()
    assert 'id="aux-test-connection"' in page and f'formaction="{TEST_URL}"' in page


def test_test_connection_reports_the_error_of_a_closed_port_and_saves_nothing(staff_client):
    settings_store.save_group("auxiliary", {"api_key": STORED_KEY})
    before = snapshot()
    posted = form_data("auxiliary", provider="custom", model="my-own-summariser",
                       base_url="http://127.0.0.1:9/v1", timeout="5", api_key="sk-typed-SECRET-77")
    response = staff_client.post(TEST_URL, posted)
    assert response.status_code == 200
    result = response.context["connection_test"]
    assert not result.ok and "ProviderUnavailableError" in result.text
    assert result.seconds < 15
    page = response.content.decode()
    assert 'id="connection-test" data-ok="false"' in page and "Connection test failed" in page
    assert 'value="my-own-summariser"' in page  # the form as typed, not the stored values
    assert "sk-typed-SECRET-77" not in page and STORED_KEY not in page
    assert f'action="{change_url("auxiliary")}"' in page  # Save still saves on the change page
    assert snapshot() == before
    assert not SettingsChange.objects.exclude(field="api_key").exists()


def test_test_connection_calls_the_endpoint_with_the_stored_key_when_the_field_is_blank(staff_client, sim):
    settings_store.save_group("auxiliary", {"api_key": STORED_KEY})
    before = snapshot()
    posted = form_data("auxiliary", provider="custom", model="sim-claude-200k", base_url=sim.base_url + "/v1")
    response = staff_client.post(TEST_URL, posted)
    result = response.context["connection_test"]
    assert result.ok, result.text
    assert result.text and result.model == "sim-claude-200k" and result.route.startswith("custom at ")
    page = response.content.decode()
    assert 'data-ok="true"' in page and "Connection test passed" in page and "The model answered" in page
    assert STORED_KEY not in page
    assert snapshot() == before
    # A typed key is the one used: the simulator refuses it.
    response = staff_client.post(TEST_URL, {**posted, "api_key": "sk-typed-WRONG-1"})
    result = response.context["connection_test"]
    assert not result.ok and "AuthenticationError" in result.text
    assert "sk-typed-WRONG-1" not in response.content.decode()


def test_test_connection_through_the_simulator_route(staff_client, sim, settings):
    settings.HERMES_SIMULATOR_URL = sim.base_url
    posted = form_data("auxiliary", provider="simulator", model="sim-claude-64k")
    result = staff_client.post(TEST_URL, posted).context["connection_test"]
    assert result.ok, result.text
    assert result.route == f"simulator at {sim.base_url}" and result.model == "sim-claude-64k"


def test_test_connection_shows_the_form_errors_instead_of_calling(staff_client):
    posted = form_data("auxiliary", provider="simulator", model="no-such-model-9000")
    response = staff_client.post(TEST_URL, posted)
    assert response.context["connection_test"] is None
    page = response.content.decode()
    assert "The connection was not tested" in page and "is not a model the offline simulator offers" in page


def test_test_connection_is_a_post_with_csrf_for_staff_who_may_change(admin_user, carol):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get(TEST_URL).status_code == 405
    assert client.post(TEST_URL, form_data("auxiliary")).status_code == 403  # no CSRF token
    token_page = client.get(change_url("auxiliary"))
    token = token_page.context["csrf_token"]
    posted = form_data("auxiliary", provider="custom", model="m", base_url="http://127.0.0.1:9/v1", timeout="5")
    assert client.post(TEST_URL, {**posted, "csrfmiddlewaretoken": str(token)}).status_code == 200
    carol_client = Client()
    carol_client.force_login(carol)  # staff without the change permission
    assert carol_client.post(TEST_URL, posted).status_code == 403
    anonymous = Client().post(TEST_URL, posted)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


# --- The context engine -------------------------------------------------------------------------

GOOD, BROKEN = "truth_good_engine", "truth_broken_engine"


@pytest.fixture
def plugins(tmp_path):
    """A plugin folder with one engine that loads and one that does not."""
    (tmp_path / GOOD).mkdir()
    (tmp_path / GOOD / "__init__.py").write_text(textwrap.dedent("""
        from compression.core.compressor import ContextCompressor

        class Good(ContextCompressor):
            name = "truth_good_engine"
    """))
    (tmp_path / BROKEN).mkdir()
    (tmp_path / BROKEN / "__init__.py").write_text("import truth_missing_dependency\n")
    (tmp_path / "notes").mkdir()  # no __init__.py: not a plugin
    registry.set_plugin_dir(tmp_path)
    yield tmp_path
    registry.set_plugin_dir(None)
    for name in [m for m in sys.modules if GOOD in m or BROKEN in m]:
        del sys.modules[name]


def test_the_engine_is_a_choice_of_the_engines_this_installation_has(staff_client, plugins):
    response = staff_client.get(change_url("context"))
    form = response.context["adminform"].form
    assert [value for value, _ in form.fields["engine"].widget.choices] == ["compressor", "lcm", GOOD]
    page = response.content.decode()
    assert '<select name="engine"' in page and f'<option value="{GOOD}">' in page
    # The plugin that failed to load is named, with its error.
    assert 'id="engine-plugin-failures"' in page and f'data-plugin="{BROKEN}"' in page
    assert "ModuleNotFoundError: No module named &#x27;truth_missing_dependency&#x27;" in page
    assert staff_client.post(change_url("context"), {"engine": GOOD}).status_code == 302
    assert settings_store.current().context.engine == GOOD


def test_the_bundled_plugin_is_offered(staff_client):
    choices = staff_client.get(change_url("context")).context["adminform"].form.fields["engine"].widget.choices
    assert ("recent_focus", "recent_focus") in choices


@pytest.mark.parametrize("engine, text", [
    ("magic", "context.engine: 'magic' is not an engine this installation has"),
    (BROKEN, f"context.engine: the plugin '{BROKEN}' failed to load (ModuleNotFoundError: No module named "
             "'truth_missing_dependency')"),
])
def test_it_refuses_an_engine_this_installation_does_not_have(staff_client, plugins, engine, text):
    before = snapshot()
    message = refused(staff_client.post(change_url("context"), {"engine": engine}), "engine")
    assert text in message and f"Choose one of: compressor, lcm, {GOOD}." in message
    assert "silently use the built-in compressor" in message
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_a_stored_engine_that_is_not_installed_says_what_runs_instead(staff_client):
    settings_store.save_group("context", {"engine": "magic"})  # stored before this check existed
    choices = dict(staff_client.get(change_url("context")).context["adminform"].form.fields["engine"].widget.choices)
    assert choices["magic"] == "magic (not available: the built-in compressor runs instead)"


# --- config.yaml: the same checks, field by field -------------------------------------------------

IMPORT_REFUSED = [
    ("model:\n  model: no-such-model\n", 2, "model.model: 'no-such-model' is not in the model catalogue"),
    ("model: no-such-model\n", 1, "model.model: 'no-such-model' is not in the model catalogue"),
    ("model:\n  max_tokens: 8000\n  model: sim-claude-32k\n", 3,
     "model.context_length: sim-claude-32k has a 32,000-token window"),
    ("context:\n  engine: magic\n", 2, "context.engine: 'magic' is not an engine this installation has"),
    ("auxiliary:\n  compression:\n    provider: simulator\n    model: no-such-model-9000\n", 4,
     "auxiliary.compression.model: 'no-such-model-9000' is not a model the offline simulator offers"),
    ("auxiliary:\n  compression:\n    model: sim-claude-32k\n", 3,
     "auxiliary.compression.model: sim-claude-32k has a 32,000-token window"),
]


@pytest.mark.parametrize("text, line, message", IMPORT_REFUSED, ids=[m.split(":")[0] for _, _, m in IMPORT_REFUSED])
def test_the_import_refuses_what_the_forms_refuse_naming_the_line(text, line, message):
    before = snapshot()
    with pytest.raises(ConfigImportError) as exc:
        import_config(text)
    assert exc.value.line == line
    assert message in exc.value.errors[0][1]
    assert f"line {line}: " in str(exc.value)
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_one_bad_key_refuses_the_whole_file():
    before = snapshot()
    text = textwrap.dedent("""
        compression:
          threshold: 0.7
        context:
          engine: lcm
        auxiliary:
          compression:
            provider: simulator
            model: no-such-model-9000
        model:
          model: no-such-model
    """).lstrip("\n")
    with pytest.raises(ConfigImportError) as exc:
        import_config(text, dry_run=True)
    assert [line for line, _ in exc.value.errors] == [8, 10]
    with pytest.raises(ConfigImportError):
        import_config(text)
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_the_import_page_shows_the_refusal_with_its_line(staff_client):
    response = staff_client.post(reverse("admin:compression_config_import"), {"text": "context:\n  engine: magic\n"})
    assert response.status_code == 200
    assert response.context["import_errors"][0][0] == 2
    assert "is not an engine this installation has" in response.content.decode()
    assert settings_store.current().context.engine == "compressor"


def test_the_import_accepts_what_the_forms_accept_and_warns_about_unknown_keys():
    result = import_config(textwrap.dedent("""
        context:
          engine: recent_focus
          flavour: strong
        auxiliary:
          compression:
            provider: custom
            model: my-own-summariser
            base_url: http://127.0.0.1:9000/v1
        model:
          model: claude-sonnet-4-6
          provider: anthropic
        surprise: {}
    """).lstrip("\n"))
    assert result.warnings == ["line 3: unknown key context.flavour (ignored)", "line 12: unknown section surprise "
                                                                                "(ignored)"]
    config = settings_store.current()
    assert (config.context.engine, config.auxiliary.model, config.model.model) == (
        "recent_focus", "my-own-summariser", "claude-sonnet-4-6")


# --- At run time: a failing auxiliary model is said out loud --------------------------------------


def _fill(conversation, pairs: int = 12, size: int = 400) -> None:
    from sessions.services.context import message_append, session_active

    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * size)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * size)


def test_two_fallbacks_in_a_row_raise_a_notice_and_the_feed_and_dashboard_say_why(alice, admin_client, sim,
                                                                                   settings):
    from sessions.models import Conversation
    from sessions.services.compaction import compression_inline
    from sessions.services.context import session_start
    from tests.web.pushes import Page

    settings.HERMES_SIMULATOR_URL = sim.base_url
    sim.sim.reset()
    # Stored as it could be before the form checked it (or edited in the database by hand).
    settings_store.save_group("auxiliary", {"provider": "simulator", "model": "no-such-model-9000"})
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=conversation)
    page = Page(conversation)

    _fill(conversation)
    first = compression_inline(conversation_id=conversation.id, trigger="preflight", force=True).event
    assert first.status == "compressed" and "no-such-model-9000" in first.aux_failure
    pushed = page.html()
    assert "the main model wrote this summary" in pushed  # the feed, pushed
    assert "in a row" not in pushed and 'id="aux-fallback-notice"' not in pushed  # one fallback: no notice yet

    _fill(conversation)
    second = compression_inline(conversation_id=conversation.id, trigger="preflight", force=True).event
    assert second.status == "compressed" and second.aux_failure
    pushed = page.html()
    assert 'data-event="notice"' in pushed and "2 compressions in a row: the auxiliary model failed: " in pushed
    assert "the main model wrote these summaries" in pushed and "no-such-model-9000" in pushed

    client = Client()
    client.force_login(alice)
    feed = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert feed.count("Fallback: the auxiliary model failed: ") == 2
    assert feed.count("; the main model wrote this summary.") == 2
    assert 'id="aux-fallback-notice"' in feed and "Two compressions in a row: the auxiliary model failed" in feed

    dashboard = admin_client.get("/staff/").content.decode()
    assert 'id="aux-fallback-streak"' in dashboard and "The last 2 compressions in a row fell back" in dashboard
    assert "Latest: the auxiliary model failed: " in dashboard and "; the main model wrote these summaries." in dashboard
    assert "no-such-model-9000" in dashboard

"""``context.recall_tools``: on by default, validated like every setting (admin form and config.yaml
alike, audited), and read per turn: a saved change decides whether the next turn's agent can call
context_search, with no restart. The tools counted where there is no conversation (list rows,
gateway hygiene) are the ones a turn's engine offers, setting on or off; lcm offers them always."""
from __future__ import annotations

import textwrap

import pytest
import yaml

from compression import settings_store
from compression.core.config import ConfigValueError, RuntimeConfig, build_group, validate_value
from compression.models import SettingsChange
from compression.yaml_io import ConfigImportError, export_config, import_config
from sessions.models import Conversation, Message
from sessions.services import recall, runtime
from sessions.services.context import message_append, session_start
from sessions.services.turns import turn_submit

from .conftest import change_url, form_data, snapshot

pytestmark = pytest.mark.django_db

ASK = "Search the history for the staging gateway port."


@pytest.fixture(scope="module")
def sim():
    """One real simulator over HTTP for the turns below."""
    from simulator import start_simulator

    server = start_simulator()
    yield server
    server.stop()


@pytest.fixture
def eager(sim, settings, django_db_blocker):
    """The simulator route points at `sim`; Celery runs tasks in the calling thread; the message
    index exists (a migration after it rebuilds the table on SQLite, dropping its triggers)."""
    from hermes_web.celery import app

    with django_db_blocker.unblock():
        recall.index_ensure_after_migrate(sender=None, using="default")
    settings.HERMES_SIMULATOR_URL = sim.base_url
    sim.sim.reset()
    app.conf.task_always_eager = True
    yield sim
    app.conf.task_always_eager = False


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_it_is_on_by_default():
    assert RuntimeConfig().context.recall_tools is True
    assert settings_store.current().context.recall_tools is True


@pytest.mark.parametrize("value, expected", [("off", False), ("no", False), (0, False), ("false", False),
                                             ("yes", True), ("on", True), (1, True), (True, True)])
def test_it_reads_the_usual_spellings_of_a_boolean(value, expected):
    assert build_group("context", {"recall_tools": value}).recall_tools is expected


@pytest.mark.parametrize("value, shown", [("sometimes", "'sometimes'"), (2, "2"), ("", None), (None, None)])
def test_anything_else_is_refused_naming_the_setting_and_its_valid_values(value, shown):
    with pytest.raises(ConfigValueError) as exc:
        validate_value("context", "recall_tools", value)
    got = f"; got {shown}" if shown else "; it is empty"
    assert str(exc.value) == f"context.recall_tools: must be true or false{got}"


def test_the_admin_page_explains_it_and_a_save_is_audited(staff_client, admin_user):
    page = staff_client.get(change_url("context")).content.decode()
    assert 'name="recall_tools"' in page and "lcm always offers them" in page
    response = staff_client.post(change_url("context"), form_data("context", recall_tools=False))
    assert response.status_code == 302
    assert settings_store.current().context.recall_tools is False
    change = SettingsChange.objects.get(group="context", field="recall_tools")
    assert (change.old_value, change.new_value, change.user, change.source) == ("true", "false", admin_user, "admin")


def test_config_yaml_imports_and_exports_it():
    result = import_config("context:\n  recall_tools: off\n")
    assert result.changes == {"context": {"recall_tools": ("true", "false")}}
    assert settings_store.current().context.recall_tools is False
    assert yaml.safe_load(export_config())["context"] == {"engine": "compressor", "recall_tools": False}


def test_config_yaml_refuses_a_bad_value_naming_its_line_and_changes_nothing():
    before = snapshot()
    text = textwrap.dedent("""\
        context:
          engine: lcm
          recall_tools: sometimes
        """)
    with pytest.raises(ConfigImportError) as exc:
        import_config(text)
    assert exc.value.errors == [(3, "context.recall_tools must be true or false; got 'sometimes'")]
    assert snapshot() == before


@pytest.mark.parametrize("engine, on, offered", [("compressor", True, True), ("compressor", False, False),
                                                 ("lcm", True, True), ("lcm", False, True)])
def test_the_tools_counted_without_a_conversation_are_the_ones_a_turn_offers(alice, engine, on, offered):
    settings_store.save_group("context", {"engine": engine, "recall_tools": on})
    cfg = runtime.current_config()
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    turn_engine = runtime.engine_build(conversation=conversation, session=session_start(conversation=conversation),
                                       cfg=cfg)
    schemas = turn_engine.get_tool_schemas()
    assert [t["name"] for t in schemas] == (["context_search", "context_expand"] if offered else [])
    assert runtime.engine_for_tools(cfg).get_tool_schemas() == schemas


def test_a_saved_change_applies_on_the_next_turn_without_a_restart(alice, eager, staff_client,
                                                                   django_capture_on_commit_callbacks):
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=conversation)
    message_append(session=session, role="user", content="The staging gateway listens on port 8443.")
    message_append(session=session, role="assistant", content="Noted.")

    def turn() -> list[str]:
        """The tools the agent called in one more turn asking to search the history."""
        newest = Message.objects.filter(conversation=conversation).order_by("-id").values_list("id", flat=True)[0]
        with django_capture_on_commit_callbacks(execute=True):
            submitted, _ = turn_submit(user=alice, conversation_id=conversation.id, text=ASK)
        submitted.refresh_from_db()
        assert submitted.status == "done", submitted.error
        return list(Message.objects.filter(conversation=conversation, role="tool", id__gt=newest)
                    .values_list("name", flat=True))

    assert turn() == ["context_search"]  # on by default
    staff_client.post(change_url("context"), form_data("context", recall_tools=False))
    assert "context_search" not in turn()  # the very next turn, same process
    staff_client.post(change_url("context"), form_data("context", recall_tools=True))
    assert turn() == ["context_search"]

"""Hostile or oversized settings input gets a clear refusal, never an exception or a stall.

A config.yaml alias bomb, nesting deep enough to exhaust the parser, text over the 256 KB cap, and
numbers too large for any database column, through each door: the core validator, the YAML import
(function and command) and the admin forms.
"""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from compression.core.config import GROUPS, SPECS, YAML_SECTIONS, ConfigValueError, validate_value, yaml_key
from compression.forms import ConfigImportForm
from compression.models import SettingsChange
from compression.yaml_io import MAX_CONFIG_BYTES, ConfigImportError, import_config, parse_config_yaml

from .conftest import change_url, form_data, snapshot

HUGE = 10**30
INT_FIELDS = [(g, n) for g in GROUPS for n, spec in SPECS[g].items() if spec.kind in ("int", "optional_int")]
INT_IDS = [f"{g}.{n}" for g, n in INT_FIELDS]


def alias_bomb(depth: int = 8) -> str:
    """A few hundred bytes that expand to 9**(depth + 1) strings when the aliases are followed."""
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x]"]
    for i in range(1, depth + 1):
        lines.append(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]")
    lines += ["compression:", f"  protect_last_n: *a{depth}"]
    return "\n".join(lines) + "\n"


def core_message(group: str, name: str, value) -> str:
    with pytest.raises(ConfigValueError) as exc:
        validate_value(group, name, value)
    return exc.value.message


def yaml_setting(group: str, name: str, value: str) -> str:
    """config.yaml text setting one field, the field on the last line."""
    path = YAML_SECTIONS[group]
    return "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(path)) + f"{'  ' * len(path)}{name}: {value}\n"


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


# --- Aliases and nesting ------------------------------------------------------------------------


def test_it_refuses_a_yaml_alias_bomb_naming_the_first_alias_line():
    text = alias_bomb()
    assert len(text.encode()) < 500
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml(text)
    assert exc.value.errors == [(2, "YAML aliases (*a0) are not accepted in config.yaml: write the value out")]


@pytest.mark.django_db
def test_it_imports_nothing_from_a_file_with_an_alias():
    before = snapshot()
    with pytest.raises(ConfigImportError, match=r"line 3: YAML aliases \(\*n\) are not accepted"):
        import_config("agent:\n  max_iterations: &n 12\n  terminal_timeout: *n\n")
    assert snapshot() == before


def test_it_still_accepts_an_anchor_that_no_alias_uses():
    assert parse_config_yaml("agent:\n  max_iterations: &n 12\n").values == {"agent": {"max_iterations": 12}}


def test_it_refuses_nesting_deep_enough_to_exhaust_the_parser():
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml("compression:\n  threshold: " + "[" * 5000 + "\n")
    assert exc.value.errors == [(2, "the YAML is nested more than 32 levels deep")]


@pytest.mark.django_db
def test_it_shows_the_nesting_error_in_the_admin_instead_of_failing(staff_client):
    before = snapshot()
    response = staff_client.post(reverse("admin:compression_config_import"),
                                 {"text": "unknown:\n  deep: " + "[" * 5000 + "\n"})
    assert response.status_code == 200
    assert "line 2: the YAML is nested more than 32 levels deep" in response.content.decode()
    assert snapshot() == before


def test_it_shows_a_short_excerpt_of_a_huge_nested_value():
    value = ["x"] * 9
    for _ in range(8):
        value = [value] * 9  # shared references: cheap to build, 387 million strings when printed
    message = core_message("compression", "protect_last_n", value)
    assert message.startswith("must be a whole number ≥ 1; got [[[")
    assert len(message) < 120


# --- Text over the cap --------------------------------------------------------------------------


def test_it_refuses_pasted_text_over_256_kb_counted_in_bytes():
    text = "compression:\n  threshold: 0.7\n# " + "é" * (ConfigImportForm.MAX_BYTES // 2) + "\n"
    assert len(text) < ConfigImportForm.MAX_BYTES < len(text.encode())  # under the cap in characters only
    form = ConfigImportForm(data={"text": text})
    assert not form.is_valid()
    assert form.non_field_errors() == ["The pasted text is larger than 256 KB."]


@pytest.mark.django_db
def test_it_refuses_pasted_text_over_256_kb_in_the_admin_and_imports_nothing(staff_client):
    before = snapshot()
    text = "compression:\n  threshold: 0.7\n# " + "x" * ConfigImportForm.MAX_BYTES + "\n"
    response = staff_client.post(reverse("admin:compression_config_import"), {"text": text})
    assert response.status_code == 200
    assert "The pasted text is larger than 256 KB." in response.content.decode()
    assert snapshot() == before


def test_it_accepts_pasted_text_of_exactly_256_kb():
    head = "compression:\n  threshold: 0.7\n# "
    text = head + "x" * (ConfigImportForm.MAX_BYTES - len(head))
    assert len(text.encode()) == ConfigImportForm.MAX_BYTES
    form = ConfigImportForm(data={"text": text})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["yaml_text"] == text


def test_it_refuses_text_over_256_kb_at_the_import_itself():
    text = "compression:\n  threshold: 0.7\n# " + "x" * MAX_CONFIG_BYTES + "\n"
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml(text)
    assert exc.value.errors == [(None, "the file is larger than 256 KB")]


@pytest.mark.django_db
def test_it_refuses_a_file_over_256_kb_in_the_import_command(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("compression:\n  threshold: 0.7\n# " + "x" * MAX_CONFIG_BYTES + "\n")
    before = snapshot()
    with pytest.raises(CommandError, match="nothing imported. the file is larger than 256 KB"):
        call_command("import_config", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert snapshot() == before


# --- Numbers too large to store -----------------------------------------------------------------


def test_it_names_the_storable_maximum_for_a_huge_integer_in_an_open_range():
    assert core_message("compression", "protect_last_n", HUGE) == (
        "must be a whole number ≥ 1 and at most 2,147,483,647; got 1000000000000000000000000000000")
    assert core_message("model", "context_length", 2**31) == (
        "must be empty or ≥ 64,000 and at most 2,147,483,647; got 2147483648")


def test_it_gives_a_bounded_range_its_own_wording_for_a_huge_integer():
    assert core_message("compression", "max_compression_attempts", HUGE) == (
        "must be a whole number 1–10; got 1000000000000000000000000000000")


@pytest.mark.parametrize("group, name", INT_FIELDS, ids=INT_IDS)
@pytest.mark.parametrize("value", [HUGE, str(HUGE), 2**31, 10**5000, "9" * 5000],
                         ids=["int", "text", "2**31", "int-5001-digits", "text-5000-digits"])
def test_it_refuses_every_integer_too_large_to_store(group, name, value):
    message = core_message(group, name, value)
    assert SPECS[group][name].valid in message
    assert len(message) < 200


def test_it_shows_a_number_too_long_to_print_by_its_size():
    assert core_message("compression", "protect_last_n", 10**5000).endswith("; got a number of about 5,001 digits")


@pytest.mark.parametrize("group, name", INT_FIELDS, ids=INT_IDS)
def test_it_accepts_the_largest_storable_integer_where_the_range_allows_it(group, name):
    if SPECS[group][name].check(2**31 - 1):
        assert validate_value(group, name, 2**31 - 1) == 2**31 - 1


def test_it_refuses_a_float_setting_given_a_number_too_large_for_a_float():
    assert core_message("compression", "threshold", 10**400).startswith("must be a number 0.0–1.0 (exclusive of 0)")


@pytest.mark.django_db
@pytest.mark.parametrize("group, name", INT_FIELDS, ids=INT_IDS)
def test_it_refuses_a_huge_integer_in_yaml_on_its_line(group, name):
    before = snapshot()
    with pytest.raises(ConfigImportError) as exc:
        import_config(yaml_setting(group, name, str(HUGE)))
    assert exc.value.errors == [(len(YAML_SECTIONS[group]) + 1, f"{yaml_key(group, name)} {core_message(group, name, HUGE)}")]
    assert snapshot() == before and not SettingsChange.objects.exists()


@pytest.mark.django_db
def test_it_refuses_a_huge_float_in_yaml_on_its_line():
    with pytest.raises(ConfigImportError) as exc:
        import_config("compression:\n  threshold: 1" + "0" * 400 + "\n")
    [(line, message)] = exc.value.errors
    assert line == 2 and message.startswith("compression.threshold must be a number 0.0–1.0 (exclusive of 0); got a")


@pytest.mark.django_db
def test_it_refuses_an_integer_too_long_to_read_in_yaml_on_its_line():
    before = snapshot()
    with pytest.raises(ConfigImportError) as exc:
        import_config("agent:\n  max_iterations: 10\ncompression:\n  protect_last_n: " + "9" * 5000 + "\n")
    assert exc.value.errors == [(4, "a whole number of more than 4300 digits cannot be read")]
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("group, name", INT_FIELDS, ids=INT_IDS)
def test_it_gives_the_range_error_for_a_huge_integer_in_each_admin_form(staff_client, group, name):
    before = snapshot()
    response = staff_client.post(change_url(group), form_data(group, **{name: str(HUGE)}))
    assert response.status_code == 200  # the form comes back with its error, not a server error
    errors = response.context["adminform"].form.errors
    assert errors == {name: [core_message(group, name, HUGE)]}
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_it_refuses_more_values_than_any_config_yaml_holds():
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml("compression:\n  protect_last_n: [" + ",".join(["1"] * 10_000) + "]\n")
    assert exc.value.errors == [(2, "the YAML holds more than 10,000 keys and values")]


def test_it_reads_a_config_of_a_few_thousand_values():
    text = "compression:\n  threshold: 0.6\n" + "".join(f"plugin_{i}:\n  enabled: true\n" for i in range(2000))
    parsed = parse_config_yaml(text)
    assert parsed.values == {"compression": {"threshold": 0.6}} and len(parsed.warnings) == 2000


def test_it_refuses_text_that_cannot_be_utf_8():
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml("compression:\n  threshold: \udcff\n")
    assert exc.value.errors == [(None, "the file is not UTF-8 text")]


@pytest.mark.django_db
def test_it_gives_a_field_error_for_an_integer_too_long_to_read_in_an_admin_form(staff_client):
    before = snapshot()
    response = staff_client.post(change_url("compression"), form_data("compression", protect_last_n="9" * 5000))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"protect_last_n": ["Enter a whole number: ≥ 1."]}
    assert snapshot() == before

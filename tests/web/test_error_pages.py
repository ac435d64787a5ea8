"""Errors get the product's own pages, never Django's debug page (which lists every URL pattern)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import path

ROOT = Path(__file__).resolve().parent.parent.parent


def boom(request):
    raise RuntimeError("a bug")


urlpatterns = [path("boom", boom)]


@pytest.mark.django_db
def test_a_missing_page_is_the_friendly_404(client, alice):
    client.force_login(alice)
    response = client.get("/no/such/page")
    body = response.content.decode()
    assert response.status_code == 404
    assert 'id="not-found"' in body and "Back to your conversations" in body
    assert "URLconf" not in body and "urlpatterns" not in body


@pytest.mark.django_db
def test_a_crash_is_the_friendly_500(alice, settings):
    settings.ROOT_URLCONF = __name__
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get("/boom")
    assert response.status_code == 500
    body = response.content.decode()
    assert 'id="server-error"' in body and "Traceback" not in body and "a bug" not in body


def test_the_run_commands_environment_has_debug_off(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "HERMES_ENV")}
    env["HERMES_DATA_DIR"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", "from django.conf import settings; import django; "
                             "django.setup(); print(settings.DEBUG)"], cwd=ROOT, capture_output=True, text=True,
                            env={**env, "DJANGO_SETTINGS_MODULE": "hermes_web.settings"}, timeout=60)
    assert result.stdout.strip() == "False", result.stderr

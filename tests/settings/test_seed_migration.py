"""Migration 0002 seeds the settings rows and the price table from data frozen in the migration."""
from __future__ import annotations

import importlib
import sys
from decimal import Decimal

import pytest
from django.apps import apps

from compression.models import SETTINGS_MODELS, ModelPrice

pytestmark = pytest.mark.django_db

SEED = importlib.import_module("compression.migrations.0002_seed_settings_and_prices")
SONNET = ("3", "15", "3.75", "6", "0.3")
OPUS = ("5", "25", "6.25", "10", "0.5")
# What the migration has created since it was written: model → input, output, cache writes 5m/1h, read.
SEEDED = {
    "claude-opus-4-8": OPUS, "claude-opus-4-7": OPUS, "claude-opus-4-6": OPUS, "claude-opus-4-5": OPUS,
    "claude-opus-4-1": ("15", "75", "18.75", "30", "1.5"), "claude-sonnet-5": ("2", "10", "2.5", "4", "0.2"),
    "claude-sonnet-4-6": SONNET, "claude-sonnet-4-5": SONNET, "claude-haiku-4-5": ("1", "5", "1.25", "2", "0.1"),
    "claude-fable-5": ("10", "50", "12.5", "20", "1"), "sim-claude-32k": SONNET, "sim-claude-64k": SONNET,
    "sim-claude-200k": SONNET, "sim-claude-1m": SONNET,
}


def stored_prices() -> dict[str, tuple[str, ...]]:
    return {p.model: tuple(format(getattr(p, f).normalize(), "f") for f in ModelPrice.PRICE_FIELDS)
            for p in ModelPrice.objects.all()}


def test_it_has_seeded_the_frozen_prices_and_every_settings_row():
    assert stored_prices() == SEEDED
    assert all(model.objects.filter(pk=1).exists() for model in SETTINGS_MODELS.values())


@pytest.mark.parametrize("catalogue", ["changed", "missing"])
def test_it_seeds_the_same_rows_whatever_the_model_catalogue_says(monkeypatch, catalogue):
    if catalogue == "changed":
        import llm.models

        monkeypatch.setattr(llm.models, "DEFAULT_MODELS", llm.models.DEFAULT_MODELS[:1])
    else:
        monkeypatch.setitem(sys.modules, "llm.models", None)  # importing it now raises ImportError
    ModelPrice.objects.all().delete()
    SEED.seed(apps, None)
    assert stored_prices() == SEEDED


def test_it_never_overwrites_a_price_edited_since():
    ModelPrice.objects.filter(model="sim-claude-200k").update(input=Decimal("4"))
    SEED.seed(apps, None)
    assert stored_prices()["sim-claude-200k"][0] == "4"

"""Create the settings singletons with their defaults and seed the price table.

Prices come from the model catalog in ``llm.models`` when it can be imported; otherwise from the
constants below (Anthropic list prices, USD per million tokens). Existing rows are never
overwritten, so prices edited in the admin survive a re-run.
"""
from decimal import Decimal

from django.db import migrations

SONNET = ("3", "15", "3.75", "6", "0.30")
FALLBACK_PRICES = {
    "claude-sonnet-4-5": SONNET,
    "claude-opus-4-1": ("15", "75", "18.75", "30", "1.50"),
    "claude-haiku-4-5": ("1", "5", "1.25", "2", "0.10"),
    "sim-claude-64k": SONNET,
    "sim-claude-200k": SONNET,
}
FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
SINGLETONS = ("CompressionSettings", "AuxiliarySettings", "PromptCachingSettings", "ContextEngineSettings",
              "ModelDefaults", "AgentSettings")


def _catalog_prices() -> dict[str, tuple]:
    try:
        from llm.models import DEFAULT_MODELS
    except ImportError:
        return {}
    prices = {}
    for info in DEFAULT_MODELS:
        p = info.price
        prices[info.name] = tuple(str(getattr(p, f)) for f in FIELDS)
    return prices


def seed(apps, schema_editor):
    for name in SINGLETONS:
        apps.get_model("compression", name).objects.get_or_create(pk=1)
    ModelPrice = apps.get_model("compression", "ModelPrice")
    prices = {**FALLBACK_PRICES, **_catalog_prices()}
    for model, values in prices.items():
        ModelPrice.objects.get_or_create(
            model=model, defaults={f: Decimal(v).quantize(Decimal("0.0001")) for f, v in zip(FIELDS, values)})


class Migration(migrations.Migration):
    dependencies = [("compression", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]

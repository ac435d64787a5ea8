"""Create the settings singletons with their defaults and seed the price table.

The prices are frozen here as they were when this migration was written (Anthropic list prices,
USD per million tokens: input, output, cache write 5m, cache write 1h, cache read), so a later
change to the model catalogue in ``llm.models`` never changes what this migration does; prices are
kept up to date in the admin. Existing rows are never overwritten, so prices edited in the admin
survive a re-run.
"""
from decimal import Decimal

from django.db import migrations

FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
SONNET = ("3", "15", "3.75", "6", "0.30")
OPUS_45_PLUS = ("5", "25", "6.25", "10", "0.50")
PRICES = {
    "claude-opus-4-8": OPUS_45_PLUS,
    "claude-opus-4-7": OPUS_45_PLUS,
    "claude-opus-4-6": OPUS_45_PLUS,
    "claude-opus-4-5": OPUS_45_PLUS,
    "claude-opus-4-1": ("15", "75", "18.75", "30", "1.50"),
    "claude-sonnet-5": ("2", "10", "2.50", "4", "0.20"),
    "claude-sonnet-4-6": SONNET,
    "claude-sonnet-4-5": SONNET,
    "claude-haiku-4-5": ("1", "5", "1.25", "2", "0.10"),
    "claude-fable-5": ("10", "50", "12.50", "20", "1"),
    "sim-claude-32k": SONNET,
    "sim-claude-64k": SONNET,
    "sim-claude-200k": SONNET,
    "sim-claude-1m": SONNET,
}
SINGLETONS = ("CompressionSettings", "AuxiliarySettings", "PromptCachingSettings", "ContextEngineSettings",
              "ModelDefaults", "AgentSettings")


def seed(apps, schema_editor):
    for name in SINGLETONS:
        apps.get_model("compression", name).objects.get_or_create(pk=1)
    ModelPrice = apps.get_model("compression", "ModelPrice")
    for model, values in PRICES.items():
        ModelPrice.objects.get_or_create(
            model=model, defaults={f: Decimal(v).quantize(Decimal("0.0001")) for f, v in zip(FIELDS, values)})


class Migration(migrations.Migration):
    dependencies = [("compression", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
